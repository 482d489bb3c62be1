#!/usr/bin/env python3
"""Render the chart with real helm and check what it must never lose: the
controller's rules are exactly deploy/rbac.yaml's (cluster-wide, or per watched
namespace, and its own namespace's Roles in every mode), the aggregated roles
are deploy/rbac-user-roles.yaml's, the templated CRD is deploy/crd.yaml and the
CRD comes exactly once however the chart is rendered, the alerts are
deploy/prometheus/'s with the chart's values applied (promtool checks the
result), every option lands where it belongs, two releases share no Lease and
no hash-key Secret, the writes guard is rendered in the API the target
Kubernetes serves, `helm test` checks the release, the README documents every
value, and the chart renders as a subchart of an umbrella chart that switches it
with a condition and passes it `global`.

usage: check_chart.py HELM"""

import copy
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent.parent
CHART = DEPLOY / "helm/memcached-operator"
ALL_VALUES = CHART / "ci/all-values.yaml"
# The Kubernetes version rendered for (`helm template` assumes 1.20, which Chart.yaml's kubeVersion
# refuses): the e2e suites' API server.
KUBE_VERSION = "1.36.1"


def helm_template(helm, *args, chart=CHART, release="rel"):
    if not any(a.startswith("--kube-version") for a in args):
        args = ("--kube-version", KUBE_VERSION, *args)
    return subprocess.run(
        [helm, "template", release, str(chart), "--namespace", "ops", *args],
        capture_output=True, text=True,
    )


def render(helm, *args, fail=False, chart=CHART, hooks=False, release="rel"):
    """The objects `helm template` renders; `helm test`'s hooks only with hooks=True (then only them)."""
    run = helm_template(helm, *args, chart=chart, release=release)
    if fail:
        assert run.returncode != 0, f"helm template {args} should fail"
        return run.stderr
    assert run.returncode == 0, run.stderr
    objects = [d for d in yaml.safe_load_all(run.stdout) if d]
    return [o for o in objects if ("helm.sh/hook" in (o["metadata"].get("annotations") or {})) == hooks]


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
        assert role["rules"] == renamed(one(rbac, "Role", f"memcached-operator-{suffix}")["rules"],
                                        "rel-memcached-operator-hash-key"), suffix
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
    assert container["image"] == "ghcr.io/c5c3/memcached-operator:v0.5.0", "tag defaults to appVersion"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["MEMORY_OVERHEAD"]["value"] == "32Mi"
    assert env["METRICS_NAMESPACES"]["value"] == "monitoring"
    assert "SERVICE_MONITOR_LABELS" not in env, "no prometheusLabels: the Memcacheds' ServiceMonitors get none"
    check_operator_pod_labels(deployment, "app.kubernetes.io/instance=rel,app.kubernetes.io/name=memcached-operator")
    assert "--leader-election" in container["args"]
    assert "--lease-name=rel-memcached-operator" in container["args"], "the Lease is the release's"
    assert "--hash-key-secret=rel-memcached-operator-hash-key" in container["args"]
    assert "imagePullSecrets" not in pod
    guard = [o for o in objects if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert [o["apiVersion"] for o in guard] == ["admissionregistration.k8s.io/v1"] * 2, "rbac.writesGuard is on"
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
    assert rule["spec"] == expected_rules({}, "rel-memcached-operator-metrics", "ops"), \
        "the default alert values must render deploy/prometheus/ with the release's job alone changed"
    check_rule_timing(helm)


def renamed(rules, secret):
    """deploy/rbac.yaml's rules with the hash-key Secret's resourceNames naming the release's `secret`."""
    rules = copy.deepcopy(rules)
    for rule in rules:
        if "resourceNames" in rule:
            rule["resourceNames"] = [secret if n == "memcached-operator-hash-key" else n
                                     for n in rule["resourceNames"]]
    return rules


def check_operator_pod_labels(deployment, expected):
    """OPERATOR_POD_LABELS: the pods' selector labels, which every pod carries."""
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    value = env["OPERATOR_POD_LABELS"]["value"]
    assert value == expected, value
    pairs = dict(pair.split("=", 1) for pair in value.split(","))
    assert pairs == deployment["spec"]["selector"]["matchLabels"]
    assert pairs.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


# The installation deploy/prometheus/'s operator alerts judge (deploy/controller-metrics.yaml's).
FILE_TARGET = 'job="memcached-operator-metrics", namespace="memcached-operator-system"'


def expected_rules(overrides, job, namespace):
    """deploy/prometheus/'s rule spec with `enabled`, `severity` and `for` of `overrides` applied by
    hand, and the operator alerts judging `job` in `namespace`."""
    spec = copy.deepcopy(load("prometheus/memcached-operator-rules.yaml")[0]["spec"])
    assert sum(FILE_TARGET in r["expr"] for g in spec["groups"] for r in g["rules"]) == 3, \
        "the operator alerts name deploy/controller-metrics.yaml's job and namespace"
    groups = []
    for group in spec["groups"]:
        rules = []
        for rule in group["rules"]:
            config = overrides.get(rule["alert"], {})
            if config.get("enabled", True):
                rule["labels"]["severity"] = config.get("severity", rule["labels"]["severity"])
                rule["for"] = config.get("for", rule["for"])
                rule["expr"] = rule["expr"].replace(FILE_TARGET, f'job="{job}", namespace="{namespace}"')
                rules.append(rule)
        groups.append({"name": group["name"], "rules": rules})
    return {"groups": groups}


def check_rule_timing(helm):
    """metrics.prometheusRule.interval sets every group's evaluation interval, an alert's `window`
    every range of its expression (not another alert's); promtool takes the result."""
    rule = one(render(helm, "--set", "metrics.prometheusRule.enabled=true,metrics.prometheusRule.interval=15s,"
                      "metrics.prometheusRule.alerts.MemcachedHitRatioLow.window=30s,"
                      "metrics.prometheusRule.alerts.MemcachedOperatorDown.window=6h"), "PrometheusRule")
    assert [g["interval"] for g in rule["spec"]["groups"]] == ["15s", "15s"]
    exprs = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    source = {r["alert"]: r["expr"] for g in expected_rules({}, "rel-memcached-operator-metrics", "ops")["groups"]
              for r in g["rules"]}
    assert exprs["MemcachedHitRatioLow"] == source["MemcachedHitRatioLow"].replace("[10m]", "[30s]")
    assert "[10m]" in source["MemcachedHitRatioLow"] and "[10m]" not in exprs["MemcachedHitRatioLow"]
    assert exprs["MemcachedOperatorDown"] == source["MemcachedOperatorDown"].replace("[1d]", "[6h]")
    assert exprs["MemcachedEvictionsRising"] == source["MemcachedEvictionsRising"]
    promtool_check(rule["spec"])
    assert "interval" in render(helm, "--set", "metrics.prometheusRule.interval=often", fail=True)


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
    assert hash_key["rules"] == renamed(one(load("rbac.yaml"), "Role", "memcached-operator-hash-key")["rules"],
                                        "cache-operator-hash-key")
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # global.imageRegistry replaces the repository's registry host.
    repository = values["image"]["repository"].replace("registry.example.com", values["global"]["imageRegistry"])
    assert repository != values["image"]["repository"]
    assert container["image"] == f"{repository}@{values['image']['digest']}"
    assert "--lease-name=cache-operator" in container["args"] and "--hash-key-secret=cache-operator-hash-key" in container["args"]
    assert "--watch-namespaces=team-a,team-b" in container["args"]
    assert container["args"][-1] == "--log-format=json", "extraArgs come last"
    env = {e["name"]: e for e in container["env"]}
    assert env["METRICS_NAMESPACES"]["value"] == "monitoring,cattle-monitoring-system"
    check_operator_pod_labels(deployment, "app.kubernetes.io/instance=rel,app.kubernetes.io/name=mc-op")
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"):
        assert pod[key] == values[key], key
    assert pod["imagePullSecrets"] == [{"name": "mirror-pull"}, {"name": "regcred"}], \
        "global.imagePullSecrets first, each name once"
    assert pod["serviceAccountName"] == "cache-operator-sa"
    assert container["resources"] == values["resources"]
    template_meta = deployment["spec"]["template"]["metadata"]
    assert template_meta["annotations"] == values["podAnnotations"]
    assert template_meta["labels"]["tier"] == "control" and template_meta["labels"]["team"] == "platform"
    assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    # prometheusLabels: on every Memcached's ServiceMonitor (the controller's SERVICE_MONITOR_LABELS)
    # and on the chart's ServiceMonitor and PrometheusRule, each one's additionalLabels on top.
    assert values["prometheusLabels"] == {"release": "kube-prometheus-stack", "tier": "monitoring"}
    assert env["SERVICE_MONITOR_LABELS"]["value"] == "release=kube-prometheus-stack,tier=monitoring"
    monitor = one(objects, "ServiceMonitor")
    assert values["metrics"]["serviceMonitor"]["additionalLabels"] == {"scrape": "controller"}
    assert {k: monitor["metadata"]["labels"].get(k) for k in ("release", "tier", "scrape")} == \
        {"release": "kube-prometheus-stack", "tier": "monitoring", "scrape": "controller"}
    assert monitor["spec"]["endpoints"][0]["interval"] == "15s"
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
    settings = values["metrics"]["serviceMonitor"]
    assert monitor["metadata"]["namespace"] == settings["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}, "the Service stays in the release namespace"
    assert monitor["spec"]["endpoints"][0]["relabelings"] == settings["relabelings"]
    assert monitor["spec"]["endpoints"][0]["metricRelabelings"] == settings["metricRelabelings"]
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == values["metrics"]["serviceMonitor"]["tlsConfig"]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert "--metrics-cert-dir=/etc/memcached-operator/metrics-tls" in container["args"]
    assert pod["volumes"] == [{"name": "metrics-tls", "secret": {"secretName": values["metrics"]["certSecret"]}}]
    assert container["volumeMounts"][0]["mountPath"] == "/etc/memcached-operator/metrics-tls"
    rule = one(objects, "PrometheusRule")
    alerts = values["metrics"]["prometheusRule"]["alerts"]
    expected = expected_rules(alerts, "cache-operator-metrics", "ops")
    for group in expected["groups"]:
        for r in group["rules"]:
            if r["alert"] == "MemcachedHitRatioLow":
                r["expr"] = r["expr"].replace("< 0.8", "< 0.65").replace("> 1\n", "> 5\n")
            if r["alert"] == "MemcachedConnectionsNearLimit":
                r["expr"] = r["expr"].replace("> 0.9", "> 0.95")
    assert rule["spec"] == expected, json.dumps(rule["spec"], indent=1)
    promtool_check(rule["spec"])
    assert values["metrics"]["prometheusRule"]["additionalLabels"] == {"tier": "alerts"}
    assert {k: rule["metadata"]["labels"].get(k) for k in ("release", "tier")} == \
        {"release": "kube-prometheus-stack", "tier": "alerts"}, "additionalLabels win over prometheusLabels"
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
    assert render(helm, "--set", "enabled=false"), "an umbrella's condition value is allowed"


def check_umbrella(helm):
    """An umbrella chart that depends on this one (file://) with `condition: memcached-operator.enabled`,
    as umbrella charts switch their parts: values.schema.json takes `enabled`, the condition switches
    the chart off, and `global.imageRegistry` and `global.imagePullSecrets` reach its pods (Bitnami's
    convention). The bundled CRD subchart's own condition works from there too."""
    with tempfile.TemporaryDirectory() as tmp:
        umbrella = pathlib.Path(tmp) / "umbrella"
        umbrella.mkdir()
        (umbrella / "Chart.yaml").write_text(yaml.safe_dump({
            "apiVersion": "v2", "name": "umbrella", "version": "1.0.0",
            "dependencies": [{"name": "memcached-operator", "version": "*", "repository": f"file://{CHART}",
                              "condition": "memcached-operator.enabled"}],
        }))
        (umbrella / "values.yaml").write_text(yaml.safe_dump({
            "global": {"imageRegistry": "registry.example.com", "imagePullSecrets": ["mirror"],
                       "storageClass": "another chart's global"},
            "memcached-operator": {"enabled": True, "replicaCount": 1},
        }))
        build = subprocess.run([helm, "dependency", "build", str(umbrella)], capture_output=True, text=True,
                               env={"HOME": tmp, "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": tmp,
                                    "HELM_CONFIG_HOME": tmp, "HELM_DATA_HOME": tmp})
        assert build.returncode == 0, build.stderr
        objects = render(helm, "--include-crds", chart=umbrella)
        deployment = one(objects, "Deployment")
        assert deployment["spec"]["replicas"] == 1
        pod = deployment["spec"]["template"]["spec"]
        assert pod["containers"][0]["image"] == "registry.example.com/c5c3/memcached-operator:v0.5.0", \
            "global.imageRegistry replaces ghcr.io"
        assert pod["imagePullSecrets"] == [{"name": "mirror"}]
        assert len(kinds(objects, "CustomResourceDefinition")) == 1
        test_pod = one(render(helm, chart=umbrella, hooks=True), "Pod")
        assert test_pod["spec"]["containers"][0]["image"] == pod["containers"][0]["image"]
        assert test_pod["spec"]["imagePullSecrets"] == [{"name": "mirror"}]
        off = render(helm, "--include-crds", "--set", "memcached-operator.enabled=false", chart=umbrella)
        assert off == [], f"condition false: {[o['kind'] for o in off]}"
        no_crd = render(helm, "--include-crds", "--set", "memcached-operator.crds.install=false", chart=umbrella)
        assert not kinds(no_crd, "CustomResourceDefinition") and kinds(no_crd, "Deployment")
        lint = subprocess.run([helm, "lint", "--strict", str(umbrella), "--with-subcharts"], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr


def check_releases_share_nothing(helm):
    """Two releases in one namespace: each its own Lease (a shared one would leave the second standing
    by for ever) and its own hash-key Secret, which its Role names; leaderElection.leaseName still wins."""
    seen = {}
    for release in ("first", "second"):
        objects = render(helm, release=release)
        container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        args = dict(a.split("=", 1) for a in container["args"] if "=" in a)
        seen[release] = (args["--lease-name"], args["--hash-key-secret"])
        role = one(objects, "Role", f"{release}-memcached-operator-hash-key")
        assert [r["resourceNames"] for r in role["rules"] if "resourceNames" in r] == [[args["--hash-key-secret"]]]
    assert seen == {"first": ("first-memcached-operator", "first-memcached-operator-hash-key"),
                    "second": ("second-memcached-operator", "second-memcached-operator-hash-key")}, seen
    named = one(render(helm, "--set", "leaderElection.leaseName=shared"), "Deployment")
    assert "--lease-name=shared" in named["spec"]["template"]["spec"]["containers"][0]["args"]


def check_kube_versions(helm):
    """Chart.yaml's kubeVersion floor is the Kubernetes API the controller is compiled against
    (k8s-openapi's feature in Cargo.toml; only 1.36 is tested). The writes guard is rendered as
    admissionregistration.k8s.io/v1 (GA since 1.30, below the floor) where that is served: as the
    served kinds say when Helm knows them (a cluster), else as the group/versions say."""
    feature = re.search(r'k8s-openapi = \{[^}]*"v1_(\d+)"', (DEPLOY.parent / "Cargo.toml").read_text()).group(1)
    assert yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"] == f">=1.{feature}.0-0"
    assert f"incompatible with Kubernetes v1.{int(feature) - 1}.0" in render(
        helm, "--kube-version", f"1.{int(feature) - 1}.0", fail=True)

    def guard(*args):
        return [(o["apiVersion"], o["kind"]) for o in render(helm, *args)
                if o["kind"].startswith("ValidatingAdmissionPolicy")]

    v1 = "admissionregistration.k8s.io/v1"
    kinds_ = ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    floor, tested = f"1.{feature}.0", "1.36.0"
    assert guard("--kube-version", floor) == [(v1, k) for k in kinds_]
    assert guard("--kube-version", tested) == [(v1, k) for k in kinds_]
    # As against a cluster: the served kinds decide.
    served = ["--api-versions", "v1/Pod"]
    assert guard("--kube-version", tested, *served) == [], "the API not served: no guard"
    assert guard("--kube-version", tested, *served, "--api-versions",
                 f"{v1}/ValidatingAdmissionPolicy") == [(v1, k) for k in kinds_]
    assert guard("--kube-version", tested, "--set", "rbac.writesGuard=false") == []


def check_crds(helm):
    """The CRD comes exactly once: from the bundled subchart's crds/ (crds.install, the default), or
    from templates/ (crds.managed with crds.install=false), with or without --include-crds (Argo
    CD's default); both at once is refused, saying which value to set."""
    def crds(*args):
        return kinds(render(helm, "--include-crds", *args), "CustomResourceDefinition")

    source = load("crd.yaml")[0]
    [default] = crds()
    assert default == source and "annotations" not in default["metadata"], "crds/ is deploy/crd.yaml as is"
    [managed] = crds("--set", "crds.managed=true,crds.install=false")
    assert managed["spec"] == source["spec"] and managed["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crds("--set", "crds.install=false") == []
    refused = render(helm, "--include-crds", "--set", "crds.managed=true", fail=True)
    assert "crds.install=false" in refused, refused
    shown = subprocess.run([helm, "show", "crds", str(CHART)], capture_output=True, text=True)
    assert shown.returncode == 0 and [d for d in yaml.safe_load_all(shown.stdout) if d] == [source], \
        "helm show crds (the README's upgrade command) prints deploy/crd.yaml"


def check_tests(helm):
    """`helm test`: hooks only (nothing of it exists before `helm test`); its ServiceAccount and Roles
    deleted once it ran, its pod kept for `helm test --logs` (owned by the controller's ServiceAccount,
    which the check makes its owner, so it goes with the release); a pod of the controller's image
    running `check` on this release's pods, Lease and a watched namespace, with exactly the rights
    that needs."""
    hooks = render(helm, hooks=True)
    assert {o["kind"] for o in hooks} == {"ServiceAccount", "Role", "RoleBinding", "Pod"}, [o["kind"] for o in hooks]
    for o in hooks:
        annotations = o["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "test"
        assert annotations["helm.sh/hook-delete-policy"] == (
            "before-hook-creation" if o["kind"] == "Pod" else "before-hook-creation,hook-succeeded,hook-failed")
    pod = one(hooks, "Pod")
    deployment = one(render(helm), "Deployment")
    controller = deployment["spec"]["template"]["spec"]["containers"][0]
    check = pod["spec"]["containers"][0]
    assert check["image"] == controller["image"] and pod["spec"]["restartPolicy"] == "Never"
    assert check["args"] == [
        "check", "--namespace=ops",
        "--pod-labels=app.kubernetes.io/instance=rel,app.kubernetes.io/name=memcached-operator",
        "--lease-name=rel-memcached-operator", "--memcached-namespace=ops",
        "--memcached-name=rel-memcached-operator-test", "--owner-service-account=rel-memcached-operator",
        "--timeout=120"], check["args"]
    assert check["env"] == [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    labels = pod["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert not selector.items() <= labels.items(), "the test pod is no controller pod"
    assert check["securityContext"] == controller["securityContext"]
    assert pod["spec"]["securityContext"] == deployment["spec"]["template"]["spec"]["securityContext"]
    assert one(hooks, "Role")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["rel-memcached-operator-test"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["rel-memcached-operator"],
         "verbs": ["get"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["rel-memcached-operator"], "verbs": ["get"]},
        {"apiGroups": ["memcached.c5c3.io"], "resources": ["memcacheds"], "verbs": ["get", "create", "delete"]}]
    # Watching namespaces: the Memcached goes to the first, with a Role there.
    scoped = render(helm, "-f", str(ALL_VALUES), hooks=True)
    args = one(scoped, "Pod")["spec"]["containers"][0]["args"]
    assert "--memcached-namespace=team-a" in args and "--lease-name=cache-operator" in args
    assert "--owner-service-account=cache-operator-sa" in args
    roles = {o["metadata"]["namespace"]: o["rules"] for o in kinds(scoped, "Role")}
    assert set(roles) == {"ops", "team-a"} and roles["team-a"] == [
        {"apiGroups": ["memcached.c5c3.io"], "resources": ["memcacheds"], "verbs": ["get", "create", "delete"]}]
    assert {o["metadata"]["namespace"] for o in kinds(scoped, "RoleBinding")} == {"ops", "team-a"}
    solo = one(render(helm, "--set", "replicaCount=1,leaderElection.enabled=false", hooks=True), "Pod")
    assert not [a for a in solo["spec"]["containers"][0]["args"] if a.startswith("--lease-name")]


def check_readme_values(helm):
    """Every value of values.yaml is in the README's values table (a row naming it or a section of it)."""
    del helm
    readme = (CHART / "README.md").read_text()
    table = readme.split("## Values", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        parent = ""
        for token in re.findall(r"`([^`]+)`", row.split("|")[1]):
            if "." in token:
                parent = token.rsplit(".", 1)[0]
                documented.add(token)
            else:
                documented.add(f"{parent}.{token}" if parent else token)

    def covered(path):
        parts = path.split(".")
        for doc in documented:
            pattern = doc.split(".")
            if len(pattern) <= len(parts) and all(
                    p == q or (p.startswith("<") and p.endswith(">")) for p, q in zip(pattern, parts)):
                return True
        return False

    def leaves(values, prefix=""):
        for key, value in values.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                yield from leaves(value, f"{path}.")
            else:
                yield path

    missing = [p for p in leaves(yaml.safe_load((CHART / "values.yaml").read_text())) if not covered(p)]
    assert not missing, f"values missing from the README's table: {missing}"


def check_prometheus_labels(helm):
    """One value, prometheusLabels, labels all three objects Prometheus selects; without it, none."""
    monitored = "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true"
    objects = render(helm, "--set", f"{monitored},prometheusLabels.release=kube-prometheus-stack")
    env = {e["name"]: e for e in one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SERVICE_MONITOR_LABELS"]["value"] == "release=kube-prometheus-stack"
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert one(objects, kind)["metadata"]["labels"]["release"] == "kube-prometheus-stack", kind
    plain = render(helm, "--set", monitored)
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert "release" not in one(plain, kind)["metadata"]["labels"], kind
    bad = render(helm, "--set-json", 'prometheusLabels={"release": "a,b"}', fail=True)
    assert "prometheusLabels" in bad, bad


def check_metrics_modes(helm):
    """Plain /metrics for local use; the ServiceMonitor follows the mode."""
    plain = render(helm, "--set", "metrics.secure=false,metrics.serviceMonitor.enabled=true")
    assert not [o for o in plain if "metrics-" in o["metadata"]["name"] and o["kind"].startswith("ClusterRole")]
    assert one(plain, "ServiceMonitor")["spec"]["endpoints"][0]["scheme"] == "http"
    assert "--metrics-secure=false" in one(plain, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    monitor = one(render(helm, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["tlsConfig"] == {"insecureSkipVerify": True}, "self-signed by default"


def check_policy(helm):
    """The ClusterAdmissionPolicy is deploy/policy.yaml's, judging with the release's policy artifact and the
    chart's memoryOverhead (the controller's), only where Kubewarden's CRDs are served; the audit twin is
    deploy/policy-audit.yaml's, off by default; a mirror, a PolicyServer and watched namespaces land. With the
    policy, the PolicyServer's ServiceAccount may read Memcacheds (the stored Memcached of a scale-up), cluster-wide
    or in the watched namespaces only."""
    kubewarden = ("--api-versions", "policies.kubewarden.io/v1/ClusterAdmissionPolicy")
    assert not kinds(render(helm), "ClusterAdmissionPolicy"), "a policy rendered where Kubewarden is not served"
    assert not kinds(render(helm, *kubewarden, "--set", "policy.enabled=false"), "ClusterAdmissionPolicy")
    version = yaml.safe_load((DEPLOY.parent / "metadata.yml").read_text())["annotations"][
        "io.kubewarden.policy.version"]
    objects = render(helm, *kubewarden)
    policy = one(objects, "ClusterAdmissionPolicy")
    assert policy["metadata"]["name"] == "rel-memcached-operator", policy["metadata"]["name"]
    expected = copy.deepcopy(one(load("policy.yaml"), "ClusterAdmissionPolicy")["spec"])
    expected["module"] = f"registry://ghcr.io/c5c3/policies/memcached:v{version}"
    expected["policyServer"] = "default"
    assert policy["spec"] == expected, f"the chart's policy drifted from deploy/policy.yaml: {policy['spec']}"
    assert [o["kind"] for o in kinds(objects, "ClusterAdmissionPolicy")] == ["ClusterAdmissionPolicy"], \
        "the audit twin is off by default"
    check_policy_server_rbac(helm, objects, kubewarden)

    objects = render(helm, *kubewarden, "--set", "policy.audit.enabled=true,memoryOverhead=48Mi,"
                     "policy.registry=mirror.example/ghcr.io,policy.policyServer=caches,"
                     "policy.settings.podSecurityLevel=baseline", "--set-json", 'watchNamespaces=["a","b"]')
    policy = one(objects, "ClusterAdmissionPolicy", "rel-memcached-operator")
    audit = one(objects, "ClusterAdmissionPolicy", "rel-memcached-operator-audit")
    deployment = one(objects, "Deployment")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert policy["spec"]["settings"]["memoryOverhead"] == env["MEMORY_OVERHEAD"] == "48Mi", \
        "the policy and the controller check memory limits with one memoryOverhead"
    assert policy["spec"]["settings"]["podSecurityLevel"] == "baseline"
    for p in (policy, audit):
        assert p["spec"]["module"] == f"registry://mirror.example/ghcr.io/c5c3/policies/memcached:v{version}"
        assert p["spec"]["policyServer"] == "caches"
        assert p["spec"]["namespaceSelector"] == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}
    expected = copy.deepcopy(one(load("policy-audit.yaml"), "ClusterAdmissionPolicy")["spec"])
    got = copy.deepcopy(audit["spec"])
    del got["module"], got["policyServer"], got["namespaceSelector"], expected["module"]
    assert got["settings"] == {"memoryOverhead": "48Mi", "mutate": False, "podSecurityLevel": "baseline"}, got
    del got["settings"], expected["settings"]
    assert got == expected, f"the chart's audit twin drifted from deploy/policy-audit.yaml: {got}"
    module = "registry://registry.example/policies/memcached:v9"
    policy = one(render(helm, *kubewarden, "--set", f"policy.module={module}"), "ClusterAdmissionPolicy")
    assert policy["spec"]["module"] == module


def check_policy_server_rbac(helm, objects, kubewarden):
    """The policy reads the stored Memcached of a scale-up with the PolicyServer's ServiceAccount, which
    kubewarden-defaults (policyServer.serviceAccountName policy-server, in its release namespace, kubewarden in
    Kubewarden's docs) grants only what its policyServer.permissions lists: the chart grants get, list and watch
    on memcacheds, with the policy only, and with watchNamespaces only there."""
    name = "rel-memcached-operator-policy-server"
    role = one(objects, "ClusterRole", name)
    assert role["rules"] == [{"apiGroups": ["memcached.c5c3.io"], "resources": ["memcacheds"],
                              "verbs": ["get", "list", "watch"]}], role["rules"]
    policy = one(objects, "ClusterAdmissionPolicy")
    assert {"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached"} in policy["spec"]["contextAwareResources"]

    def bindings(objects):
        return [o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding") and o["metadata"]["name"] == name]

    def granted(binding, account, namespace):
        return binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name} \
            and binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]

    [binding] = bindings(objects)
    assert binding["kind"] == "ClusterRoleBinding" and granted(binding, "policy-server", "kubewarden"), binding
    for off in ("policy.enabled=false", "policy.policyServerRBAC.create=false"):
        rendered = render(helm, *kubewarden, "--set", off)
        assert not bindings(rendered) and not [o for o in kinds(rendered, "ClusterRole") if o["metadata"]["name"] == name], off
    assert not bindings(render(helm)), "no PolicyServer to grant where Kubewarden is not served"
    scoped = render(helm, *kubewarden, "--set", "policy.policyServerRBAC.serviceAccountName=ps,"
                    "policy.policyServerRBAC.serviceAccountNamespace=kw", "--set-json", 'watchNamespaces=["a","b"]')
    found = bindings(scoped)
    assert [(b["kind"], b["metadata"].get("namespace")) for b in found] == [("RoleBinding", "a"), ("RoleBinding", "b")], \
        "watchNamespaces must not grant the PolicyServer cluster-wide reads"
    assert all(granted(b, "ps", "kw") for b in found), found
    assert "policyServerRBAC" in render(helm, *kubewarden, "--set", "policy.policyServerRBAC.other=1", fail=True)


def main(helm):
    for check in (check_defaults, check_all_values, check_switches, check_umbrella, check_releases_share_nothing,
                  check_kube_versions, check_crds, check_tests, check_readme_values, check_metrics_modes,
                  check_policy, check_prometheus_labels):
        check(helm)
        print(f"ok {check.__name__}")


if __name__ == "__main__":
    main(sys.argv[1])
