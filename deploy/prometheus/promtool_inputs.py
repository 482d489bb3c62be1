#!/usr/bin/env python3
"""Write what promtool checks into DIR: the PrometheusRule's rule groups
(memcached-operator.rules.yaml, what the unit tests load) and every query of the
Grafana dashboard as a recording rule (dashboard.rules.yaml), so promtool parses
the dashboard's PromQL too. Grafana's variables become what they stand for.

Every metric the alerts and the dashboard name must exist: the controller's are
read from controller/src/metrics/registry.rs (its registry) and
controller/src/metrics/memcacheds.rs (each Memcached's conditions and per-pod numbers,
full names), the exporter's are those of prom/memcached-exporter v0.15
(pkg/exporter/exporter.go) that they use.

Every alert links its runbook: a `runbook_url` annotation of the project's
docs/operating/alerts.md on GitHub (the chart's `home`) with the anchor GitHub
gives one of its headings, and each heading there is an alert's. No alert is
named as one of the memcached mixin's (prometheus/memcached_exporter's, also in
grafana/jsonnet-libs), which mean something else: both sets are often loaded
into one Prometheus, and routes and silences go by name."""

import json
import pathlib
import re
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent.parent
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*", "$memcached": ".*"}
EXPORTER_METRICS = {
    "memcached_up", "memcached_uptime_seconds", "memcached_commands_total",
    "memcached_current_connections", "memcached_max_connections", "memcached_current_bytes",
    "memcached_limit_bytes", "memcached_current_items", "memcached_items_evicted_total",
    "memcached_read_bytes_total", "memcached_written_bytes_total",
}
ALERTS_DOC = DEPLOY.parent / "docs/operating/alerts.md"
# The memcached mixin's alerts: MemcachedDown is `memcached_up == 0` (the exporter's scrape of
# memcached), MemcachedConnectionLimitApproaching (warning and critical) and
# MemcachedOutOfMemoryErrors read the exporter's numbers.
MIXIN_ALERTS = {"MemcachedDown", "MemcachedConnectionLimitApproaching", "MemcachedOutOfMemoryErrors"}
# OpenMetrics suffixes prometheus-client adds to a registered name.
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "")


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


def controller_metrics():
    source = (DEPLOY.parent / "controller/src/metrics/registry.rs").read_text()
    prefix = re.search(r'(?:Registry::with_prefix|sub_registry_with_prefix)\("(\w+)"\)', source)
    assert prefix, "no metric prefix in controller/src/metrics/registry.rs"
    prefix = prefix.group(1)
    names = re.findall(r'register\(\s*"(\w+)"', source)
    assert names, "no metric registered in controller/src/metrics/registry.rs"
    names = [f"{prefix}_{name}" for name in names]
    board = (DEPLOY.parent / "controller/src/metrics/memcacheds.rs").read_text()
    full = re.findall(r'"(memcached_operator_\w+)"', board)
    assert full, "no metric named in controller/src/metrics/memcacheds.rs"
    return {f"{name}{suffix}" for name in names + full for suffix in SUFFIXES}


def check_metric_names(groups):
    exprs = [rule["expr"] for group in groups for rule in group["rules"]]
    used = {name for expr in exprs for name in re.findall(r"\bmemcached_\w+", expr)}
    unknown = sorted(used - EXPORTER_METRICS - controller_metrics())
    assert not unknown, f"metrics no exporter or controller serves: {unknown}"


def github_slug(heading):
    """GitHub's anchor for a heading (as hack/check-docs.sh computes it): lower case, punctuation
    dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def runbook_base():
    chart = yaml.safe_load((DEPLOY / "helm/memcached-operator/Chart.yaml").read_text())
    return f"{chart['home']}/blob/main/docs/operating/alerts.md"


def check_runbooks(groups):
    """Every alert's runbook_url is its section of docs/operating/alerts.md, and every section of
    it is an alert's."""
    headings, fenced = [], False
    for line in ALERTS_DOC.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            headings.append(line[3:].strip())
    anchors = {github_slug(h): h for h in headings}
    base = runbook_base()
    alerts = [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]
    for group in groups:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            url = rule.get("annotations", {}).get("runbook_url")
            assert url, f"{rule['alert']} has no runbook_url"
            page, _, anchor = url.partition("#")
            assert page == base, f"{rule['alert']}: runbook_url {url} is not on {base}"
            assert anchors.get(anchor) == rule["alert"], \
                f"{rule['alert']}: #{anchor} is no section of {ALERTS_DOC.name} named after it ({sorted(anchors)})"
    assert sorted(headings) == sorted(alerts), \
        f"{ALERTS_DOC.name}'s sections are not one per alert: {sorted(set(headings) ^ set(alerts))}"
    clashes = sorted(MIXIN_ALERTS & set(alerts))
    assert not clashes, f"alerts named as the memcached mixin's, which mean something else: {clashes}"


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rules, dashboard = rule_groups(), dashboard_queries()
    check_metric_names(rules["groups"] + dashboard["groups"])
    check_runbooks(rules["groups"])
    (out / "memcached-operator.rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (out / "dashboard.rules.yaml").write_text(yaml.safe_dump(dashboard, sort_keys=False))


if __name__ == "__main__":
    main(sys.argv[1])
