//! The controller itself: a restart that writes nothing, leader election between two processes,
//! and `deploy/controller.yaml`'s two replicas run as real pods through a rollout restart.

use super::*;

pub(crate) fn restart_no_writes(env: &mut Env) -> Result<(), String> {
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

pub(crate) fn leader_election(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn controller_rollout(env: &mut Env) -> Result<(), String> {
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
