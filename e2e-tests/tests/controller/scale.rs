//! Scale: 1,000 Memcacheds across 50 namespaces at once.

use super::*;

/// 1,000 Memcacheds across 50 namespaces, applied at once (zero replicas:
/// the controller's cost, not a thousand memcacheds'). Every one converges
/// (its status observes its generation, its Deployment exists); then, over a
/// window of periodic reconciles, the controller writes almost nothing and
/// its memory stays bounded.
pub(crate) fn many_across_namespaces(env: &mut Env) -> Result<(), String> {
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
    // Progress is bounded, not time: on a 2-core machine this took 46 s
    // alone and 601 s beside `make test`'s other lanes.
    wait_for_progress(
        &format!("{TOTAL} Memcacheds converged"),
        2 * TOTAL,
        Duration::from_secs(180),
        || {
            let (done, deployments) = converged(env, "many-")?;
            Ok((
                done + deployments,
                format!("{done} converged, {deployments} Deployments"),
            ))
        },
    )?;
    let converged_after = started.elapsed();

    let operator = env.operator()?;
    // Writes in the window that change a status are news (kube-controller-manager,
    // at its 20 requests a second, reports the last Deployments available
    // minutes after they were created); the others are a storm.
    let (writes, reconciles) = (controller_writes(env)?, operator.reconciles()?);
    let before = statuses(env, "many-")?;
    std::thread::sleep(WINDOW);
    let written = grown(&writes, controller_writes(env)?);
    let reconciled = operator.reconciles()? - reconciles;
    let after = statuses(env, "many-")?;
    let news = (after.iter())
        .filter(|(key, status)| before.get(*key) != Some(status))
        .count();
    let rss_mib = operator.rss_kib().unwrap_or_default() / 1024;
    println!(
        "     applied in {:.1}s, all converged {:.1}s after the apply began; then {reconciled} reconciles \
         in {}s wrote {:.0} times {written:?}, {news} statuses changed; controller RSS {rss_mib} MiB",
        applied.as_secs_f64(),
        converged_after.as_secs_f64(),
        WINDOW.as_secs(),
        written.values().sum::<f64>(),
    );
    for ns in &namespaces {
        env.kubectl
            .ok(&["delete", "namespace", ns, "--wait=false"])?;
    }
    let written: f64 = written.values().sum();
    check(
        written <= news as f64 + (reconciled as f64 / 20.0).max(5.0),
        format!("{written} writes for {reconciled} reconciles and {news} changed statuses"),
    )?;
    check(
        rss_mib > 0 && rss_mib <= MAX_RSS_MIB,
        format!("the controller holds {rss_mib} MiB"),
    )
}

/// Across the namespaces named `prefix*`: the Memcacheds whose status
/// observes their generation, and the Deployments.
pub(crate) fn converged(env: &Env, prefix: &str) -> Result<(usize, usize), String> {
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

/// The status of each Memcached across the namespaces named `prefix*`.
fn statuses(env: &Env, prefix: &str) -> Result<BTreeMap<String, Value>, String> {
    let list = env.kubectl.get(&["memcacheds", "-A"])?;
    Ok((list["items"].as_array().into_iter().flatten())
        .filter_map(|m| {
            let ns = m["metadata"]["namespace"].as_str()?;
            let name = m["metadata"]["name"].as_str()?;
            ns.starts_with(prefix)
                .then(|| (format!("{ns}/{name}"), m["status"].clone()))
        })
        .collect())
}

/// Writes (any verb but GET, LIST and WATCH) the API server counted on the
/// kinds the controller writes, by verb and resource; Deployment status and
/// Events are left out: kube-controller-manager writes them too.
pub(crate) fn controller_writes(env: &Env) -> Result<BTreeMap<String, f64>, String> {
    const RESOURCES: &[&str] = &[
        "memcacheds",
        "deployments",
        "services",
        "configmaps",
        "secrets",
        "poddisruptionbudgets",
        "networkpolicies",
    ];
    let mut writes = BTreeMap::new();
    for c in request_counts(&env.kubectl)? {
        if c.is_write()
            && RESOURCES.contains(&c.resource.as_str())
            && !(c.resource == "deployments" && c.subresource == "status")
        {
            let key = format!("{} {}/{}", c.verb, c.resource, c.subresource);
            *writes
                .entry(key.trim_end_matches('/').to_string())
                .or_default() += c.count;
        }
    }
    Ok(writes)
}

/// What `after` counts beyond `before`, the nonzero differences.
fn grown(before: &BTreeMap<String, f64>, after: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    (after.into_iter())
        .map(|(k, n)| (n - before.get(&k).copied().unwrap_or_default(), k))
        .filter(|(n, _)| *n > 0.0)
        .map(|(n, k)| (k, n))
        .collect()
}
