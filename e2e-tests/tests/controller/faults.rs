//! Faults around a running controller: the API server hung or stopped, etcd
//! compacted, a hung memcached.

use super::*;

/// The whole control plane hangs for 40 s (SIGSTOP: connections accepted,
/// never answered): see [`api_server_away`]. The standby's watches fail
/// nothing (they just stay silent), yet it turns unready.
pub(crate) fn api_server_hung(env: &mut Env) -> Result<(), String> {
    api_server_away(env, Outage::Hung)
}

/// etcd compacted, then the API server stopped as its death would (every
/// connection ends) for 40 s and started again: see [`api_server_away`].
pub(crate) fn api_server_stopped(env: &mut Env) -> Result<(), String> {
    api_server_away(env, Outage::Stopped)
}

/// How the API server goes away in [`api_server_away`].
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Outage {
    /// The control plane frozen (SIGSTOP).
    Hung,
    /// etcd compacted and the API server stopped, then started again.
    Stopped,
}

/// The API server away for 40 s under a leader and a standby. The leader
/// cannot renew its Lease, so it stops reconciling and exits before the
/// Lease could expire; nothing it manages is touched. The standby's
/// `/readyz` turns false once the API server has not answered for 10 s (a
/// heartbeat later at most on a busy machine), and
/// true again when it answers. Then the standby takes the Lease and
/// converges a change made after the outage and a new Memcached; no pod
/// restarted, no Deployment replaced.
pub(crate) fn api_server_away(env: &mut Env, outage: Outage) -> Result<(), String> {
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
    // The standby is the suite's controller from here: a check that fails
    // leaves the next scenarios one.
    let standby_log = env.cluster.workdir.join(format!("{}.log", standby.name));
    env.operator = Some(standby);
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
    // Its heartbeat asks every 5 s and waits no longer than the deadline: a
    // busy machine delays the answer's timeout by up to one heartbeat.
    check(
        unready <= UNANSWERED + HEARTBEAT,
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
    env.operator()?.wait_ready(SETTLE)?;
    let ready_again = back.elapsed();
    wait_holder(env, env.operator()?)?;
    println!(
        "     the standby was ready {:.1}s and leading {:.1}s after the API server answered again",
        ready_again.as_secs_f64(),
        back.elapsed().as_secs_f64()
    );
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
pub(crate) fn hung_memcached(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn memcached_listening_on(ip: &str) -> Result<u32, String> {
    // Another suite's pods may have the same addresses in their own network
    // namespace (make test runs suites side by side): ours share this one.
    let network = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let ours = network("self");
    let processes = std::fs::read_dir("/proc").map_err(|e| e.to_string())?;
    for entry in processes.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if network(&pid.to_string()) != ours {
            continue;
        }
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

/// etcd compacted at its current revision and the API server restarted (as
/// an upgrade of the control plane does) under a running leader: every watch
/// ends, resumes from a revision the new API server no longer serves, is
/// answered 410 Gone and lists again (the leader's log says so). A scale, a
/// deletion and a new Memcached made right after converge; the deleted one's
/// objects are collected and not recreated; no pod restarted, no owned object
/// replaced, the leader kept its Lease.
pub(crate) fn compacted_and_restarted(env: &mut Env) -> Result<(), String> {
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
pub(crate) struct Running {
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
pub(crate) fn unserved_lists(log: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(text.matches(NOT_SERVED).count())
}

/// How many times the controller's log says a watch expired and listed again.
pub(crate) fn expired_watches(log: &std::path::Path) -> Result<usize, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok(text.matches(WATCH_EXPIRED).count())
}
