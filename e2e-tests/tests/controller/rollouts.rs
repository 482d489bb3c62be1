//! Changes that replace or keep pods: the replica handover to the HPA and
//! back, a mounted Secret deleted, a new rendering waiting for the spec, a
//! surge pod without a node, a rotation paced in StatefulSet mode.

use super::*;

pub(crate) fn autoscaling_handover(env: &mut Env) -> Result<(), String> {
    let ns = "handover";
    ensure_namespace(env, ns)?;
    let file = json!({"replicas": 5, "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}}});
    env.kubectl.apply(&memcached(ns, "cache", file.clone()))?;
    wait_ready(env, ns, "cache", 5)?;
    let watch = ReplicaWatch::start(env, ns, "cache")?;
    let mut unscaled = file;
    unscaled
        .as_object_mut()
        .ok_or("spec is not an object")?
        .remove("replicas");
    let mut autoscaled = unscaled.clone();
    autoscaled["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 10});
    env.kubectl.apply(&memcached(ns, "cache", autoscaled))?;
    wait_for("the HPA", SETTLE, || {
        env.kubectl
            .get(&["horizontalpodautoscaler", "cache", "-n", ns])
            .map(drop)
    })?;
    wait_for("the controller to stop applying replicas", SETTLE, || {
        let d = deployment(env, ns, "cache")?;
        let ours = d["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| {
                m["manager"] == "memcached-operator"
                    && !m["fieldsV1"]["f:spec"]["f:replicas"].is_null()
            });
        if ours {
            Err("memcached-operator still owns spec.replicas".into())
        } else {
            Ok(())
        }
    })?;
    // The Deployment controller and the HPA get a few seconds to react.
    std::thread::sleep(Duration::from_secs(10));
    let seen = watch.stop();
    println!("     spec.replicas seen during the switch: {seen:?}");
    check(!seen.is_empty(), "the watch saw no Deployment")?;
    check(
        seen.iter().all(|r| *r >= 5),
        format!("spec.replicas dipped below 5: {seen:?}"),
    )?;

    // And back: autoscaling turned off without a replica count keeps the
    // pods the autoscaler ran, and kubectl says so.
    let watch = ReplicaWatch::start(env, ns, "cache")?;
    let applied = env.kubectl.run(
        &["apply", "-f", "-"],
        Some(&memcached(ns, "cache", unscaled)),
    );
    check(
        applied.success,
        format!("kubectl apply: {}", applied.stderr),
    )?;
    println!("     {}", applied.stderr.trim());
    check(
        applied.stderr.contains("Warning:") && applied.stderr.contains("spec.replicas"),
        format!("no warning about the replica count: {:?}", applied.stderr),
    )?;
    wait_for("the HPA gone", SETTLE, || {
        let gone = env
            .kubectl
            .run(&["get", "horizontalpodautoscaler", "cache", "-n", ns], None);
        (!gone.success && gone.stderr.contains("NotFound"))
            .then_some(())
            .ok_or_else(|| format!("{} {}", gone.stdout, gone.stderr))
    })?;
    let stored = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
    check(
        stored["spec"]["replicas"] == 5,
        format!("stored spec.replicas {}", stored["spec"]["replicas"]),
    )?;
    std::thread::sleep(Duration::from_secs(10));
    let seen = watch.stop();
    println!("     spec.replicas seen turning autoscaling off: {seen:?}");
    check(
        !seen.is_empty() && seen.iter().all(|r| *r == 5),
        format!("spec.replicas left 5: {seen:?}"),
    )?;
    wait_ready(env, ns, "cache", 5)?;
    delete_namespace(env, ns)
}

/// `kubectl get -w` on one Deployment, recording every `spec.replicas`.
pub(crate) struct ReplicaWatch {
    child: std::process::Child,
    seen: Arc<Mutex<Vec<i64>>>,
}

impl ReplicaWatch {
    fn start(env: &Env, namespace: &str, name: &str) -> Result<Self, String> {
        let mut child = Command::new(&env.binaries.kubectl)
            .arg("--kubeconfig")
            .arg(&env.cluster.kubeconfig)
            .args([
                "get",
                "deployment",
                name,
                "-n",
                namespace,
                "-w",
                "-o",
                "json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        std::thread::spawn(move || {
            let objects = serde_json::Deserializer::from_reader(BufReader::new(stdout));
            for object in objects.into_iter::<Value>().map_while(Result::ok) {
                if let (Some(r), Ok(mut seen)) =
                    (object["spec"]["replicas"].as_i64(), record.lock())
                {
                    seen.push(r);
                }
            }
        });
        // The first object arrives once the watch is established.
        wait_for("the Deployment watch", Duration::from_secs(10), || {
            if seen.lock().map_err(|e| e.to_string())?.is_empty() {
                Err("nothing yet".into())
            } else {
                Ok(())
            }
        })?;
        Ok(ReplicaWatch { child, seen })
    }

    fn stop(mut self) -> Vec<i64> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// Fault: the auth Secret a running Memcached mounts is deleted. The
/// status says so (Degraded/SecretNotFound) and the pods keep running
/// untouched; created again with the same content, the Memcached is Ready
/// again with the same pods (the same data: the same hash).
pub(crate) fn secret_deleted_while_mounted(env: &mut Env) -> Result<(), String> {
    let ns = "secret-gone";
    ensure_namespace(env, ns)?;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "auth", "namespace": ns}, "stringData": {"auth": "app:pw\n"}})
    .to_string();
    env.kubectl.apply(&secret)?;
    let spec = json!({"replicas": 2, "security": {"sasl": {"enabled": true,
        "credentialsSecretRef": {"name": "auth"}}}});
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 2)?;
    let pods = || pod_uids(env, ns, "cache");
    let before = pods()?;
    env.kubectl.ok(&["delete", "secret", "auth", "-n", ns])?;
    wait_for("Degraded SecretNotFound", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["reason"] == "SecretNotFound" => Ok(()),
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        pods()? == before,
        "pods replaced after the Secret was deleted",
    )?;
    env.kubectl.apply(&secret)?;
    wait_ready(env, ns, "cache", 2)?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        pods()? == before,
        "pods replaced after the same Secret came back",
    )?;
    delete_namespace(env, ns)
}

/// A controller upgrade whose rendering differs: the pods run a template an
/// older controller rendered for the same spec (simulated by changing it
/// while the controller is stopped). The restarted controller keeps it, says
/// so in an Event, still scales, and rolls the new rendering out only with
/// the next spec change.
pub(crate) fn new_rendering_waits_for_the_spec(env: &mut Env) -> Result<(), String> {
    let ns = "upgrade";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 2})))?;
    wait_ready(env, ns, "cache", 2)?;
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let patched = apply_older_rendering(env, ns, "cache");
    let rolled = patched.and_then(|_| rolled_out(env, ns, "cache", 2));
    let operator = env.start_operator("operator-upgrade")?;
    env.operator = Some(operator);
    rolled?;
    let running = || -> Result<bool, String> {
        let d = deployment(env, ns, "cache")?;
        Ok(d["spec"]["template"]["metadata"]["labels"]["rendered-by"] == "older")
    };
    let before = pod_uids(env, ns, "cache")?;
    wait_for("the PodTemplateHeld Event", SETTLE, || {
        let events = env.kubectl.get(&[
            "events",
            "-n",
            ns,
            "--field-selector",
            "reason=PodTemplateHeld",
        ])?;
        let items = events["items"].as_array().cloned().unwrap_or_default();
        items
            .first()
            .map(|e| println!("     {}", e["message"]))
            .ok_or("none yet".to_string())
    })?;
    std::thread::sleep(Duration::from_secs(3));
    check(
        running()?,
        "the older template was replaced without a spec change",
    )?;
    check(
        pod_uids(env, ns, "cache")? == before,
        "pods restarted without a spec change",
    )?;

    env.kubectl
        .apply(&memcached(ns, "cache", json!({"replicas": 3})))?;
    wait_ready(env, ns, "cache", 3)?;
    let scaled = pod_uids(env, ns, "cache")?;
    check(
        before.iter().all(|uid| scaled.contains(uid)) && running()?,
        "scaling restarted pods",
    )?;

    let changed = json!({"replicas": 3, "memcached": {"verbosity": 1}});
    env.kubectl.apply(&memcached(ns, "cache", changed))?;
    wait_for("the new rendering after the spec change", SETTLE, || {
        (!running()?)
            .then_some(())
            .ok_or("still the older template".to_string())
    })?;
    rolled_out(env, ns, "cache", 3)?;
    let after = pod_uids(env, ns, "cache")?;
    check(
        after.iter().all(|uid| !scaled.contains(uid)),
        "pods of the older template left after the spec change",
    )?;
    delete_namespace(env, ns)
}

/// Apply Deployment `name` again under the controller's field manager, as an
/// older controller would have rendered it: one more pod label, and its
/// stamp of that template.
pub(crate) fn apply_older_rendering(env: &Env, ns: &str, name: &str) -> Result<(), String> {
    let live = deployment(env, ns, name)?;
    let meta = &live["metadata"];
    let mut annotations = meta["annotations"].clone();
    annotations["memcached.c5c3.io/template-hash"] = json!("older");
    let mut spec = live["spec"].clone();
    spec["template"]["metadata"]["labels"]["rendered-by"] = json!("older");
    let older = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": meta["labels"],
            "annotations": annotations, "ownerReferences": meta["ownerReferences"]},
        "spec": spec});
    let args = [
        "apply",
        "--server-side",
        "--field-manager=memcached-operator",
        "--force-conflicts",
        "-f",
        "-",
    ];
    let outcome = env.kubectl.run(&args, Some(&older.to_string()));
    check(
        outcome.success,
        format!("older rendering refused: {}", outcome.stderr),
    )
}

/// Wait until Deployment `name` runs `replicas` pods of its current template, all ready.
pub(crate) fn rolled_out(env: &Env, ns: &str, name: &str, replicas: i64) -> Result<(), String> {
    wait_for(&format!("{ns}/{name} rolled out"), SETTLE, || {
        let d = deployment(env, ns, name)?;
        let status = &d["status"];
        let done = status["observedGeneration"] == d["metadata"]["generation"]
            && [
                &status["updatedReplicas"],
                &status["readyReplicas"],
                &status["replicas"],
            ]
            .iter()
            .all(|n| **n == replicas);
        done.then_some(()).ok_or_else(|| status.to_string())
    })
}

/// Hard anti-affinity with as many replicas as nodes: a Deployment rollout
/// adds a pod before removing one, and that pod finds no node. The Memcached
/// says so (Degraded/RolloutUnschedulable, naming the pod, the scheduler's
/// reason and the way out) instead of waiting silently; one replica fewer
/// than nodes then lets the rollout finish (the running pods' required
/// anti-affinity repels any new pod, so the soft preset alone would not).
pub(crate) fn surge_pod_unschedulable(env: &mut Env) -> Result<(), String> {
    let ns = "unschedulable";
    ensure_namespace(env, ns)?;
    let nodes = env.kubectl.get(&["nodes", "-l", "type=kwok"])?;
    let nodes = nodes["items"].as_array().map_or(0, Vec::len);
    check(nodes > 1, format!("{nodes} kwok nodes"))?;
    let hard = json!({"replicas": nodes, "highAvailability": {"antiAffinityPreset": "hard"}});
    env.kubectl.apply(&memcached(ns, "cache", hard.clone()))?;
    wait_ready(env, ns, "cache", nodes as i64)?;
    let mut changed = hard;
    changed["memcached"] = json!({"verbosity": 1});
    env.kubectl
        .apply(&memcached(ns, "cache", changed.clone()))?;
    let message = wait_for("Degraded RolloutUnschedulable", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["reason"] == "RolloutUnschedulable" => {
                Ok(c["message"].as_str().unwrap_or_default().to_string())
            }
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    println!("     {message}");
    check(
        message.contains("no node can take") && message.contains("hard anti-affinity"),
        format!("the message names neither the scheduler's verdict nor the preset: {message}"),
    )?;
    changed["replicas"] = json!(nodes - 1);
    env.kubectl.apply(&memcached(ns, "cache", changed))?;
    wait_for("the rollout finished, not Degraded", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
        (degraded["status"] == "False" && mc["status"]["rollout"].is_null())
            .then_some(())
            .ok_or_else(|| format!("Degraded {degraded}, rollout {}", mc["status"]["rollout"]))
    })?;
    delete_namespace(env, ns)
}

/// A rotated password rolls a StatefulSet's pods one at a time, paced by
/// the cache: the pods not yet replaced keep the auth file they started with
/// (memcached never re-reads it) and refuse the new password, so the
/// controller reads them with the password that read them before; the new
/// pod, empty, holds the next until clients refill it. Taking unread pods
/// for empty ones would let every pod go cold back to back.
pub(crate) fn rotation_stays_paced(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 400;
    const HELD: Duration = Duration::from_secs(10);
    let ns = "rotation";
    ensure_namespace(env, ns)?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:first-password\n"))?;
    let spec = json!({"replicas": 3, "workload": "StatefulSet", "security": {"sasl":
        {"enabled": true, "credentialsSecretRef": {"name": "cache-auth"}}}});
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 3)?;
    let pods = |env: &Env| -> Result<BTreeMap<String, (String, String)>, String> {
        let listed =
            env.kubectl
                .get(&["pods", "-n", ns, "-l", "app.kubernetes.io/instance=cache"])?;
        Ok(listed["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .map(|p| {
                let name = p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let uid = p["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let ip = p["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (name, (uid, ip))
            })
            .collect())
    };
    let before = pods(env)?;
    for (_, ip) in before.values() {
        Memcache::login(ip, "operator", "first-password")?.fill(KEYS)?;
    }
    // The controller reads every pod with the first password (a collection
    // of the 3 ready pods, started by the touch, ends within seconds).
    touch(env, ns, "cache")?;
    std::thread::sleep(Duration::from_secs(5));
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:second-password\n"))?;
    let replaced = |env: &Env, name: &str| -> Result<Option<String>, String> {
        let now = pods(env)?;
        Ok(now
            .get(name)
            .filter(|(uid, ip)| Some(uid) != before.get(name).map(|b| &b.0) && !ip.is_empty())
            .map(|(_, ip)| ip.clone()))
    };
    let ip = wait_for("cache-2 replaced", SETTLE, || {
        replaced(env, "cache-2")?.ok_or_else(|| "not yet".to_string())
    })?;
    wait_ready(env, ns, "cache", 3)?;
    std::thread::sleep(HELD);
    for name in ["cache-0", "cache-1"] {
        check(
            replaced(env, name)?.is_none(),
            format!("{name} was replaced while cache-2 was empty"),
        )?;
    }
    // The pods not yet replaced are read at the controller's next stats
    // collection, which a busy machine may put after the hold.
    let message = wait_for("the pods not yet replaced read", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        let progressing = condition(&mc, "Progressing").cloned().unwrap_or_default();
        let message = progressing["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        check(
            mc["status"]["rollout"]
                == format!("1/3 updated, cache-2 warming, 0 of {} items", KEYS / 2).as_str(),
            format!("Rollout column {}", mc["status"]["rollout"]),
        )?;
        check(
            message.contains(&format!(
                "half the median pod's {KEYS} or half its memory wanted"
            )),
            format!("the pods not yet replaced were not read with their own password: {message}"),
        )?;
        Ok(message)
    })?;
    println!("     {message}");
    Memcache::login(&ip, "operator", "second-password")?.fill(KEYS)?;
    wait_for("cache-1 replaced once cache-2 is warm", SETTLE, || {
        replaced(env, "cache-1")?
            .map(drop)
            .ok_or_else(|| "not yet".to_string())
    })?;
    delete_namespace(env, ns)
}
