//! A Memcached's life: Ready with live stats from real traffic, scaled, its configuration rolled
//! out, its features switched on and off, and every child collected when it is deleted.

use super::*;

pub(crate) fn minimal_ready(env: &mut Env) -> Result<(), String> {
    let ns = "minimal";
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    let mc = wait_ready(env, ns, "cache", 1)?;
    let status = &mc["status"];
    check(
        condition_status(&mc, "Available") == Some("True"),
        "Available is not True",
    )?;
    check(
        status["observedGeneration"] == mc["metadata"]["generation"],
        "observedGeneration lags",
    )?;
    check(
        status["serverList"] == json!(["cache.minimal:11211"]),
        format!("serverList {}", status["serverList"]),
    )?;
    for kind in ["deployment", "service"] {
        let object = env.kubectl.get(&[kind, "cache", "-n", ns])?;
        check(
            owned_by(&object, &mc),
            format!("{kind} owners {}", object["metadata"]["ownerReferences"]),
        )?;
    }
    let service = env.kubectl.get(&["service", "cache", "-n", ns])?;
    check(
        service["spec"]["clusterIP"] == "None",
        "Service is not headless",
    )?;

    // The pod runs a real memcached: put traffic on it, then see it in status.
    let ip = pod_ips(env, ns, "cache")?.pop().ok_or("no pod IP")?;
    let mut session = Memcache::connect(&ip)?;
    session.command("set greeting 0 0 5\r\nhello\r\n", "STORED")?;
    session.command("get greeting\r\n", "END")?;
    session.command("get missing\r\n", "END")?;
    // The session stays open: the one client connection the status counts.
    touch(env, ns, "cache")?;
    wait_for("live stats in status", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        let status = &mc["status"];
        let live = status["memcachedVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("1."))
            && status["currentConnections"]
                .as_i64()
                .is_some_and(|c| c >= 1)
            && status["hitRatio"] == "0.50";
        if live {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })?;
    // The client gone, the status counts none (so later scenarios see a
    // settled status).
    drop(session);
    touch(env, ns, "cache")?;
    wait_for("no client connection in status", SETTLE, || {
        let status = get(env, ns, "cache")?["status"].clone();
        (status["currentConnections"] == 0)
            .then_some(())
            .ok_or_else(|| status.to_string())
    })?;
    let printed = env.kubectl.ok(&["get", "memcached", "cache", "-n", ns])?;
    check(
        printed.contains("cache") && printed.lines().count() == 2,
        format!("kubectl get memcached printed {printed}"),
    )
}

pub(crate) fn scale_and_toggle(env: &mut Env) -> Result<(), String> {
    let ns = "scale";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 1})))?;
    wait_ready(env, ns, "cache", 1)?;

    // 1 -> 3 by editing the spec, 3 -> 1 through the scale subresource.
    patch(env, ns, "cache", json!({"spec": {"replicas": 3}}))?;
    wait_ready(env, ns, "cache", 3)?;
    check(pod_ips(env, ns, "cache")?.len() == 3, "not 3 pods")?;
    env.kubectl
        .ok(&["scale", "memcached", "cache", "-n", ns, "--replicas=1"])?;
    wait_ready(env, ns, "cache", 1)?;
    wait_for("one pod left", SETTLE, || {
        let ips = pod_ips(env, ns, "cache")?;
        if ips.len() == 1 {
            Ok(())
        } else {
            Err(format!("{} pods", ips.len()))
        }
    })?;

    // A config change rolls pods that run memcached with the new args.
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"memcached": {"maxMemoryMB": 96}}}),
    )?;
    wait_for("pods running with -m 96", SETTLE, || {
        let ips = pod_ips(env, ns, "cache")?;
        let limits: Vec<String> = ips
            .iter()
            .map(|ip| memcached_stat(ip, "limit_maxbytes").unwrap_or_default())
            .collect();
        if ips.len() == 1 && limits.iter().all(|l| l == &(96 * 1024 * 1024).to_string()) {
            Ok(())
        } else {
            Err(format!("limit_maxbytes per pod: {limits:?}"))
        }
    })?;
    wait_ready(env, ns, "cache", 1)?;

    // PodDisruptionBudget and NetworkPolicy (also where the Go operator has
    // it, spec.security.networkPolicy: kept by the CRD through a merge patch,
    // honoured by the controller): on adds, off removes.
    for (feature, kind) in [
        (
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
            "poddisruptionbudget",
        ),
        (json!({"networkPolicy": {"enabled": true}}), "networkpolicy"),
        (
            json!({"networkPolicy": null, "security": {"networkPolicy": {"enabled": true}}}),
            "networkpolicy",
        ),
    ] {
        patch(env, ns, "cache", json!({"spec": feature}))?;
        wait_exists(env, ns, kind, "cache", true)?;
        let off = toggled_off(&feature);
        patch(env, ns, "cache", json!({"spec": off}))?;
        wait_exists(env, ns, kind, "cache", false)?;
    }

    // Monitoring: the exporter sidecar at once, the ServiceMonitor once its CRD exists.
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"monitoring": {"enabled": true}}}),
    )?;
    wait_for("the exporter sidecar", SETTLE, || {
        let deployment = env.kubectl.get(&["deployment", "cache", "-n", ns])?;
        let containers = deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map_or(0, Vec::len);
        if containers == 2 {
            Ok(())
        } else {
            Err(format!("{containers} containers"))
        }
    })?;
    wait_ready(env, ns, "cache", 2)?;
    install_service_monitor_crd(env)?;
    // The controller tries the ServiceMonitor on every reconcile; prompt one.
    touch(env, ns, "cache")?;
    wait_exists(
        env,
        ns,
        "servicemonitors.monitoring.coreos.com",
        "cache",
        true,
    )?;
    patch(
        env,
        ns,
        "cache",
        json!({"spec": {"monitoring": {"enabled": false}}}),
    )?;
    wait_exists(
        env,
        ns,
        "servicemonitors.monitoring.coreos.com",
        "cache",
        false,
    )?;

    // Autoscaling switched on by re-applying a file that never had replicas.
    let file = json!({"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}});
    env.kubectl.apply(&memcached(ns, "auto", file.clone()))?;
    wait_ready(env, ns, "auto", 1)?;
    let mut autoscaled = file.clone();
    autoscaled["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 4});
    env.kubectl.apply(&memcached(ns, "auto", autoscaled))?;
    wait_exists(env, ns, "horizontalpodautoscaler", "auto", true)?;
    let hpa = env
        .kubectl
        .get(&["horizontalpodautoscaler", "auto", "-n", ns])?;
    check(
        hpa["spec"]["minReplicas"] == 2 && hpa["spec"]["maxReplicas"] == 4,
        format!("HPA spec {}", hpa["spec"]),
    )?;
    let stored = get(env, ns, "auto")?;
    check(
        stored["spec"].get("replicas").is_none(),
        format!("replicas kept beside autoscaling: {}", stored["spec"]),
    )?;
    env.kubectl.apply(&memcached(ns, "auto", file))?;
    wait_exists(env, ns, "horizontalpodautoscaler", "auto", false)?;
    env.kubectl
        .ok(&["delete", "namespace", ns, "--wait=false"])?;
    Ok(())
}

pub(crate) fn garbage_collection(env: &mut Env) -> Result<(), String> {
    let ns = "collect";
    ensure_namespace(env, ns)?;
    let everything = json!({
        "replicas": 2,
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}},
        "monitoring": {"enabled": true},
        "networkPolicy": {"enabled": true},
    });
    install_service_monitor_crd(env)?;
    env.kubectl.apply(&memcached(ns, "cache", everything))?;
    wait_ready(env, ns, "cache", 2)?;
    let kinds = [
        "deployment",
        "service",
        "poddisruptionbudget",
        "networkpolicy",
        "servicemonitors.monitoring.coreos.com",
    ];
    for kind in kinds {
        wait_exists(env, ns, kind, "cache", true)?;
    }
    env.kubectl
        .ok(&["delete", "memcached", "cache", "-n", ns])?;
    for kind in kinds {
        wait_exists(env, ns, kind, "cache", false)?;
    }
    wait_for("pods and ReplicaSets collected", SETTLE, || {
        let left = env
            .kubectl
            .ok(&["get", "pods,replicasets", "-n", ns, "-o", "name"])?;
        if left.trim().is_empty() {
            Ok(())
        } else {
            Err(left)
        }
    })
}

/// The spec fragment with every `enabled: true` turned off.
fn toggled_off(feature: &Value) -> Value {
    match feature {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "minAvailable")
                .map(|(key, value)| {
                    (
                        key.clone(),
                        if key == "enabled" {
                            json!(false)
                        } else {
                            toggled_off(value)
                        },
                    )
                })
                .collect(),
        ),
        other => other.clone(),
    }
}
