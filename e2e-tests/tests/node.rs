//! The real node (`make e2e-node`): the environment of the end-to-end suites
//! (control plane, policy-server, the controller) with a kubelet on
//! containerd and kube-proxy beside the kwok nodes. Scenario 2 installs
//! Kubewarden from its own charts there and removes the suite's
//! policy-server webhook: from then on its PolicyServer pod judges every
//! Memcached. A Memcached steered to the node runs its pod in a real
//! container pulled from the local registry, Ready through the rendered
//! tcpSocket probe; `kubectl logs` and `exec` reach it, memcached answers
//! over the pod IP, and the pod resolves Services through CoreDNS. Teardown
//! must leave no process, cgroup, mount or changed sysctl.
//!
//! Runs inside `e2e-tests/netns.sh`; every scenario runs even when an earlier
//! one failed, and the process fails if any did.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::cluster::helm::{self, Helm};
use e2e_tests::cluster::http;
use e2e_tests::cluster::kubewarden::KUBEWARDEN_NAMESPACE;
use e2e_tests::cluster::kubewarden_charts;
use e2e_tests::cluster::memcache::Memcache;
use e2e_tests::cluster::node::{self, NodeState};
use e2e_tests::cluster::pki;
use e2e_tests::cluster::scenario::{
    SETTLE, Scenario, check, ensure_namespace, instance_objects, memcached, ready_endpoints,
    run_each, wait_ready,
};
use e2e_tests::cluster::signing;
use e2e_tests::cluster::{Env, Outcome, condition, condition_status, wait_for};
use memcached_controller::intent::TEMPLATE_ANNOTATION;
use serde_json::{Value, json};

const NAMESPACE: &str = "real-node";
const NAME: &str = "cache";

const SCENARIOS: &[(&str, Scenario)] = &[
    (
        "1. the real node is Ready on containerd 2.x beside the kwok nodes",
        node_ready,
    ),
    (
        "2. Kubewarden from its own charts on the node: deploy/policy.yaml turns active and judges \
         every Memcached from here on through the webhook kubewarden-controller registered; \
         its audit scanner reports the invalid ones created before",
        kubewarden_from_its_charts,
    ),
    (
        "3. Kubewarden requiring the release key: a PolicyServer serves the artifact make push \
         signed, and refuses to load an unsigned one, saying why",
        signature_required,
    ),
    (
        "4. a Memcached's pod runs in a real container on the real node, Ready through its tcpSocket probe",
        pod_in_container,
    ),
    (
        "5. memcached answers stats over the pod IP, and kubectl logs shows its output",
        stats_and_logs,
    ),
    (
        "6. the pod resolves kubernetes.default.svc and its own Service through CoreDNS",
        cluster_dns,
    ),
    (
        "7. warm restart: a new spec.image is applied to each pod in place, every key kept",
        warm_image_change,
    ),
    (
        "8. warm restart in StatefulSet mode: the new image in place, every key kept, the new revision current",
        warm_image_change_stateful,
    ),
    (
        "9. the exporter sidecar serves memcached's numbers on the pod IP",
        exporter_scraped,
    ),
    (
        "10. TLS and authentication from the Secret files the kubelet mounts; a rotated password rolls the pod",
        tls_and_auth,
    ),
    (
        "11. StatefulSet: each server of status.serverList resolves to its pod through CoreDNS; a deleted pod returns under its name",
        stateful_set_names,
    ),
    (
        "12. memcached killed in its container: the kubelet restarts it in the same pod",
        killed_memcached_restarted,
    ),
    (
        "13. a deleted pod leaves its Service at once, serves through its preStop delay, then stops on SIGTERM",
        graceful_deletion,
    ),
    (
        "14. 3 replicas Ready; a config change rolls 3 new pods that run the new -m; scale 3 -> 1 -> 2",
        config_rollout_and_scale,
    ),
    (
        "15. a Deployment rollout paced by the cache: one new pod at a time, the next only once \
         the last is warm again, the old pod serving meanwhile",
        paced_deployment_rollout,
    ),
    (
        "16. a StatefulSet rollout paced by the cache: one pod at a time, the next only once the \
         last is warm again, each under its name",
        paced_stateful_rollout,
    ),
    (
        "17. a controller upgrade that renders pods differently restarts none, in either workload mode",
        controller_upgrade_restarts_none,
    ),
    (
        "18. pods that answer stats with garbage or reset the connection are named on their Memcached; \
         none is replaced, the controller runs on, another Memcached scales meanwhile",
        faulty_pods,
    ),
    (
        "19. helm install of the chart make push-chart published and signed: the controller's \
         image runs in its container on the node, reconciles there, hands over its Lease on a \
         rollout restart; helm test passes; uninstalled, it leaves nothing",
        chart_installed,
    ),
    (
        "20. helm install with watchNamespaces: each release reconciles only the namespaces it \
         watches; two in one namespace each lead on their own Lease (on the other's, helm test \
         says it never leads); uninstalled, they leave nothing",
        chart_watching_namespaces,
    ),
    ("21. the node stack's memory", node_memory),
];

fn main() {
    e2e_tests::cluster::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-node");
    let sysctls = node::sysctls();
    let started = Instant::now();
    let env = match Env::start_with(&workdir, true) {
        Ok(Some(env)) => env,
        Ok(None) => return,
        Err(e) => {
            eprintln!("cannot start the end-to-end environment with a real node: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "control plane and real node ready in {:.1}s (environment {:.1}s), logs in {}",
        env.cluster.start_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    let state = NodeState::read(&env.cluster.workdir);
    let mut env = env;
    let mut failed = run_each(&mut env, SCENARIOS);
    let stopping = Instant::now();
    drop(env);
    let name = "22. teardown leaves no process, cgroup, mount or changed sysctl";
    match state.and_then(|state| teardown_clean(&state, &sysctls)) {
        Ok(()) => println!(
            "ok   {name} (stopped in {:.1}s)",
            stopping.elapsed().as_secs_f64()
        ),
        Err(e) => {
            failed += 1;
            println!("FAIL {name}\n     {e}");
        }
    }
    let total = SCENARIOS.len() + 1;
    println!(
        "{} of {total} scenarios passed in {:.0}s",
        total - failed,
        started.elapsed().as_secs_f64()
    );
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

// ---------------------------------------------------------------- scenarios

/// The release key required: a second PolicyServer verifies signatures
/// offline (`verificationConfig`, `sigstoreTrustConfig`). It loads the
/// artifact `deploy/push-policy.sh` signed (the one `deploy/policy.yaml`
/// names, signed where it lies); an unsigned copy added to it keeps its new
/// pods from starting, with policy-server's reason in their log, while the
/// signed policy stays active. Everything it created goes again. Needs
/// Kubewarden installed (scenario 2).
fn signature_required(env: &mut Env) -> Result<(), String> {
    let (server, key_map, trust_map) = ("verified", "memcached-release-key", "sigstore-trust");
    let outcome = verify_signatures(env, server, key_map, trust_map);
    // Whatever happened: the later scenarios run without this PolicyServer.
    for object in [
        "clusteradmissionpolicy/memcached-unsigned",
        "clusteradmissionpolicy/memcached-signed",
        &format!("policyserver/{server}"),
        &format!("configmap/{key_map}"),
        &format!("configmap/{trust_map}"),
    ] {
        env.kubectl.ok(&[
            "delete",
            object,
            "-n",
            KUBEWARDEN_NAMESPACE,
            "--ignore-not-found",
            "--wait=true",
        ])?;
    }
    outcome
}

/// [`signature_required`]'s checks, with PolicyServer `server` requiring the
/// key in ConfigMap `key_map`, verified with the trust config in `trust_map`.
fn verify_signatures(
    env: &Env,
    server: &str,
    key_map: &str,
    trust_map: &str,
) -> Result<(), String> {
    let release = signing::key_pair(&env.cluster.workdir.join("signing"), "release")?;
    let module = env.protect.module().to_string();
    let repository = kubewarden_charts::module_repository(&module)?;
    signing::push(env, &env.registry.url(repository), Some(&release))?;
    let unsigned_repository = repository.replacen(":", "-unsigned:", 1);
    signing::push(env, &env.registry.url(&unsigned_repository), None)?;
    let unsigned_module = module.replacen(repository, &unsigned_repository, 1);
    env.kubectl
        .apply(&signing::verification_config_map(key_map, &release.public)?)?;
    env.kubectl
        .apply(&signing::sigstore_trust_config_map(trust_map)?)?;
    let policy_server = kubewarden_charts::verifying_policy_server(
        server,
        kubewarden_charts::module_host(&module)?,
        key_map,
        trust_map,
    )?;
    // kubewarden-controller's webhook reads the ConfigMaps from its cache.
    wait_for("the PolicyServer admitted", SETTLE, || {
        env.kubectl.apply(&policy_server.to_string())
    })?;

    let signed = kubewarden_charts::protect_policy("memcached-signed", server, &module)?;
    env.kubectl.apply(&signed.to_string())?;
    let active =
        kubewarden_charts::wait_active(&env.kubectl, "memcached-signed", Duration::from_secs(180))?;
    let deployment = format!("deployment/policy-server-{server}");
    let log = env
        .kubectl
        .ok(&["logs", &deployment, "-n", KUBEWARDEN_NAMESPACE])?;
    check(
        log.contains("verified-signatures"),
        format!("policy-server-{server} loaded the policy without verifying it:\n{log}"),
    )?;

    let unsigned =
        kubewarden_charts::protect_policy("memcached-unsigned", server, &unsigned_module)?;
    env.kubectl.apply(&unsigned.to_string())?;
    // policy-server's own words for this policy and this reason
    // (policy_downloader.rs, policy-fetcher's verify/mod.rs).
    let refused = |line: &&str| {
        line.contains("policy cannot be verified")
            && line.contains("policy=\"clusterwide-memcached-unsigned\"")
            && line.contains("no signatures found for image")
    };
    let selector = format!("kubewarden/policy-server={server}");
    let refusal = wait_for(
        "a policy-server pod refusing the unsigned policy",
        Duration::from_secs(120),
        || {
            let pods = env
                .kubectl
                .get(&["pods", "-n", KUBEWARDEN_NAMESPACE, "-l", &selector])?;
            for pod in pods["items"].as_array().into_iter().flatten() {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                for previous in ["--previous=false", "--previous=true"] {
                    let outcome = env
                        .kubectl
                        .run(&["logs", name, "-n", KUBEWARDEN_NAMESPACE, previous], None);
                    if let Some(line) = outcome.stdout.lines().find(refused) {
                        return Ok(line.to_string());
                    }
                }
            }
            Err("no pod has said so yet".into())
        },
    )?;
    let status = |name: &str| -> Result<Value, String> {
        Ok(env.kubectl.get(&["clusteradmissionpolicy", name])?["status"].clone())
    };
    let unsigned_status = status("memcached-unsigned")?;
    check(
        unsigned_status["policyStatus"] != "active",
        format!("the unsigned policy is active: {unsigned_status}"),
    )?;
    let signed_status = status("memcached-signed")?;
    check(
        signed_status["policyStatus"] == "active",
        format!("the signed policy left active: {signed_status}"),
    )?;
    println!(
        "     signed policy active {:.1}s after kubectl apply; the unsigned one {}: {}",
        active.as_secs_f64(),
        unsigned_status["policyStatus"],
        refusal.chars().take(300).collect::<String>()
    );
    Ok(())
}

/// Kubewarden installed as its users install it. The suite's own
/// policy-server webhook goes first, so the scenarios after this one are
/// judged by the PolicyServer pod; Memcacheds created meanwhile, judged by
/// nothing, are what the audit scanner must report.
fn kubewarden_from_its_charts(env: &mut Env) -> Result<(), String> {
    let audited = "audited";
    let protect = env.protect.clone();
    env.unregister(&protect)?;
    env.wait_for_no_protection()?;
    ensure_namespace(env, audited)?;
    // Admitted by the CRD's schema, refused by the policy.
    let invalid = [
        ("capitals-in-image", "Memcached:1.6"),
        ("space-in-image", "memcached :1.6"),
    ];
    for (name, image) in invalid {
        env.kubectl
            .apply(&memcached(audited, name, json!({"image": image})))?;
    }
    env.kubectl
        .apply(&memcached(audited, "valid", json!({"replicas": 1})))?;

    let took = kubewarden_charts::take_over(env).inspect_err(|_| {
        // The later scenarios need a policy judging their Memcacheds.
        if let Err(e) = env.register(&protect) {
            eprintln!("re-registering the suite's policy-server webhook: {e}");
        }
    })?;

    let webhook = env
        .kubectl
        .get(&["mutatingwebhookconfiguration", &protect.id()])?;
    let service = &webhook["webhooks"][0]["clientConfig"]["service"];
    check(
        service["namespace"] == KUBEWARDEN_NAMESPACE
            && service["name"] == format!("policy-server-{}", kubewarden_charts::POLICY_SERVER),
        format!("{} calls {service}", protect.id()),
    )?;
    let created = env.kubectl.run(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&memcached(audited, "defaulted", json!({}))),
    );
    let defaulted: Value =
        serde_json::from_str(&created.stdout).map_err(|e| format!("{e}: {}", created.stderr))?;
    check(
        defaulted["spec"]["image"] == "memcached:1.6",
        format!(
            "not defaulted through the PolicyServer: {}",
            defaulted["spec"]
        ),
    )?;

    let scanned = kubewarden_charts::audit(&env.kubectl, "audit-now")?;
    let reports = kubewarden_charts::reports(&env.kubectl, audited)?;
    for (name, _) in invalid {
        let results = reports.get(name).cloned().unwrap_or_default();
        check(
            results
                .iter()
                .any(|r| r.policy == env.audit.id() && r.result == "fail"),
            format!("{name}'s report: {results:?}"),
        )?;
    }
    let valid = reports.get("valid").cloned().unwrap_or_default();
    check(
        !valid.is_empty() && valid.iter().all(|r| r.result == "pass"),
        format!("valid's report: {valid:?}"),
    )?;
    println!(
        "     Kubewarden {} installed and its PolicyServer Ready in {:.1}s; both policies active \
         {:.1}s after kubectl apply; audit of {} Memcacheds in {:.1}s",
        kubewarden_charts::VERSION,
        took.installed.as_secs_f64(),
        took.active.as_secs_f64(),
        reports.len(),
        scanned.as_secs_f64()
    );
    Ok(())
}

fn node_ready(env: &mut Env) -> Result<(), String> {
    let real = env.kubectl.get(&["node", node::NAME])?;
    check(
        condition_status(&real, "Ready") == Some("True"),
        format!("{} is not Ready: {}", node::NAME, real["status"]),
    )?;
    let info = &real["status"]["nodeInfo"];
    let runtime = info["containerRuntimeVersion"].as_str().unwrap_or_default();
    check(
        runtime.starts_with("containerd://2."),
        format!("container runtime {runtime}"),
    )?;
    // The API server's own answer: `kubectl version` also parses the
    // client's version, which this kubectl (built from modules) lacks.
    let version: Value = serde_json::from_str(&env.kubectl.ok(&["get", "--raw", "/version"])?)
        .map_err(|e| e.to_string())?;
    let server = version["gitVersion"].as_str();
    check(
        info["kubeletVersion"].as_str() == server,
        format!(
            "kubelet {} against API server {server:?}",
            info["kubeletVersion"]
        ),
    )?;
    let taints = real["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(
        taints
            .iter()
            .any(|t| t["key"] == node::TAINT && t["effect"] == "NoSchedule"),
        format!("taints {taints:?}"),
    )?;
    let nodes = env.kubectl.get(&["nodes", "-l", "type=kwok"])?;
    let kwok = nodes["items"].as_array().cloned().unwrap_or_default();
    check(
        !kwok.is_empty()
            && kwok
                .iter()
                .all(|n| condition_status(n, "Ready") == Some("True")),
        format!("{} kwok nodes, not all Ready", kwok.len()),
    )?;
    println!(
        "     {} {} ({runtime}, kubelet {}) beside {} kwok nodes",
        node::NAME,
        real["status"]["addresses"][0]["address"],
        info["kubeletVersion"],
        kwok.len()
    );
    Ok(())
}

fn pod_in_container(env: &mut Env) -> Result<(), String> {
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    // -vv: memcached logs its listeners and every command (kubectl logs).
    spec["memcached"] = json!({"verbosity": 2});
    let applied = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, NAME, spec))?;
    wait_ready(env, NAMESPACE, NAME, 1)?;
    println!(
        "     apply -> Ready in {:.1}s",
        applied.elapsed().as_secs_f64()
    );
    let pod = the_pod(env)?;
    check(
        pod["spec"]["nodeName"] == node::NAME,
        format!("the pod runs on {}", pod["spec"]["nodeName"]),
    )?;
    let probe = &pod["spec"]["containers"][0]["readinessProbe"];
    check(
        probe["tcpSocket"]["port"] == "memcached",
        format!("readiness probe {probe}"),
    )?;
    let status = &pod["status"]["containerStatuses"][0];
    let id = status["containerID"].as_str().unwrap_or_default();
    check(
        id.starts_with("containerd://") && status["ready"] == true,
        format!("container status {status}"),
    )?;
    check(
        status["image"] == "docker.io/library/memcached:1.6"
            && status["imageID"]
                .as_str()
                .is_some_and(|i| i.contains("@sha256:")),
        format!("image {} ({})", status["image"], status["imageID"]),
    )?;
    // The container's process: memcached under the node, as uid 11211.
    let state = NodeState::read(&env.cluster.workdir)?;
    let processes = state.processes();
    let memcached: Vec<_> = processes.iter().filter(|p| p.name == "memcached").collect();
    check(
        memcached.len() == 1 && memcached[0].uid == 11211,
        format!("memcached processes under the node: {memcached:?}"),
    )
}

fn stats_and_logs(env: &mut Env) -> Result<(), String> {
    let ip = pod_ip(&the_pod(env)?)?;
    let stats = stats(&ip)?;
    // PID 1: memcached is its container's init (docker-entrypoint.sh execs it).
    for (key, expected) in [("pid", "1"), ("version", "1.6.18")] {
        check(
            stats.get(key).map(String::as_str) == Some(expected),
            format!("STAT {key} {:?}, expected {expected}", stats.get(key)),
        )?;
    }
    let pod = the_pod(env)?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let logs = wait_for("the stats connection in the logs", SETTLE, || {
        let logs = env
            .kubectl
            .ok(&["logs", "-n", NAMESPACE, name, "-c", "memcached"])?;
        if logs.contains("server listening") && logs.contains("stats") {
            Ok(logs)
        } else {
            Err(logs)
        }
    })?;
    println!(
        "     {ip}:11211 STAT pid 1, {} lines of logs",
        logs.lines().count()
    );
    Ok(())
}

fn cluster_dns(env: &mut Env) -> Result<(), String> {
    let pod = the_pod(env)?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let ip = pod_ip(&pod)?;
    let ready = ready_endpoints(env, NAMESPACE, NAME)?;
    check(
        ready.iter().any(|e| e["addresses"][0] == ip),
        format!("{NAME}'s ready endpoints {ready:?} lack {ip}"),
    )?;
    // The kubelet gives the pod CoreDNS and the search path that completes
    // `<svc>.<ns>.svc` to a cluster.local name (busybox's nslookup does not
    // search, so the completed names are asked).
    let resolv = busybox(env, name, &["cat", "/etc/resolv.conf"]);
    let resolv = resolv.stdout + &resolv.stderr;
    let search = format!("search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local");
    check(
        resolv.contains("nameserver 10.96.0.10") && resolv.contains(&search),
        format!("the pod's /etc/resolv.conf:\n{resolv}"),
    )?;
    for (query, answer) in [
        ("kubernetes.default.svc.cluster.local", "10.96.0.1"),
        (
            &format!("{NAME}.{NAMESPACE}.svc.cluster.local") as &str,
            ip.as_str(),
        ),
    ] {
        let out = busybox(env, name, &["nslookup", "-type=a", query]);
        let resolved = out
            .stdout
            .split("Name:")
            .skip(1)
            .any(|record| record.contains(&format!("Address: {answer}")));
        check(
            resolved,
            format!("nslookup {query} in the pod:\n{}{}", out.stdout, out.stderr),
        )?;
    }
    Ok(())
}

/// With monitoring on, the pod runs the exporter beside memcached; its
/// metrics on the pod IP carry memcached's own numbers.
fn exporter_scraped(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 100;
    let name = "monitored";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["monitoring"] = json!({"enabled": true, "exporterImage": node::EXPORTER_IMAGE});
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let pod = pod_of(env, name)?;
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(
        statuses.len() == 2 && statuses.iter().all(|s| s["ready"] == true),
        format!("container statuses {statuses:?}"),
    )?;
    let ip = pod_ip(&pod)?;
    fill(&ip, KEYS)?;
    let address = format!("{ip}:9150").parse().map_err(|e| format!("{e}"))?;
    let metrics = wait_for("the exporter's metrics", SETTLE, || {
        http::get(address, "/metrics")
    })?;
    let sample = |metric: &str| {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(metric)?.strip_prefix(' '))
            .unwrap_or_default()
            .to_string()
    };
    let (up, items) = (sample("memcached_up"), sample("memcached_current_items"));
    println!("     {ip}:9150/metrics: memcached_up {up}, memcached_current_items {items}");
    check(up == "1", format!("memcached_up {up:?}"))?;
    check(
        items == KEYS.to_string(),
        format!("memcached_current_items {items:?}, {KEYS} keys set"),
    )?;
    // The pod's security context applies to the sidecar too.
    let state = NodeState::read(&env.cluster.workdir)?;
    let exporters: Vec<_> = state
        .processes()
        .into_iter()
        .filter(|p| p.name == "memcached_expor")
        .collect();
    check(
        exporters.len() == 1 && exporters[0].uid == 11211,
        format!("exporter processes under the node: {exporters:?}"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// TLS and `-Y` authentication from the Secret volumes the kubelet mounts
/// (group-readable through the pod's fsGroup): memcached starts, plain text
/// is refused, the controller reads stats over TLS with the password; a new
/// password in the Secret rolls the pod, and the controller reads on with it.
fn tls_and_auth(env: &mut Env) -> Result<(), String> {
    let name = "secure";
    ensure_namespace(env, NAMESPACE)?;
    let tls = pki::issue(&[&format!("{name}.{NAMESPACE}.svc")])?;
    let secrets = |password: &str| {
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
             "metadata": {"name": "secure-tls", "namespace": NAMESPACE},
             "stringData": {"tls.crt": tls.cert, "tls.key": tls.key, "ca.crt": tls.ca}},
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "secure-auth", "namespace": NAMESPACE},
             "stringData": {"auth": format!("app:{password}\n")}},
        ]})
        .to_string()
    };
    env.kubectl.apply(&secrets("first-password"))?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["security"] = json!({
        "sasl": {"enabled": true, "credentialsSecretRef": {"name": "secure-auth"}},
        "tls": {"enabled": true, "certificateSecretRef": {"name": "secure-tls"}},
    });
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    stats_read_by_controller(env, name)?;
    let before = pod_of(env, name)?;
    let pod_name = before["metadata"]["name"].as_str().unwrap_or_default();
    let listing = busybox(
        env,
        pod_name,
        &[
            "ls",
            "-lnL",
            "/etc/memcached/auth/auth",
            "/etc/memcached/tls/tls.key",
        ],
    );
    check(
        listing.success
            && listing.stdout.lines().count() == 2
            && listing
                .stdout
                .lines()
                .all(|l| l.split_whitespace().nth(3) == Some("11211")),
        format!(
            "the mounted Secret files (group 11211 from fsGroup):\n{}{}",
            listing.stdout, listing.stderr
        ),
    )?;
    check(
        stats(&pod_ip(&before)?).is_err(),
        "memcached answered plain text with TLS on",
    )?;
    env.kubectl.apply(&secrets("second-password"))?;
    let rotated = Instant::now();
    let after = wait_for("a new pod with the rotated password, Ready", SETTLE, || {
        let pods = serving(pods_of(env, name)?);
        match pods.as_slice() {
            [pod]
                if pod["metadata"]["uid"] != before["metadata"]["uid"]
                    && condition_status(pod, "Ready") == Some("True") =>
            {
                Ok(pod.clone())
            }
            _ => Err(format!("pods {:?}", summary(&pods))),
        }
    })?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let stats_after = stats_read_by_controller(env, name)?;
    println!(
        "     Secret files {:?}; new password: pod {} Ready {:.1}s after the rotation, \
         the controller reads stats with it (version {stats_after})",
        listing
            .stdout
            .lines()
            .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>(),
        after["metadata"]["name"],
        rotated.elapsed().as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// The controller's last stats read of `name`'s pods, which needs TLS and
/// the password: the memcached version it reports, once every pod answered.
fn stats_read_by_controller(env: &Env, name: &str) -> Result<String, String> {
    wait_for("the controller reading stats", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let status = &mc["status"];
        match status["memcachedVersion"].as_str() {
            Some(version) if condition_status(&mc, "Degraded") != Some("True") => {
                Ok(version.to_string())
            }
            _ => Err(format!("status {status}")),
        }
    })
}

/// StatefulSet pods keep their names: every `<name>-<i>.<name>.<ns>.svc` of
/// `status.serverList` resolves through CoreDNS to that pod, also after the
/// pod is deleted and comes back (with a new IP, under the same name).
fn stateful_set_names(env: &mut Env) -> Result<(), String> {
    let name = "sharded";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["workload"] = json!("StatefulSet");
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    let mc = wait_ready(env, NAMESPACE, name, 3)?;
    let servers: Vec<String> = (0..3)
        .map(|i| format!("{name}-{i}.{name}.{NAMESPACE}.svc:11211"))
        .collect();
    check(
        mc["status"]["serverList"] == json!(servers),
        format!("serverList {}", mc["status"]["serverList"]),
    )?;
    let resolved = |asker: &str| -> Result<(), String> {
        for i in 0..3 {
            let pod = env
                .kubectl
                .get(&["pod", &format!("{name}-{i}"), "-n", NAMESPACE])?;
            let ip = pod_ip(&pod)?;
            let host = format!("{name}-{i}.{name}.{NAMESPACE}.svc.cluster.local");
            wait_for(&format!("{host} -> {ip}"), Duration::from_secs(30), || {
                let out = busybox(env, asker, &["nslookup", "-type=a", &host]);
                check(
                    out.stdout
                        .split("Name:")
                        .skip(1)
                        .any(|r| r.contains(&format!("Address: {ip}"))),
                    format!("nslookup {host}:\n{}{}", out.stdout, out.stderr),
                )
            })?;
        }
        Ok(())
    };
    resolved(&format!("{name}-0"))?;
    let old = env
        .kubectl
        .get(&["pod", &format!("{name}-1"), "-n", NAMESPACE])?;
    env.kubectl.ok(&[
        "delete",
        "pod",
        &format!("{name}-1"),
        "-n",
        NAMESPACE,
        "--wait=true",
    ])?;
    let back = wait_for(&format!("{name}-1 back and Ready"), SETTLE, || {
        let pod = env
            .kubectl
            .get(&["pod", &format!("{name}-1"), "-n", NAMESPACE])?;
        (pod["metadata"]["uid"] != old["metadata"]["uid"]
            && condition_status(&pod, "Ready") == Some("True"))
        .then_some(pod.clone())
        .ok_or_else(|| "not yet".to_string())
    })?;
    resolved(&format!("{name}-0"))?;
    let mc = wait_ready(env, NAMESPACE, name, 3)?;
    check(
        mc["status"]["serverList"] == json!(servers),
        format!(
            "serverList after the pod came back {}",
            mc["status"]["serverList"]
        ),
    )?;
    println!(
        "     {servers:?} resolve to their pods; {name}-1 came back at {} (was {})",
        back["status"]["podIP"], old["status"]["podIP"]
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// SIGKILL to memcached inside its container (from the node's side): the
/// kubelet restarts the container in the same pod, which is Ready again.
fn killed_memcached_restarted(env: &mut Env) -> Result<(), String> {
    let name = "crashing";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let before = pod_of(env, name)?;
    let id = before["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("containerd://"))
        .ok_or_else(|| format!("container status {}", before["status"]))?
        .to_string();
    // The container's processes are in a cgroup named after its ID.
    let state = NodeState::read(&env.cluster.workdir)?;
    let process = state
        .processes()
        .into_iter()
        .find(|p| {
            p.name == "memcached"
                && std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid))
                    .is_ok_and(|cgroups| cgroups.contains(&id))
        })
        .ok_or_else(|| format!("no memcached process in container {id}"))?;
    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &process.pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    check(
        status.success(),
        format!("kill -KILL {}: {status}", process.pid),
    )?;
    let after = wait_for("the container restarted and Ready", SETTLE, || {
        let pod = pod_of(env, name)?;
        let status = &pod["status"]["containerStatuses"][0];
        (status["restartCount"] == 1 && status["ready"] == true)
            .then_some(pod.clone())
            .ok_or_else(|| format!("pods {:?}", summary(std::slice::from_ref(&pod))))
    })?;
    let took = killed.elapsed();
    let last = &after["status"]["containerStatuses"][0]["lastState"]["terminated"];
    check(
        after["metadata"]["uid"] == before["metadata"]["uid"] && last["exitCode"] == 137,
        format!("the same pod, its last state {last}"),
    )?;
    let uptime = stats(&pod_ip(&after)?)?
        .get("uptime")
        .cloned()
        .unwrap_or_default();
    println!(
        "     memcached (pid {}) killed: restarted by the kubelet in the same pod, Ready {:.1}s later, uptime {uptime}s",
        process.pid,
        took.as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// Deleting a pod with graceful shutdown on: its endpoint turns not ready at
/// once, memcached keeps answering during the preStop delay, and the pod is
/// gone after the delay, well before its grace period (memcached stops on
/// SIGTERM).
fn graceful_deletion(env: &mut Env) -> Result<(), String> {
    const DELAY: u64 = 5;
    const GRACE: u64 = 30;
    let name = "draining";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["highAvailability"] = json!({"gracefulShutdown": {
        "enabled": true, "preStopDelaySeconds": DELAY, "terminationGracePeriodSeconds": GRACE,
    }});
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let pod = pod_of(env, name)?;
    let (pod_name, ip) = (
        pod["metadata"]["name"].as_str().unwrap_or_default(),
        pod_ip(&pod)?,
    );
    let deleted = Instant::now();
    env.kubectl
        .ok(&["delete", "pod", pod_name, "-n", NAMESPACE, "--wait=false"])?;
    wait_for("the endpoint not ready", Duration::from_secs(DELAY), || {
        let ready = ready_endpoints(env, NAMESPACE, name)?;
        check(
            !ready.iter().any(|e| e["addresses"][0] == ip.as_str()),
            format!("ready endpoints {ready:?}"),
        )
    })?;
    let unready = deleted.elapsed();
    let served = stats(&ip).map(|s| s.get("curr_connections").cloned());
    let served_at = deleted.elapsed();
    wait_for("the pod gone", Duration::from_secs(GRACE + 10), || {
        let left = env.kubectl.ok(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "--field-selector",
            &format!("metadata.name={pod_name}"),
            "-o",
            "name",
        ])?;
        check(left.trim().is_empty(), format!("still there: {left}"))
    })?;
    let gone = deleted.elapsed();
    println!(
        "     deleted: endpoint not ready after {:.1}s, stats answered at {:.1}s, pod gone after {:.1}s \
         (preStop {DELAY}s, grace period {GRACE}s)",
        unready.as_secs_f64(),
        served_at.as_secs_f64(),
        gone.as_secs_f64()
    );
    check(
        served.is_ok() || served_at >= Duration::from_secs(DELAY),
        format!(
            "memcached did not answer {:.1}s into its preStop delay: {served:?}",
            served_at.as_secs_f64()
        ),
    )?;
    check(
        gone >= Duration::from_secs(DELAY) && gone < Duration::from_secs(GRACE),
        format!("the pod went after {:.1}s", gone.as_secs_f64()),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// A new `maxMemoryMB` rolls new pods whose memcached runs with it; scaling
/// up and down follows `replicas`.
fn config_rollout_and_scale(env: &mut Env) -> Result<(), String> {
    let name = "rolling";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["memcached"] = json!({"maxMemoryMB": 64});
    let applied = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let created = applied.elapsed();
    let before: Vec<Value> = pods_of(env, name)?
        .iter()
        .map(|p| p["metadata"]["uid"].clone())
        .collect();
    spec["memcached"]["maxMemoryMB"] = json!(128);
    let changed = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_for("3 new pods serving with -m 128", SETTLE, || {
        let pods = serving(pods_of(env, name)?);
        let limits: Vec<String> = pods
            .iter()
            .map(|p| {
                let ip = pod_ip(p)?;
                Ok(stats(&ip)?
                    .get("limit_maxbytes")
                    .cloned()
                    .unwrap_or_default())
            })
            .collect::<Result<_, String>>()?;
        (pods.len() == 3
            && pods.iter().all(|p| !before.contains(&p["metadata"]["uid"]))
            && limits.iter().all(|l| *l == (128u64 << 20).to_string()))
        .then_some(())
        .ok_or_else(|| format!("pods {:?}, limit_maxbytes {limits:?}", summary(&pods)))
    })?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let rolled = changed.elapsed();
    for replicas in [1, 2] {
        spec["replicas"] = json!(replicas);
        env.kubectl
            .apply(&memcached(NAMESPACE, name, spec.clone()))?;
        wait_ready(env, NAMESPACE, name, replicas)?;
    }
    let left = wait_for("two pods left", SETTLE, || {
        let pods = pods_of(env, name)?;
        (pods.len() == 2)
            .then_some(pods.len())
            .ok_or_else(|| format!("pods {:?}", summary(&pods)))
    })?;
    println!(
        "     3 replicas Ready {:.1}s after the apply; -m 64 -> 128: 3 new pods Ready {:.1}s after \
         the apply; scaled 3 -> 1 -> {left}",
        created.as_secs_f64(),
        rolled.as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// The pods not being deleted.
fn serving(pods: Vec<Value>) -> Vec<Value> {
    pods.into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

fn paced_deployment_rollout(env: &mut Env) -> Result<(), String> {
    paced_rollout(env, "paced-d", "Deployment")
}

fn paced_stateful_rollout(env: &mut Env) -> Result<(), String> {
    paced_rollout(env, "paced-s", "StatefulSet")
}

/// A rollout paced by the cache: 3 pods of [`PACED_KEYS`] keys each, then
/// a change that needs new pods. One new pod at a time: while it is empty
/// no other is replaced (a Deployment keeps the old pod it replaces serving,
/// paused; a StatefulSet holds its partition) and the Rollout column names
/// it warming; once clients refill it (here the test) to half its peers'
/// items, the next follows. A StatefulSet's pods keep their names.
fn paced_rollout(env: &mut Env, name: &str, workload: &str) -> Result<(), String> {
    const PACED_KEYS: usize = 400;
    /// How long the rollout must hold while the new pod is empty.
    const HELD: Duration = Duration::from_secs(10);
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["workload"] = json!(workload);
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let original = pods_of(env, name)?;
    for pod in &original {
        fill(&pod_ip(pod)?, PACED_KEYS)?;
    }
    let is_new = |pod: &Value| {
        !original
            .iter()
            .any(|o| o["metadata"]["uid"] == pod["metadata"]["uid"])
    };
    // The new pods oldest first, and how many of the original pods are left.
    let generations = |env: &Env| -> Result<(Vec<Value>, usize), String> {
        let pods = pods_of(env, name)?;
        let mut new: Vec<Value> = pods.iter().filter(|p| is_new(p)).cloned().collect();
        new.sort_by_key(|p| p["metadata"]["creationTimestamp"].to_string());
        Ok((new, pods.len() - pods.iter().filter(|p| is_new(p)).count()))
    };
    spec["memcached"] = json!({"verbosity": 1});
    let changed = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    let mut steps = Vec::new();
    for step in 1..=3 {
        let (newest, left) = wait_for(&format!("new pod {step} Ready"), SETTLE, || {
            let (new, left) = generations(env)?;
            match new.as_slice() {
                [.., newest] if new.len() == step && ready(newest) => Ok((newest.clone(), left)),
                _ => Err(format!(
                    "new pods {:?}, {left} original left",
                    summary(&new)
                )),
            }
        })?;
        let pod = pod_name(&newest).to_string();
        let ready_after = changed.elapsed();
        if step == 3 {
            break;
        }
        std::thread::sleep(HELD);
        let (new, left_now) = generations(env)?;
        check(
            new.len() == step && left_now == left,
            format!(
                "while {pod} was empty: new pods {:?}, {left_now} of {left} original left",
                summary(&new)
            ),
        )?;
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let column = mc["status"]["rollout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        check(
            column.ends_with(&format!("{pod} warming")),
            format!("Rollout column {column:?} while {pod} is empty"),
        )?;
        // Clients refill it; then the next pod follows.
        fill(&pod_ip(&newest)?, PACED_KEYS)?;
        steps.push(format!(
            "{pod} Ready {:.1}s after the apply, held while empty, {left} of the 3 original pods serving ({column:?})",
            ready_after.as_secs_f64()
        ));
    }
    wait_ready(env, NAMESPACE, name, 3)?;
    let took = changed.elapsed();
    wait_for("the rollout complete", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let (new, left) = generations(env)?;
        (mc["status"]["rollout"].is_null() && new.len() == 3 && left == 0)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "status.rollout {}, {left} original left",
                    mc["status"]["rollout"]
                )
            })
    })?;
    if workload == "StatefulSet" {
        let names = |pods: &[Value]| {
            pods.iter()
                .map(pod_name)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let now = names(&pods_of(env, name)?);
        check(now == names(&original), format!("pod names {now:?}"))?;
    }
    println!(
        "     {workload}: {}; all 3 new pods Ready {:.1}s after the apply",
        steps.join("; "),
        took.as_secs_f64(),
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// A controller upgrade whose rendering differs (every workload's template
/// stamp set to another digest, as an older controller version leaves it,
/// then the controller restarted) restarts no pod of a Deployment or a
/// StatefulSet Memcached: the template is held until the spec changes.
fn controller_upgrade_restarts_none(env: &mut Env) -> Result<(), String> {
    /// How long the pods are watched after the new controller's first reconcile.
    const WATCHED: Duration = Duration::from_secs(20);
    const OLDER_STAMP: &str = "00000000000000000000000000000000";
    const MEMCACHEDS: [(&str, &str, &str); 2] = [
        ("upgrade-d", "Deployment", "deployment"),
        ("upgrade-s", "StatefulSet", "statefulset"),
    ];
    ensure_namespace(env, NAMESPACE)?;
    for (name, workload, _) in MEMCACHEDS {
        let mut spec = node::scheduling();
        spec["replicas"] = json!(2);
        spec["workload"] = json!(workload);
        env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    }
    let running = |env: &Env| -> Result<Vec<String>, String> {
        let mut pods = Vec::new();
        for (name, _, _) in MEMCACHEDS {
            pods.extend(summary(&pods_of(env, name)?));
        }
        Ok(pods)
    };
    for (name, _, _) in MEMCACHEDS {
        wait_ready(env, NAMESPACE, name, 2)?;
    }
    let before = wait_for("4 pods", SETTLE, || {
        let pods = running(env)?;
        (pods.len() == 4)
            .then(|| pods.clone())
            .ok_or_else(|| format!("pods {pods:?}"))
    })?;
    let stamp = format!("{TEMPLATE_ANNOTATION}={OLDER_STAMP}");
    for (name, _, kind) in MEMCACHEDS {
        env.kubectl.ok(&[
            "annotate",
            kind,
            name,
            "-n",
            NAMESPACE,
            "--overwrite",
            &stamp,
        ])?;
    }
    env.replace_operator("operator-upgraded")?;
    std::thread::sleep(WATCHED);
    let after = running(env)?;
    check(
        after == before,
        format!("pods before {before:?}, after {after:?}"),
    )?;
    for (name, _, kind) in MEMCACHEDS {
        let workload = env.kubectl.get(&[kind, name, "-n", NAMESPACE])?;
        let held = &workload["metadata"]["annotations"][TEMPLATE_ANNOTATION];
        check(
            held == OLDER_STAMP,
            format!("the {kind}'s template was replaced (stamp {held})"),
        )?;
    }
    println!(
        "     4 pods (Deployment and StatefulSet) kept for {}s after the upgraded controller's first reconcile",
        WATCHED.as_secs()
    );
    for (name, _, _) in MEMCACHEDS {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// memcached pods that accept connections but answer `stats` with garbage
/// or reset the connection (an image that is something else on port 11211,
/// Ready through the rendered TCP probe): each is named on its Memcached
/// with how it fails, and not Ready; the controller replaces no pod, keeps
/// running, and scales another Memcached meanwhile.
fn faulty_pods(env: &mut Env) -> Result<(), String> {
    const FAULTS: [(&str, &str); 2] = [
        ("garbage-stats", "not memcached's stats answer"),
        ("resets-connections", "connection reset or closed"),
    ];
    const BESIDE: &str = "beside-faults";
    const NAMED_WITHIN: Duration = Duration::from_secs(30);
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl
        .apply(&memcached(NAMESPACE, BESIDE, spec.clone()))?;
    for (fault, _) in FAULTS {
        let mut faulty = spec.clone();
        faulty["image"] = json!(node::faulty_memcached_image(fault));
        env.kubectl.apply(&memcached(NAMESPACE, fault, faulty))?;
    }
    wait_ready(env, NAMESPACE, BESIDE, 1)?;
    let applied = Instant::now();
    let mut pods = Vec::new();
    for (fault, how) in FAULTS {
        let pod = wait_for(&format!("the {fault} pod Ready"), SETTLE, || {
            let pod = pod_of(env, fault)?;
            (pod["status"]["containerStatuses"][0]["ready"] == true)
                .then_some(pod.clone())
                .ok_or_else(|| format!("pod {:?}", summary(std::slice::from_ref(&pod))))
        })?;
        let named = format!("{}:11211 ({how})", pod_ip(&pod)?);
        // Read as soon as its address is ready, not at the 60 s resync.
        let message = wait_for(&format!("the {fault} pod named"), NAMED_WITHIN, || {
            let mc = env.kubectl.get(&["memcached", fault, "-n", NAMESPACE])?;
            let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
            let message = degraded["message"].as_str().unwrap_or_default();
            (degraded["reason"] == "PodsNotAnswering"
                && condition_status(&mc, "Ready") == Some("False")
                && message.contains(&named))
            .then(|| message.to_string())
            .ok_or_else(|| format!("Degraded {degraded}"))
        })?;
        println!(
            "     {fault}: named {:.1}s after the apply: {message}",
            applied.elapsed().as_secs_f64()
        );
        pods.push(pod);
    }
    let scaled = Instant::now();
    spec["replicas"] = json!(2);
    env.kubectl.apply(&memcached(NAMESPACE, BESIDE, spec))?;
    wait_ready(env, NAMESPACE, BESIDE, 2)?;
    println!(
        "     {BESIDE} scaled to 2 meanwhile in {:.1}s",
        scaled.elapsed().as_secs_f64()
    );
    for (pod, (fault, _)) in pods.iter().zip(FAULTS) {
        let now = pod_of(env, fault)?;
        check(
            now["metadata"]["uid"] == pod["metadata"]["uid"]
                && now["status"]["containerStatuses"][0]["restartCount"] == 0,
            format!(
                "the {fault} pod was replaced or restarted: {:?}",
                summary(&[pod.clone(), now])
            ),
        )?;
    }
    check(
        env.operator.as_mut().is_some_and(|o| o.exited().is_none()),
        "the controller exited",
    )?;
    for name in [BESIDE, FAULTS[0].0, FAULTS[1].0] {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// The chart as a release publishes it (`deploy/helm/push-chart.sh`, what
/// `make push-chart` runs: pushed to the suite's registry, its digest signed
/// with a fresh cosign key; cosign verifies it under that key and refuses it
/// under another), installed from that registry by digest with its default
/// image, which the node pulls: the controller runs in its container (uid
/// 65532, read-only root filesystem) as the chart's ServiceAccount,
/// reconciles a Memcached on the node, and after `kubectl rollout restart` a
/// new pod holds the release's Lease and reconciles the next change; `helm
/// test` passes (its pod, of the controller's image, checks the Lease and
/// reconciles a Memcached) and leaves nothing; `helm uninstall` leaves
/// nothing either (the Lease and the hash-key Secret go with the
/// ServiceAccount that owns them).
fn chart_installed(env: &mut Env) -> Result<(), String> {
    let (release, namespace) = ("mo", "operator-node");
    let lease = format!("{release}-memcached-operator");
    let helm = stop_suite_controller(env)?;
    let published = publish_chart(env, &helm)?;
    let started = Instant::now();
    helm.install_reference(
        &published,
        release,
        namespace,
        &["--plain-http", "-f", &chart_values(env)?],
    )?;
    let installed = started.elapsed();
    let pods = controller_pods(env, release, namespace, 2)?;
    let state = NodeState::read(&env.cluster.workdir)?;
    let controllers: Vec<_> = state
        .processes()
        .into_iter()
        .filter(|p| p.name == "memcached-contr")
        .collect();
    check(
        controllers.len() == 2 && controllers.iter().all(|p| p.uid == 65532),
        format!("controller processes under the node: {controllers:?}"),
    )?;
    let container = &pods[0]["spec"]["containers"][0];
    check(
        container["image"] == format!("ghcr.io/{}:v0.1.0", node::CONTROLLER_REPOSITORY)
            && container["securityContext"]["readOnlyRootFilesystem"] == true,
        format!("controller container {container}"),
    )?;

    let name = "chart-cache";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    let applied = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let reconciled = applied.elapsed();
    let holder = lease_holder(env, namespace, &lease)?;
    check(
        pods.iter()
            .any(|p| p["metadata"]["name"] == holder.as_str()),
        format!("the Lease is held by {holder}, not a controller pod"),
    )?;

    let restarted = Instant::now();
    let deployment = format!("deployment/{release}-memcached-operator");
    env.kubectl
        .ok(&["rollout", "restart", &deployment, "-n", namespace])?;
    env.kubectl.ok(&[
        "rollout",
        "status",
        &deployment,
        "-n",
        namespace,
        "--timeout=120s",
    ])?;
    let new_pods = controller_pods(env, release, namespace, 2)?;
    let new_holder = wait_for("a new pod to hold the Lease", SETTLE, || {
        let holder = lease_holder(env, namespace, &lease)?;
        new_pods
            .iter()
            .any(|p| p["metadata"]["name"] == holder.as_str())
            .then_some(holder.clone())
            .ok_or(holder)
    })?;
    let handed_over = restarted.elapsed();
    spec["replicas"] = json!(2);
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 2)?;
    println!(
        "     2 controller pods Ready {:.1}s after helm install; {name} Ready {:.1}s after apply; \
         Lease {holder} -> {new_holder} {:.1}s after the rollout restart",
        installed.as_secs_f64(),
        reconciled.as_secs_f64(),
        handed_over.as_secs_f64()
    );
    helm_test_passes(env, &helm, release, namespace, Some(&lease))?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    helm.uninstall(release, namespace)?;
    nothing_left(env, &[release], namespace)
}

/// `watchNamespaces` mode (a Role per namespace, no cluster-wide access),
/// two releases in one namespace, each watching its own: a Memcached in a
/// watched namespace is reconciled, one elsewhere is not. The second
/// release given the first's Lease name (as both had by default before)
/// installs "successfully" and stands by for ever: its Memcached gets
/// nothing and its `helm test` fails, saying the Lease is another
/// installation's; with its own Lease (the default, its full name) it leads,
/// reconciles, and its `helm test` passes. Both uninstalled, nothing is left.
fn chart_watching_namespaces(env: &mut Env) -> Result<(), String> {
    let namespace = "operator-scoped";
    let (first, first_watched) = ("scoped", "real-node-watched");
    let (second, second_watched) = ("scoped-too", "real-node-watched-too");
    let helm = stop_suite_controller(env)?;
    for ns in [first_watched, second_watched, NAMESPACE] {
        ensure_namespace(env, ns)?;
    }
    let values = chart_values(env)?;
    let first_lease = format!("{first}-memcached-operator");
    helm.install(
        first,
        namespace,
        &[
            "-f",
            &values,
            "--set",
            &format!("watchNamespaces={{{first_watched}}},replicaCount=1"),
        ],
    )?;
    controller_pods(env, first, namespace, 1)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl
        .apply(&memcached(NAMESPACE, "unwatched", spec.clone()))?;
    env.kubectl
        .apply(&memcached(first_watched, "watched", spec.clone()))?;
    wait_ready(env, first_watched, "watched", 1)?;
    let unwatched = env
        .kubectl
        .get(&["memcached", "unwatched", "-n", NAMESPACE])?;
    let deployments = instance_objects(env, "deployments", NAMESPACE, "unwatched")?;
    check(
        unwatched["status"].is_null() && deployments.is_empty(),
        format!(
            "a Memcached outside watchNamespaces was reconciled: status {}, {} Deployment(s)",
            unwatched["status"],
            deployments.len()
        ),
    )?;
    helm_test_passes(env, &helm, first, namespace, Some(&first_lease))?;

    // The second release on the first's Lease: Ready, standing by, never leading.
    helm.install(
        second,
        namespace,
        &[
            "-f",
            &values,
            "--set",
            &format!(
                "watchNamespaces={{{second_watched}}},replicaCount=1,leaderElection.leaseName={first_lease}"
            ),
        ],
    )?;
    controller_pods(env, second, namespace, 1)?;
    env.kubectl
        .apply(&memcached(second_watched, "watched", spec.clone()))?;
    let refused = helm.test(second, namespace).err().unwrap_or_default();
    check(
        refused.contains(&format!(
            "the Lease {namespace}/{first_lease} is held by {first}-"
        )) && refused.contains("uses the same Lease name"),
        format!("helm test of a release that never leads: {refused}"),
    )?;
    let ignored = env
        .kubectl
        .get(&["memcached", "watched", "-n", second_watched])?;
    check(
        ignored["status"].is_null(),
        format!("the standing-by release reconciled: {}", ignored["status"]),
    )?;
    println!(
        "     on the first release's Lease, helm test fails: {}",
        refused
            .lines()
            .find(|l| l.contains("is held by"))
            .unwrap_or_default()
            .trim()
    );
    // Its own Lease (the default): it leads; the next helm test replaces the failed one's objects.
    helm.run(&[
        "upgrade",
        second,
        &Helm::chart().to_string_lossy(),
        "--namespace",
        namespace,
        "--reuse-values",
        "--set",
        "leaderElection.leaseName=",
        "--wait",
        "--timeout=120s",
    ])?;
    wait_ready(env, second_watched, "watched", 1)?;
    helm_test_passes(
        env,
        &helm,
        second,
        namespace,
        Some(&format!("{second}-memcached-operator")),
    )?;
    for (ns, name) in [
        (first_watched, "watched"),
        (second_watched, "watched"),
        (NAMESPACE, "unwatched"),
    ] {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", ns, "--wait=false"])?;
    }
    helm.uninstall(first, namespace)?;
    helm.uninstall(second, namespace)?;
    nothing_left(env, &[first, second], namespace)
}

/// `helm test --logs` of `release` passes: its pod checked that a Ready pod
/// of the release holds `lease` and that a Memcached got reconciled. The
/// test's ServiceAccount and Roles are gone afterwards; its finished pod
/// stays for its log, owned by the controller's ServiceAccount (so `helm
/// uninstall` takes it).
fn helm_test_passes(
    env: &Env,
    helm: &Helm,
    release: &str,
    namespace: &str,
    lease: Option<&str>,
) -> Result<(), String> {
    let started = Instant::now();
    let out = helm.test(release, namespace)?;
    check(
        out.contains("Succeeded")
            && !out.contains("Failed")
            && out.contains("ok: Memcached")
            && lease.is_none_or(|l| out.contains(&format!("holds the Lease {namespace}/{l}"))),
        format!("helm test {release}:\n{out}"),
    )?;
    let selector = format!("app.kubernetes.io/instance={release},app.kubernetes.io/component=test");
    let left = env.kubectl.ok(&[
        "get",
        "serviceaccounts,roles,rolebindings",
        "-A",
        "-l",
        &selector,
        "-o",
        "name",
    ])?;
    check(left.trim().is_empty(), format!("helm test left {left}"))?;
    let pod = env.kubectl.get(&[
        "pod",
        &format!("{release}-memcached-operator-test"),
        "-n",
        namespace,
    ])?;
    let owners = &pod["metadata"]["ownerReferences"];
    check(
        pod["status"]["phase"] == "Succeeded"
            && owners[0]["kind"] == "ServiceAccount"
            && owners[0]["name"] == format!("{release}-memcached-operator").as_str(),
        format!(
            "the test pod: phase {}, owners {owners}",
            pod["status"]["phase"]
        ),
    )?;
    let line = out
        .lines()
        .find(|l| l.starts_with("ok: Memcached"))
        .unwrap_or_default();
    println!(
        "     helm test {release} passed in {:.1}s: {line}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The chart pushed to the suite's registry with `deploy/helm/push-chart.sh`
/// and signed with a fresh key; cosign verifies the pushed digest under that
/// key, and refuses it under another. The immutable reference
/// (`oci://<registry>/charts/memcached-operator@sha256:...`).
fn publish_chart(env: &Env, helm: &Helm) -> Result<String, String> {
    let keys = env.cluster.workdir.join("chart-keys");
    let (key, public) = helm::key_pair(&keys, "release")?;
    let (_, other) = helm::key_pair(&keys, "other")?;
    let repository = format!("oci://{}/charts", env.registry.address());
    let published = helm.push_chart(&Helm::chart(), &repository, Some(&key))?;
    check(
        published.starts_with(&format!("{repository}/memcached-operator@sha256:")),
        format!("push-chart.sh printed {published}"),
    )?;
    helm::verify_chart(&published, &public)?;
    let refused = helm::verify_chart(&published, &other);
    check(
        refused.is_err(),
        format!("cosign verified the chart under another key: {refused:?}"),
    )?;
    println!("     published {published}: cosign verifies it under the release key only");
    Ok(published)
}

/// Who holds the Lease `name` in `namespace`.
fn lease_holder(env: &Env, namespace: &str, name: &str) -> Result<String, String> {
    let lease = env.kubectl.get(&["lease", name, "-n", namespace])?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("the Lease {namespace}/{name} has no holder"))
}

/// After `helm uninstall` of `releases`: nothing of them is left in
/// `namespace` (only what Kubernetes puts in every namespace) or
/// cluster-wide (labelled with their instance).
fn nothing_left(env: &Env, releases: &[&str], namespace: &str) -> Result<(), String> {
    let started = Instant::now();
    wait_for("nothing of the releases left", SETTLE, || {
        let mut left: Vec<String> = env
            .kubectl
            .ok(&[
                "get",
                "pods,leases,secrets,serviceaccounts,configmaps,services,deployments,\
                 replicasets,poddisruptionbudgets,roles,rolebindings",
                "-n",
                namespace,
                "-o",
                "name",
            ])?
            .lines()
            .filter(|l| *l != "serviceaccount/default" && *l != "configmap/kube-root-ca.crt")
            .map(str::to_string)
            .collect();
        for release in releases {
            left.extend(
                env.kubectl
                    .ok(&[
                        "get",
                        "clusterroles,clusterrolebindings,validatingadmissionpolicies,\
                         validatingadmissionpolicybindings",
                        "-l",
                        &format!("app.kubernetes.io/instance={release}"),
                        "-o",
                        "name",
                    ])?
                    .lines()
                    .map(str::to_string),
            );
        }
        left.retain(|l| !l.is_empty());
        check(left.is_empty(), format!("left: {}", left.join(", ")))
    })?;
    println!(
        "     helm uninstall {}: nothing left in {namespace} or cluster-wide {:.1}s later",
        releases.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stop the suite's own controller (it leads another Lease and would
/// reconcile too); helm for the chart scenarios.
fn stop_suite_controller(env: &mut Env) -> Result<Helm, String> {
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    Ok(Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir))
}

/// A values file that puts the controller's pods on the real node.
fn chart_values(env: &Env) -> Result<String, String> {
    let path = env.cluster.workdir.join("real-node-values.json");
    let scheduling = node::scheduling();
    std::fs::write(&path, scheduling.to_string())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// The release's controller pods, `count` of them, each Ready on the real
/// node, none logging an error (`kubectl logs`: JSON lines, the chart's default).
fn controller_pods(
    env: &Env,
    release: &str,
    namespace: &str,
    count: usize,
) -> Result<Vec<Value>, String> {
    let selector = format!("app.kubernetes.io/instance={release}");
    let pods = wait_for(&format!("{count} Ready controller pods"), SETTLE, || {
        let pods = env
            .kubectl
            .get(&["pods", "-n", namespace, "-l", &selector])?;
        let pods: Vec<Value> = pods["items"].as_array().cloned().unwrap_or_default();
        let ready = pods.len() == count
            && pods.iter().all(|p| {
                condition_status(p, "Ready") == Some("True")
                    && p["metadata"]["deletionTimestamp"].is_null()
            });
        ready
            .then_some(pods.clone())
            .ok_or_else(|| format!("pods {:?}", summary(&pods)))
    })?;
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        check(
            pod["spec"]["nodeName"] == node::NAME,
            format!("controller pod {name} runs on {}", pod["spec"]["nodeName"]),
        )?;
        let log = env.kubectl.ok(&["logs", "-n", namespace, name])?;
        check(
            !log.is_empty()
                && log
                    .lines()
                    .all(|l| l.starts_with('{') && !l.contains("\"ERROR\"")),
            format!("controller {name} logged:\n{log}"),
        )?;
    }
    Ok(pods)
}

fn node_memory(env: &mut Env) -> Result<(), String> {
    let state = NodeState::read(&env.cluster.workdir)?;
    let by_name = node::memory_by_name(&state.processes());
    let total: u64 = by_name.values().map(|(_, kib)| kib).sum();
    for (name, (count, kib)) in &by_name {
        println!("     {name:<24} x{count} {:>6.1} MiB", *kib as f64 / 1024.0);
    }
    println!("     {:<24}    {:>6.1} MiB", "total", total as f64 / 1024.0);
    for daemon in ["kubelet", "containerd", "coredns", "kube-proxy"] {
        check(
            by_name.contains_key(daemon),
            format!("no {daemon} among the node's processes {by_name:?}"),
        )?;
    }
    Ok(())
}

fn teardown_clean(
    state: &NodeState,
    sysctls: &BTreeMap<&'static str, String>,
) -> Result<(), String> {
    let mut left = state.leftovers();
    let now = node::sysctls();
    left.extend(
        sysctls
            .iter()
            .filter(|(name, value)| now.get(*name) != Some(value))
            .map(|(name, value)| format!("sysctl {name} {value} -> {:?}", now.get(name))),
    );
    check(left.is_empty(), left.join("\n     "))
}

/// Warm restarts (spec.warmRestart): a change of spec.image alone is applied
/// by the controller to each running pod in place (controller/src/in_place.rs),
/// one pod at a time: the same pods, each container restarted once, every
/// key kept, and the Deployment ends with the new template on its one
/// ReplicaSet (no pod replaced, not paused).
fn warm_image_change(env: &mut Env) -> Result<(), String> {
    image_changed_in_place(env, "warm", "Deployment")
}

/// As [`warm_image_change`] in StatefulSet mode
/// (controller/src/stateful_in_place.rs): the pods keep their names and
/// caches, and the StatefulSet ends with the new revision current and no
/// partition (no pod replaced).
fn warm_image_change_stateful(env: &mut Env) -> Result<(), String> {
    image_changed_in_place(env, "warm-sts", "StatefulSet")
}

/// A Memcached `name` of 2 warm-restart replicas run by `workload`, 2,000
/// keys in each pod, `spec.image` changed to the same image by digest.
fn image_changed_in_place(env: &mut Env, name: &str, workload: &str) -> Result<(), String> {
    const KEYS: usize = 2_000;
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(2);
    spec["workload"] = json!(workload);
    spec["warmRestart"] = json!({"enabled": true});
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 2)?;
    let before = pods_of(env, name)?;
    for pod in &before {
        fill(&pod_ip(pod)?, KEYS)?;
    }
    let image = node::image_by_digest(&before[0])?;
    spec["image"] = json!(image);
    let kind = workload.to_lowercase();
    let changed = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    let after = wait_for("every pod restarted in place and Ready", SETTLE, || {
        let pods = pods_of(env, name)?;
        pods.iter()
            .all(|p| {
                let status = &p["status"]["containerStatuses"][0];
                p["spec"]["containers"][0]["image"] == image.as_str()
                    && status["restartCount"] == 1
                    && status["ready"] == true
            })
            .then_some(pods.clone())
            .ok_or_else(|| {
                let live = env
                    .kubectl
                    .get(&[&kind, name, "-n", NAMESPACE])
                    .unwrap_or_default();
                format!(
                    "pods {:?}; {workload} strategy {}, status {}",
                    summary(&pods),
                    live["spec"]["updateStrategy"],
                    live["status"]
                )
            })
    })?;
    let took = changed.elapsed();
    let uids = |pods: &[Value]| -> Vec<String> {
        pods.iter()
            .map(|p| p["metadata"]["uid"].to_string())
            .collect()
    };
    check(
        uids(&after) == uids(&before),
        format!(
            "the same pods: {:?} then {:?}",
            summary(&before),
            summary(&after)
        ),
    )?;
    let mut kept = Vec::new();
    for pod in &after {
        kept.push(
            stats(&pod_ip(pod)?)?
                .get("curr_items")
                .cloned()
                .unwrap_or_default(),
        );
    }
    let mc = wait_for("the Memcached Ready, its rollout complete", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        (condition_status(&mc, "Ready") == Some("True")
            && condition_status(&mc, "Progressing") == Some("False")
            && workload_settled(env, &kind, name)?)
        .then_some(mc.clone())
        .ok_or_else(|| format!("status {}", mc["status"]))
    })?;
    let live = env.kubectl.get(&[&kind, name, "-n", NAMESPACE])?;
    let events = env.kubectl.get(&[
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        &format!("involvedObject.name={name},reason=RestartingInPlace"),
    ])?;
    let restarted = events["items"].as_array().map_or(0, Vec::len);
    // A Deployment keeps its one ReplicaSet; a StatefulSet makes the new
    // revision current with every pod on it.
    let kept_workload = if workload == "Deployment" {
        let sets = instance_objects(env, "replicasets", NAMESPACE, name)?;
        (sets.len() == 1, format!("{} ReplicaSet(s)", sets.len()))
    } else {
        let status = &live["status"];
        (
            status["currentRevision"] == status["updateRevision"] && status["updatedReplicas"] == 2,
            format!(
                "revision {} current (update {}), {} updated",
                status["currentRevision"], status["updateRevision"], status["updatedReplicas"]
            ),
        )
    };
    println!(
        "     image changed in place by the controller: keys kept per pod {kept:?} of {KEYS}, \
         both pods Ready again {:.1}s after the apply, {}, {restarted} RestartingInPlace event(s)",
        took.as_secs_f64(),
        kept_workload.1
    );
    check(
        kept.iter().all(|k| *k == KEYS.to_string()),
        format!("keys kept {kept:?} of {KEYS} per pod"),
    )?;
    check(kept_workload.0, kept_workload.1)?;
    check(
        live["spec"]["template"]["spec"]["containers"][0]["image"] == image.as_str(),
        format!("the {workload}'s template has the new image"),
    )?;
    check(
        restarted == 2,
        format!("{restarted} RestartingInPlace events"),
    )?;
    check(
        mc["status"]["image"] == image.as_str(),
        format!("status.image {}", mc["status"]["image"]),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// The workload (`deployment` or `statefulset`) `name` is resumed (no
/// partition left), without the in-place annotation, and its status
/// describes its latest generation.
fn workload_settled(env: &Env, kind: &str, name: &str) -> Result<bool, String> {
    let w = env.kubectl.get(&[kind, name, "-n", NAMESPACE])?;
    let partition = w["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
        .as_i64()
        .unwrap_or(0);
    Ok(w["spec"]["paused"] != true
        && partition == 0
        && w["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null()
        && w["status"]["observedGeneration"] == w["metadata"]["generation"])
}

/// Name, uid, image and restart count of each pod, for messages.
fn summary(pods: &[Value]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            format!(
                "{} uid {} revision {} image {} restarts {} ready {}",
                p["metadata"]["name"],
                p["metadata"]["uid"],
                p["metadata"]["labels"]["controller-revision-hash"],
                p["spec"]["containers"][0]["image"],
                p["status"]["containerStatuses"][0]["restartCount"],
                p["status"]["containerStatuses"][0]["ready"]
            )
        })
        .collect()
}

// ---------------------------------------------------------------- helpers

/// Set `count` keys at `ip`:11211 (noreply, then one `mn` to wait for them).
fn fill(ip: &str, count: usize) -> Result<(), String> {
    let mut text = String::new();
    for i in 0..count {
        text.push_str(&format!("set key-{i} 0 0 5 noreply\r\nvalue\r\n"));
    }
    text.push_str("mn\r\n");
    let answer = Memcache::connect(ip)?.reply(&text)?;
    check(answer == "MN", format!("answer to mn: {answer:?}"))
}

/// `busybox <args>` in the pod's memcached container (kubectl exec).
fn busybox(env: &Env, pod: &str, args: &[&str]) -> Outcome {
    let mut all = vec![
        "exec",
        "-n",
        NAMESPACE,
        pod,
        "-c",
        "memcached",
        "--",
        "busybox",
    ];
    all.extend_from_slice(args);
    env.kubectl.run(&all, None)
}

/// The Memcached's one pod.
fn the_pod(env: &Env) -> Result<Value, String> {
    pod_of(env, NAME)
}

/// The one pod of Memcached `name`.
fn pod_of(env: &Env, name: &str) -> Result<Value, String> {
    match pods_of(env, name)?.as_slice() {
        [pod] => Ok(pod.clone()),
        pods => Err(format!("expected one pod of {name}: {pods:?}")),
    }
}

/// The pods of Memcached `name`, by name.
fn pods_of(env: &Env, name: &str) -> Result<Vec<Value>, String> {
    instance_objects(env, "pods", NAMESPACE, name)
}

/// The pod's memcached container is ready.
fn ready(pod: &Value) -> bool {
    pod["status"]["containerStatuses"][0]["ready"] == true
}

fn pod_name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

fn pod_ip(pod: &Value) -> Result<String, String> {
    pod["status"]["podIP"]
        .as_str()
        .filter(|ip| ip.starts_with(node::POD_PREFIX))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "pod IP {} not in the real node's range",
                pod["status"]["podIP"]
            )
        })
}

/// memcached's `stats` at `ip`:11211, as name -> value.
fn stats(ip: &str) -> Result<BTreeMap<String, String>, String> {
    let lines = Memcache::connect(ip)?.command("stats\r\n", "END")?;
    Ok(lines
        .iter()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ' ').skip(1);
            Some((fields.next()?.to_string(), fields.next()?.to_string()))
        })
        .collect())
}
