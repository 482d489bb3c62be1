//! The controller against the real API server's semantics (`make e2e`):
//! server-side apply converging both ways, the replica handover to the HPA,
//! refusals and conflicts in status, readiness of standbys and the Lease
//! handover after SIGTERM and SIGKILL, the StatefulSet name bound, an
//! invalid spec stored without the policy, render against kubectl's strict
//! validation, replicas whose clocks differ by 12 s, secure `/metrics`, a
//! Memcached the controller's types cannot read, a missing namespace, a CRD
//! older than the controller, the guard on the controller's writes, a
//! mounted Secret deleted, a controller upgrade that renders pods differently,
//! a hung API server, a hung memcached, the leader killed mid-apply, the
//! Lease taken mid-reconcile, etcd compacted and the API server restarted,
//! 1,000 Memcacheds across 50 namespaces, the API server stopped for 40 s.
//!
//! Runs inside `e2e-tests/netns.sh`; every scenario runs even when an earlier
//! one failed, and the process fails if any did.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_tests::cluster::api_requests::request_counts;
use e2e_tests::cluster::http::free_address;
use e2e_tests::cluster::memcache::Memcache;
use e2e_tests::cluster::objects::{auth_secret, delete_namespace, deployment};
use e2e_tests::cluster::pods::pod_uids;
use e2e_tests::cluster::runner::{Scenario, run_scenarios};
use e2e_tests::cluster::scenario::{
    self, SETTLE, check, ensure_namespace, lease_holder, memcached, touch, wait_ready,
};
use e2e_tests::cluster::{
    Env, Kubectl, OPERATOR_NAMESPACE, Operator, Outcome, condition, metrics_reader_token, scrape,
    wait_for,
};
use memcached_api::MemcachedSpec;
use memcached_api::field::invalid_message;
use memcached_api::validation::{self, ObjectName, Options};
use memcached_controller::cluster::cache::{NOT_SERVED, WATCH_EXPIRED};
use memcached_controller::cluster::leadership::{LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD};
use memcached_controller::serve::readiness::UNANSWERED;
use serde_json::{Value, json};

const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "fields removed from the spec disappear from the Deployment",
        removed_fields,
    ),
    Scenario::new(
        "quantities the server rewrites cause no writes and no Events",
        normalised_quantities,
    ),
    Scenario::new(
        "autoscaling takes replicas over without a dip, and hands them back without one",
        autoscaling_handover,
    ),
    Scenario::new(
        "a foreign Deployment degrades the Memcached and is never reported",
        foreign_deployment,
    ),
    Scenario::new(
        "standbys are ready; the Lease hands over after SIGTERM and SIGKILL",
        readiness_and_handover,
    ),
    Scenario::new(
        "a 52-character StatefulSet runs its pods, a 53-character one cannot (the policy's bound)",
        stateful_set_name_bound,
    ),
    Scenario::new(
        "without the policy, an invalid Memcached is refused visibly and converges once fixed",
        invalid_spec_without_the_policy,
    ),
    Scenario::new(
        "render names unknown fields as kubectl apply --validate=strict does",
        render_reports_unknown_fields_as_kubectl,
    ),
    Scenario::new(
        "replicas whose clocks differ by 12s take no renewed Lease and an abandoned one on time",
        skewed_clocks,
    ),
    Scenario::new(
        "secure /metrics: a metrics-reader scrapes, another ServiceAccount gets 403, no token 401",
        secure_metrics,
    ),
    Scenario::new(
        "an unreadable Memcached is reported on itself; after a restart every other one converges",
        unreadable_memcached,
    ),
    Scenario::new(
        "without its namespace the controller exits saying so in one line",
        missing_namespace_in_one_line,
    ),
    Scenario::new(
        "an older CRD without a status field the controller writes: the rest is written",
        older_crd,
    ),
    Scenario::new(
        "the controller's token writes only objects it manages (deploy/rbac-writes-guard.yaml), creates only those a Memcached owns, and puts back a removed label",
        writes_only_its_own,
    ),
    Scenario::new(
        "a Secret deleted while mounted, then recreated alike, restarts no pod",
        secret_deleted_while_mounted,
    ),
    Scenario::new(
        "a controller that renders pods differently restarts none until the spec changes",
        new_rendering_waits_for_the_spec,
    ),
    Scenario::new(
        "the API server hung for 40s: the leader steps down before its Lease expires, the standby turns unready, no pod restarts, all converges after",
        api_server_hung,
    ),
    Scenario::new(
        "a hung memcached is named on its Memcached and delays no other; it is Ready again once it answers",
        hung_memcached,
    ),
    Scenario::new(
        "the leader SIGKILLed while applying 20 Memcacheds: the standby converges each, nothing duplicated",
        leader_killed_mid_apply,
    ),
    Scenario::new(
        "the Lease taken by another replica mid-reconcile: the leader stops and leaves it alone",
        lease_taken_mid_reconcile,
    ),
    Scenario::new(
        "etcd compacted and the API server restarted: watches answered 410 Gone list again, changes made after converge",
        compacted_and_restarted,
    ),
    Scenario::new(
        "1,000 Memcacheds across 50 namespaces at once: each converges, then no request storm and bounded memory",
        many_across_namespaces,
    ),
    Scenario::new(
        "the API server stopped for 40s after an etcd compaction, then started: as 17",
        api_server_stopped,
    ),
    Scenario::new(
        "hard anti-affinity with a pod on every node: the rollout's surge pod finds no node, and the Memcached says why",
        surge_pod_unschedulable,
    ),
    Scenario::new(
        "a rotated password rolls the pods paced: those not yet replaced are read with the password they run, an empty new pod holds the next",
        rotation_stays_paced,
    ),
];

fn main() {
    e2e_tests::cluster::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e-controller");
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    println!("environment ready, logs in {}", workdir.display());
    run_scenarios(env, SCENARIOS);
}

// ---------------------------------------------------------------- scenarios

fn removed_fields(env: &mut Env) -> Result<(), String> {
    let ns = "removed";
    ensure_namespace(env, ns)?;
    let full = json!({
        "replicas": 2,
        "podLabels": {"team": "cache"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}},
        "highAvailability": {
            "antiAffinityPreset": "soft",
            "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 5, "terminationGracePeriodSeconds": 40},
        },
    });
    env.kubectl.apply(&memcached(ns, "cache", full))?;
    let has = |d: &Value| -> Vec<&'static str> { present_fields(d) };
    wait_for("every field on the Deployment", SETTLE, || {
        let found = has(&deployment(env, ns, "cache")?);
        if found.len() == 6 {
            Ok(())
        } else {
            Err(format!("only {found:?}"))
        }
    })?;
    // `kubectl apply` of a file without them: the stored spec drops them.
    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 2})))?;
    wait_for(
        "every removed field gone from the Deployment",
        SETTLE,
        || {
            let found = has(&deployment(env, ns, "cache")?);
            if found.is_empty() {
                Ok(())
            } else {
                Err(format!("still there: {found:?}"))
            }
        },
    )?;
    delete_namespace(env, ns)
}

/// Which of the removable fields the Deployment carries.
fn present_fields(d: &Value) -> Vec<&'static str> {
    let pod = &d["spec"]["template"]["spec"];
    let memcached = &pod["containers"][0];
    [
        (
            "podLabel",
            !d["spec"]["template"]["metadata"]["labels"]["team"].is_null(),
        ),
        ("nodeSelector", !pod["nodeSelector"].is_null()),
        ("tolerations", !pod["tolerations"].is_null()),
        (
            "resources.limits",
            !memcached["resources"]["limits"].is_null(),
        ),
        ("affinity", !pod["affinity"].is_null()),
        ("preStop", !memcached["lifecycle"]["preStop"].is_null()),
    ]
    .into_iter()
    .filter_map(|(name, there)| there.then_some(name))
    .collect()
}

fn normalised_quantities(env: &mut Env) -> Result<(), String> {
    let ns = "quantities";
    ensure_namespace(env, ns)?;
    // Stored by the API server as 1Gi, 500m and 1Gi.
    let spec = json!({
        "memcached": {"maxMemoryMB": 512},
        "resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"memory": "1024Mi"}},
    });
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 1)?;
    let stored = deployment(env, ns, "cache")?;
    let requests = &stored["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"];
    println!("     the API server stored requests {requests}");
    // Let the creation settle (rollout status writes are the Deployment controller's).
    std::thread::sleep(Duration::from_secs(3));
    let version = deployment(env, ns, "cache")?["metadata"]["resourceVersion"].clone();
    let events = updated_events(env, ns)?;
    let operator = env.operator()?;
    let reconciles = operator.reconciles()?;
    for _ in 0..20 {
        touch(env, ns, "cache")?;
    }
    wait_for("20 more reconciles", SETTLE, || {
        let now = operator.reconciles()?;
        if now >= reconciles + 20 {
            Ok(())
        } else {
            Err(format!("{} reconciles", now - reconciles))
        }
    })?;
    std::thread::sleep(Duration::from_secs(2));
    let after = deployment(env, ns, "cache")?["metadata"]["resourceVersion"].clone();
    check(
        version == after,
        format!("the Deployment was written: resourceVersion {version} -> {after}"),
    )?;
    let later = updated_events(env, ns)?;
    check(
        later == events,
        format!("Updated Events {events} -> {later}"),
    )?;
    delete_namespace(env, ns)
}

/// Number of `Updated` Events in `namespace`.
fn updated_events(env: &Env, namespace: &str) -> Result<usize, String> {
    let events = env
        .kubectl
        .get(&["events.events.k8s.io", "-n", namespace])?;
    Ok(events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "Updated")
        .count())
}

fn autoscaling_handover(env: &mut Env) -> Result<(), String> {
    let ns = "handover";
    ensure_namespace(env, ns)?;
    let file = json!({"replicas": 5, "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}}});
    env.kubectl.apply(&memcached(ns, "cache", file.clone()))?;
    wait_ready(env, ns, "cache", 5)?;
    let watch = ReplicaWatch::start(env, ns, "cache")?;
    let mut unscaled = file;
    unscaled
        .as_object_mut()
        .ok_or("spec is not an object")?
        .remove("replicas");
    let mut autoscaled = unscaled.clone();
    autoscaled["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 10});
    env.kubectl.apply(&memcached(ns, "cache", autoscaled))?;
    wait_for("the HPA", SETTLE, || {
        env.kubectl
            .get(&["horizontalpodautoscaler", "cache", "-n", ns])
            .map(drop)
    })?;
    wait_for("the controller to stop applying replicas", SETTLE, || {
        let d = deployment(env, ns, "cache")?;
        let ours = d["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["manager"] == "memcached-operator"
                    && !m["fieldsV1"]["f:spec"]["f:replicas"].is_null()
            });
        if ours {
            Err("memcached-operator still owns spec.replicas".into())
        } else {
            Ok(())
        }
    })?;
    // The Deployment controller and the HPA get a few seconds to react.
    std::thread::sleep(Duration::from_secs(10));
    let seen = watch.stop();
    println!("     spec.replicas seen during the switch: {seen:?}");
    check(!seen.is_empty(), "the watch saw no Deployment")?;
    check(
        seen.iter().all(|r| *r >= 5),
        format!("spec.replicas dipped below 5: {seen:?}"),
    )?;

    // And back: autoscaling turned off without a replica count keeps the
    // pods the autoscaler ran, and kubectl says so.
    let watch = ReplicaWatch::start(env, ns, "cache")?;
    let applied = env.kubectl.run(
        &["apply", "-f", "-"],
        Some(&memcached(ns, "cache", unscaled)),
    );
    check(
        applied.success,
        format!("kubectl apply: {}", applied.stderr),
    )?;
    println!("     {}", applied.stderr.trim());
    check(
        applied.stderr.contains("Warning:") && applied.stderr.contains("spec.replicas"),
        format!("no warning about the replica count: {:?}", applied.stderr),
    )?;
    wait_for("the HPA gone", SETTLE, || {
        let gone = env
            .kubectl
            .run(&["get", "horizontalpodautoscaler", "cache", "-n", ns], None);
        (!gone.success && gone.stderr.contains("NotFound"))
            .then_some(())
            .ok_or_else(|| format!("{} {}", gone.stdout, gone.stderr))
    })?;
    let stored = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
    check(
        stored["spec"]["replicas"] == 5,
        format!("stored spec.replicas {}", stored["spec"]["replicas"]),
    )?;
    std::thread::sleep(Duration::from_secs(10));
    let seen = watch.stop();
    println!("     spec.replicas seen turning autoscaling off: {seen:?}");
    check(
        !seen.is_empty() && seen.iter().all(|r| *r == 5),
        format!("spec.replicas left 5: {seen:?}"),
    )?;
    wait_ready(env, ns, "cache", 5)?;
    delete_namespace(env, ns)
}

/// `kubectl get -w` on one Deployment, recording every `spec.replicas`.
struct ReplicaWatch {
    child: std::process::Child,
    seen: Arc<Mutex<Vec<i64>>>,
}

impl ReplicaWatch {
    fn start(env: &Env, namespace: &str, name: &str) -> Result<Self, String> {
        let mut child = Command::new(&env.binaries.kubectl)
            .arg("--kubeconfig")
            .arg(&env.cluster.kubeconfig)
            .args([
                "get",
                "deployment",
                name,
                "-n",
                namespace,
                "-w",
                "-o",
                "json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            let objects = serde_json::Deserializer::from_reader(BufReader::new(stdout));
            for object in objects.into_iter::<Value>().map_while(Result::ok) {
                if let (Some(r), Ok(mut seen)) =
                    (object["spec"]["replicas"].as_i64(), record.lock())
                {
                    seen.push(r);
                }
            }
        });
        // The first object arrives once the watch is established.
        wait_for("the Deployment watch", Duration::from_secs(10), || {
            if seen.lock().map_err(|e| e.to_string())?.is_empty() {
                Err("nothing yet".into())
            } else {
                Ok(())
            }
        })?;
        Ok(ReplicaWatch { child, seen })
    }

    fn stop(mut self) -> Vec<i64> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn foreign_deployment(env: &mut Env) -> Result<(), String> {
    let ns = "foreign";
    ensure_namespace(env, ns)?;
    let foreign = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "cache", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "someone-else"}},
            "template": {
                "metadata": {"labels": {"app": "someone-else"}},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
    });
    env.kubectl.apply(&foreign.to_string())?;
    wait_for("the foreign Deployment ready", SETTLE, || {
        let d = deployment(env, ns, "cache")?;
        if d["status"]["readyReplicas"] == 1 {
            Ok(())
        } else {
            Err(d["status"].to_string())
        }
    })?;
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    let mc = wait_for("Degraded ResourceConflict", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["status"] == "True" && c["reason"] == "ResourceConflict" => Ok(mc.clone()),
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    let status = &mc["status"];
    check(
        status["readyReplicas"] == 0 && status["serverList"].is_null(),
        format!("the foreign Deployment is reported: {status}"),
    )?;
    check(
        condition(&mc, "Ready").is_some_and(|c| c["status"] == "False"),
        "Ready while the Deployment is someone else's",
    )?;
    let d = deployment(env, ns, "cache")?;
    check(
        d["metadata"]["ownerReferences"].is_null()
            && d["spec"]["selector"]["matchLabels"]["app"] == "someone-else",
        "the foreign Deployment was changed",
    )?;
    let warnings = env.kubectl.get(&["events.events.k8s.io", "-n", ns])?;
    check(
        warnings["items"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["reason"] == "ResourceConflict" && e["type"] == "Warning"),
        "no ResourceConflict Warning Event",
    )?;
    delete_namespace(env, ns)
}

fn readiness_and_handover(env: &mut Env) -> Result<(), String> {
    let first = env.operator.take().ok_or("no controller running")?;
    let second = env.start_operator("operator-standby")?;
    wait_for("both replicas ready", SETTLE, || {
        match (first.ready(), second.ready()) {
            (true, true) => Ok(()),
            other => Err(format!("ready: {other:?}")),
        }
    })?;
    let (leader, standby) = if lease_holder(env)? == first.name {
        (first, second)
    } else {
        (second, first)
    };
    check(
        standby.reconciles()? == 0,
        "the standby reconciles while another process leads",
    )?;

    let sigterm = hand_over(env, leader, &standby, Operator::stop)?;
    let next = env.start_operator("operator-next")?;
    next.wait_ready(SETTLE)?;
    let sigkill = hand_over(env, standby, &next, Operator::kill)?;
    println!(
        "     Lease handover: {:.1}s after SIGTERM, {:.1}s after SIGKILL (Lease 15s)",
        sigterm.as_secs_f64(),
        sigkill.as_secs_f64()
    );
    // The new leader reconciles.
    let ns = "leader";
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    wait_ready(env, ns, "cache", 1)?;
    check(next.reconciles()? > 0, "the new leader did not reconcile")?;
    env.operator = Some(next);
    check(
        sigterm < Duration::from_secs(5),
        format!("the Lease was not released on SIGTERM: {sigterm:?}"),
    )?;
    delete_namespace(env, ns)
}

/// 20 Memcacheds are created at once and the leader is killed (SIGKILL)
/// as soon as the first of their Deployments exists, so some objects are
/// applied and others not. The standby takes the Lease when it expires and
/// converges every one: each Ready, with its one Deployment and Service.
fn leader_killed_mid_apply(env: &mut Env) -> Result<(), String> {
    const COUNT: usize = 20;
    let ns = "killed";
    ensure_namespace(env, ns)?;
    let leader = env.operator.take().ok_or("no controller running")?;
    let standby = env.start_operator("operator-survivor")?;
    let ready = standby.wait_ready(SETTLE);
    let leading = lease_holder(env).map(|holder| holder == leader.name);
    if ready.is_err() || leading != Ok(true) {
        env.operator = Some(leader);
        return ready.and(leading.and_then(|l| check(l, "the first controller does not lead")));
    }
    let list = memcacheds(ns, COUNT);
    let kubectl = &env.kubectl;
    // Killed while the Memcacheds are still being created and applied.
    let (created, applied_before_kill, killed) = std::thread::scope(|scope| {
        let create = scope.spawn(|| kubectl.apply(&list));
        let first = wait_for("the leader's first Deployment", SETTLE, || {
            let deployments = kubectl.get(&["deployments", "-n", ns])?;
            let n = deployments["items"].as_array().map_or(0, Vec::len);
            (n > 0).then_some(n).ok_or_else(|| "none yet".to_string())
        });
        let killed = Instant::now();
        leader.kill();
        let created = create
            .join()
            .unwrap_or_else(|_| Err("kubectl apply panicked".into()));
        (created, first, killed)
    });
    env.operator = Some(standby);
    created?;
    println!(
        "     killed the leader with {} of {COUNT} Deployments applied",
        applied_before_kill?
    );
    for i in 0..COUNT {
        wait_ready(env, ns, &format!("c{i}"), 1)?;
    }
    println!(
        "     all {COUNT} Ready {:.1}s after the kill (Lease 15s)",
        killed.elapsed().as_secs_f64()
    );
    let mut expected: Vec<String> = (0..COUNT).map(|i| format!("c{i}")).collect();
    expected.sort();
    for (kind, wanted) in [
        ("deployments", expected.clone()),
        ("services", expected),
        ("statefulsets", Vec::new()),
    ] {
        let objects = env.kubectl.get(&[kind, "-n", ns])?;
        let mut names: Vec<String> = objects["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        check(names == wanted, format!("{kind}: {names:?}"))?;
    }
    delete_namespace(env, ns)
}

/// `count` Memcacheds `c0`, `c1`, ... with the default spec, as one List.
fn memcacheds(ns: &str, count: usize) -> String {
    let items: Vec<Value> = (0..count)
        .map(|i| {
            serde_json::from_str(&memcached(ns, &format!("c{i}"), json!({}))).unwrap_or_default()
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// While the leader reconciles 10 new Memcacheds, another replica takes the
/// Lease (an "intruder" writes itself as holder). The leader stops
/// reconciling at its next renewal and exits without touching the new
/// holder's Lease (its release is conditional on still holding it). Once
/// the intruder's Lease expires, a new controller converges a change and
/// all 10 are Ready.
fn lease_taken_mid_reconcile(env: &mut Env) -> Result<(), String> {
    const COUNT: usize = 10;
    let ns = "taken";
    ensure_namespace(env, ns)?;
    let mut leader = env.operator.take().ok_or("no controller running")?;
    let log = env.cluster.workdir.join(format!("{}.log", leader.name));
    env.kubectl.apply(&memcacheds(ns, COUNT))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs_f64();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "memcached-operator", "namespace": OPERATOR_NAMESPACE},
        "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 15,
            "acquireTime": micro_time(now)?, "renewTime": micro_time(now)?},
    });
    env.kubectl.apply(&lease.to_string())?;
    let taken = Instant::now();
    let exited = wait_for("the leader to stop", LEASE_DURATION, || {
        leader.exited().ok_or_else(|| "still running".to_string())
    });
    let stopped = taken.elapsed();
    let holder = lease_holder(env);
    env.operator = Some(env.start_operator("operator-after-intruder")?);
    exited?;
    println!(
        "     the leader stopped {:.1}s after the Lease was taken",
        stopped.as_secs_f64()
    );
    check(
        holder? == "intruder",
        "the old leader overwrote the new holder's Lease",
    )?;
    let said = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    check(
        said.contains("lost leadership") && said.contains("the Lease is another replica's"),
        "the old leader's log does not say it lost the Lease to another replica",
    )?;
    // Only the next leader, once the intruder's Lease expired, converges this.
    env.kubectl
        .apply(&memcached(ns, "c0", json!({"replicas": 2})))?;
    wait_ready(env, ns, "c0", 2)?;
    println!(
        "     a change converged {:.1}s after the Lease was taken (Lease 15s)",
        taken.elapsed().as_secs_f64()
    );
    for i in 1..COUNT {
        wait_ready(env, ns, &format!("c{i}"), 1)?;
    }
    delete_namespace(env, ns)
}

/// End `leader` with `end`; the time until `successor` holds the Lease.
fn hand_over(
    env: &Env,
    leader: Operator,
    successor: &Operator,
    end: fn(Operator),
) -> Result<Duration, String> {
    let started = Instant::now();
    end(leader);
    wait_holder(env, successor)?;
    Ok(started.elapsed())
}

/// Wait until `operator` holds the Lease.
fn wait_holder(env: &Env, operator: &Operator) -> Result<(), String> {
    wait_for(
        &format!("{} to take the Lease", operator.name),
        SETTLE,
        || {
            let holder = lease_holder(env)?;
            if holder == operator.name {
                Ok(())
            } else {
                Err(holder)
            }
        },
    )
}

/// Two real replicas whose wall clocks differ by 12 s (the second runs with
/// libfaketime). Each judges the other's Lease by when it saw the record
/// change, never by the other's timestamps, so:
/// - the skewed standby (to which every renewTime looks 12 s old) never
///   takes the Lease while the leader renews it, and takes it 15 s (the
///   Lease duration) after the leader was SIGKILLed, not at once;
/// - a standby with the true clock (to which every renewTime looks 12 s in
///   the future) never takes it while the skewed leader renews, and takes it
///   at once when that leader releases it on SIGTERM; the release leaves the
///   new holder's record alone.
fn skewed_clocks(env: &mut Env) -> Result<(), String> {
    const AHEAD: Duration = Duration::from_secs(12);
    const WATCHED: Duration = Duration::from_secs(20);
    let leader = env.operator.take().ok_or("no controller is running")?;
    wait_holder(env, &leader)?;
    let skewed = env.start_operator_ahead("operator-ahead", AHEAD)?;
    let standing_by = standby_while_renewed(env, &leader, &skewed, WATCHED)?;
    let killed = Instant::now();
    leader.kill();
    wait_holder(env, &skewed)?;
    let taken = killed.elapsed();
    // The leader renewed at most a retry period before it died.
    check(
        taken >= LEASE_DURATION - RETRY_PERIOD - Duration::from_millis(500)
            && taken <= LEASE_DURATION + Duration::from_secs(5),
        format!("the skewed standby took the Lease {taken:?} after the leader died"),
    )?;

    // The skew is real: the skewed leader's renewTime is ahead of this clock.
    std::thread::sleep(RETRY_PERIOD * 2);
    let ahead = renewed_ahead(env)?;
    check(
        ahead >= AHEAD.as_secs_f64() - 3.0,
        format!("the skewed leader's renewTime is only {ahead:.1}s ahead"),
    )?;

    let true_clock = env.start_operator("operator-true-clock")?;
    standby_while_renewed(env, &skewed, &true_clock, WATCHED)?;
    let released = hand_over(env, skewed, &true_clock, Operator::stop)?;
    std::thread::sleep(RETRY_PERIOD * 2);
    let mut true_clock = true_clock;
    check(
        lease_holder(env)? == true_clock.name && true_clock.exited().is_none(),
        "the new holder lost the Lease after the skewed leader released it",
    )?;
    println!(
        "     {standing_by}; the skewed standby took the Lease {:.1}s after the leader was killed \
         (its renewTime {ahead:.1}s ahead); the true-clock standby {:.1}s after the skewed leader's SIGTERM",
        taken.as_secs_f64(),
        released.as_secs_f64()
    );
    env.operator = Some(true_clock);
    Ok(())
}

/// How far the Lease's renewTime is ahead of this host's clock, in seconds.
fn renewed_ahead(env: &Env) -> Result<f64, String> {
    let lease = env
        .kubectl
        .get(&["lease", "memcached-operator", "-n", OPERATOR_NAMESPACE])?;
    let renewed = lease["spec"]["renewTime"]
        .as_str()
        .ok_or("the Lease has no renewTime")?;
    let output = Command::new("date")
        .args(["-u", "-d", renewed, "+%s.%N"])
        .output()
        .map_err(|e| format!("date: {e}"))?;
    let renewed: f64 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("date cannot read renewTime {renewed:?}"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    Ok(renewed - now.as_secs_f64())
}

/// `standby` stays ready, running and idle for `watched` while `leader`
/// holds and renews the Lease.
fn standby_while_renewed(
    env: &Env,
    leader: &Operator,
    standby: &Operator,
    watched: Duration,
) -> Result<String, String> {
    standby.wait_ready(SETTLE)?;
    let started = Instant::now();
    while started.elapsed() < watched {
        check(
            lease_holder(env)? == leader.name,
            format!("{} took a renewed Lease", standby.name),
        )?;
        std::thread::sleep(Duration::from_secs(1));
    }
    check(
        standby.reconciles()? == 0,
        format!("{} reconciled while {} led", standby.name, leader.name),
    )?;
    Ok(format!(
        "{} stood by for {}s",
        standby.name,
        watched.as_secs()
    ))
}

/// `seconds` since the Unix epoch as a MicroTime (RFC 3339, UTC).
fn micro_time(seconds: f64) -> Result<String, String> {
    let output = Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("@{seconds:.6}"),
            "+%Y-%m-%dT%H:%M:%S.%6NZ",
        ])
        .output()
        .map_err(|e| format!("date: {e}"))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// The policy limits StatefulSet-mode names to 52 characters. Shown on the
/// real API server and StatefulSet controller: at 52 the pods run; a
/// StatefulSet of 53 is accepted but each pod is refused (its
/// controller-revision-hash label would exceed 63), and the policy refuses
/// such a Memcached up front.
fn stateful_set_name_bound(env: &mut Env) -> Result<(), String> {
    let ns = "names";
    ensure_namespace(env, ns)?;
    let longest = format!("s{}", "a".repeat(51));
    let spec = json!({"workload": "StatefulSet", "replicas": 1});
    env.kubectl.apply(&memcached(ns, &longest, spec.clone()))?;
    wait_ready(env, ns, &longest, 1)?;

    let too_long = format!("s{}", "a".repeat(52));
    let refused = env
        .kubectl
        .run(&["apply", "-f", "-"], Some(&memcached(ns, &too_long, spec)));
    check(
        !refused.success
            && refused
                .stderr
                .contains("must be no more than 52 characters with spec.workload StatefulSet"),
        format!(
            "the policy admitted a 53-character StatefulSet Memcached: {}",
            refused.stderr
        ),
    )?;
    let labels = json!({"app": "too-long"});
    let set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": too_long, "namespace": ns},
        "spec": {
            "replicas": 1, "serviceName": too_long,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
    });
    env.kubectl.apply(&set.to_string())?;
    wait_for(
        "the StatefulSet controller to fail creating the pod",
        SETTLE,
        || {
            let events = env.kubectl.get(&["events", "-n", ns])?;
            events["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| {
                    e["reason"] == "FailedCreate"
                        && e["involvedObject"]["name"] == too_long.as_str()
                        && e["message"]
                            .as_str()
                            // "characters" before Kubernetes 1.36, "bytes" since.
                            .is_some_and(|m| m.contains("must be no more than 63"))
                })
                .map(drop)
                .ok_or_else(|| "no FailedCreate Event yet".to_string())
        },
    )?;
    let pods = env.kubectl.get(&["pods", "-n", ns, "-l", "app=too-long"])?;
    check(
        pods["items"].as_array().is_some_and(Vec::is_empty),
        format!("a pod of the 53-character StatefulSet exists: {pods}"),
    )?;
    delete_namespace(env, ns)
}

/// The protect policy's webhook removed (the CRD alone, as when
/// policy-server is down under `failurePolicy: Ignore`): a Memcached the
/// policy would refuse is stored. The controller reports it on the object
/// (Degraded/InvalidSpec with the policy's own message, a Warning Event) and
/// creates nothing for it; the fixed spec converges. The webhook is restored
/// afterwards, whatever happened.
fn invalid_spec_without_the_policy(env: &mut Env) -> Result<(), String> {
    without_the_policy(env, "invalid", refused_until_fixed)
}

/// Run `scenario` in namespace `ns` with the protect policy's webhook
/// removed; the webhook is restored and the namespace deleted afterwards,
/// whatever happened.
fn without_the_policy(
    env: &mut Env,
    ns: &str,
    scenario: fn(&mut Env, &str) -> Result<(), String>,
) -> Result<(), String> {
    ensure_namespace(env, ns)?;
    env.unregister(&env.protect)?;
    let result = scenario(env, ns);
    let cleanup = env
        .register(&env.protect)
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup).and(delete_namespace(env, ns))
}

fn refused_until_fixed(env: &mut Env, ns: &str) -> Result<(), String> {
    // Schema-valid (the CRD bounds each field), but the limit cannot hold 512 MB.
    let spec = json!({
        "memcached": {"maxMemoryMB": 512},
        "resources": {"requests": {"memory": "96Mi"}, "limits": {"memory": "128Mi"}},
    });
    let expected = policy_message(ns, "cache", &spec)?;
    // kube-apiserver drops the webhook asynchronously.
    wait_for("the Memcached stored without the policy", SETTLE, || {
        env.kubectl.apply(&memcached(ns, "cache", spec.clone()))
    })?;
    let message = refused_visibly(env, ns, "cache")?;
    check(
        message == expected,
        format!("Degraded message {message:?}, the policy says {expected:?}"),
    )?;
    println!(
        "     {}",
        env.kubectl
            .ok(&["get", "memcached", "cache", "-n", ns, "-o", "wide"])?
            .trim_end()
            .replace('\n', "\n     ")
    );
    // The controller had its chance: a few reconciles later, still nothing.
    std::thread::sleep(Duration::from_secs(3));
    for kind in ["deployments", "statefulsets", "services", "configmaps"] {
        let managed = env.kubectl.get(&[
            kind,
            "-n",
            ns,
            "-l",
            "app.kubernetes.io/managed-by=memcached-operator",
        ])?;
        check(
            managed["items"].as_array().is_some_and(Vec::is_empty),
            format!("{kind} created for an invalid spec: {managed}"),
        )?;
    }

    let fixed = json!({
        "memcached": {"maxMemoryMB": 64},
        "resources": {"requests": {"memory": "96Mi"}, "limits": {"memory": "128Mi"}},
    });
    env.kubectl.apply(&memcached(ns, "cache", fixed))?;
    let mc = wait_ready(env, ns, "cache", 1)?;
    check(
        condition(&mc, "Degraded").is_some_and(|c| c["status"] == "False"),
        format!("still degraded once fixed: {}", mc["status"]),
    )?;
    // Without the policy nothing defaulted spec.image: the Image column
    // shows the image the controller runs.
    let wide = env
        .kubectl
        .ok(&["get", "memcached", "cache", "-n", ns, "-o", "wide"])?;
    println!("     {}", wide.trim_end().replace('\n', "\n     "));
    check(
        mc["status"]["image"] == memcached_api::defaults::IMAGE,
        format!("status.image {}", mc["status"]["image"]),
    )
}

/// The protect policy's webhook removed: a Memcached whose spec passes the
/// CRD's schema but not the controller's types (`minAvailable: 4294967296`
/// cannot be an int32) is stored, and the controller restarts, so its
/// first list holds that object. The controller is ready, reconciles every
/// other Memcached, reports the unreadable one on itself naming the field
/// (Degraded/InvalidSpec, a Warning Event), creates nothing for it, and
/// converges it once fixed.
fn unreadable_memcached(env: &mut Env) -> Result<(), String> {
    without_the_policy(env, "unreadable", reported_while_others_converge)
}

fn reported_while_others_converge(env: &mut Env, ns: &str) -> Result<(), String> {
    let pdb = |min_available: Value| json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": min_available}}});
    wait_for(
        "the unreadable Memcached stored without the policy",
        SETTLE,
        || {
            env.kubectl
                .apply(&memcached(ns, "unreadable", pdb(json!(4_294_967_296_u64))))
        },
    )?;
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let operator = env.start_operator("operator-unreadable")?;
    let ready = operator.wait_ready(SETTLE);
    env.operator = Some(operator);
    ready?;
    env.kubectl.apply(&memcached(ns, "healthy", json!({})))?;
    wait_ready(env, ns, "healthy", 1)?;

    let expected = r#"Memcached.memcached.c5c3.io "unreadable" cannot be read: spec.highAvailability.podDisruptionBudget.minAvailable: "#;
    let message = refused_visibly(env, ns, "unreadable")?;
    println!("     {message}");
    check(
        message.starts_with(expected),
        format!("Degraded message {message:?}, expected it to start with {expected:?}"),
    )?;
    let deployments = env.kubectl.get(&[
        "deployments",
        "-n",
        ns,
        "-l",
        "app.kubernetes.io/instance=unreadable",
    ])?;
    check(
        deployments["items"].as_array().is_some_and(Vec::is_empty),
        format!("a Deployment was created for an unreadable spec: {deployments}"),
    )?;

    let mut fixed = pdb(json!(1));
    fixed["replicas"] = json!(2);
    env.kubectl.apply(&memcached(ns, "unreadable", fixed))?;
    wait_ready(env, ns, "unreadable", 2).map(drop)
}

/// Started from a workstation against a cluster without its namespace, the
/// controller exits 1 saying what is missing and how to fix it, in one
/// line on stderr: no backtrace (even with `RUST_BACKTRACE=1`).
fn missing_namespace_in_one_line(env: &mut Env) -> Result<(), String> {
    let mut child = Command::new(&env.binaries.controller)
        .args([
            "run",
            "--lease-namespace",
            "nowhere",
            "--identity",
            "laptop",
        ])
        .args([
            "--metrics-secure=false",
            "--metrics-address",
            &free_address()?.to_string(),
        ])
        .args(["--health-address", &free_address()?.to_string()])
        // A developer's kubeconfig: may create Secrets anywhere.
        .env("KUBECONFIG", &env.cluster.kubeconfig)
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the controller: {e}"))?;
    let status = wait_for("the controller to exit", SETTLE, || {
        child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_string())
    });
    let _ = child.kill();
    let status = status?;
    let stderr = std::io::read_to_string(child.stderr.take().ok_or("no stderr")?)
        .map_err(|e| e.to_string())?;
    println!("     {}", stderr.trim_end());
    check(status.code() == Some(1), format!("exit status {status}"))?;
    check(
        stderr.lines().count() == 1
            && stderr.starts_with(
                r#"error: the controller's namespace "nowhere" does not exist: create it (kubectl create namespace nowhere)"#,
            ),
        format!("stderr is not the one-line explanation: {stderr:?}"),
    )
}

/// Wait until Memcached `ns/name` is Degraded/InvalidSpec (status.state
/// says so) with a Warning Event saying the same; the message.
fn refused_visibly(env: &Env, ns: &str, name: &str) -> Result<String, String> {
    let mc = wait_for(&format!("{name} Degraded InvalidSpec"), SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["status"] == "True" && c["reason"] == "InvalidSpec" => Ok(mc.clone()),
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    let message = condition(&mc, "Degraded")
        .and_then(|c| c["message"].as_str().map(str::to_string))
        .unwrap_or_default();
    check(
        mc["status"]["state"] == "Degraded: InvalidSpec",
        format!("status.state {}", mc["status"]["state"]),
    )?;
    let events = env.kubectl.get(&["events.events.k8s.io", "-n", ns])?;
    check(
        events["items"].as_array().into_iter().flatten().any(|e| {
            e["reason"] == "InvalidSpec"
                && e["type"] == "Warning"
                && e["regarding"]["name"] == name
                && e["note"] == message.as_str()
        }),
        format!("no InvalidSpec Warning Event saying {message:?}: {events}"),
    )?;
    Ok(message)
}

/// The CRD as an older release installed it (no `status.image`), as after
/// a `helm upgrade`, which never upgrades a chart's `crds/`: the controller
/// still converges and writes every status field the CRD declares. The
/// current CRD is applied again afterwards, whatever happened.
fn older_crd(env: &mut Env) -> Result<(), String> {
    let ns = "older-crd";
    ensure_namespace(env, ns)?;
    let image = "/schema/openAPIV3Schema/properties/status/properties/image";
    let remove: Vec<Value> = (0..2)
        .map(|v| json!({"op": "remove", "path": format!("/spec/versions/{v}{image}")}))
        .collect();
    let crd = "crd/memcacheds.memcached.c5c3.io";
    env.kubectl.ok(&[
        "patch",
        crd,
        "--type=json",
        "-p",
        &Value::Array(remove).to_string(),
    ])?;
    let result = (|| {
        env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
        let mc = wait_ready(env, ns, "cache", 1)?;
        check(
            mc["status"]["image"].is_null() && mc["status"]["selector"].is_string(),
            format!("status {}", mc["status"]),
        )
    })();
    let crd_file = e2e_tests::workspace_root().join("deploy/crd.yaml");
    let restore = env
        .kubectl
        .ok(&["apply", "-f", &crd_file.to_string_lossy()])
        .map(drop);
    result.and(restore).and(delete_namespace(env, ns))
}

/// Every scenario runs the controller under deploy/rbac-writes-guard.yaml,
/// so it never blocks the controller's own writes. Here its token tries
/// what RBAC alone would let it do: change, delete or create a Deployment
/// without the managed-by label. Each is refused with the policy's message;
/// a labelled one is created and deleted.
fn writes_only_its_own(env: &mut Env) -> Result<(), String> {
    let ns = "guard";
    ensure_namespace(env, ns)?;
    let deployment_of = deployment;
    let deployment = |name: &str, labels: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        .to_string()
    };
    env.kubectl
        .apply(&deployment("someone-elses", json!({"team": "web"})))?;
    let controller = Kubectl::new(&env.binaries.kubectl, &env.operator_kubeconfig);
    let refused = |args: &[&str], stdin: Option<&str>| -> Result<(), String> {
        let outcome = controller.run(args, stdin);
        check(
            !outcome.success
                && outcome
                    .stderr
                    .contains("writes only the objects it manages"),
            format!("kubectl {args:?} as the controller: {outcome:?}"),
        )
    };
    // The policy is compiled asynchronously after it is created.
    wait_for("the guard in force", SETTLE, || {
        refused(
            &["annotate", "deployment", "someone-elses", "-n", ns, "x=y"],
            None,
        )
    })?;
    refused(&["delete", "deployment", "someone-elses", "-n", ns], None)?;
    refused(
        &["apply", "-f", "-"],
        Some(&deployment("unlabelled", json!({}))),
    )?;
    let managed = json!({"app.kubernetes.io/managed-by": "memcached-operator"});
    // Labelled alone is not enough to create: a stolen token could make a
    // labelled Deployment anywhere (kube-system).
    refused(
        &["apply", "-f", "-"],
        Some(&deployment("labelled", managed.clone())),
    )?;
    // Created with a Memcached as its controller owner: the controller's own.
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    wait_ready(env, ns, "cache", 1)?;
    let owner = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
    let mut own: Value =
        serde_json::from_str(&deployment("labelled", managed)).map_err(|e| e.to_string())?;
    own["metadata"]["ownerReferences"] = json!([{"apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached", "name": "cache", "uid": owner["metadata"]["uid"], "controller": true}]);
    let own = own.to_string();
    for args in [
        &["apply", "-f", "-"][..],
        &["delete", "deployment", "labelled", "-n", ns][..],
    ] {
        let outcome = controller.run(args, Some(&own));
        check(
            outcome.success,
            format!("kubectl {args:?} as the controller: {outcome:?}"),
        )?;
    }
    // Someone removes the label of a managed Deployment: the controller's
    // next apply puts it back (the object is still the Memcached's), instead
    // of being refused for good.
    env.kubectl.ok(&[
        "label",
        "deployment",
        "cache",
        "-n",
        ns,
        "app.kubernetes.io/managed-by-",
    ])?;
    touch(env, ns, "cache")?;
    wait_for("the label back, no ApplyFailed", SETTLE, || {
        let d = deployment_of(env, ns, "cache")?;
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
        (d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "memcached-operator"
            && degraded["reason"] != "ApplyFailed")
            .then_some(())
            .ok_or_else(|| format!("labels {}, Degraded {degraded}", d["metadata"]["labels"]))
    })?;
    delete_namespace(env, ns)
}

/// Fault: the auth Secret a running Memcached mounts is deleted. The
/// status says so (Degraded/SecretNotFound) and the pods keep running
/// untouched; created again with the same content, the Memcached is Ready
/// again with the same pods (the same data: the same hash).
fn secret_deleted_while_mounted(env: &mut Env) -> Result<(), String> {
    let ns = "secret-gone";
    ensure_namespace(env, ns)?;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "auth", "namespace": ns}, "stringData": {"auth": "app:pw\n"}})
    .to_string();
    env.kubectl.apply(&secret)?;
    let spec = json!({"replicas": 2, "security": {"sasl": {"enabled": true,
        "credentialsSecretRef": {"name": "auth"}}}});
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 2)?;
    let pods = || pod_uids(env, ns, "cache");
    let before = pods()?;
    env.kubectl.ok(&["delete", "secret", "auth", "-n", ns])?;
    wait_for("Degraded SecretNotFound", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["reason"] == "SecretNotFound" => Ok(()),
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        pods()? == before,
        "pods replaced after the Secret was deleted",
    )?;
    env.kubectl.apply(&secret)?;
    wait_ready(env, ns, "cache", 2)?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        pods()? == before,
        "pods replaced after the same Secret came back",
    )?;
    delete_namespace(env, ns)
}

/// A controller upgrade whose rendering differs: the pods run a template an
/// older controller rendered for the same spec (simulated by changing it
/// while the controller is stopped). The restarted controller keeps it, says
/// so in an Event, still scales, and rolls the new rendering out only with
/// the next spec change.
fn new_rendering_waits_for_the_spec(env: &mut Env) -> Result<(), String> {
    let ns = "upgrade";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 2})))?;
    wait_ready(env, ns, "cache", 2)?;
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let patched = apply_older_rendering(env, ns, "cache");
    let rolled = patched.and_then(|_| rolled_out(env, ns, "cache", 2));
    let operator = env.start_operator("operator-upgrade")?;
    env.operator = Some(operator);
    rolled?;
    let running = || -> Result<bool, String> {
        let d = deployment(env, ns, "cache")?;
        Ok(d["spec"]["template"]["metadata"]["labels"]["rendered-by"] == "older")
    };
    let before = pod_uids(env, ns, "cache")?;
    wait_for("the PodTemplateHeld Event", SETTLE, || {
        let events = env.kubectl.get(&[
            "events",
            "-n",
            ns,
            "--field-selector",
            "reason=PodTemplateHeld",
        ])?;
        let items = events["items"].as_array().cloned().unwrap_or_default();
        items
            .first()
            .map(|e| println!("     {}", e["message"]))
            .ok_or("none yet".to_string())
    })?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        running()?,
        "the older template was replaced without a spec change",
    )?;
    check(
        pod_uids(env, ns, "cache")? == before,
        "pods restarted without a spec change",
    )?;

    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 3})))?;
    wait_ready(env, ns, "cache", 3)?;
    let scaled = pod_uids(env, ns, "cache")?;
    check(
        before.iter().all(|uid| scaled.contains(uid)) && running()?,
        "scaling restarted pods",
    )?;

    let changed = json!({"replicas": 3, "memcached": {"verbosity": 1}});
    env.kubectl.apply(&memcached(ns, "cache", changed))?;
    wait_for("the new rendering after the spec change", SETTLE, || {
        (!running()?)
            .then_some(())
            .ok_or("still the older template".to_string())
    })?;
    rolled_out(env, ns, "cache", 3)?;
    let after = pod_uids(env, ns, "cache")?;
    check(
        after.iter().all(|uid| !scaled.contains(uid)),
        "pods of the older template left after the spec change",
    )?;
    delete_namespace(env, ns)
}

/// The whole control plane hangs for 40 s (SIGSTOP: connections accepted,
/// never answered): see [`api_server_away`]. The standby's watches fail
/// nothing (they just stay silent), yet it turns unready.
fn api_server_hung(env: &mut Env) -> Result<(), String> {
    api_server_away(env, Outage::Hung)
}

/// etcd compacted, then the API server stopped as its death would (every
/// connection ends) for 40 s and started again: see [`api_server_away`].
fn api_server_stopped(env: &mut Env) -> Result<(), String> {
    api_server_away(env, Outage::Stopped)
}

/// How the API server goes away in [`api_server_away`].
#[derive(Clone, Copy, PartialEq)]
enum Outage {
    /// The control plane frozen (SIGSTOP).
    Hung,
    /// etcd compacted and the API server stopped, then started again.
    Stopped,
}

/// The API server away for 40 s under a leader and a standby. The leader
/// cannot renew its Lease, so it stops reconciling and exits before the
/// Lease could expire; nothing it manages is touched. The standby's
/// `/readyz` turns false once the API server has not answered for 10 s, and
/// true again when it answers. Then the standby takes the Lease and
/// converges a change made after the outage and a new Memcached; no pod
/// restarted, no Deployment replaced.
fn api_server_away(env: &mut Env, outage: Outage) -> Result<(), String> {
    const OUTAGE: Duration = Duration::from_secs(40);
    let ns = match outage {
        Outage::Hung => "outage",
        Outage::Stopped => "stopped",
    };
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "steady", json!({"replicas": 2})))?;
    wait_ready(env, ns, "steady", 2)?;
    let before = Running::of(env, ns, "steady")?;
    let mut operator = env.operator.take().ok_or("no controller is running")?;
    let log = env.cluster.workdir.join(format!("{}.log", operator.name));
    let standby = env.start_operator(&format!("operator-standby-{ns}"))?;
    standby.wait_ready(SETTLE)?;

    let paused = match outage {
        Outage::Hung => Some(env.cluster.pause()?),
        Outage::Stopped => {
            env.cluster.stop_api_server()?;
            None
        }
    };
    let frozen = Instant::now();
    let (mut exited, mut unready) = (None, None);
    while frozen.elapsed() < OUTAGE {
        if exited.is_none() {
            exited = operator.exited().map(|status| (frozen.elapsed(), status));
        }
        if unready.is_none() && !standby.ready() {
            unready = Some(frozen.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    match paused {
        Some(paused) => drop(paused),
        None => drop(env.cluster.start_api_server()?),
    }
    let (step_down, status) = exited.ok_or("the leader still runs after the outage")?;
    let unready = unready.ok_or("the standby stayed ready through the outage")?;
    println!(
        "     leader exited {:.1}s into the outage ({status}); the standby turned unready after {:.1}s",
        step_down.as_secs_f64(),
        unready.as_secs_f64()
    );
    check(
        !status.success(),
        "the leader exited 0 after losing its Lease",
    )?;
    check(
        unready <= UNANSWERED + Duration::from_secs(2),
        format!("the standby turned unready only {unready:?} into the outage"),
    )?;
    let said = std::fs::read_to_string(&log).map_err(|e| e.to_string())?;
    // It stopped reconciling at the renew deadline, before the Lease could
    // expire; the exit came after a bounded attempt to release it.
    let stopped = format!(
        "lost leadership (no Lease renewal succeeded for {}s): stopped reconciling",
        RENEW_DEADLINE.as_secs()
    );
    check(
        said.contains(&stopped),
        format!("the leader's log does not say {stopped:?}"),
    )?;

    let back = Instant::now();
    standby.wait_ready(SETTLE)?;
    let ready_again = back.elapsed();
    wait_holder(env, &standby)?;
    println!(
        "     the standby was ready {:.1}s and leading {:.1}s after the API server answered again",
        ready_again.as_secs_f64(),
        back.elapsed().as_secs_f64()
    );
    let standby_log = env.cluster.workdir.join(format!("{}.log", standby.name));
    env.operator = Some(standby);
    env.kubectl
        .apply(&memcached(ns, "steady", json!({"replicas": 3})))?;
    env.kubectl.apply(&memcached(ns, "new", json!({})))?;
    wait_for("the new leader's Deployments", SETTLE, || {
        let scaled = deployment(env, ns, "steady")?["spec"]["replicas"] == 3;
        match (scaled, deployment(env, ns, "new")) {
            (true, Ok(_)) => Ok(()),
            (_, outcome) => Err(format!("scaled: {scaled}, new: {:?}", outcome.err())),
        }
    })?;
    let applied = back.elapsed();
    // After a stop, kube-controller-manager's and the fake nodes' watches
    // back off as client-go's do (up to 30 s each): the new pods follow only
    // about 90 s later, which is theirs, not the controller's, to answer for.
    if outage == Outage::Hung {
        wait_ready(env, ns, "steady", 3)?;
        wait_ready(env, ns, "new", 1)?;
    }
    println!(
        "     the new leader applied the change and the new Memcached {:.1}s after the API server answered again \
         (Ready {:.1}s after, when waited for); {} watches of the standby listed again (410 Gone)",
        applied.as_secs_f64(),
        back.elapsed().as_secs_f64(),
        expired_watches(&standby_log)?
    );
    before.kept(env, "the outage")?;
    delete_namespace(env, ns)
}

/// One memcached of two stops answering (SIGSTOP: its port still accepts
/// connections, so its TCP probes pass and Kubernetes keeps it Ready). Its
/// Memcached names it (Degraded and not Ready: PodsNotAnswering) without
/// restarting anything; a change to another Memcached converges meanwhile;
/// once it answers again its Memcached is Ready.
fn hung_memcached(env: &mut Env) -> Result<(), String> {
    let ns = "hung";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "hangs", json!({"replicas": 2})))?;
    env.kubectl.apply(&memcached(ns, "other", json!({})))?;
    wait_ready(env, ns, "hangs", 2)?;
    wait_ready(env, ns, "other", 1)?;
    let before = pod_uids(env, ns, "hangs")?;
    let pods = env
        .kubectl
        .get(&["pods", "-n", ns, "-l", "app.kubernetes.io/instance=hangs"])?;
    let ip = pods["items"][0]["status"]["podIP"]
        .as_str()
        .ok_or("a pod without an IP")?
        .to_string();
    let pid = memcached_listening_on(&ip)?;
    let signal = |signal: &str| {
        Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .map_err(|e| e.to_string())
    };
    signal("-STOP")?;
    let hung = Instant::now();
    // Reconciled now rather than at the 60 s resync of a Ready Memcached.
    touch(env, ns, "hangs")?;
    let named = wait_for("the hung pod named", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "hangs", "-n", ns])?;
        let degraded = condition(&mc, "Degraded").unwrap_or_default();
        let ready = condition(&mc, "Ready").unwrap_or_default();
        let message = degraded["message"].as_str().unwrap_or_default().to_string();
        (degraded["reason"] == "PodsNotAnswering"
            && ready["status"] == "False"
            && message.contains(&ip))
        .then_some(message)
        .ok_or_else(|| format!("Degraded {degraded}"))
    });
    let named_after = hung.elapsed();
    let changed = Instant::now();
    let converged = env
        .kubectl
        .apply(&memcached(ns, "other", json!({"replicas": 2})))
        .and_then(|_| wait_ready(env, ns, "other", 2));
    let other_took = changed.elapsed();
    let restarted = pod_uids(env, ns, "hangs").map(|uids| uids != before);
    signal("-CONT")?;
    let message = named?;
    println!(
        "     named {:.1}s after it hung: {message}",
        named_after.as_secs_f64()
    );
    converged?;
    println!(
        "     another Memcached scaled meanwhile in {:.1}s",
        other_took.as_secs_f64()
    );
    check(!restarted?, "pods replaced while one hung")?;
    touch(env, ns, "hangs")?;
    wait_ready(env, ns, "hangs", 2)?;
    delete_namespace(env, ns)
}

/// The pid of the memcached process the pod runtime started for pod `ip`
/// (it listens with `-l <ip>`).
fn memcached_listening_on(ip: &str) -> Result<u32, String> {
    let processes = std::fs::read_dir("/proc").map_err(|e| e.to_string())?;
    for entry in processes.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let memcached = args.first().is_some_and(|a| a.ends_with(b"memcached"));
        let listens = args
            .windows(2)
            .any(|w| w[0] == b"-l" && w[1] == ip.as_bytes());
        if memcached && listens {
            return Ok(pid);
        }
    }
    Err(format!("no memcached process listens on {ip}"))
}

/// Apply Deployment `name` again under the controller's field manager, as an
/// older controller would have rendered it: one more pod label, and its
/// stamp of that template.
fn apply_older_rendering(env: &Env, ns: &str, name: &str) -> Result<(), String> {
    let live = deployment(env, ns, name)?;
    let meta = &live["metadata"];
    let mut annotations = meta["annotations"].clone();
    annotations["memcached.c5c3.io/template-hash"] = json!("older");
    let mut spec = live["spec"].clone();
    spec["template"]["metadata"]["labels"]["rendered-by"] = json!("older");
    let older = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": meta["labels"],
            "annotations": annotations, "ownerReferences": meta["ownerReferences"]},
        "spec": spec});
    let args = [
        "apply",
        "--server-side",
        "--field-manager=memcached-operator",
        "--force-conflicts",
        "-f",
        "-",
    ];
    let outcome = env.kubectl.run(&args, Some(&older.to_string()));
    check(
        outcome.success,
        format!("older rendering refused: {}", outcome.stderr),
    )
}

/// Wait until Deployment `name` runs `replicas` pods of its current template, all ready.
fn rolled_out(env: &Env, ns: &str, name: &str, replicas: i64) -> Result<(), String> {
    wait_for(&format!("{ns}/{name} rolled out"), SETTLE, || {
        let d = deployment(env, ns, name)?;
        let status = &d["status"];
        let done = status["observedGeneration"] == d["metadata"]["generation"]
            && [
                &status["updatedReplicas"],
                &status["readyReplicas"],
                &status["replicas"],
            ]
            .iter()
            .all(|n| **n == replicas);
        done.then_some(()).ok_or_else(|| status.to_string())
    })
}

/// The real API server's strict field validation and `render` name the same
/// misspelt fields in the same words, and both refuse the object.
fn render_reports_unknown_fields_as_kubectl(env: &mut Env) -> Result<(), String> {
    let ns = "strict";
    ensure_namespace(env, ns)?;
    let manifest = memcached(
        ns,
        "cache",
        json!({"replica": 2, "memcached": {"maxMemoryMb": 64}}),
    );
    let args = ["apply", "--validate=strict", "--dry-run=server", "-f", "-"];
    let kubectl = env.kubectl.run(&args, Some(&manifest));
    println!("     kubectl: {}", kubectl.stderr.trim_end());
    let render = render(env, &manifest)?;
    println!(
        "     render: {}",
        render.stderr.trim_end().replace('\n', "\n     ")
    );
    check(!kubectl.success, "the API server stored unknown fields")?;
    check(!render.success, "render exited 0 on unknown fields")?;
    for field in [
        r#"unknown field "spec.replica""#,
        r#"unknown field "spec.memcached.maxMemoryMb""#,
    ] {
        check(
            kubectl.stderr.contains(field),
            format!("kubectl does not say {field}"),
        )?;
        check(
            render.stderr.contains(field),
            format!("render does not say {field}"),
        )?;
    }
    delete_namespace(env, ns)
}

/// `memcached-controller render -f -` of `manifest`.
fn render(env: &Env, manifest: &str) -> Result<Outcome, String> {
    let mut child = Command::new(&env.binaries.controller)
        .args(["render", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(manifest.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok(Outcome {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The policy's rejection message for `spec` (defaulted as the policy does).
fn policy_message(ns: &str, name: &str, spec: &Value) -> Result<String, String> {
    let spec: MemcachedSpec = serde_json::from_value(spec.clone()).map_err(|e| e.to_string())?;
    let object = ObjectName {
        name,
        generate_name: "",
    };
    let checked = validation::check(object, spec, &Options::default());
    if checked.errors.is_empty() {
        return Err(format!(
            "the policy would admit {:?} in {ns}",
            *checked.spec
        ));
    }
    Ok(invalid_message(
        "Memcached.memcached.c5c3.io",
        name,
        &checked.errors,
    ))
}

// ---------------------------------------------------------------- helpers

/// A controller with the default `--metrics-secure`, authenticated as its
/// ServiceAccount with deploy/rbac-metrics-auth.yaml applied (a standby: the
/// Lease is the first controller's), scraped with `curl` over TLS by
/// ServiceAccount tokens the API server issued: the API server reviews each
/// token and RBAC decides. Prints the scrape latency when the controller
/// asks the API server (a new token) and when its decision is cached.
fn secure_metrics(env: &mut Env) -> Result<(), String> {
    let root = e2e_tests::workspace_root();
    let rbac = root.join("deploy/rbac-metrics-auth.yaml");
    env.kubectl.ok(&["apply", "-f", &rbac.to_string_lossy()])?;
    let ns = "scrapers";
    ensure_namespace(env, ns)?;
    let reader = metrics_reader_token(&env.kubectl, ns, "prometheus")?;
    env.kubectl
        .ok(&["create", "serviceaccount", "stranger", "-n", ns])?;
    let stranger = env.kubectl.ok(&["create", "token", "stranger", "-n", ns])?;
    let (metrics, health) = (free_address()?.to_string(), free_address()?.to_string());
    let log = env.cluster.workdir.join("metrics-secure.log");
    let log = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut controller = Command::new(&env.binaries.controller)
        .args(["run", "--leader-election", "--log-format", "text"])
        .args(["--lease-namespace", OPERATOR_NAMESPACE])
        .args(["--identity", "metrics-secure"])
        .args(["--metrics-address", &metrics, "--health-address", &health])
        .env("KUBECONFIG", &env.operator_kubeconfig)
        .stderr(log.try_clone().map_err(|e| e.to_string())?)
        .stdout(log)
        .spawn()
        .map_err(|e| e.to_string())?;
    let outcome = (|| {
        let url = format!("https://{metrics}/metrics");
        wait_for("the secure /metrics", Duration::from_secs(20), || {
            scrape(&url, None).map(drop)
        })?;
        let (status, body, _) = scrape(&url, Some(&reader))?;
        check(
            status == 200 && body.contains("memcached_operator_reconciles_total"),
            format!("the metrics reader got {status}: {body}"),
        )?;
        check(
            body.contains("process_resident_memory_bytes"),
            "no process metrics",
        )?;
        let (status, _, _) = scrape(&url, Some(stranger.trim()))?;
        check(
            status == 403,
            format!("a ServiceAccount without the role got {status}"),
        )?;
        let (status, _, _) = scrape(&url, None)?;
        check(status == 401, format!("no token got {status}"))?;
        let (status, _, _) = scrape(&url, Some("not-a-token"))?;
        check(status == 401, format!("an invalid token got {status}"))?;

        const SCRAPES: usize = 10;
        let mut uncached = Duration::ZERO;
        for _ in 0..SCRAPES {
            let fresh = metrics_reader_token(&env.kubectl, ns, "prometheus")?;
            uncached += scrape(&url, Some(&fresh))?.2;
        }
        let mut cached = Duration::ZERO;
        for _ in 0..SCRAPES {
            cached += scrape(&url, Some(&reader))?.2;
        }
        println!(
            "   secure /metrics, mean of {SCRAPES} scrapes (curl, new TLS connection each): \
             uncached (TokenReview + SubjectAccessReview) {:?}, cached {:?}",
            uncached / SCRAPES as u32,
            cached / SCRAPES as u32
        );
        Ok(())
    })();
    let _ = controller.kill();
    let _ = controller.wait();
    outcome
}

/// etcd compacted at its current revision and the API server restarted (as
/// an upgrade of the control plane does) under a running leader: every watch
/// ends, resumes from a revision the new API server no longer serves, is
/// answered 410 Gone and lists again (the leader's log says so). A scale, a
/// deletion and a new Memcached made right after converge; the deleted one's
/// objects are collected and not recreated; no pod restarted, no owned object
/// replaced, the leader kept its Lease.
fn compacted_and_restarted(env: &mut Env) -> Result<(), String> {
    let ns = "relist";
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(ns, "kept", json!({})))?;
    env.kubectl.apply(&memcached(ns, "gone", json!({})))?;
    wait_ready(env, ns, "kept", 1)?;
    wait_ready(env, ns, "gone", 1)?;
    let before = Running::of(env, ns, "kept")?;
    let leader = env.operator()?.name.clone();
    let log = env.cluster.workdir.join(format!("{leader}.log"));
    let expired_before = expired_watches(&log)?;
    let unserved_before = unserved_lists(&log)?;
    let began = Instant::now();

    let stopped = Instant::now();
    env.cluster.stop_api_server()?;
    env.cluster.start_api_server()?;
    let away = stopped.elapsed();
    let back = Instant::now();
    env.kubectl
        .apply(&memcached(ns, "kept", json!({"replicas": 2})))?;
    env.kubectl.ok(&["delete", "memcached", "gone", "-n", ns])?;
    env.kubectl.apply(&memcached(ns, "new", json!({})))?;
    wait_ready(env, ns, "kept", 2)?;
    wait_ready(env, ns, "new", 1)?;
    let converged = back.elapsed();
    // kube-controller-manager's garbage collector, not the controller, deletes it.
    wait_for(
        "the deleted Memcached's Deployment collected",
        SETTLE,
        || match env.kubectl.get(&[
            "deployments",
            "-n",
            ns,
            "-l",
            "app.kubernetes.io/instance=gone",
        ]) {
            Ok(list) if list["items"].as_array().is_some_and(Vec::is_empty) => Ok(()),
            Ok(_) => Err("still there".to_string()),
            Err(e) => Err(e),
        },
    )?;
    let collected = back.elapsed();
    let expired = expired_watches(&log)? - expired_before;
    let unserved = unserved_lists(&log)? - unserved_before;
    println!(
        "     API server away {:.1}s; {expired} watches of the leader answered 410 Gone listed again; \
         {unserved} ServiceMonitor lists failed meanwhile; converged {:.1}s after it answered, the deleted one's Deployment collected after {:.1}s",
        away.as_secs_f64(),
        converged.as_secs_f64(),
        collected.as_secs_f64()
    );
    check(expired > 0, "no watch of the leader was answered 410 Gone")?;
    check(
        unserved_lists(&log)? > 0,
        "the log (debug level) names no failed ServiceMonitor list since the start",
    )?;
    // ServiceMonitors are not served here (no Prometheus Operator): their
    // list fails each time, and is retried backing off to 30 s, not every 0.8 s.
    let most = began.elapsed().as_secs() as usize / 4 + 3;
    check(
        unserved <= most,
        format!(
            "{unserved} failed ServiceMonitor lists in {:.0}s",
            began.elapsed().as_secs_f64()
        ),
    )?;
    check(
        lease_holder(env)? == leader && env.operator.as_mut().is_some_and(|o| o.exited().is_none()),
        "the leader lost its Lease or exited",
    )?;
    before.kept(env, "the relist")?;
    delete_namespace(env, ns)
}

/// A Memcached's pods and Deployment, to show a fault replaced none of them.
struct Running {
    namespace: String,
    name: String,
    pods: Vec<String>,
    deployment: Value,
}

impl Running {
    fn of(env: &Env, namespace: &str, name: &str) -> Result<Self, String> {
        Ok(Running {
            namespace: namespace.to_string(),
            name: name.to_string(),
            pods: pod_uids(env, namespace, name)?,
            deployment: deployment(env, namespace, name)?["metadata"]["uid"].clone(),
        })
    }

    /// Every pod still runs and the Deployment is the same object after `fault`.
    fn kept(&self, env: &Env, fault: &str) -> Result<(), String> {
        let (ns, name) = (self.namespace.as_str(), self.name.as_str());
        let after = pod_uids(env, ns, name)?;
        check(
            self.pods.iter().all(|uid| after.contains(uid)),
            format!("pods restarted by {fault}"),
        )?;
        check(
            deployment(env, ns, name)?["metadata"]["uid"] == self.deployment,
            format!("the Deployment was replaced by {fault}"),
        )
    }
}

/// How many times the controller's log says a list failed with 404 (an API
/// not served; logged at debug level).
fn unserved_lists(log: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(text.matches(NOT_SERVED).count())
}

/// How many times the controller's log says a watch expired and listed again.
fn expired_watches(log: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(text.matches(WATCH_EXPIRED).count())
}

/// 1,000 Memcacheds across 50 namespaces, applied at once (zero replicas:
/// the controller's cost, not a thousand memcacheds'). Every one converges
/// (its status observes its generation, its Deployment exists); then, over a
/// window of periodic reconciles, the controller writes almost nothing and
/// its memory stays bounded.
fn many_across_namespaces(env: &mut Env) -> Result<(), String> {
    const NAMESPACES: usize = 50;
    const EACH: usize = 20;
    const TOTAL: usize = NAMESPACES * EACH;
    const WINDOW: Duration = Duration::from_secs(20);
    const MAX_RSS_MIB: u64 = 256;
    let namespaces: Vec<String> = (0..NAMESPACES).map(|i| format!("many-{i}")).collect();
    let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "List", "items": items});
    env.kubectl.apply(
        &list(
            (namespaces.iter())
                .map(
                    |ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
                .collect(),
        )
        .to_string(),
    )?;
    let items = (namespaces.iter())
        .flat_map(|ns| {
            (0..EACH).map(move |i| memcached(ns, &format!("c{i}"), json!({"replicas": 0})))
        })
        .map(|m| serde_json::from_str(&m).unwrap_or_default())
        .collect();
    let started = Instant::now();
    let args = ["apply", "--server-side", "-f", "-"];
    let outcome = env.kubectl.run(&args, Some(&list(items).to_string()));
    if !outcome.success {
        return Err(format!("kubectl apply: {}", outcome.stderr));
    }
    let applied = started.elapsed();
    wait_for(
        &format!("{TOTAL} Memcacheds converged"),
        Duration::from_secs(300),
        || match converged(env, "many-")? {
            (done, deployments) if done == TOTAL && deployments == TOTAL => Ok(()),
            (done, deployments) => Err(format!("{done} converged, {deployments} Deployments")),
        },
    )?;
    let converged_after = started.elapsed();

    let operator = env.operator()?;
    let (writes, reconciles) = (controller_writes(env)?, operator.reconciles()?);
    std::thread::sleep(WINDOW);
    let written = controller_writes(env)? - writes;
    let reconciled = operator.reconciles()? - reconciles;
    let rss_mib = operator.rss_kib().unwrap_or_default() / 1024;
    println!(
        "     applied in {:.1}s, all converged {:.1}s after the apply began; then {reconciled} reconciles \
         in {}s wrote {written:.0} times; controller RSS {rss_mib} MiB",
        applied.as_secs_f64(),
        converged_after.as_secs_f64(),
        WINDOW.as_secs()
    );
    for ns in &namespaces {
        env.kubectl
            .ok(&["delete", "namespace", ns, "--wait=false"])?;
    }
    check(
        written <= (reconciled as f64 / 20.0).max(5.0),
        format!("{written} writes for {reconciled} converged reconciles"),
    )?;
    check(
        rss_mib > 0 && rss_mib <= MAX_RSS_MIB,
        format!("the controller holds {rss_mib} MiB"),
    )
}

/// Across the namespaces named `prefix*`: the Memcacheds whose status
/// observes their generation, and the Deployments.
fn converged(env: &Env, prefix: &str) -> Result<(usize, usize), String> {
    let count = |kind: &str, f: &dyn Fn(&Value) -> bool| -> Result<usize, String> {
        let list = env.kubectl.get(&[kind, "-A"])?;
        Ok((list["items"].as_array().into_iter().flatten())
            .filter(|o| {
                o["metadata"]["namespace"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .filter(|o| f(o))
            .count())
    };
    let observed = |m: &Value| m["status"]["observedGeneration"] == m["metadata"]["generation"];
    Ok((
        count("memcacheds", &observed)?,
        count("deployments", &|_| true)?,
    ))
}

/// Writes (any verb but GET, LIST and WATCH) the API server counted on the
/// kinds the controller writes; Deployment status and Events are left out:
/// kube-controller-manager writes them too.
fn controller_writes(env: &Env) -> Result<f64, String> {
    const RESOURCES: &[&str] = &[
        "memcacheds",
        "deployments",
        "services",
        "configmaps",
        "secrets",
        "poddisruptionbudgets",
        "networkpolicies",
    ];
    Ok(request_counts(&env.kubectl)?
        .iter()
        .filter(|c| c.is_write() && RESOURCES.contains(&c.resource.as_str()))
        .filter(|c| !(c.resource == "deployments" && c.subresource == "status"))
        .map(|c| c.count)
        .sum())
}

/// Hard anti-affinity with as many replicas as nodes: a Deployment rollout
/// adds a pod before removing one, and that pod finds no node. The Memcached
/// says so (Degraded/RolloutUnschedulable, naming the pod, the scheduler's
/// reason and the way out) instead of waiting silently; one replica fewer
/// than nodes then lets the rollout finish (the running pods' required
/// anti-affinity repels any new pod, so the soft preset alone would not).
fn surge_pod_unschedulable(env: &mut Env) -> Result<(), String> {
    let ns = "unschedulable";
    ensure_namespace(env, ns)?;
    let nodes = env.kubectl.get(&["nodes", "-l", "type=kwok"])?;
    let nodes = nodes["items"].as_array().map_or(0, Vec::len);
    check(nodes > 1, format!("{nodes} kwok nodes"))?;
    let hard = json!({"replicas": nodes, "highAvailability": {"antiAffinityPreset": "hard"}});
    env.kubectl.apply(&memcached(ns, "cache", hard.clone()))?;
    wait_ready(env, ns, "cache", nodes as i64)?;
    let mut changed = hard;
    changed["memcached"] = json!({"verbosity": 1});
    env.kubectl
        .apply(&memcached(ns, "cache", changed.clone()))?;
    let message = wait_for("Degraded RolloutUnschedulable", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["reason"] == "RolloutUnschedulable" => {
                Ok(c["message"].as_str().unwrap_or_default().to_string())
            }
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    println!("     {message}");
    check(
        message.contains("no node can take") && message.contains("hard anti-affinity"),
        format!("the message names neither the scheduler's verdict nor the preset: {message}"),
    )?;
    changed["replicas"] = json!(nodes - 1);
    env.kubectl.apply(&memcached(ns, "cache", changed))?;
    wait_for("the rollout finished, not Degraded", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
        (degraded["status"] == "False" && mc["status"]["rollout"].is_null())
            .then_some(())
            .ok_or_else(|| format!("Degraded {degraded}, rollout {}", mc["status"]["rollout"]))
    })?;
    delete_namespace(env, ns)
}

/// A rotated password rolls a StatefulSet's pods one at a time, paced by
/// the cache: the pods not yet replaced keep the auth file they started with
/// (memcached never re-reads it) and refuse the new password, so the
/// controller reads them with the password that read them before; the new
/// pod, empty, holds the next until clients refill it. Taking unread pods
/// for empty ones would let every pod go cold back to back.
fn rotation_stays_paced(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 400;
    const HELD: Duration = Duration::from_secs(10);
    let ns = "rotation";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:first-password\n"))?;
    let spec = json!({"replicas": 3, "workload": "StatefulSet", "security": {"sasl":
        {"enabled": true, "credentialsSecretRef": {"name": "cache-auth"}}}});
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 3)?;
    let pods = |env: &Env| -> Result<BTreeMap<String, (String, String)>, String> {
        let listed =
            env.kubectl
                .get(&["pods", "-n", ns, "-l", "app.kubernetes.io/instance=cache"])?;
        Ok(listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                let name = p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let uid = p["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let ip = p["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (name, (uid, ip))
            })
            .collect())
    };
    let before = pods(env)?;
    for (_, ip) in before.values() {
        Memcache::login(ip, "operator", "first-password")?.fill(KEYS)?;
    }
    // The controller reads every pod with the first password (a collection
    // of the 3 ready pods, started by the touch, ends within seconds).
    touch(env, ns, "cache")?;
    std::thread::sleep(Duration::from_secs(5));
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:second-password\n"))?;
    let replaced = |env: &Env, name: &str| -> Result<Option<String>, String> {
        let now = pods(env)?;
        Ok(now
            .get(name)
            .filter(|(uid, ip)| Some(uid) != before.get(name).map(|b| &b.0) && !ip.is_empty())
            .map(|(_, ip)| ip.clone()))
    };
    let ip = wait_for("cache-2 replaced", SETTLE, || {
        replaced(env, "cache-2")?.ok_or_else(|| "not yet".to_string())
    })?;
    wait_ready(env, ns, "cache", 3)?;
    std::thread::sleep(HELD);
    for name in ["cache-0", "cache-1"] {
        check(
            replaced(env, name)?.is_none(),
            format!("{name} was replaced while cache-2 was empty"),
        )?;
    }
    let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
    let progressing = condition(&mc, "Progressing").cloned().unwrap_or_default();
    let message = progressing["message"].as_str().unwrap_or_default();
    println!("     {message}");
    check(
        mc["status"]["rollout"]
            == format!("1/3 updated, cache-2 warming, 0 of {} items", KEYS / 2).as_str(),
        format!("Rollout column {}", mc["status"]["rollout"]),
    )?;
    check(
        message.contains(&format!("half the median pod's {KEYS} wanted")),
        format!("the pods not yet replaced were not read with their own password: {message}"),
    )?;
    Memcache::login(&ip, "operator", "second-password")?.fill(KEYS)?;
    wait_for("cache-1 replaced once cache-2 is warm", SETTLE, || {
        replaced(env, "cache-1")?
            .map(drop)
            .ok_or_else(|| "not yet".to_string())
    })?;
    delete_namespace(env, ns)
}
