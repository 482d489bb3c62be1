//! Every builder against the design doc's YAML, with and without each feature.

use memcached_api::render::args::AUTH_FILE;
use memcached_api::render::warm_restart;
use memcached_api::{Memcached, apply_defaults};
use memcached_controller::objects::desired::{Desired, Workload};
use memcached_controller::objects::server_list;
use serde_json::{Value, json};
use test_support::object;

fn memcached(spec: Value) -> Memcached {
    object::memcached(spec)
        .namespace("default")
        .uid("u-1")
        .annotation("memcached.c5c3.io/restart-trigger", "2026-11-22")
        .typed()
}

fn desired(spec: Value, secret_hash: Option<&str>) -> Desired {
    desired_reading(spec, secret_hash, AUTH_FILE)
}

/// [`desired`] with the authentication Secret's key memcached's file is read from.
fn desired_reading(spec: Value, secret_hash: Option<&str>, auth_key: &str) -> Desired {
    let mc = memcached(spec);
    let effective = apply_defaults(mc.spec.clone());
    Desired::new(&mc, &effective, secret_hash, auth_key, &Default::default())
}

/// The workload as JSON, whichever kind it is.
fn workload(desired: &Desired) -> Value {
    match &desired.workload {
        Workload::Deployment(d) => to_json(d),
        Workload::StatefulSet(s) => to_json(s),
    }
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

/// True when every field set in `wanted` has the same value in `actual`.
fn contains(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(a), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| a.get(k).is_some_and(|av| contains(av, wv))),
        (Value::Array(a), Value::Array(w)) => {
            a.len() == w.len() && a.iter().zip(w).all(|(av, wv)| contains(av, wv))
        }
        _ => actual == wanted,
    }
}

fn assert_contains(actual: &Value, wanted: &Value) {
    assert!(
        contains(actual, wanted),
        "wanted\n{wanted:#}\nin\n{actual:#}"
    );
}

const SELECTOR: &str = r#"
app.kubernetes.io/name: memcached
app.kubernetes.io/instance: my-cache
app.kubernetes.io/managed-by: memcached-operator
"#;

/// The design doc's "Full Example" spec.
fn full_example() -> Value {
    yaml(
        r#"
replicas: 3
image: memcached:1.6
resources: {requests: {cpu: 250m, memory: 256Mi}, limits: {cpu: "1", memory: 512Mi}}
memcached: {maxMemoryMB: 256, maxConnections: 1024, threads: 4, maxItemSize: "1m", verbosity: 0, extraArgs: []}
highAvailability:
  antiAffinityPreset: soft
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]
  podDisruptionBudget: {enabled: true, minAvailable: 1}
monitoring:
  enabled: true
  exporterImage: prom/memcached-exporter:v0.15.4
  exporterResources: {requests: {cpu: 50m, memory: 32Mi}, limits: {cpu: 100m, memory: 64Mi}}
  serviceMonitor: {additionalLabels: {release: prometheus}, interval: 30s, scrapeTimeout: 10s}
networkPolicy:
  enabled: true
  allowedSources: [{podSelector: {matchLabels: {app: my-app}}}, {namespaceSelector: {matchLabels: {team: backend}}}]
"#,
    )
}

#[test]
fn deployment_matches_the_design_doc() {
    let d = workload(&desired(full_example(), None));
    let expected = yaml(&format!(
        r#"
metadata:
  name: my-cache
  namespace: default
  ownerReferences: [{{apiVersion: memcached.c5c3.io/v1beta1, kind: Memcached, name: my-cache, uid: u-1, controller: true, blockOwnerDeletion: true}}]
spec:
  replicas: 3
  strategy: {{type: RollingUpdate, rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  selector: {{matchLabels: {{{sel}}}}}
  template:
    metadata:
      labels: {{{sel}, app.kubernetes.io/version: "1.6"}}
      annotations: {{memcached.c5c3.io/restart-trigger: "2026-11-22"}}
    spec:
      securityContext: {{runAsNonRoot: true, runAsUser: 11211, runAsGroup: 11211, fsGroup: 11211, seccompProfile: {{type: RuntimeDefault}}}}
      # memcached and the exporter never call the API server: no ServiceAccount token is mounted.
      automountServiceAccountToken: false
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                labelSelector: {{matchLabels: {{app.kubernetes.io/name: memcached, app.kubernetes.io/instance: my-cache}}}}
                topologyKey: kubernetes.io/hostname
      # The design doc's constraint has no labelSelector, which matches no pod: it spreads this instance's pods.
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector: {{matchLabels: {{app.kubernetes.io/name: memcached, app.kubernetes.io/instance: my-cache}}}}
      containers:
        - name: memcached
          image: memcached:1.6
          args: ["-m", "256", "-c", "1024", "-t", "4", "-I", "1m"]
          ports: [{{name: memcached, containerPort: 11211, protocol: TCP}}]
          livenessProbe: {{tcpSocket: {{port: memcached}}, initialDelaySeconds: 10, periodSeconds: 10}}
          readinessProbe: {{tcpSocket: {{port: memcached}}, initialDelaySeconds: 5, periodSeconds: 5}}
          resources: {{requests: {{cpu: 250m, memory: 256Mi}}, limits: {{cpu: "1", memory: 512Mi}}}}
          securityContext: {{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {{drop: [ALL]}}}}
        - name: exporter
          image: prom/memcached-exporter:v0.15.4
          args: ["--memcached.address=localhost:11211"]
          ports: [{{name: metrics, containerPort: 9150, protocol: TCP}}]
          resources: {{requests: {{cpu: 50m, memory: 32Mi}}, limits: {{cpu: 100m, memory: 64Mi}}}}
          securityContext: {{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {{drop: [ALL]}}}}
"#,
        sel = SELECTOR.trim().replace('\n', ", ")
    ));
    assert_contains(&d, &expected);
    assert!(
        d["spec"]["template"]["spec"]
            .get("terminationGracePeriodSeconds")
            .is_none()
    );
    assert!(d["spec"]["template"]["spec"].get("volumes").is_none());
}

#[test]
fn deployment_options() {
    let hard = workload(&desired(
        json!({"highAvailability": {"antiAffinityPreset": "hard"}}),
        None,
    ));
    assert_contains(
        &hard,
        &json!({"spec": {"template": {"spec": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]}}}}}}),
    );
    let plain = workload(&desired(json!({}), None));
    assert!(plain["spec"]["template"]["spec"].get("affinity").is_none());
    assert_eq!(
        plain["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let autoscaled = workload(&desired(
        json!({"autoscaling": {"enabled": true, "maxReplicas": 4}}),
        None,
    ));
    assert!(
        autoscaled["spec"].get("replicas").is_none(),
        "the HPA owns the scale"
    );

    let graceful = workload(&desired(
        json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 7}}}),
        None,
    ));
    assert_contains(
        &graceful,
        &json!({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 30,
        "containers": [{"lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 7"]}}}}]}}}}),
    );

    let pod = workload(&desired(
        json!({"podLabels": {"team": "a", "app.kubernetes.io/instance": "spoof"}, "podAnnotations": {"x": "y"},
        "nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k", "effect": "NoSchedule"}], "imagePullSecrets": [{"name": "reg"}],
        "image": "registry:5000/memcached:1.6.28"}),
        Some("abc"),
    ));
    assert_contains(
        &pod,
        &json!({"metadata": {"labels": {"app.kubernetes.io/version": "1.6.28"}}, "spec": {"template": {
        "metadata": {"labels": {"team": "a", "app.kubernetes.io/instance": "my-cache", "app.kubernetes.io/version": "1.6.28"},
            "annotations": {"x": "y", "memcached.c5c3.io/secret-hash": "abc"}},
        "spec": {"nodeSelector": {"disk": "ssd"}, "tolerations": [{"key": "k"}], "imagePullSecrets": [{"name": "reg"}]}}}}),
    );
}

#[test]
fn warm_restarts_keep_the_memory_file_on_tmpfs_and_save_it_on_stop() {
    let warm = workload(&desired(
        json!({"warmRestart": {"enabled": true}, "memcached": {"maxMemoryMB": 256},
        "highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 7}}}),
        None,
    ));
    let save = "kill -USR1 1 && while [ ! -e /var/lib/memcached/saved ]; do sleep 1; done";
    // The supervisor reads memcached's args from the pod's annotation, one per line.
    assert_contains(
        &warm,
        &json!({"spec": {"template": {
        "metadata": {"annotations": {"memcached.c5c3.io/args":
            "-m\n256\n-c\n1024\n-t\n4\n-I\n1m\n-e\n/var/lib/memcached/memory_file"}},
        "spec": {
        "volumes": [
            {"name": "warm-restart", "emptyDir": {"medium": "Memory", "sizeLimit": "257Mi"}},
            {"name": "run", "downwardAPI": {"items": [
                {"path": "args", "fieldRef": {"fieldPath": "metadata.annotations['memcached.c5c3.io/args']"}},
                {"path": "secrets", "fieldRef": {"fieldPath": "metadata.annotations['memcached.c5c3.io/secret-hash']"}}]}}],
        "containers": [{
            "command": warm_restart::command(),
            "volumeMounts": [{"name": "warm-restart", "mountPath": "/var/lib/memcached"},
                {"name": "run", "mountPath": "/etc/memcached/run", "readOnly": true}],
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", format!("sleep 7; {save}")]}}}}]}}}}),
    );
    assert!(
        warm["spec"]["template"]["spec"]["containers"][0]
            .get("args")
            .is_none(),
        "the args are the annotation's"
    );
    let without_delay = workload(&desired(json!({"warmRestart": {"enabled": true}}), None));
    assert_contains(
        &without_delay,
        &json!({"spec": {"template": {"spec": {"containers": [{
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", save]}}}}]}}}}),
    );
    let cold = workload(&desired(json!({"warmRestart": {"enabled": false}}), None));
    let pod = &cold["spec"]["template"]["spec"];
    assert!(pod.get("volumes").is_none(), "{pod}");
    assert!(pod["containers"][0].get("lifecycle").is_none(), "{pod}");
    assert!(pod["containers"][0].get("command").is_none(), "{pod}");
    assert!(
        cold["spec"]["template"]["metadata"]["annotations"]
            .get("memcached.c5c3.io/args")
            .is_none()
    );
}

/// memcached reads `/etc/memcached/auth/auth` (`-Y`) whichever key of the
/// Secret holds the file: `auth` is mounted as it is (the pods of a Secret
/// with that key are unchanged), `password-file` (the Go operator's) and
/// `memcached-sasl-db` (the design's) are mapped to that file.
#[test]
fn the_auth_file_is_mounted_from_each_of_its_keys() {
    let spec =
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "creds"}}}});
    for (key, items) in [
        ("auth", None),
        (
            "password-file",
            Some(json!([{"key": "password-file", "path": "auth"}])),
        ),
        (
            "memcached-sasl-db",
            Some(json!([{"key": "memcached-sasl-db", "path": "auth"}])),
        ),
    ] {
        let d = workload(&desired_reading(spec.clone(), Some("h"), key));
        let pod = &d["spec"]["template"]["spec"];
        let mut secret = json!({"secretName": "creds"});
        if let Some(items) = items {
            secret["items"] = items;
        }
        assert_eq!(
            pod["volumes"],
            json!([{"name": "auth", "secret": secret}]),
            "{key}"
        );
        let args = pod["containers"][0]["args"].as_array().unwrap();
        let y = args.iter().position(|a| a == "-Y").unwrap();
        assert_eq!(args[y + 1], "/etc/memcached/auth/auth", "{key}");
    }
}

#[test]
fn deployment_mounts_secrets_and_configures_the_exporter_for_tls() {
    let d = workload(&desired(
        json!({"monitoring": {"enabled": true}, "security": {
        "sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}},
        "tls": {"enabled": true, "certificateSecretRef": {"name": "certs"}, "enableClientCert": true}}}),
        Some("h"),
    ));
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "auth", "secret": {"secretName": "auth"}}, {"name": "tls", "secret": {"secretName": "certs"}}])
    );
    assert_eq!(
        pod["containers"][0]["volumeMounts"],
        json!([
        {"name": "auth", "mountPath": "/etc/memcached/auth", "readOnly": true},
        {"name": "tls", "mountPath": "/etc/memcached/tls", "readOnly": true}])
    );
    assert_eq!(
        pod["containers"][1]["volumeMounts"],
        json!([{"name": "tls", "mountPath": "/etc/memcached/tls", "readOnly": true}])
    );
    assert_eq!(
        pod["containers"][1]["args"],
        json!([
            "--memcached.address=localhost:11211",
            "--memcached.tls.enable",
            "--memcached.tls.insecure-skip-verify",
            "--memcached.tls.cert-file=/etc/memcached/tls/tls.crt",
            "--memcached.tls.key-file=/etc/memcached/tls/tls.key"
        ])
    );
}

#[test]
fn stateful_set_mode_runs_the_same_pods_under_stable_names() {
    let mut spec = full_example();
    let deployment = workload(&desired(spec.clone(), Some("h")));
    spec["workload"] = json!("StatefulSet");
    let built = desired(spec.clone(), Some("h"));
    let set = workload(&built);
    assert_eq!(set["kind"], "StatefulSet");
    // The same metadata, but for the stamps of what the pods were made from.
    let unstamped = |workload: &Value| {
        let mut metadata = workload["metadata"].clone();
        let annotations = metadata["annotations"].as_object_mut().unwrap();
        for stamp in [
            "memcached.c5c3.io/intent",
            "memcached.c5c3.io/template-hash",
            "memcached.c5c3.io/template-base-hash",
            "memcached.c5c3.io/intent-spec",
        ] {
            assert!(annotations.remove(stamp).is_some(), "{stamp} missing");
        }
        metadata
    };
    assert_eq!(unstamped(&set), unstamped(&deployment));
    let mut template = set["spec"]["template"].clone();
    let term = "/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm/labelSelector";
    let spread = "/spec/topologySpreadConstraints/0/labelSelector";
    for selector in [term, spread] {
        // Only the StatefulSet's own pods: a switch must not need nodes free of the Deployment's.
        let expressions = template
            .pointer_mut(selector)
            .and_then(|s| s.as_object_mut())
            .and_then(|s| s.remove("matchExpressions"));
        assert_eq!(
            expressions,
            Some(json!([{"key": "statefulset.kubernetes.io/pod-name", "operator": "Exists"}]))
        );
    }
    assert_eq!(
        template, deployment["spec"]["template"],
        "probes, security, anti-affinity, spread, Secrets hash: one pod template"
    );
    assert_contains(
        &set,
        &json!({"spec": {"replicas": 3, "serviceName": "my-cache", "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"}, "selector": {"matchLabels": yaml(SELECTOR)}}}),
    );
    assert!(set["spec"].get("strategy").is_none());
    // The objects around it select the same pods.
    let pdb = to_json(built.pdb.as_ref().unwrap());
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], yaml(SELECTOR));
    assert_eq!(to_json(&built.service)["spec"]["clusterIP"], "None");

    spec["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 5});
    spec.as_object_mut().unwrap().remove("replicas");
    let autoscaled = desired(spec, None);
    assert!(workload(&autoscaled)["spec"].get("replicas").is_none());
    assert_eq!(
        to_json(autoscaled.hpa.as_ref().unwrap())["spec"]["scaleTargetRef"],
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "my-cache"})
    );
}

/// A Deployment's pods whose keys are handed over wait for the controller's
/// gate: clients hash over the ready pods, so a new pod turns ready only
/// once it holds its keys. A StatefulSet's are listed by the controller
/// instead, and pods without a known hashing have no gate.
#[test]
fn only_a_deployment_handing_keys_over_gates_its_pods_readiness() {
    let cases = [
        (
            json!({"clientHashing": "rendezvous"}),
            Some(json!([{"conditionType": "memcached.c5c3.io/keys-taken"}])),
        ),
        (
            json!({"workload": "StatefulSet", "clientHashing": "ketama"}),
            None,
        ),
        (json!({"replicas": 3}), None),
    ];
    for (spec, gates) in cases {
        let built = workload(&desired(spec.clone(), None));
        let template = &built["spec"]["template"]["spec"];
        assert_eq!(template.get("readinessGates").cloned(), gates, "{spec}");
        let service = to_json(&desired(spec.clone(), None).service);
        let not_ready = service["spec"].get("publishNotReadyAddresses").cloned();
        let listed = spec["workload"] == "StatefulSet" && spec.get("clientHashing").is_some();
        assert_eq!(not_ready, listed.then_some(json!(true)), "{spec}");
    }
}

#[test]
fn the_server_list_names_every_ordinal_in_stateful_set_mode() {
    let mut effective = apply_defaults(memcached(json!({})).spec).into_inner();
    let mc = memcached(json!({}));
    assert_eq!(
        server_list::build(&mc, effective.stateful_set(), 3),
        ["my-cache.default:11211"]
    );
    effective.workload = Some("StatefulSet".into());
    assert_eq!(
        server_list::build(&mc, effective.stateful_set(), 3),
        [
            "my-cache-0.my-cache.default.svc:11211",
            "my-cache-1.my-cache.default.svc:11211",
            "my-cache-2.my-cache.default.svc:11211"
        ]
    );
    assert!(server_list::build(&mc, effective.stateful_set(), 0).is_empty());
    assert!(server_list::config_map(&mc, &effective, &[]).is_none());

    effective.server_list_config_map = Some("cache-servers".into());
    let servers = server_list::build(&mc, effective.stateful_set(), 2);
    let config_map = to_json(&server_list::config_map(&mc, &effective, &servers).unwrap());
    assert_contains(
        &config_map,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cache-servers", "namespace": "default", "labels": yaml(SELECTOR),
                "ownerReferences": [{"kind": "Memcached", "name": "my-cache", "uid": "u-1", "controller": true}]},
            "data": {
                "memcache_servers": "my-cache-0.my-cache.default.svc:11211,my-cache-1.my-cache.default.svc:11211",
                "servers": "my-cache-0.my-cache.default.svc:11211\nmy-cache-1.my-cache.default.svc:11211\n"}}),
    );
}

#[test]
fn service_matches_the_design_doc() {
    let s = to_json(&desired(full_example(), None).service);
    assert_contains(
        &s,
        &yaml(&format!(
            r#"
metadata: {{name: my-cache, namespace: default, labels: {{{sel}}}}}
spec:
  clusterIP: None
  ports:
    - {{name: memcached, port: 11211, targetPort: memcached, protocol: TCP}}
    - {{name: metrics, port: 9150, targetPort: metrics, protocol: TCP}}
  selector: {{{sel}}}
"#,
            sel = SELECTOR.trim().replace('\n', ", ")
        )),
    );
    let plain = to_json(&desired(json!({"service": {"annotations": {"a": "b"}}}), None).service);
    assert_eq!(plain["spec"]["ports"].as_array().unwrap().len(), 1);
    assert_eq!(plain["metadata"]["annotations"], json!({"a": "b"}));
}

/// `allowedSources` absent or empty: one rule without `from`, every source
/// may connect (what the policy's warning says); never an operator-only rule
/// that locks every client out.
#[test]
fn a_network_policy_without_sources_admits_every_source() {
    for sources in [json!(null), json!([])] {
        let policy = desired(
            json!({"networkPolicy": {"enabled": true, "allowedSources": sources}}),
            None,
        )
        .network_policy
        .unwrap();
        let rules = to_json(&policy)["spec"]["ingress"].clone();
        assert_eq!(
            rules,
            json!([{"ports": [{"port": 11211, "protocol": "TCP"}]}]),
            "allowedSources: {sources}"
        );
    }
}

#[test]
fn pdb_hpa_network_policy_and_service_monitor_follow_their_switches() {
    let all = desired(full_example(), None);
    assert_contains(
        &to_json(&all.pdb.unwrap()),
        &json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/instance": "my-cache"}}}}),
    );
    assert_contains(
        &to_json(&all.network_policy.unwrap()),
        &json!({"spec": {"policyTypes": ["Ingress"], "ingress": [{
        "from": [{"podSelector": {"matchLabels": {"app": "my-app"}}}, {"namespaceSelector": {"matchLabels": {"team": "backend"}}},
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "memcached-operator-system"}},
             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "memcached-operator"}}}],
        "ports": [{"port": 11211, "protocol": "TCP"}]}, {
        "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        "ports": [{"port": 9150, "protocol": "TCP"}]}]}}),
    );
    assert_contains(
        &to_json(&all.service_monitor.unwrap()),
        &json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"labels": {"release": "prometheus", "app.kubernetes.io/name": "memcached"}},
        "spec": {"endpoints": [{"port": "metrics", "interval": "30s", "scrapeTimeout": "10s"}]}}),
    );
    assert!(all.hpa.is_none());

    let none = desired(
        json!({"highAvailability": {"podDisruptionBudget": {"enabled": false, "minAvailable": 1}},
        "networkPolicy": {"enabled": false}, "monitoring": {"enabled": false}}),
        None,
    );
    assert!(
        none.pdb.is_none()
            && none.network_policy.is_none()
            && none.service_monitor.is_none()
            && none.hpa.is_none()
    );

    let hpa = desired(
        json!({"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 6}}),
        None,
    )
    .hpa
    .unwrap();
    assert_contains(
        &to_json(&hpa),
        &json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "my-cache"},
        "minReplicas": 2, "maxReplicas": 6,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}}),
    );
}
