//! The memcached releases users run: an image upgrade from an older 1.6
//! (the node's `memcached:<version>`, the host's 1.6.18) to today's
//! `memcached:1.6` (Debian sid's), warm restarts on.

use super::*;

/// A Memcached of 2 warm-restart replicas on the older release, 2,000 keys
/// in each pod, `spec.image` changed to `memcached:1.6`: each pod restarts
/// memcached in place on today's release (the `version` it reports), which
/// restores the memory file the older one saved, every key kept.
pub(crate) fn image_upgraded_to_todays_memcached(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 2_000;
    const NAME: &str = "upgrade";
    let previous = node::previous_memcached_image(&env.binaries)?;
    let older = node::memcached_release(&env.binaries, "memcached-previous")?;
    let newest = node::memcached_release(&env.binaries, "memcached")?;
    check(
        older != newest,
        format!("two releases on the node: {older} and {newest}"),
    )?;
    // The chart's scenarios before this one stop the suite's controller.
    if env.operator.is_none() {
        env.replace_operator("versions")?;
    }
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(2);
    spec["warmRestart"] = json!({"enabled": true});
    spec["image"] = json!(previous);
    env.kubectl
        .apply(&memcached(NAMESPACE, NAME, spec.clone()))?;
    wait_ready(env, NAMESPACE, NAME, 2)?;
    let before = pods_of(env, NAME)?;
    for pod in &before {
        let ip = pod_ip(pod)?;
        let version = stats(&ip)?.get("version").cloned().unwrap_or_default();
        check(
            version == older,
            format!("{} runs memcached {version}, not {older}", pod_name(pod)),
        )?;
        fill(&ip, KEYS)?;
    }
    let image = "memcached:1.6";
    spec["image"] = json!(image);
    let changed = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, NAME, spec))?;
    let after = wait_for(
        "every pod restarted in place on memcached:1.6 and Ready",
        SETTLE,
        || {
            let pods = pods_of(env, NAME)?;
            pods.iter()
                .all(|p| {
                    let status = &p["status"]["containerStatuses"][0];
                    p["spec"]["containers"][0]["image"] == image
                        && status["restartCount"] == 1
                        && status["ready"] == true
                })
                .then_some(pods.clone())
                .ok_or_else(|| format!("pods {:?}", summary(&pods)))
        },
    )?;
    let took = changed.elapsed();
    same_pods(&before, &after)?;
    let mut kept = Vec::new();
    let mut versions = Vec::new();
    for pod in &after {
        let stats = stats(&pod_ip(pod)?)?;
        kept.push(stats.get("curr_items").cloned().unwrap_or_default());
        versions.push(stats.get("version").cloned().unwrap_or_default());
    }
    let mc = wait_for("the Memcached Ready, its rollout complete", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", NAME, "-n", NAMESPACE])?;
        (condition_status(&mc, "Ready") == Some("True")
            && condition_status(&mc, "Progressing") == Some("False")
            && workload_settled(env, "deployment", NAME)?)
        .then_some(mc.clone())
        .ok_or_else(|| format!("status {}", mc["status"]))
    })?;
    println!(
        "     memcached {older} -> {newest} in place: keys kept per pod {kept:?} of {KEYS}, \
         versions now {versions:?}, both pods Ready again {:.1}s after the apply",
        took.as_secs_f64()
    );
    check(
        versions.iter().all(|v| *v == newest),
        format!("the pods run memcached {versions:?}, not {newest}"),
    )?;
    check(
        kept.iter().all(|k| *k == KEYS.to_string()),
        format!("keys kept {kept:?} of {KEYS} per pod"),
    )?;
    check(
        mc["status"]["image"] == image,
        format!("status.image {}", mc["status"]["image"]),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", NAME, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}
