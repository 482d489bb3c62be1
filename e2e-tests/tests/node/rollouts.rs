//! Rollouts of new pods: a config rollout and scaling, pacing by the cache, a controller upgrade that restarts none, faulty pods.

use super::*;

/// A new `maxMemoryMB` rolls new pods whose memcached runs with it; scaling
/// up and down follows `replicas`.
pub(crate) fn config_rollout_and_scale(env: &mut Env) -> Result<(), String> {
    let name = "rolling";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["memcached"] = json!({"maxMemoryMB": 64});
    let applied = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let created = applied.elapsed();
    let before: Vec<Value> = pods_of(env, name)?
        .iter()
        .map(|p| p["metadata"]["uid"].clone())
        .collect();
    spec["memcached"]["maxMemoryMB"] = json!(128);
    let changed = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_for("3 new pods serving with -m 128", SETTLE, || {
        let pods = serving(pods_of(env, name)?);
        let limits: Vec<String> = pods
            .iter()
            .map(|p| {
                let ip = pod_ip(p)?;
                Ok(stats(&ip)?
                    .get("limit_maxbytes")
                    .cloned()
                    .unwrap_or_default())
            })
            .collect::<Result<_, String>>()?;
        (pods.len() == 3
            && pods.iter().all(|p| !before.contains(&p["metadata"]["uid"]))
            && limits.iter().all(|l| *l == (128u64 << 20).to_string()))
        .then_some(())
        .ok_or_else(|| format!("pods {:?}, limit_maxbytes {limits:?}", summary(&pods)))
    })?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let rolled = changed.elapsed();
    for replicas in [1, 2] {
        spec["replicas"] = json!(replicas);
        env.kubectl
            .apply(&memcached(NAMESPACE, name, spec.clone()))?;
        wait_ready(env, NAMESPACE, name, replicas)?;
    }
    let left = wait_for("two pods left", SETTLE, || {
        let pods = pods_of(env, name)?;
        (pods.len() == 2)
            .then_some(pods.len())
            .ok_or_else(|| format!("pods {:?}", summary(&pods)))
    })?;
    println!(
        "     3 replicas Ready {:.1}s after the apply; -m 64 -> 128: 3 new pods Ready {:.1}s after \
         the apply; scaled 3 -> 1 -> {left}",
        created.as_secs_f64(),
        rolled.as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// The pods not being deleted.
pub(crate) fn serving(pods: Vec<Value>) -> Vec<Value> {
    pods.into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect()
}

/// Without warm restarts.
pub(crate) fn paced_deployment_rollout(env: &mut Env) -> Result<(), String> {
    paced_rollout(env, "paced-d", "Deployment", false, memcached)
}

/// With warm restarts, as the policy defaults them: a geometry change is
/// still cold, said at apply time, and paced.
pub(crate) fn paced_stateful_rollout(env: &mut Env) -> Result<(), String> {
    paced_rollout(env, "paced-s", "StatefulSet", false, memcached_as_written)
}

/// As [`paced_stateful_rollout`] under read traffic: a new pod is judged by
/// what clients feel, its hit ratio since it started against the pods not
/// yet replaced; one that holds as many items as they do but still makes
/// clients miss holds the next.
pub(crate) fn hit_ratio_paced_rollout(env: &mut Env) -> Result<(), String> {
    paced_rollout(env, "paced-hits", "StatefulSet", true, memcached)
}

/// A rollout paced by the cache: 3 pods of [`PACED_KEYS`] keys each, then
/// a change that needs new pods. One new pod at a time: while it is empty
/// no other is replaced (a Deployment keeps the old pod it replaces serving,
/// paused; a StatefulSet holds its partition) and the Rollout column names
/// it warming; once clients refill it (here the test) to half its peers'
/// items, the next follows. A StatefulSet's pods keep their names.
/// `kubectl apply` of the change warns that the 3 pods restart cold.
/// `manifest` writes the Memcached's (warm restarts off, or as defaulted).
pub(crate) fn paced_rollout(
    env: &mut Env,
    name: &str,
    workload: &str,
    traffic: bool,
    manifest: fn(&str, &str, Value) -> String,
) -> Result<(), String> {
    const PACED_KEYS: usize = 400;
    /// How long the rollout must hold while the new pod is empty.
    const HELD: Duration = Duration::from_secs(10);
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["workload"] = json!(workload);
    env.kubectl
        .apply(&manifest(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let original = pods_of(env, name)?;
    for pod in &original {
        let ip = pod_ip(pod)?;
        fill(&ip, PACED_KEYS)?;
        if traffic {
            // Clients read it: its hit ratio is what the new pods must get back to.
            Memcache::connect(&ip)?.read_through(PACED_KEYS)?;
        }
    }
    let is_new = |pod: &Value| {
        !original
            .iter()
            .any(|o| o["metadata"]["uid"] == pod["metadata"]["uid"])
    };
    // The new pods oldest first, and how many of the original pods are left.
    let generations = |env: &Env| -> Result<(Vec<Value>, usize), String> {
        let pods = pods_of(env, name)?;
        let mut new: Vec<Value> = pods.iter().filter(|p| is_new(p)).cloned().collect();
        new.sort_by_key(|p| p["metadata"]["creationTimestamp"].to_string());
        Ok((new, pods.len() - pods.iter().filter(|p| is_new(p)).count()))
    };
    // Another memory geometry: a saved cache cannot be restored into it, so
    // the pods are replaced, cold (warm restarts on or off).
    spec["memcached"] = json!({"maxMemoryMB": 80});
    let changed = Instant::now();
    let applied = (env.kubectl).run(
        &["apply", "-f", "-"],
        Some(&manifest(NAMESPACE, name, spec)),
    );
    check(
        applied.success
            && applied
                .stderr
                .contains("Warning: spec.memcached.maxMemoryMB changes ")
            && applied
                .stderr
                .contains(": 3 pods restart cold, one at a time"),
        format!("kubectl apply said: {}{}", applied.stdout, applied.stderr),
    )?;
    let mut steps = Vec::new();
    for step in 1..=3 {
        let (newest, left) = wait_for(&format!("new pod {step} Ready"), SETTLE, || {
            let (new, left) = generations(env)?;
            match new.as_slice() {
                [.., newest] if new.len() == step && ready(newest) => Ok((newest.clone(), left)),
                _ => Err(format!(
                    "new pods {:?}, {left} original left",
                    summary(&new)
                )),
            }
        })?;
        let pod = pod_name(&newest).to_string();
        let ready_after = changed.elapsed();
        if step == 3 {
            break;
        }
        let mut session = Memcache::connect(&pod_ip(&newest)?)?;
        if traffic {
            // Clients read it through: every key missed, then set. It holds
            // as many items as its peers now, yet clients miss.
            session.read_through(PACED_KEYS)?;
        }
        std::thread::sleep(HELD);
        let (new, left_now) = generations(env)?;
        check(
            new.len() == step && left_now == left,
            format!(
                "while {pod} was cold: new pods {:?}, {left_now} of {left} original left",
                summary(&new)
            ),
        )?;
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let column = mc["status"]["rollout"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let gate = if traffic { "hit ratio" } else { "items" };
        check(
            column.contains(&format!("{pod} warming, ")) && column.contains(gate),
            format!("Rollout column {column:?} while {pod} is cold (judged by its {gate})"),
        )?;
        // Clients warm it; then the next pod follows.
        if traffic {
            let passes = wait_for(&format!("{pod} warm by its hit ratio"), SETTLE, || {
                session.read_through(PACED_KEYS)?;
                let (new, _) = generations(env)?;
                (new.len() > step).then_some(()).ok_or("held".to_string())
            });
            passes?;
        } else {
            session.fill(PACED_KEYS)?;
        }
        steps.push(format!(
            "{pod} Ready {:.1}s after the apply, held while empty, {left} of the 3 original pods serving ({column:?})",
            ready_after.as_secs_f64()
        ));
    }
    wait_ready(env, NAMESPACE, name, 3)?;
    let took = changed.elapsed();
    wait_for("the rollout complete", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let (new, left) = generations(env)?;
        (mc["status"]["rollout"].is_null() && new.len() == 3 && left == 0)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "status.rollout {}, {left} original left",
                    mc["status"]["rollout"]
                )
            })
    })?;
    if workload == "StatefulSet" {
        let names = |pods: &[Value]| {
            pods.iter()
                .map(pod_name)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let now = names(&pods_of(env, name)?);
        check(now == names(&original), format!("pod names {now:?}"))?;
    }
    println!(
        "     {workload}: {}; all 3 new pods Ready {:.1}s after the apply",
        steps.join("; "),
        took.as_secs_f64(),
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// A controller upgrade whose rendering differs (every workload's template
/// stamp set to another digest, as an older controller version leaves it,
/// then the controller restarted) restarts no pod of a Deployment or a
/// StatefulSet Memcached: the template is held until the spec changes.
pub(crate) fn controller_upgrade_restarts_none(env: &mut Env) -> Result<(), String> {
    /// How long the pods are watched after the new controller's first reconcile.
    const WATCHED: Duration = Duration::from_secs(20);
    const OLDER_STAMP: &str = "00000000000000000000000000000000";
    const MEMCACHEDS: [(&str, &str, &str); 2] = [
        ("upgrade-d", "Deployment", "deployment"),
        ("upgrade-s", "StatefulSet", "statefulset"),
    ];
    ensure_namespace(env, NAMESPACE)?;
    for (name, workload, _) in MEMCACHEDS {
        let mut spec = node::scheduling();
        spec["replicas"] = json!(2);
        spec["workload"] = json!(workload);
        env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    }
    let running = |env: &Env| -> Result<Vec<String>, String> {
        let mut pods = Vec::new();
        for (name, _, _) in MEMCACHEDS {
            pods.extend(summary(&pods_of(env, name)?));
        }
        Ok(pods)
    };
    for (name, _, _) in MEMCACHEDS {
        wait_ready(env, NAMESPACE, name, 2)?;
    }
    let before = wait_for("4 pods", SETTLE, || {
        let pods = running(env)?;
        (pods.len() == 4)
            .then(|| pods.clone())
            .ok_or_else(|| format!("pods {pods:?}"))
    })?;
    let stamp = format!("{TEMPLATE_ANNOTATION}={OLDER_STAMP}");
    for (name, _, kind) in MEMCACHEDS {
        annotate(env, kind, name, &[&stamp])?;
    }
    env.replace_operator("operator-upgraded")?;
    std::thread::sleep(WATCHED);
    let after = running(env)?;
    check(
        after == before,
        format!("pods before {before:?}, after {after:?}"),
    )?;
    for (name, _, kind) in MEMCACHEDS {
        let workload = env.kubectl.get(&[kind, name, "-n", NAMESPACE])?;
        let held = &workload["metadata"]["annotations"][TEMPLATE_ANNOTATION];
        check(
            held == OLDER_STAMP,
            format!("the {kind}'s template was replaced (stamp {held})"),
        )?;
    }
    println!(
        "     4 pods (Deployment and StatefulSet) kept for {}s after the upgraded controller's first reconcile",
        WATCHED.as_secs()
    );
    for (name, _, _) in MEMCACHEDS {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// memcached pods that accept connections but answer `stats` with garbage
/// or reset the connection (an image that is something else on port 11211,
/// Ready through the rendered TCP probe): each is named on its Memcached
/// with how it fails, and not Ready; the controller replaces no pod, keeps
/// running, and scales another Memcached meanwhile.
pub(crate) fn faulty_pods(env: &mut Env) -> Result<(), String> {
    const FAULTS: [(&str, &str); 2] = [
        ("garbage-stats", "not memcached's stats answer"),
        ("resets-connections", "connection reset or closed"),
    ];
    const BESIDE: &str = "beside-faults";
    const NAMED_WITHIN: Duration = Duration::from_secs(30);
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl
        .apply(&memcached(NAMESPACE, BESIDE, spec.clone()))?;
    for (fault, _) in FAULTS {
        let mut faulty = spec.clone();
        faulty["image"] = json!(node::faulty_memcached_image(fault));
        env.kubectl.apply(&memcached(NAMESPACE, fault, faulty))?;
    }
    wait_ready(env, NAMESPACE, BESIDE, 1)?;
    let applied = Instant::now();
    let mut pods = Vec::new();
    for (fault, how) in FAULTS {
        let pod = wait_for(&format!("the {fault} pod Ready"), SETTLE, || {
            let pod = pod_of(env, fault)?;
            (pod["status"]["containerStatuses"][0]["ready"] == true)
                .then_some(pod.clone())
                .ok_or_else(|| format!("pod {:?}", summary(std::slice::from_ref(&pod))))
        })?;
        let named = format!("{}:11211 ({how})", pod_ip(&pod)?);
        // Read as soon as its address is ready, not at the 60 s resync.
        let message = wait_for(&format!("the {fault} pod named"), NAMED_WITHIN, || {
            let mc = env.kubectl.get(&["memcached", fault, "-n", NAMESPACE])?;
            let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
            let message = degraded["message"].as_str().unwrap_or_default();
            (degraded["reason"] == "PodsNotAnswering"
                && condition_status(&mc, "Ready") == Some("False")
                && message.contains(&named))
            .then(|| message.to_string())
            .ok_or_else(|| format!("Degraded {degraded}"))
        })?;
        println!(
            "     {fault}: named {:.1}s after the apply: {message}",
            applied.elapsed().as_secs_f64()
        );
        pods.push(pod);
    }
    let scaled = Instant::now();
    spec["replicas"] = json!(2);
    env.kubectl.apply(&memcached(NAMESPACE, BESIDE, spec))?;
    wait_ready(env, NAMESPACE, BESIDE, 2)?;
    println!(
        "     {BESIDE} scaled to 2 meanwhile in {:.1}s",
        scaled.elapsed().as_secs_f64()
    );
    for (pod, (fault, _)) in pods.iter().zip(FAULTS) {
        let now = pod_of(env, fault)?;
        check(
            now["metadata"]["uid"] == pod["metadata"]["uid"]
                && now["status"]["containerStatuses"][0]["restartCount"] == 0,
            format!(
                "the {fault} pod was replaced or restarted: {:?}",
                summary(&[pod.clone(), now])
            ),
        )?;
    }
    check(
        env.operator.as_mut().is_some_and(|o| o.exited().is_none()),
        "the controller exited",
    )?;
    for name in [BESIDE, FAULTS[0].0, FAULTS[1].0] {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// Autoscaling on, then off, without a replica count (issue: turning it off
/// dropped 10 pods to 1): the HorizontalPodAutoscaler runs 4 pods (its
/// lower bound raised to 4), each holding keys; turned off, the policy
/// keeps the 4 and says so at `kubectl apply`, the controller keeps the same
/// 4 pods and every key is still served.
pub(crate) fn autoscaling_handed_back(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 1_000;
    let name = "handback";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["resources"] =
        json!({"requests": {"cpu": "10m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}});
    let fixed = spec.clone();
    spec["autoscaling"] = json!({"enabled": true, "minReplicas": 2, "maxReplicas": 6});
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 2)?;
    // The autoscaler, not the controller, brings it to 4.
    spec["autoscaling"]["minReplicas"] = json!(4);
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 4)?;
    let before = pods_of(env, name)?;
    for pod in &before {
        fill(&pod_ip(pod)?, KEYS)?;
    }
    // From the apply until long enough after the HPA is gone for a drop to 1
    // to show: the fewest keys the pods served together at one moment.
    let mut fewest_served = 4 * KEYS;
    // A poll whose pod list cannot be read is skipped.
    let mut sample = |env: &Env| {
        if let Ok(pods) = pods_of(env, name) {
            let served = pods.iter().filter_map(|pod| keys_served(pod, &[], KEYS));
            fewest_served = fewest_served.min(served.sum());
        }
    };
    let applied = env.kubectl.run(
        &["apply", "-f", "-"],
        Some(&memcached(NAMESPACE, name, fixed)),
    );
    sample(env);
    check(
        applied.success,
        format!("kubectl apply: {}", applied.stderr),
    )?;
    println!("     {}", applied.stderr.trim());
    check(
        applied.stderr.contains("spec.replicas set to 4"),
        format!(
            "no warning keeping the autoscaler's 4 replicas: {:?}",
            applied.stderr
        ),
    )?;
    wait_for("the HPA gone", SETTLE, || {
        sample(env);
        let hpa = env.kubectl.run(
            &["get", "horizontalpodautoscaler", name, "-n", NAMESPACE],
            None,
        );
        (!hpa.success)
            .then_some(())
            .ok_or("the HPA is still there".to_string())
    })?;
    let gone = Instant::now();
    while gone.elapsed() < Duration::from_secs(10) {
        sample(env);
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = pods_of(env, name)?;
    same_pods(&before, &after)?;
    let restarts = container_restarts(&after) - container_restarts(&before);
    println!(
        "     the same 4 pods after autoscaling was turned off, container restarts {restarts}; \
         {fewest_served} of {} keys served at the worst moment",
        4 * KEYS
    );
    check(restarts == 0, format!("{restarts} container restarts"))?;
    check(
        fewest_served == 4 * KEYS,
        format!("{fewest_served} keys served at one moment"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// Set (`key=value`) or remove (`key-`) annotations of the workload `kind`
/// `name` in the suite's namespace, as an older controller would have left them.
pub(crate) fn annotate(
    env: &Env,
    kind: &str,
    name: &str,
    annotations: &[&str],
) -> Result<(), String> {
    let mut args = vec!["annotate", kind, name, "-n", NAMESPACE, "--overwrite"];
    args.extend(annotations);
    env.kubectl.ok(&args).map(drop)
}
