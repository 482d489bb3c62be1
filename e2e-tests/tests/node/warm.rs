//! Warm restarts: changes applied to the running pods in place, every key kept.

use super::*;

/// Warm restarts (spec.warmRestart): a change of spec.image alone is applied
/// by the controller to each running pod in place (controller/src/in_place.rs),
/// one pod at a time: the same pods, each container restarted once, every
/// key kept, and the Deployment ends with the new template on its one
/// ReplicaSet (no pod replaced, not paused).
pub(crate) fn warm_image_change(env: &mut Env) -> Result<(), String> {
    image_changed_in_place(env, "warm", "Deployment")
}

/// As [`warm_image_change`] in StatefulSet mode
/// (controller/src/stateful_in_place.rs): the pods keep their names and
/// caches, and the StatefulSet ends with the new revision current and no
/// partition (no pod replaced).
pub(crate) fn warm_image_change_stateful(env: &mut Env) -> Result<(), String> {
    image_changed_in_place(env, "warm-sts", "StatefulSet")
}

/// A Memcached `name` of 2 warm-restart replicas run by `workload`, 2,000
/// keys in each pod, `spec.image` changed to the same image by digest.
pub(crate) fn image_changed_in_place(
    env: &mut Env,
    name: &str,
    workload: &str,
) -> Result<(), String> {
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
pub(crate) fn workload_settled(env: &Env, kind: &str, name: &str) -> Result<bool, String> {
    let w = env.kubectl.get(&[kind, name, "-n", NAMESPACE])?;
    let partition = w["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
        .as_i64()
        .unwrap_or(0);
    Ok(w["spec"]["paused"] != true
        && partition == 0
        && w["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null()
        && w["status"]["observedGeneration"] == w["metadata"]["generation"])
}
