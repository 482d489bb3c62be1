//! End-to-end scenarios on a real control plane (`make e2e`): kubectl apply
//! through Kubewarden's policy-server (the policy's OCI artifact pulled from a
//! local registry), the controller driving real objects to Ready, a real
//! memcached behind every pod.
//!
//! Runs inside `e2e-tests/netns.sh`; every scenario runs even when an earlier
//! one failed, and the process fails if any did.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e_tests::cluster::leadership::{self, Replica};
use e2e_tests::cluster::memcache::{Memcache, memcached_stat, memcached_version};
use e2e_tests::cluster::objects::{
    auth_secret, changed, exists, get, install_service_monitor_crd, ordinal_servers, owned_by,
    resource_versions, tls_secret, wait_disruption_budget, wait_exists, wait_server_list,
};
use e2e_tests::cluster::pods::{
    EndpointWatch, memcached_pods, pod_ips, pod_name, pod_names, served_by, served_pods,
    wait_ordinal_pods,
};
use e2e_tests::cluster::runner::{Scenario, run_scenarios};
use e2e_tests::cluster::scenario::{
    self, SETTLE, check, ensure_namespace, lease_holder, memcached, patch, touch, wait_ready,
};
use e2e_tests::cluster::{
    Env, Kubectl, OPERATOR_NAMESPACE, condition, condition_status, metrics_reader_token, pki,
    reconciles_at_secure, wait_for,
};
use e2e_tests::fixtures;
use serde_json::{Value, json};

#[path = "cluster/go_operator/mod.rs"]
mod go_operator;

const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "the CRD installs and both versions are served",
        crd_installs,
    ),
    Scenario::new("every seed example through kubectl apply", seed_examples),
    Scenario::new(
        "a minimal Memcached becomes Ready with live stats",
        minimal_ready,
    ),
    Scenario::new(
        "scaling, config rollout and feature toggles",
        scale_and_toggle,
    ),
    Scenario::new("Secret rotation and a missing Secret", secrets),
    Scenario::new(
        "deleting a Memcached collects every child",
        garbage_collection,
    ),
    Scenario::new(
        "StatefulSet mode: stable per-pod names, the server list ConfigMap, mode switches without an outage",
        statefulset_mode,
    ),
    Scenario::new("a restarted controller writes nothing", restart_no_writes),
    Scenario::new("leader election hands over", leader_election),
    Scenario::new(
        "policy-server runs the artifact pulled from the local registry",
        artifact_from_registry,
    ),
    Scenario::new(
        "monitor mode (deploy/policy-audit.yaml) admits an invalid Memcached and reports it",
        audit_mode,
    ),
    Scenario::new(
        "a namespace's Pod Security label, read by policy-server for the policy at podSecurityLevel \
         baseline; a kubectl scale up after the label is refused as the apply is, a scale down admitted",
        namespace_pod_security,
    ),
    Scenario::new(
        "kubectl scale of an autoscaled Memcached: refused by the CRD's rule, in the policy's words",
        scale_while_autoscaling,
    ),
    Scenario::new(
        "the controller Deployment: both replicas Ready, a rollout restart finishes, one leader at a time",
        controller_rollout,
    ),
    Scenario::new(
        "the Go operator's samples and e2e objects through kubectl apply as they are: admitted whole, \
         Ready, with their NetworkPolicy and authentication in force; the one it refuses refused",
        go_operator::go_operator_objects,
    ),
];

fn main() {
    e2e_tests::cluster::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e");
    let started = Instant::now();
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    println!(
        "control plane ready in {:.1}s (environment {:.1}s), logs in {}",
        env.cluster.start_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    println!(
        "policy-server {} serves {} from {}@{}",
        env.policy_server.url,
        [env.protect.id(), env.audit.id(), env.namespaced.id()].join(", "),
        env.artifact.reference,
        env.artifact.digest
    );
    run_scenarios(env, SCENARIOS);
}

// ---------------------------------------------------------------- scenarios

fn crd_installs(env: &mut Env) -> Result<(), String> {
    let crd = env.kubectl.get(&["crd", "memcacheds.memcached.c5c3.io"])?;
    for condition in ["Established", "NamesAccepted"] {
        check(
            condition_status(&crd, condition) == Some("True"),
            format!("CRD condition {condition} is not True"),
        )?;
    }
    check(
        condition_status(&crd, "NonStructuralSchema").is_none(),
        "the API server found the schema non-structural",
    )?;
    let served: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == json!(true))
        .filter_map(|v| v["name"].as_str())
        .collect();
    check(
        served == ["v1alpha1", "v1beta1"],
        format!("served versions {served:?}"),
    )?;
    for version in ["v1alpha1", "v1beta1"] {
        let list = env
            .kubectl
            .get(&[&format!("memcacheds.{version}.memcached.c5c3.io"), "-A"])?;
        check(
            list["kind"] == "List" || list["kind"] == "MemcachedList",
            format!("listing {version} answered {}", list["kind"]),
        )?;
    }
    let resources = env.kubectl.ok(&[
        "api-resources",
        "--api-group=memcached.c5c3.io",
        "-o",
        "wide",
    ])?;
    check(
        resources.contains("memcacheds") && resources.contains("mc "),
        format!("api-resources: {resources}"),
    )
}

fn seed_examples(env: &mut Env) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut applied = 0;
    for fixture in fixtures() {
        let request = &fixture.review["request"];
        if !(fixture.name.starts_with("design-") || fixture.name.starts_with("seed-"))
            || request["operation"] != "CREATE"
        {
            continue;
        }
        applied += 1;
        let namespace = format!(
            "seeds-{}",
            request["object"]["apiVersion"]
                .as_str()
                .unwrap_or("")
                .rsplit('/')
                .next()
                .unwrap_or("")
        );
        ensure_namespace(env, &namespace)?;
        let mut object = request["object"].clone();
        object["metadata"]["namespace"] = json!(namespace);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let outcome = env
            .kubectl
            .run(&["apply", "-f", "-"], Some(&object.to_string()));
        let expected = &fixture.expected;
        for warning in &expected.warnings {
            if !outcome.stderr.contains(&format!("Warning: {warning}")) {
                problems.push(format!(
                    "{}: warning {warning:?} not printed: {}",
                    fixture.name, outcome.stderr
                ));
            }
        }
        if !expected.accepted {
            let message = format!(
                "admission webhook \"{}\" denied the request: {}",
                env.protect.webhook_name(),
                expected.message(&name)
            );
            if outcome.success || !outcome.stderr.contains(&message) {
                problems.push(format!(
                    "{}: expected\n       {message}\n     kubectl printed\n       {}",
                    fixture.name,
                    outcome.stderr.trim()
                ));
            }
            continue;
        }
        if !outcome.success {
            problems.push(format!(
                "{}: refused: {}",
                fixture.name,
                outcome.stderr.trim()
            ));
            continue;
        }
        let stored = env.kubectl.get(&["memcached", &name, "-n", &namespace])?;
        let want = expected.object.as_ref().unwrap_or(&request["object"]);
        if stored["spec"] != want["spec"] {
            problems.push(format!(
                "{}: stored spec differs from the defaulted one\n       stored {}\n       wanted {}",
                fixture.name, stored["spec"], want["spec"]
            ));
        }
        let deleted = env.kubectl.run(
            &[
                "delete",
                "memcached",
                &name,
                "-n",
                &namespace,
                // Wait for the children too: the garbage collector must not still be
                // deleting them when a later scenario counts writes.
                "--cascade=foreground",
                "--wait=true",
            ],
            None,
        );
        if !deleted.success {
            problems.push(format!(
                "{}: delete failed: {}",
                fixture.name, deleted.stderr
            ));
        }
    }
    check(applied >= 30, format!("only {applied} seed examples found"))?;
    check(problems.is_empty(), problems.join("\n     "))
}

fn minimal_ready(env: &mut Env) -> Result<(), String> {
    let ns = "minimal";
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    let mc = wait_ready(env, ns, "cache", 1)?;
    let status = &mc["status"];
    check(
        condition_status(&mc, "Available") == Some("True"),
        "Available is not True",
    )?;
    check(
        status["observedGeneration"] == mc["metadata"]["generation"],
        "observedGeneration lags",
    )?;
    check(
        status["serverList"] == json!(["cache.minimal:11211"]),
        format!("serverList {}", status["serverList"]),
    )?;
    for kind in ["deployment", "service"] {
        let object = env.kubectl.get(&[kind, "cache", "-n", ns])?;
        check(
            owned_by(&object, &mc),
            format!("{kind} owners {}", object["metadata"]["ownerReferences"]),
        )?;
    }
    let service = env.kubectl.get(&["service", "cache", "-n", ns])?;
    check(
        service["spec"]["clusterIP"] == "None",
        "Service is not headless",
    )?;

    // The pod runs a real memcached: put traffic on it, then see it in status.
    let ip = pod_ips(env, ns, "cache")?.pop().ok_or("no pod IP")?;
    let mut session = Memcache::connect(&ip)?;
    session.command("set greeting 0 0 5\r\nhello\r\n", "STORED")?;
    session.command("get greeting\r\n", "END")?;
    session.command("get missing\r\n", "END")?;
    // The session stays open: the one client connection the status counts.
    touch(env, ns, "cache")?;
    wait_for("live stats in status", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        let status = &mc["status"];
        let live = status["memcachedVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("1."))
            && status["currentConnections"]
                .as_i64()
                .is_some_and(|c| c >= 1)
            && status["hitRatio"] == "0.50";
        if live {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })?;
    // The client gone, the status counts none (so later scenarios see a
    // settled status).
    drop(session);
    touch(env, ns, "cache")?;
    wait_for("no client connection in status", SETTLE, || {
        let status = get(env, ns, "cache")?["status"].clone();
        (status["currentConnections"] == 0)
            .then_some(())
            .ok_or_else(|| status.to_string())
    })?;
    let printed = env.kubectl.ok(&["get", "memcached", "cache", "-n", ns])?;
    check(
        printed.contains("cache") && printed.lines().count() == 2,
        format!("kubectl get memcached printed {printed}"),
    )
}

fn scale_and_toggle(env: &mut Env) -> Result<(), String> {
    let ns = "scale";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 1})))?;
    wait_ready(env, ns, "cache", 1)?;

    // 1 -> 3 by editing the spec, 3 -> 1 through the scale subresource.
    patch(env, ns, "cache", json!({"spec": {"replicas": 3}}))?;
    wait_ready(env, ns, "cache", 3)?;
    check(pod_ips(env, ns, "cache")?.len() == 3, "not 3 pods")?;
    env.kubectl
        .ok(&["scale", "memcached", "cache", "-n", ns, "--replicas=1"])?;
    wait_ready(env, ns, "cache", 1)?;
    wait_for("one pod left", SETTLE, || {
        let ips = pod_ips(env, ns, "cache")?;
        if ips.len() == 1 {
            Ok(())
        } else {
            Err(format!("{} pods", ips.len()))
        }
    })?;

    // A config change rolls pods that run memcached with the new args.
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"memcached": {"maxMemoryMB": 96}}}),
    )?;
    wait_for("pods running with -m 96", SETTLE, || {
        let ips = pod_ips(env, ns, "cache")?;
        let limits: Vec<String> = ips
            .iter()
            .map(|ip| memcached_stat(ip, "limit_maxbytes").unwrap_or_default())
            .collect();
        if ips.len() == 1 && limits.iter().all(|l| l == &(96 * 1024 * 1024).to_string()) {
            Ok(())
        } else {
            Err(format!("limit_maxbytes per pod: {limits:?}"))
        }
    })?;
    wait_ready(env, ns, "cache", 1)?;

    // PodDisruptionBudget and NetworkPolicy (also where the Go operator has
    // it, spec.security.networkPolicy: kept by the CRD through a merge patch,
    // honoured by the controller): on adds, off removes.
    for (feature, kind) in [
        (
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
            "poddisruptionbudget",
        ),
        (json!({"networkPolicy": {"enabled": true}}), "networkpolicy"),
        (
            json!({"networkPolicy": null, "security": {"networkPolicy": {"enabled": true}}}),
            "networkpolicy",
        ),
    ] {
        patch(env, ns, "cache", json!({"spec": feature}))?;
        wait_exists(env, ns, kind, "cache", true)?;
        let off = toggled_off(&feature);
        patch(env, ns, "cache", json!({"spec": off}))?;
        wait_exists(env, ns, kind, "cache", false)?;
    }

    // Monitoring: the exporter sidecar at once, the ServiceMonitor once its CRD exists.
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"monitoring": {"enabled": true}}}),
    )?;
    wait_for("the exporter sidecar", SETTLE, || {
        let deployment = env.kubectl.get(&["deployment", "cache", "-n", ns])?;
        let containers = deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map_or(0, Vec::len);
        if containers == 2 {
            Ok(())
        } else {
            Err(format!("{containers} containers"))
        }
    })?;
    wait_ready(env, ns, "cache", 2)?;
    install_service_monitor_crd(env)?;
    // The controller tries the ServiceMonitor on every reconcile; prompt one.
    touch(env, ns, "cache")?;
    wait_exists(
        env,
        ns,
        "servicemonitors.monitoring.coreos.com",
        "cache",
        true,
    )?;
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"monitoring": {"enabled": false}}}),
    )?;
    wait_exists(
        env,
        ns,
        "servicemonitors.monitoring.coreos.com",
        "cache",
        false,
    )?;

    // Autoscaling switched on by re-applying a file that never had replicas.
    let file = json!({"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}});
    env.kubectl.apply(&memcached(ns, "auto", file.clone()))?;
    wait_ready(env, ns, "auto", 1)?;
    let mut autoscaled = file.clone();
    autoscaled["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 4});
    env.kubectl.apply(&memcached(ns, "auto", autoscaled))?;
    wait_exists(env, ns, "horizontalpodautoscaler", "auto", true)?;
    let hpa = env
        .kubectl
        .get(&["horizontalpodautoscaler", "auto", "-n", ns])?;
    check(
        hpa["spec"]["minReplicas"] == 2 && hpa["spec"]["maxReplicas"] == 4,
        format!("HPA spec {}", hpa["spec"]),
    )?;
    let stored = get(env, ns, "auto")?;
    check(
        stored["spec"].get("replicas").is_none(),
        format!("replicas kept beside autoscaling: {}", stored["spec"]),
    )?;
    env.kubectl.apply(&memcached(ns, "auto", file))?;
    wait_exists(env, ns, "horizontalpodautoscaler", "auto", false)?;
    env.kubectl
        .ok(&["delete", "namespace", ns, "--wait=false"])?;
    Ok(())
}

fn secrets(env: &mut Env) -> Result<(), String> {
    let ns = "secrets";
    ensure_namespace(env, ns)?;
    let tls = pki::issue(&["cache.secrets.svc"])?;
    env.kubectl.apply(&tls_secret(ns, "cache-tls", &tls))?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:first-password\n"))?;
    let secure = json!({"security": {
        "tls": {"enabled": true, "certificateSecretRef": {"name": "cache-tls"}},
        "sasl": {"enabled": true, "credentialsSecretRef": {"name": "cache-auth"}},
    }});
    env.kubectl.apply(&memcached(ns, "cache", secure))?;
    wait_ready(env, ns, "cache", 1)?;
    // Stats over TLS with the password prove memcached got the TLS and -Y flags.
    wait_for("stats over TLS with authentication", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        if mc["status"]["memcachedVersion"].is_string() {
            Ok(())
        } else {
            Err(mc["status"].to_string())
        }
    })?;

    // Rotating the password rolls the pods; stats keep working with the new one.
    let before = pod_names(env, ns, "cache")?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:second-password\n"))?;
    // Well inside the 60 s periodic reconcile: the Secret watch must notice.
    wait_for(
        "pods replaced after the rotation",
        Duration::from_secs(30),
        || {
            let now = pod_names(env, ns, "cache")?;
            if !now.is_empty() && now.iter().all(|p| !before.contains(p)) {
                Ok(())
            } else {
                Err(format!("{before:?} -> {now:?}"))
            }
        },
    )?;
    wait_ready(env, ns, "cache", 1)?;
    let served = served_by(env, ns, "cache")?;
    touch(env, ns, "cache")?;
    wait_for("stats with the rotated password", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        let ok =
            mc["status"]["memcachedVersion"].is_string() && served_by(env, ns, "cache")? == served;
        if ok {
            Ok(())
        } else {
            Err(mc["status"].to_string())
        }
    })?;

    // A missing Secret: Degraded/SecretNotFound, recovered once it exists.
    env.kubectl.apply(&memcached(
        ns,
        "waiting",
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "later"}}}}),
    ))?;
    wait_for("Degraded/SecretNotFound", SETTLE, || {
        let mc = get(env, ns, "waiting")?;
        match condition(&mc, "Degraded") {
            Some(c) if c["status"] == "True" && c["reason"] == "SecretNotFound" => Ok(()),
            other => Err(format!("Degraded: {other:?}")),
        }
    })?;
    env.kubectl
        .apply(&auth_secret(ns, "later", "operator:password\n"))?;
    let mc = wait_ready(env, ns, "waiting", 1)?;
    check(
        condition_status(&mc, "Degraded") == Some("False"),
        "Degraded did not clear",
    )
}

fn garbage_collection(env: &mut Env) -> Result<(), String> {
    let ns = "collect";
    ensure_namespace(env, ns)?;
    let everything = json!({
        "replicas": 2,
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}},
        "monitoring": {"enabled": true},
        "networkPolicy": {"enabled": true},
    });
    install_service_monitor_crd(env)?;
    env.kubectl.apply(&memcached(ns, "cache", everything))?;
    wait_ready(env, ns, "cache", 2)?;
    let kinds = [
        "deployment",
        "service",
        "poddisruptionbudget",
        "networkpolicy",
        "servicemonitors.monitoring.coreos.com",
    ];
    for kind in kinds {
        wait_exists(env, ns, kind, "cache", true)?;
    }
    env.kubectl
        .ok(&["delete", "memcached", "cache", "-n", ns])?;
    for kind in kinds {
        wait_exists(env, ns, kind, "cache", false)?;
    }
    wait_for("pods and ReplicaSets collected", SETTLE, || {
        let left = env
            .kubectl
            .ok(&["get", "pods,replicasets", "-n", ns, "-o", "name"])?;
        if left.trim().is_empty() {
            Ok(())
        } else {
            Err(left)
        }
    })
}

/// StatefulSet mode: pods `<name>-<i>` behind per-pod DNS names, listed in
/// `status.serverList` and the ConfigMap clients read; scale-down from the
/// highest ordinal, the PodDisruptionBudget following the StatefulSet's
/// scale; a deleted pod back under its name with the list
/// untouched; switches to Deployment mode and back that never leave the
/// Service without a ready endpoint. Leaves the Memcached running in
/// StatefulSet mode with its ConfigMap, for the next scenario to watch.
fn statefulset_mode(env: &mut Env) -> Result<(), String> {
    let (ns, name, config_map) = ("sharded", "cache", "cache-servers");
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(
        ns,
        name,
        json!({
            "workload": "StatefulSet",
            "replicas": 3,
            "serverListConfigMap": config_map,
            "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}},
        }),
    ))?;
    let mc = wait_ready(env, ns, name, 3)?;
    let statefulset = env.kubectl.get(&["statefulset", name, "-n", ns])?;
    let spec = &statefulset["spec"];
    check(
        spec["podManagementPolicy"] == "Parallel" && spec["serviceName"] == name,
        format!(
            "StatefulSet podManagementPolicy {} serviceName {}, expected \"Parallel\" and \"{name}\"",
            spec["podManagementPolicy"], spec["serviceName"]
        ),
    )?;
    check(
        owned_by(&statefulset, &mc),
        format!(
            "StatefulSet owners {}",
            statefulset["metadata"]["ownerReferences"]
        ),
    )?;
    check(
        !exists(env, ns, "deployment", name)?,
        "a Deployment exists beside the StatefulSet",
    )?;
    wait_ordinal_pods(env, ns, name, 3)?;
    wait_disruption_budget(env, ns, name, 3)?;
    wait_server_list(env, ns, name, config_map, &ordinal_servers(ns, name, 3))?;

    // Scale-down removes the highest ordinal.
    patch(env, ns, name, json!({"spec": {"replicas": 2}}))?;
    wait_ready(env, ns, name, 2)?;
    wait_ordinal_pods(env, ns, name, 2)?;
    wait_disruption_budget(env, ns, name, 2)?;
    let listed = wait_server_list(env, ns, name, config_map, &ordinal_servers(ns, name, 2))?;

    // A deleted pod comes back under its name; the list is not touched meanwhile.
    let first = format!("{name}-0");
    let deleted = env.kubectl.get(&["pod", &first, "-n", ns])?;
    env.kubectl
        .ok(&["delete", "pod", &first, "-n", ns, "--wait=false"])?;
    wait_for(&format!("a new pod {first} Ready"), SETTLE, || {
        let pod = env.kubectl.get(&["pod", &first, "-n", ns])?;
        let ready = condition_status(&pod, "Ready");
        if pod["metadata"]["uid"] != deleted["metadata"]["uid"] && ready == Some("True") {
            Ok(())
        } else {
            Err(format!("uid {}, Ready {ready:?}", pod["metadata"]["uid"]))
        }
    })?;
    let mc = wait_ready(env, ns, name, 2)?;
    wait_ordinal_pods(env, ns, name, 2)?;
    check(
        mc["status"]["serverList"] == json!(ordinal_servers(ns, name, 2)),
        format!(
            "status.serverList {} after {first} came back",
            mc["status"]["serverList"]
        ),
    )?;
    let unchanged = env.kubectl.get(&["configmap", config_map, "-n", ns])?;
    check(
        unchanged["metadata"]["resourceVersion"] == listed["metadata"]["resourceVersion"],
        format!(
            "ConfigMap {config_map} was rewritten while {first} was replaced: {} -> {}",
            listed["data"], unchanged["data"]
        ),
    )?;

    // To Deployment mode and back, the Service serving all along.
    switch_workload(env, ns, name, "Deployment", 2)?;
    wait_server_list(env, ns, name, config_map, &[format!("{name}.{ns}:11211")])?;
    switch_workload(env, ns, name, "StatefulSet", 2)?;
    wait_ordinal_pods(env, ns, name, 2)?;
    wait_server_list(env, ns, name, config_map, &ordinal_servers(ns, name, 2))?;

    // Without serverListConfigMap the ConfigMap goes; set again, it returns.
    patch(
        env,
        ns,
        name,
        json!({"spec": {"serverListConfigMap": null}}),
    )?;
    wait_exists(env, ns, "configmap", config_map, false)?;
    patch(
        env,
        ns,
        name,
        json!({"spec": {"serverListConfigMap": config_map}}),
    )?;
    wait_server_list(env, ns, name, config_map, &ordinal_servers(ns, name, 2)).map(drop)
}

/// Set `spec.workload` to `to` while watching the Service's EndpointSlices:
/// the other workload is deleted, `replicas` pods of the new one serve (each
/// a memcached), and the Service had a ready endpoint after every change.
fn switch_workload(
    env: &Env,
    namespace: &str,
    name: &str,
    to: &str,
    replicas: i64,
) -> Result<(), String> {
    let (kind, old_kind) = match to {
        "Deployment" => ("deployment", "statefulset"),
        _ => ("statefulset", "deployment"),
    };
    // Deployment pods belong to a ReplicaSet.
    let pod_owner = if to == "Deployment" { "ReplicaSet" } else { to };
    let before = served_pods(env, namespace, name)?;
    let watch = EndpointWatch::start(env, namespace, name)?;
    let from = watch.wait_for(&before)?;
    patch(env, namespace, name, json!({"spec": {"workload": to}}))?;
    wait_exists(env, namespace, old_kind, name, false)?;
    let mc = wait_ready(env, namespace, name, replicas)?;
    let workload = env.kubectl.get(&[kind, name, "-n", namespace])?;
    check(
        owned_by(&workload, &mc) && workload["status"]["readyReplicas"] == replicas,
        format!(
            "after the switch to {to}: owners {}, readyReplicas {}",
            workload["metadata"]["ownerReferences"], workload["status"]["readyReplicas"]
        ),
    )?;
    let after = wait_for(
        &format!("only {to} pods behind the Service"),
        SETTLE,
        || {
            let pods = memcached_pods(env, namespace, name)?;
            let served = served_pods(env, namespace, name)?;
            let owners: Vec<&Value> = pods
                .iter()
                .map(|p| &p["metadata"]["ownerReferences"][0]["kind"])
                .collect();
            if served.len() as i64 == replicas
                && pods.len() == served.len()
                && owners.iter().all(|k| *k == pod_owner)
            {
                Ok(served)
            } else {
                Err(format!(
                    "pods owned by {owners:?}, ready endpoints {served:?}"
                ))
            }
        },
    )?;
    for ip in pod_ips(env, namespace, name)? {
        memcached_version(&ip)?;
    }
    let states = watch.stop_at(from, &after)?;
    check(
        states.iter().all(|ready| !ready.is_empty()),
        format!(
            "the Service {namespace}/{name} had no ready endpoint during the switch to {to}; \
             ready endpoints after each EndpointSlice change: {states:?}"
        ),
    )
}

fn restart_no_writes(env: &mut Env) -> Result<(), String> {
    install_service_monitor_crd(env)?;
    let operator = env.operator.take().ok_or("no controller running")?;
    // Converged first: nothing changes between two looks a few seconds apart.
    let before = wait_for("a converged cluster", SETTLE, || {
        let first = resource_versions(env)?;
        std::thread::sleep(Duration::from_secs(3));
        let second = resource_versions(env)?;
        if first == second {
            Ok(second)
        } else {
            Err(changed(&first, &second))
        }
    })?;
    operator.stop();
    let count = lasting_memcacheds(env)?;
    let restarted = env.operator.insert(env.start_operator("operator-b")?);
    wait_for(
        "the restarted controller to reconcile every Memcached",
        SETTLE,
        || {
            let reconciles = restarted.reconciles()?;
            if reconciles >= count {
                Ok(())
            } else {
                Err(format!("{reconciles} of {count} reconciles"))
            }
        },
    )?;
    std::thread::sleep(Duration::from_secs(3));
    let after = resource_versions(env)?;
    check(before == after, changed(&before, &after))
}

/// Memcached objects that will still exist in a moment: none being
/// deleted, none in a namespace being deleted (earlier scenarios' own).
fn lasting_memcacheds(env: &Env) -> Result<u64, String> {
    let terminating: Vec<String> = env.kubectl.get(&["namespaces"])?["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["status"]["phase"] == "Terminating")
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let memcacheds = env.kubectl.get(&["memcached", "-A"])?;
    let lasting = memcacheds["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["metadata"]["deletionTimestamp"].is_null())
        .filter(|m| {
            let ns = m["metadata"]["namespace"].as_str().unwrap_or_default();
            !terminating.iter().any(|t| t == ns)
        })
        .count();
    Ok(lasting as u64)
}

fn leader_election(env: &mut Env) -> Result<(), String> {
    let leader = env.operator.take().ok_or("no controller running")?;
    let follower = env.start_operator("operator-c")?;
    wait_for("the leader to hold the Lease", SETTLE, || {
        let holder = lease_holder(env)?;
        if holder == leader.name {
            Ok(())
        } else {
            Err(holder)
        }
    })?;
    let ns = "minimal";
    touch(env, ns, "cache")?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        follower.reconciles()? == 0 && follower.ready(),
        "the follower reconciles while another process leads",
    )?;

    let killed = Instant::now();
    leader.kill();
    wait_for(
        "the follower to take the Lease",
        Duration::from_secs(30),
        || {
            let holder = lease_holder(env)?;
            if holder == follower.name {
                Ok(())
            } else {
                Err(holder)
            }
        },
    )?;
    let handover = killed.elapsed();
    // The new leader reconciles: a spec change reaches the Deployment.
    patch(env, ns, "cache", json!({"spec": {"replicas": 2}}))?;
    wait_ready(env, ns, "cache", 2)?;
    check(
        follower.reconciles()? > 0,
        "the new leader did not reconcile",
    )?;
    println!(
        "     handover took {:.1}s (Lease duration 15s)",
        handover.as_secs_f64()
    );
    env.operator = Some(follower);
    check(
        handover <= Duration::from_secs(20),
        format!("handover took {handover:?}"),
    )
}

/// deploy/controller.yaml on the cluster, its pods running the controller
/// binary (the pod runtime maps the image to it, authenticated by a token of
/// the pod's ServiceAccount, probed on /readyz every periodSeconds): both
/// replicas turn Ready, the standby too, so `kubectl rollout status`
/// finishes, and so does a `kubectl rollout restart`. Only the Lease holder
/// reconciles: in the replicas' logs no replica reconciles outside its own
/// term or after its successor started leading, and each successor took the
/// Lease on the SIGTERMed leader's release; standbys' reconcile counters stay
/// at 0, and the last leader, authenticated as its pod, reconciles a change.
fn controller_rollout(env: &mut Env) -> Result<(), String> {
    // Another leader would hold the Lease; SIGTERM releases it.
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let root = e2e_tests::workspace_root();
    let manifests = [
        "deploy/rbac.yaml",
        "deploy/rbac-metrics-auth.yaml",
        "deploy/controller.yaml",
    ];
    for manifest in manifests {
        env.kubectl
            .ok(&["apply", "-f", &root.join(manifest).to_string_lossy()])?;
    }
    let deployment = "deployment/memcached-operator";
    let status = [
        "rollout",
        "status",
        deployment,
        "-n",
        OPERATOR_NAMESPACE,
        "--timeout=60s",
    ];
    let started = Instant::now();
    env.kubectl.ok(&status)?;
    let first_rollout = started.elapsed();
    let before = both_ready(env, "after the rollout")?;

    let ns = "rollout";
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    wait_ready(env, ns, "cache", 1)?;
    only_the_leader_reconciled(env, &before)?;

    let started = Instant::now();
    env.kubectl
        .ok(&["rollout", "restart", deployment, "-n", OPERATOR_NAMESPACE])?;
    env.kubectl.ok(&status)?;
    let restart = started.elapsed();
    let old: Vec<&str> = before.iter().map(pod_name).collect();
    // Removed once their controller exited (SIGTERM; SIGKILL after 30 s).
    wait_for(
        "the old controller pods to stop",
        Duration::from_secs(45),
        || {
            let pods = env.kubectl.get(&["pods", "-n", OPERATOR_NAMESPACE])?;
            let names: Vec<&str> = pods["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(pod_name)
                .collect();
            if names.iter().any(|n| old.contains(n)) {
                Err(format!("pods {names:?}"))
            } else {
                Ok(())
            }
        },
    )?;
    let after = both_ready(env, "after the restart")?;
    patch(env, ns, "cache", json!({"spec": {"replicas": 2}}))?;
    wait_ready(env, ns, "cache", 2)?;
    let leader = only_the_leader_reconciled(env, &after)?;
    runs_as_its_pod(env, &leader)?;

    let replicas = controller_logs(env)?;
    check(
        replicas.len() == before.len() + after.len(),
        format!(
            "{} controller logs for {} pods",
            replicas.len(),
            before.len() + after.len()
        ),
    )?;
    let terms = leadership::exclusive_terms(&replicas)?;
    let last = terms.last().ok_or("no replica ever led")?;
    check(
        last.replica == leader && last.until.is_none(),
        format!("the last term is {last:?}, but {leader} holds the Lease"),
    )?;
    let handovers = leadership::handovers(&replicas, &terms);
    println!(
        "     kubectl rollout status: 2 replicas Ready {:.1}s after apply; \
         rollout restart + rollout status {:.1}s",
        first_rollout.as_secs_f64(),
        restart.as_secs_f64()
    );
    for handover in &handovers {
        println!(
            "     SIGTERM handover {} -> {}: leading {:.2}s after the SIGTERM",
            handover.from,
            handover.to,
            handover.after_signal.unwrap_or(f64::NAN),
        );
    }
    // The first leader was an old pod: at least one handover, each one after
    // the old leader's SIGTERM, taken on its release (not on expiry).
    check(
        !handovers.is_empty()
            && handovers
                .iter()
                .all(|h| h.after_signal.is_some() && h.on_release),
        format!("handovers {handovers:?}"),
    )
}

/// The controller pods not being deleted: both replicas, both Ready.
fn both_ready(env: &Env, when: &str) -> Result<Vec<Value>, String> {
    let pods = env.kubectl.get(&[
        "pods",
        "-n",
        OPERATOR_NAMESPACE,
        "-l",
        "app.kubernetes.io/name=memcached-operator",
    ])?;
    let pods: Vec<Value> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect();
    check(
        pods.len() == 2
            && pods
                .iter()
                .all(|p| condition_status(p, "Ready") == Some("True")),
        format!("{when}: {} controller pods, not all Ready", pods.len()),
    )?;
    Ok(pods)
}

/// Among `pods`, the Lease holder has reconciled and the others never did
/// (their secure /metrics on the pod IP, read by a metrics-reader); the
/// holder's name.
fn only_the_leader_reconciled(env: &Env, pods: &[Value]) -> Result<String, String> {
    let holder = lease_holder(env)?;
    let token = metrics_reader_token(&env.kubectl, OPERATOR_NAMESPACE, "metrics-scraper")?;
    check(
        pods.iter().any(|p| pod_name(p) == holder),
        format!("{holder} holds the Lease, not one of the controller pods"),
    )?;
    for pod in pods {
        let name = pod_name(pod);
        let port = pod["spec"]["containers"][0]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "metrics")
            .map(|p| p["containerPort"].clone());
        let address = format!(
            "{}:{}",
            pod["status"]["podIP"].as_str().unwrap_or_default(),
            port.unwrap_or_default()
        );
        let reconciles = reconciles_at_secure(
            address
                .parse()
                .map_err(|e| format!("pod {name} metrics address {address}: {e}"))?,
            &token,
        )?;
        check(
            (reconciles > 0) == (name == holder),
            format!("{name} reconciled {reconciles} times; {holder} holds the Lease"),
        )?;
    }
    Ok(holder)
}

/// Every controller pod's log, named by pod.
fn controller_logs(env: &Env) -> Result<Vec<Replica>, String> {
    controller_pod_dirs(env)?
        .iter()
        .map(|(pod, dir)| Replica::read(pod, &dir.join("controller.log")))
        .collect()
}

/// The pod runtime's directory of every controller pod that ran
/// (`pods/<namespace>/<pod>-<first 8 characters of the UID>` in the
/// cluster's directory), by pod name.
fn controller_pod_dirs(env: &Env) -> Result<Vec<(String, PathBuf)>, String> {
    let dir = env.cluster.workdir.join("pods").join(OPERATOR_NAMESPACE);
    let mut pods = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let pod = name.rsplit_once('-').map_or(&*name, |(pod, _)| pod);
        if path.join("controller.log").is_file() {
            pods.push((pod.to_string(), path.clone()));
        }
    }
    Ok(pods)
}

/// The leader's credentials are its pod's: the ServiceAccount of
/// deploy/rbac.yaml, in a token bound to the pod (`kubectl auth whoami`
/// with the kubeconfig the pod runtime gave it).
fn runs_as_its_pod(env: &Env, pod: &str) -> Result<(), String> {
    let dirs = controller_pod_dirs(env)?;
    let (_, dir) = dirs
        .iter()
        .find(|(name, _)| name == pod)
        .ok_or_else(|| format!("no pod directory for {pod}"))?;
    let kubectl = Kubectl::new(&env.binaries.kubectl, &dir.join("kubeconfig"));
    let review: Value = serde_json::from_str(&kubectl.ok(&["auth", "whoami", "-o", "json"])?)
        .map_err(|e| format!("kubectl auth whoami: {e}"))?;
    let user = &review["status"]["userInfo"];
    check(
        user["username"]
            == format!("system:serviceaccount:{OPERATOR_NAMESPACE}:memcached-operator")
            && user["extra"]["authentication.kubernetes.io/pod-name"] == json!([pod]),
        format!("{pod} authenticates as {user}"),
    )
}

/// policy-server downloaded the module from the registry into its download
/// directory, and it is the annotated policy byte for byte.
fn artifact_from_registry(env: &mut Env) -> Result<(), String> {
    let downloads = env.cluster.workdir.join("policies");
    let mut modules = Vec::new();
    let mut dirs = vec![downloads.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                modules.push(path);
            }
        }
    }
    let annotated = std::fs::read(e2e_tests::workspace_root().join("annotated-policy.wasm"))
        .map_err(|e| e.to_string())?;
    // Both policies load the same reference: one download.
    check(
        modules.len() == 1,
        format!("policy-server downloaded {modules:?}"),
    )?;
    let host = env
        .artifact
        .reference
        .trim_start_matches("registry://")
        .split('/')
        .next()
        .unwrap_or_default();
    check(
        modules[0].to_string_lossy().contains(host),
        format!("{} is not from {host}", modules[0].display()),
    )?;
    check(
        std::fs::read(&modules[0]).map_err(|e| e.to_string())? == annotated,
        format!(
            "{} differs from annotated-policy.wasm",
            modules[0].display()
        ),
    )
}

/// deploy/policy.yaml at `podSecurityLevel: baseline` alone in the
/// admission chain: policy-server reads each request's Namespace (Kubewarden's
/// context-aware lookup, as the ServiceAccount and RBAC of Kubewarden's own
/// chart). A Memcached running as root is refused where the namespace
/// enforces `restricted`, admitted where it enforces `privileged`, and
/// refused there once the label changes. The protect policy's webhook is
/// restored afterwards, whatever happened.
fn namespace_pod_security(env: &mut Env) -> Result<(), String> {
    let (strict, lenient) = ("psa-restricted", "psa-privileged");
    for (ns, level) in [(strict, "restricted"), (lenient, "privileged")] {
        ensure_namespace(env, ns)?;
        label_enforce(env, ns, level)?;
    }
    env.unregister(&env.protect)?;
    env.register(&env.namespaced)?;
    let result = judged_by_namespace(env, strict, lenient);
    let cleanup = env
        .unregister(&env.namespaced)
        .and_then(|()| env.register(&env.protect))
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup)
}

fn label_enforce(env: &Env, namespace: &str, level: &str) -> Result<(), String> {
    let label = format!("pod-security.kubernetes.io/enforce={level}");
    env.kubectl
        .ok(&["label", "namespace", namespace, &label, "--overwrite"])
        .map(drop)
}

fn judged_by_namespace(env: &Env, strict: &str, lenient: &str) -> Result<(), String> {
    let root = json!({"security": {"containerSecurityContext": {
        "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
    }}});
    let dry_run = |ns: &str| {
        env.kubectl.run(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&memcached(ns, "root", root.clone())),
        )
    };
    let refused_in = |ns: &str| {
        let outcome = dry_run(ns);
        let expected = [
            format!(
                "error when creating \"STDIN\": admission webhook \"{}\" denied the request: ",
                env.namespaced.webhook_name()
            ),
            format!(
                "Memcached.memcached.c5c3.io \"root\" is forbidden: violates PodSecurity \"restricted:latest\" \
                 (enforced by namespace \"{ns}\"): spec.security.containerSecurityContext.runAsNonRoot: "
            ),
            "spec.security.containerSecurityContext.runAsUser: runAsUser=0 (container \"memcached\" must not set runAsUser=0)"
                .to_string(),
        ];
        if !outcome.success && expected.iter().all(|part| outcome.stderr.contains(part)) {
            Ok(())
        } else {
            Err(format!(
                "not refused by the namespace's label: {}",
                outcome.stderr.trim()
            ))
        }
    };
    // Until kube-apiserver has swapped the webhooks, the protect policy may still answer.
    wait_for(
        "the namespaced policy alone",
        Duration::from_secs(30),
        || refused_in(strict),
    )?;
    wait_for(
        "a privileged namespace admits root",
        Duration::from_secs(30),
        || {
            let outcome = dry_run(lenient);
            if outcome.success {
                Ok(())
            } else {
                Err(outcome.stderr)
            }
        },
    )?;
    // Stored while the namespace allowed root, scaled after it was labelled:
    // the scale-up is judged as the apply would be, from the stored
    // Memcached policy-server reads; scaling down is not.
    env.kubectl
        .apply(&memcached(lenient, "root", root.clone()))?;
    let relabelled = Instant::now();
    label_enforce(env, lenient, "restricted")?;
    wait_for("the new label seen", Duration::from_secs(30), || {
        refused_in(lenient)
    })?;
    println!(
        "    a changed enforce label judged {:.1}s after kubectl label",
        relabelled.elapsed().as_secs_f64()
    );
    let scale = |replicas: &str| {
        env.kubectl.run(
            &["scale", "memcached", "root", "-n", lenient, replicas],
            None,
        )
    };
    let up = scale("--replicas=2");
    let expected = [
        "admission webhook".to_string(),
        format!(
            "Memcached.memcached.c5c3.io \"root\" is forbidden: violates PodSecurity \"restricted:latest\" \
             (enforced by namespace \"{lenient}\")"
        ),
        "runAsUser=0".to_string(),
    ];
    check(
        !up.success && expected.iter().all(|part| up.stderr.contains(part)),
        format!(
            "kubectl scale up in a namespace labelled since: {}{}",
            up.stdout, up.stderr
        ),
    )?;
    let down = scale("--replicas=0");
    check(down.success, format!("kubectl scale down: {}", down.stderr))?;
    println!("    kubectl scale up refused as the apply is, scale down admitted");
    env.kubectl
        .ok(&["delete", "memcached", "root", "-n", lenient, "--wait=true"])
        .map(drop)
}

/// `kubectl scale` writes `spec.replicas` through the `scale` subresource,
/// whose Scale tells the policy nothing about autoscaling: the CRD's CEL rule
/// on `spec` (`memcached_api::REPLICAS_WITH_AUTOSCALING_RULE`), which
/// kube-apiserver evaluates on the Memcached the scale update makes, refuses
/// it with the words the policy uses for the same spec. Without autoscaling
/// the same command scales.
fn scale_while_autoscaling(env: &mut Env) -> Result<(), String> {
    let ns = "scale-rule";
    ensure_namespace(env, ns)?;
    let autoscaled = json!({"resources": {"requests": {"cpu": "50m"}},
        "autoscaling": {"enabled": true, "minReplicas": 1, "maxReplicas": 3}});
    env.kubectl
        .apply(&memcached(ns, "autoscaled", autoscaled))?;
    env.kubectl
        .apply(&memcached(ns, "fixed", json!({"replicas": 1})))?;
    let result = scale_refused(env, ns);
    let cleanup = env
        .kubectl
        .ok(&["delete", "namespace", ns, "--wait=true"])
        .map(drop);
    result.and(cleanup)
}

fn scale_refused(env: &Env, ns: &str) -> Result<(), String> {
    let scale = |name: &str| {
        env.kubectl.run(
            &["scale", "memcached", name, "-n", ns, "--replicas=5"],
            None,
        )
    };
    let refused = scale("autoscaled");
    let expected = format!(
        "The Memcached \"autoscaled\" is invalid: spec.replicas: Invalid value: 5: {}",
        memcached_api::REPLICAS_WITH_AUTOSCALING
    );
    check(
        !refused.success && refused.stderr.contains(&expected),
        format!(
            "kubectl scale of an autoscaled Memcached: expected\n       {expected}\n     kubectl printed\n       {}{}",
            refused.stdout.trim(),
            refused.stderr.trim()
        ),
    )?;
    let stored = get(env, ns, "autoscaled")?;
    check(
        stored["spec"].get("replicas").is_none(),
        format!(
            "spec.replicas stored beside autoscaling: {}",
            stored["spec"]
        ),
    )?;
    let scaled = scale("fixed");
    check(
        scaled.success,
        format!(
            "kubectl scale without autoscaling: {}",
            scaled.stderr.trim()
        ),
    )?;
    let stored = get(env, ns, "fixed")?;
    check(
        stored["spec"]["replicas"] == 5,
        format!("scaled to {}", stored["spec"]["replicas"]),
    )
}

/// deploy/policy-audit.yaml alone in the admission chain: an invalid
/// Memcached is stored untouched, and policy-server logs the rejection it
/// would have sent. The protect policy's webhook is removed meanwhile (it
/// would refuse the object before the audit webhook saw it; validating
/// webhooks run after mutating ones) and restored afterwards, whatever happened.
fn audit_mode(env: &mut Env) -> Result<(), String> {
    let ns = "audit";
    ensure_namespace(env, ns)?;
    env.unregister(&env.protect)?;
    env.register(&env.audit)?;
    let result = audited(env, ns);
    let cleanup = env
        .kubectl
        .ok(&["delete", "memcached", "--all", "-n", ns, "--wait=true"])
        .and_then(|_| env.unregister(&env.audit))
        .and_then(|()| env.register(&env.protect))
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup)
}

fn audited(env: &Env, ns: &str) -> Result<(), String> {
    let would_reject = |env: &Env| -> Result<usize, String> {
        Ok(env
            .policy_server
            .monitor_mode_evaluations()?
            .iter()
            .filter(|e| e.policy_id == env.audit.id() && e.namespace == ns && e.would_reject())
            .count())
    };
    // Schema-valid (validating webhooks run after the CRD's schema), refused by the policy.
    let fixture = fixtures()
        .into_iter()
        .find(|f| f.name == "seed-multiple-violations-v1beta1")
        .ok_or("fixture seed-multiple-violations-v1beta1 not found")?;
    check(!fixture.expected.accepted, "the fixture is not invalid")?;
    let mut object = fixture.review["request"]["object"].clone();
    object["metadata"]["namespace"] = json!(ns);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Until kube-apiserver has swapped the webhooks, dry runs are refused or unaudited.
    wait_for("the audit webhook alone", Duration::from_secs(30), || {
        let before = would_reject(env)?;
        let outcome = env.kubectl.run(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&object.to_string()),
        );
        if outcome.success && would_reject(env)? > before {
            Ok(())
        } else {
            Err(format!(
                "{} (no monitor-mode evaluation logged)",
                outcome.stderr.trim()
            ))
        }
    })?;
    let before = would_reject(env)?;
    env.kubectl.apply(&object.to_string())?;
    let stored = get(env, ns, &name)?;
    check(
        stored["spec"] == object["spec"],
        format!("the audit policy changed the spec: {}", stored["spec"]),
    )?;
    let reported: Vec<_> = env
        .policy_server
        .monitor_mode_evaluations()?
        .into_iter()
        .filter(|e| e.policy_id == env.audit.id() && e.namespace == ns && e.would_reject())
        .skip(before)
        .collect();
    // The message the protect policy would send, inside policy-server's
    // debug rendering of the response (quotes escaped).
    let message = fixture.expected.message(&name).replace('"', "\\\"");
    check(
        reported
            .first()
            .is_some_and(|e| e.response.contains(&message)),
        format!("policy-server logged {reported:?}, expected a would-be rejection with {message}"),
    )
}

// ---------------------------------------------------------------- helpers

/// The spec fragment with every `enabled: true` turned off.
fn toggled_off(feature: &Value) -> Value {
    match feature {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "minAvailable")
                .map(|(key, value)| {
                    (
                        key.clone(),
                        if key == "enabled" {
                            json!(false)
                        } else {
                            toggled_off(value)
                        },
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}
