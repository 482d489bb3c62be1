//! Leader election: standbys ready, the Lease handed over after SIGTERM and
//! SIGKILL, the leader killed mid-apply, the Lease taken mid-reconcile,
//! clocks that differ by 12 s.

use super::*;

pub(crate) fn readiness_and_handover(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn leader_killed_mid_apply(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn memcacheds(ns: &str, count: usize) -> String {
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
pub(crate) fn lease_taken_mid_reconcile(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn hand_over(
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
pub(crate) fn wait_holder(env: &Env, operator: &Operator) -> Result<(), String> {
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
pub(crate) fn skewed_clocks(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn renewed_ahead(env: &Env) -> Result<f64, String> {
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
pub(crate) fn standby_while_renewed(
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
pub(crate) fn micro_time(seconds: f64) -> Result<String, String> {
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
