//! StatefulSet mode: pods under stable names, the server list and its ConfigMap, scale-down from
//! the highest ordinal, and switches between Deployment and StatefulSet without an outage.

use super::*;

/// StatefulSet mode: pods `<name>-<i>` behind per-pod DNS names, listed in
/// `status.serverList` and the ConfigMap clients read; scale-down from the
/// highest ordinal, the PodDisruptionBudget following the StatefulSet's
/// scale; a deleted pod back under its name with the list
/// untouched; switches to Deployment mode and back that never leave the
/// Service without a ready endpoint. Leaves the Memcached running in
/// StatefulSet mode with its ConfigMap, for the next scenario to watch.
pub(crate) fn statefulset_mode(env: &mut Env) -> Result<(), String> {
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
