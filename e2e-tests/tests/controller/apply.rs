//! Server-side apply against the real API server: fields removed from the
//! spec disappear, quantities the server rewrites cause no writes, a foreign
//! Deployment is reported, the StatefulSet name bound.

use super::*;

pub(crate) fn removed_fields(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn present_fields(d: &Value) -> Vec<&'static str> {
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

pub(crate) fn normalised_quantities(env: &mut Env) -> Result<(), String> {
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
pub(crate) fn updated_events(env: &Env, namespace: &str) -> Result<usize, String> {
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

pub(crate) fn foreign_deployment(env: &mut Env) -> Result<(), String> {
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

/// The policy limits StatefulSet-mode names to 52 characters. Shown on the
/// real API server and StatefulSet controller: at 52 the pods run; a
/// StatefulSet of 53 is accepted but each pod is refused (its
/// controller-revision-hash label would exceed 63), and the policy refuses
/// such a Memcached up front.
pub(crate) fn stateful_set_name_bound(env: &mut Env) -> Result<(), String> {
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
