#!/usr/bin/env python3
"""Write what promtool checks into DIR: the PrometheusRule's rule groups
(memcached-operator.rules.yaml, what the unit tests load) and every query of the
Grafana dashboard as a recording rule (dashboard.rules.yaml), so promtool parses
the dashboard's PromQL too. Grafana's variables become what they stand for."""

import json
import pathlib
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent.parent
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*", "$memcached": ".*"}


def rule_groups():
    rule = yaml.safe_load((DEPLOY / "prometheus/memcached-operator-rules.yaml").read_text())
    assert rule["kind"] == "PrometheusRule", rule["kind"]
    return rule["spec"]


def dashboard_queries():
    dashboard = json.loads((DEPLOY / "grafana/memcached.json").read_text())
    rules = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"unknown Grafana variable in {panel['title']!r}: {expr}"
            rules.append({"record": f"dashboard:panel_{panel['id']}:{target['refId']}", "expr": expr})
    assert rules, "the dashboard has no queries"
    return {"groups": [{"name": "dashboard", "rules": rules}]}


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memcached-operator.rules.yaml").write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    (out / "dashboard.rules.yaml").write_text(yaml.safe_dump(dashboard_queries(), sort_keys=False))


if __name__ == "__main__":
    main(sys.argv[1])
