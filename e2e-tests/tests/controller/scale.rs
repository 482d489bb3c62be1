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
    // A bound, not a goal: 280 s were seen on a 2-core machine running another suite and a build.
    wait_for(
        &format!("{TOTAL} Memcacheds converged"),
        Duration::from_secs(600),
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

/// Writes (any verb but GET, LIST and WATCH) the API server counted on the
/// kinds the controller writes; Deployment status and Events are left out:
/// kube-controller-manager writes them too.
pub(crate) fn controller_writes(env: &Env) -> Result<f64, String> {
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
