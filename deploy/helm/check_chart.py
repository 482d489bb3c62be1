#!/usr/bin/env python3
"""Render the chart with real helm and check what it must never lose: the
controller's rules are exactly deploy/rbac.yaml's (cluster-wide, or per watched
namespace, and its own namespace's Roles in every mode), the aggregated roles
are deploy/rbac-user-roles.yaml's, the templated CRD is deploy/crd.yaml, the
alerts are deploy/prometheus/'s with the chart's values applied (promtool checks
the result), every option lands where it belongs, and the chart renders as a
subchart of an umbrella chart.

usage: check_chart.py HELM"""

import copy
import json
import pathlib
import subprocess
import sys
import tempfile

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent.parent
CHART = DEPLOY / "helm/memcached-operator"
ALL_VALUES = CHART / "ci/all-values.yaml"


def render(helm, *args, fail=False, chart=CHART):
    run = subprocess.run(
        [helm, "template", "rel", str(chart), "--namespace", "ops", *args],
        capture_output=True, text=True,
    )
    if fail:
        assert run.returncode != 0, f"helm template {args} should fail"
        return run.stderr
    assert run.returncode == 0, run.stderr
    return [d for d in yaml.safe_load_all(run.stdout) if d]


def load(path):
    return [d for d in yaml.safe_load_all((DEPLOY / path).read_text()) if d]


def one(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in {[o['kind'] for o in objects]}"
    return found[0]


def kinds(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def check_defaults(helm):
    objects = render(helm)
    rbac = load("rbac.yaml")
    assert one(objects, "ClusterRole", "rel-memcached-operator")["rules"] == one(rbac, "ClusterRole")["rules"], \
        "the chart's ClusterRole drifted from deploy/rbac.yaml"
    for suffix in ("leader-election", "hash-key"):
        role = one(objects, "Role", f"rel-memcached-operator-{suffix}")
        assert role["rules"] == one(rbac, "Role", f"memcached-operator-{suffix}")["rules"], suffix
        assert role["metadata"]["namespace"] == "ops", suffix
        assert one(objects, "RoleBinding", role["metadata"]["name"])["roleRef"]["name"] == role["metadata"]["name"]
    binding = one(objects, "ClusterRoleBinding", "rel-memcached-operator")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rel-memcached-operator", "namespace": "ops"}]
    user_roles = {o["metadata"]["name"]: o for o in load("rbac-user-roles.yaml")}
    for name, role in user_roles.items():
        rendered = one(objects, "ClusterRole", name.replace("memcached-operator", "rel-memcached-operator"))
        assert rendered["rules"] == role["rules"], name
        assert role["metadata"]["labels"].items() <= rendered["metadata"]["labels"].items(), name
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "ghcr.io/c5c3/memcached-operator:v0.1.0", "tag defaults to appVersion"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["MEMORY_OVERHEAD"]["value"] == "32Mi"
    assert env["METRICS_NAMESPACES"]["value"] == "monitoring"
    check_operator_pod_labels(deployment, "app.kubernetes.io/instance=rel,app.kubernetes.io/name=memcached-operator")
    assert "--leader-election" in container["args"]
    labels = deployment["metadata"]["labels"]
    for key in ("helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                "app.kubernetes.io/version", "app.kubernetes.io/managed-by"):
        assert key in labels, key
    assert one(objects, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1, "selector": deployment["spec"]["selector"]}
    assert one(objects, "Service")["spec"]["ports"][0]["targetPort"] == "metrics"
    check_metrics_auth(objects, "rel-memcached-operator", "ops", readers=[])
    assert "--metrics-secure=true" in container["args"] and "--metrics-address=:8080" in container["args"]
    assert not [a for a in container["args"] if a.startswith("--metrics-cert-dir")], "self-signed by default"
    for kind in ("ServiceMonitor", "PrometheusRule", "ConfigMap", "CustomResourceDefinition"):
        assert not kinds(objects, kind), f"{kind} is opt-in"
    rule = one(render(helm, "--set", "metrics.prometheusRule.enabled=true"), "PrometheusRule")
    assert rule["spec"] == load("prometheus/memcached-operator-rules.yaml")[0]["spec"], \
        "the default alert values must render deploy/prometheus/ unchanged"


def check_operator_pod_labels(deployment, expected):
    """OPERATOR_POD_LABELS: the pods' selector labels, which every pod carries."""
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    value = env["OPERATOR_POD_LABELS"]["value"]
    assert value == expected, value
    pairs = dict(pair.split("=", 1) for pair in value.split(","))
    assert pairs == deployment["spec"]["selector"]["matchLabels"]
    assert pairs.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def expected_rules(overrides):
    """deploy/prometheus/'s rule spec with `enabled`, `severity` and `for` of `overrides` applied by hand."""
    spec = copy.deepcopy(load("prometheus/memcached-operator-rules.yaml")[0]["spec"])
    groups = []
    for group in spec["groups"]:
        rules = []
        for rule in group["rules"]:
            config = overrides.get(rule["alert"], {})
            if config.get("enabled", True):
                rule["labels"]["severity"] = config.get("severity", rule["labels"]["severity"])
                rule["for"] = config.get("for", rule["for"])
                rules.append(rule)
        groups.append({"name": group["name"], "rules": rules})
    return {"groups": groups}


def promtool_check(spec):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "rules.yaml"
        path.write_text(yaml.safe_dump(spec))
        run = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def check_metrics_auth(objects, fullname, namespace, readers):
    """The secure /metrics' RBAC is deploy/rbac-metrics-auth.yaml's: the controller's review rights
    (cluster-wide: TokenReview and SubjectAccessReview are cluster-scoped) and the metrics-reader
    ClusterRole, bound to `readers` when given."""
    source = {o["metadata"]["name"]: o for o in kinds(load("rbac-metrics-auth.yaml"), "ClusterRole")}
    auth = one(objects, "ClusterRole", f"{fullname}-metrics-auth")
    assert auth["rules"] == source["memcached-operator-metrics-auth"]["rules"]
    reader = one(objects, "ClusterRole", f"{fullname}-metrics-reader")
    assert reader["rules"] == source["memcached-operator-metrics-reader"]["rules"]
    binding = one(objects, "ClusterRoleBinding", f"{fullname}-metrics-auth")
    assert binding["roleRef"]["name"] == auth["metadata"]["name"]
    assert [(s["kind"], s["namespace"]) for s in binding["subjects"]] == [("ServiceAccount", namespace)]
    bound = [o for o in kinds(objects, "ClusterRoleBinding") if o["metadata"]["name"] == f"{fullname}-metrics-reader"]
    assert [b["subjects"] for b in bound] == ([readers] if readers else [])


def check_all_values(helm):
    objects = render(helm, "-f", str(ALL_VALUES))
    values = yaml.safe_load(ALL_VALUES.read_text())
    rules = one(load("rbac.yaml"), "ClusterRole")["rules"]
    metrics_rbac = {"cache-operator-metrics-auth", "cache-operator-metrics-reader"}
    assert [o["metadata"]["name"] for o in kinds(objects, "ClusterRole") if o["metadata"]["name"] not in metrics_rbac] == \
        ["cache-operator-view", "cache-operator-edit"], "watchNamespaces must not grant cluster-wide access"
    assert {o["metadata"]["name"] for o in kinds(objects, "ClusterRoleBinding")} <= metrics_rbac, \
        "only the token and access reviews of the secure /metrics are cluster-wide"
    check_metrics_auth(objects, "cache-operator", "ops", values["metrics"]["readerSubjects"])
    for namespace in values["watchNamespaces"]:
        role = [o for o in kinds(objects, "Role") if o["metadata"]["namespace"] == namespace]
        assert len(role) == 1 and role[0]["rules"] == rules, namespace
    # The release namespace: leader election and the hash-key Secret, whatever is watched.
    assert len(kinds(objects, "RoleBinding")) == len(values["watchNamespaces"]) + 2
    hash_key = one(objects, "Role", "cache-operator-hash-key")
    assert hash_key["metadata"]["namespace"] == "ops"
    assert hash_key["rules"] == one(load("rbac.yaml"), "Role", "memcached-operator-hash-key")["rules"]
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == f"{values['image']['repository']}@{values['image']['digest']}"
    assert "--watch-namespaces=team-a,team-b" in container["args"]
    assert container["args"][-1] == "--log-format=json", "extraArgs come last"
    env = {e["name"]: e for e in container["env"]}
    assert env["METRICS_NAMESPACES"]["value"] == "monitoring,cattle-monitoring-system"
    check_operator_pod_labels(deployment, "app.kubernetes.io/instance=rel,app.kubernetes.io/name=mc-op")
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"):
        assert pod[key] == values[key], key
    assert pod["imagePullSecrets"] == values["imagePullSecrets"]
    assert pod["serviceAccountName"] == "cache-operator-sa"
    assert container["resources"] == values["resources"]
    template_meta = deployment["spec"]["template"]["metadata"]
    assert template_meta["annotations"] == values["podAnnotations"]
    assert template_meta["labels"]["tier"] == "control" and template_meta["labels"]["team"] == "platform"
    assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    monitor = one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"][0]["interval"] == "15s"
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == values["metrics"]["serviceMonitor"]["tlsConfig"]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert "--metrics-cert-dir=/etc/memcached-operator/metrics-tls" in container["args"]
    assert pod["volumes"] == [{"name": "metrics-tls", "secret": {"secretName": values["metrics"]["certSecret"]}}]
    assert container["volumeMounts"][0]["mountPath"] == "/etc/memcached-operator/metrics-tls"
    rule = one(objects, "PrometheusRule")
    alerts = values["metrics"]["prometheusRule"]["alerts"]
    expected = expected_rules(alerts)
    for group in expected["groups"]:
        for r in group["rules"]:
            if r["alert"] == "MemcachedHitRatioLow":
                r["expr"] = r["expr"].replace("< 0.8", "< 0.65").replace("> 1\n", "> 5\n")
            if r["alert"] == "MemcachedConnectionsNearLimit":
                r["expr"] = r["expr"].replace("> 0.9", "> 0.95")
    assert rule["spec"] == expected, json.dumps(rule["spec"], indent=1)
    promtool_check(rule["spec"])
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    dashboard = one(objects, "ConfigMap")
    assert json.loads(dashboard["data"]["memcached.json"]) == json.loads((DEPLOY / "grafana/memcached.json").read_text())
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    crd = one(objects, "CustomResourceDefinition")
    source = load("crd.yaml")[0]
    assert crd["spec"] == source["spec"], "the templated CRD must be deploy/crd.yaml"
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def check_switches(helm):
    single = render(helm, "--set", "replicaCount=1,rbac.create=false,rbac.aggregateToDefaultRoles=false,"
                    "serviceAccount.create=false,metrics.service.enabled=false")
    assert [o["kind"] for o in single] == ["Deployment"], [o["kind"] for o in single]
    assert single[0]["spec"]["template"]["spec"]["serviceAccountName"] == "default"
    assert "leaderElection.enabled" in render(
        helm, "--set", "replicaCount=2,leaderElection.enabled=false", fail=True)
    assert "additional properties" in render(helm, "--set", "replicas=2", fail=True), \
        "values.schema.json must refuse unknown keys"
    assert "logFormat" in render(helm, "--set", "logFormat=xml", fail=True)
    # Without leader election the hash-key Role stays: the controller reads its Secret at every start.
    solo = render(helm, "--set", "replicaCount=1,leaderElection.enabled=false")
    assert [o["metadata"]["name"] for o in kinds(solo, "Role")] == ["rel-memcached-operator-hash-key"]
    assert "metricsNamespaces" in render(helm, "--set-json", "metricsNamespaces=[]", fail=True), \
        "an empty list would admit every namespace to the exporters"
    assert "additional properties" in render(
        helm, "--set", "metrics.prometheusRule.alerts.Bogus.enabled=false", fail=True)
    assert render(helm, "--set", "global.imageRegistry=example.com"), "global is Helm's, always allowed"


def check_subchart(helm):
    """An umbrella chart depending on this one (file://) renders: Helm passes it `global`."""
    with tempfile.TemporaryDirectory() as tmp:
        umbrella = pathlib.Path(tmp) / "umbrella"
        umbrella.mkdir()
        (umbrella / "Chart.yaml").write_text(yaml.safe_dump({
            "apiVersion": "v2", "name": "umbrella", "version": "1.0.0",
            "dependencies": [{"name": "memcached-operator", "version": "*", "repository": f"file://{CHART}"}],
        }))
        (umbrella / "values.yaml").write_text(yaml.safe_dump({
            "global": {"imageRegistry": "registry.example.com"},
            "memcached-operator": {"replicaCount": 1},
        }))
        build = subprocess.run([helm, "dependency", "build", str(umbrella)], capture_output=True, text=True,
                               env={"HOME": tmp, "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": tmp,
                                    "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp})
        assert build.returncode == 0, build.stderr
        objects = render(helm, chart=umbrella)
        assert one(objects, "Deployment")["spec"]["replicas"] == 1


def check_metrics_modes(helm):
    """Plain /metrics for local use; the ServiceMonitor follows the mode."""
    plain = render(helm, "--set", "metrics.secure=false,metrics.serviceMonitor.enabled=true")
    assert not [o for o in plain if "metrics-" in o["metadata"]["name"] and o["kind"].startswith("ClusterRole")]
    assert one(plain, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "http"
    assert "--metrics-secure=false" in one(plain, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    monitor = one(render(helm, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {"insecureSkipVerify": True}, "self-signed by default"


def main(helm):
    for check in (check_defaults, check_all_values, check_switches, check_subchart, check_metrics_modes):
        check(helm)
        print(f"ok {check.__name__}")


if __name__ == "__main__":
    main(sys.argv[1])
