//! Warm restarts: changes applied to the running pods in place, every key kept.

use super::*;

/// Warm restarts (spec.warmRestart): a change of spec.image alone is applied
/// by the controller to each running pod in place (controller/src/rollout/in_place.rs),
/// one pod at a time: the same pods, each container restarted once, every
/// key kept, and the Deployment ends with the new template on its one
/// ReplicaSet (no pod replaced, not paused).
pub(crate) fn warm_image_change(env: &mut Env) -> Result<(), String> {
    image_changed_in_place(env, "warm", "Deployment")
}

/// As [`warm_image_change`] in StatefulSet mode
/// (controller/src/rollout/stateful_in_place.rs): the pods keep their names and
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
    same_pods(&before, &after)?;
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

/// A config change memcached restarts warm (`threads` 4 -> 2,
/// `maxConnections` 1024 -> 512), Deployment mode: every pod takes it in
/// place, one at a time, each restarted by its supervisor with its memory
/// file; memcached itself (`stats settings`) runs the new settings; the same
/// pods, every key kept.
pub(crate) fn warm_config_change(env: &mut Env) -> Result<(), String> {
    changed_in_place(env, "warm-config", "Deployment", Warm::Config, Asked::Yes)
}

/// As [`warm_config_change`] in StatefulSet mode.
pub(crate) fn warm_config_change_stateful(env: &mut Env) -> Result<(), String> {
    changed_in_place(
        env,
        "warm-config-sts",
        "StatefulSet",
        Warm::Config,
        Asked::Yes,
    )
}

/// A rotated password (the auth Secret's content) with warm restarts: every
/// pod takes it in place, one at a time (the kubelet refreshes the mounted
/// file, the pod's supervisor restarts memcached with it); afterwards every
/// pod accepts the new password and refuses the old one, the same pods, every
/// key kept.
pub(crate) fn warm_rotation(env: &mut Env) -> Result<(), String> {
    changed_in_place(
        env,
        "warm-rotation",
        "StatefulSet",
        Warm::Rotation,
        Asked::Yes,
    )
}

/// Warm restarts by default (needs [`KUBEWARDEN`]). A Memcached created
/// through Kubewarden's PolicyServer without a word of them gets them, and
/// takes a config change in place, every key kept (as
/// [`warm_config_change`]). `audited/valid`, stored while no policy judged
/// anything (as every Memcached created before this default is stored:
/// without the field), keeps its pod and stays without warm restarts when
/// its manifest, scaled to 2, is applied through the policy, with no warning.
pub(crate) fn warm_by_default(env: &mut Env) -> Result<(), String> {
    let (namespace, existing) = (AUDITED, "valid");
    let pods = |env: &Env| instance_objects(env, "pods", namespace, existing);
    let before = summary(&pods(env)?);
    let scaled = memcached_as_written(namespace, existing, json!({"replicas": 2}));
    let applied = env.kubectl.run(&["apply", "-f", "-"], Some(&scaled));
    check(
        applied.success && !applied.stderr.contains("Warning"),
        format!("kubectl apply: {}{}", applied.stdout, applied.stderr),
    )?;
    let stored = env.kubectl.get(&["memcached", existing, "-n", namespace])?;
    check(
        stored["spec"]["image"] == "memcached:1.6" && stored["spec"].get("warmRestart").is_none(),
        format!(
            "defaulted by the policy, warm restarts left off: {}",
            stored["spec"]
        ),
    )?;
    let after = wait_for("2 pods, the first kept", SETTLE, || {
        let after = summary(&pods(env)?);
        (after.len() == 2 && before.iter().all(|pod| after.contains(pod)))
            .then(|| after.clone())
            .ok_or_else(|| format!("pods before {before:?}, now {after:?}"))
    })?;
    println!("     {namespace}/{existing}, stored before the default: its pod kept, {after:?}");
    changed_in_place(env, "warm-default", "Deployment", Warm::Config, Asked::No)
}

/// The spellings of NAPI ids (`-N`) memcached accepts (getopt's clusters,
/// attached values and long-option prefixes; its help's `--napi_ids` is not
/// one), each with the workload it runs in.
const NAPI_IDS: [(&[&str], &str); 5] = [
    (&["-N", "1"], "Deployment"),
    (&["-N1"], "StatefulSet"),
    (&["-vN", "1"], "Deployment"),
    (&["--napi-ids=1"], "Deployment"),
    (&["--napi=1"], "StatefulSet"),
];

/// NAPI ids (`-N`), in each spelling memcached accepts, on a warm Memcached
/// from its creation, then removed (the change in place memcached 1.6.9 to
/// 1.6.39 crash in if the controller asks a pod still running them for `stats
/// settings`): every pod restarted by its supervisor without them, 0
/// container restarts, every key kept and served throughout.
pub(crate) fn napi_ids_removed(env: &mut Env) -> Result<(), String> {
    for (i, (spelling, workload)) in NAPI_IDS.into_iter().enumerate() {
        let name = format!("napi-{i}");
        println!("     extraArgs {spelling:?}, then none:");
        changed_in_place(
            env,
            &name,
            workload,
            Warm::NapiIdsRemoved(spelling),
            Asked::Yes,
        )
        .map_err(|e| format!("extraArgs {spelling:?}: {e}"))?;
    }
    Ok(())
}

/// What [`changed_in_place`] changes.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Warm {
    /// `threads` and `maxConnections`.
    Config,
    /// The auth Secret's password.
    Rotation,
    /// These `extraArgs` (NAPI ids), removed.
    NapiIdsRemoved(&'static [&'static str]),
    /// `threads` and `maxConnections`, after a controller upgrade: the
    /// workload stamped as a controller that rendered another supervisor
    /// (another base digest) and stamped no intent left it.
    ConfigAfterUpgrade,
}

/// Whether [`changed_in_place`]'s Memcached asks for warm restarts.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Asked {
    /// `warmRestart.enabled: true` in its manifest.
    Yes,
    /// Its manifest leaves `warmRestart` out: the policy's default.
    No,
}

/// A Memcached `name` of 3 warm-restart replicas run by `workload`, each pod
/// holding `KEYS` keys, then `change`; watched until every pod runs it: the
/// pods whose memcached does not answer at once (at most one), the pods kept,
/// what memcached runs afterwards, the keys each still holds.
pub(crate) fn changed_in_place(
    env: &mut Env,
    name: &str,
    workload: &str,
    change: Warm,
    asked: Asked,
) -> Result<(), String> {
    const KEYS: usize = 2_000;
    const REPLICAS: usize = 3;
    ensure_namespace(env, NAMESPACE)?;
    let secret = format!("{name}-auth");
    let auth = |password: &str| auth_secret(NAMESPACE, &secret, &format!("op:{password}\n"));
    let mut spec = node::scheduling();
    spec["replicas"] = json!(REPLICAS);
    spec["workload"] = json!(workload);
    let manifest = |spec: &Value| match asked {
        Asked::Yes => memcached(NAMESPACE, name, spec.clone()),
        Asked::No => memcached_as_written(NAMESPACE, name, spec.clone()),
    };
    if asked == Asked::Yes {
        spec["warmRestart"] = json!({"enabled": true});
    }
    if let Warm::NapiIdsRemoved(args) = change {
        spec["memcached"] = json!({"extraArgs": args});
    }
    if change == Warm::Rotation {
        env.kubectl.apply(&auth("first"))?;
        spec["security"] =
            json!({"sasl": {"enabled": true, "credentialsSecretRef": {"name": secret}}});
    }
    env.kubectl.apply(&manifest(&spec))?;
    wait_ready(env, NAMESPACE, name, REPLICAS as i64)?;
    let stored = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
    check(
        stored["spec"]["warmRestart"]["enabled"] == true,
        format!("stored without warm restarts: {}", stored["spec"]),
    )?;
    let session = |ip: &str, password: &str| match change {
        Warm::Rotation => Memcache::login(ip, "op", password),
        Warm::Config | Warm::NapiIdsRemoved(_) | Warm::ConfigAfterUpgrade => Memcache::connect(ip),
    };
    let before = pods_of(env, name)?;
    let mut pids = BTreeMap::new();
    for pod in &before {
        let mut memcached = session(&pod_ip(pod)?, "first")?;
        memcached.fill(KEYS)?;
        pids.insert(
            pod_name(pod).to_string(),
            memcached.stats("")?["pid"].clone(),
        );
    }
    let kind = workload.to_lowercase();
    if change == Warm::ConfigAfterUpgrade {
        upgraded_from_another_supervisor(env, &kind, name)?;
    }
    let changed = Instant::now();
    match change {
        Warm::Config | Warm::ConfigAfterUpgrade => {
            spec["memcached"] = json!({"threads": 2, "maxConnections": 512});
            env.kubectl.apply(&manifest(&spec))?
        }
        Warm::Rotation => env.kubectl.apply(&auth("second"))?,
        Warm::NapiIdsRemoved(_) => {
            spec.as_object_mut().map(|s| s.remove("memcached"));
            env.kubectl.apply(&manifest(&spec))?
        }
    };
    // Until every pod runs the change: how many memcacheds did not answer at
    // once, and the fewest keys the pods served together at one moment.
    let passwords: &[&str] = match change {
        Warm::Rotation => &["second", "first"],
        Warm::Config | Warm::NapiIdsRemoved(_) | Warm::ConfigAfterUpgrade => &[],
    };
    let served = |pod: &Value| keys_served(pod, passwords, KEYS);
    let mut most_down = 0;
    let mut fewest_served = KEYS * REPLICAS;
    let after = wait_for(
        "every pod restarted in place, the rollout complete",
        SETTLE * 2,
        || {
            let pods = pods_of(env, name)?;
            let down = (pods.iter())
                .filter(|p| pod_ip(p).is_ok_and(|ip| Memcache::connect(&ip).is_err()))
                .count();
            most_down = most_down.max(down);
            fewest_served = fewest_served.min(pods.iter().filter_map(served).sum());
            let restarted = (pods.iter()).all(|p| {
                let was = pids.get(pod_name(p));
                let password = if change == Warm::Rotation {
                    "second"
                } else {
                    "first"
                };
                let now = pod_ip(p)
                    .and_then(|ip| session(&ip, password)?.stats(""))
                    .map(|s| s["pid"].clone());
                now.is_ok_and(|pid| Some(&pid) != was)
            });
            let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
            (restarted
                && pods.len() == REPLICAS
                && condition_status(&mc, "Ready") == Some("True")
                && condition_status(&mc, "Progressing") == Some("False")
                && workload_settled(env, &kind, name)?)
            .then_some(pods.clone())
            .ok_or_else(|| format!("pods {:?}; status {}", summary(&pods), mc["status"]))
        },
    )?;
    let took = changed.elapsed();
    same_pods(&before, &after)?;
    let mut kept = Vec::new();
    for pod in &after {
        let ip = pod_ip(pod)?;
        let password = if change == Warm::Rotation {
            "second"
        } else {
            "first"
        };
        let mut memcached = session(&ip, password)?;
        kept.push(memcached.stats("")?["curr_items"].clone());
        match change {
            Warm::Config | Warm::ConfigAfterUpgrade => {
                let settings = memcached.stats("settings")?;
                check(
                    settings["num_threads"] == "2" && settings["maxconns"] == "512",
                    format!(
                        "{} runs num_threads {} and maxconns {}",
                        pod_name(pod),
                        settings["num_threads"],
                        settings["maxconns"]
                    ),
                )?;
            }
            Warm::Rotation => check(
                Memcache::login(&ip, "op", "first").is_err(),
                format!("{} still accepts the old password", pod_name(pod)),
            )?,
            // Restarted (another pid) with args free of them: the command
            // answers (0 is printed as `(null)` before 1.6.40).
            Warm::NapiIdsRemoved(_) => {
                let napi_ids = memcached.stats("settings")?["num_napi_ids"].clone();
                check(
                    napi_ids == "(null)" || napi_ids == "0",
                    format!("{} runs num_napi_ids {napi_ids}", pod_name(pod)),
                )?;
            }
        }
    }
    println!(
        "     {workload}: every pod took the change in place, {:.1}s after the apply; keys kept per pod \
         {kept:?} of {KEYS}; at most {most_down} memcached not answering at once; {fewest_served} of \
         {} keys served at the worst moment; pods replaced 0, container restarts {}",
        took.as_secs_f64(),
        KEYS * REPLICAS,
        container_restarts(&after)
    );
    check(
        kept.iter().all(|k| *k == KEYS.to_string()),
        format!("keys kept {kept:?} of {KEYS} per pod"),
    )?;
    let restarts = container_restarts(&after);
    check(restarts == 0, format!("{restarts} container restarts"))?;
    check(
        most_down <= 1,
        format!("{most_down} memcacheds restarting at once"),
    )?;
    check(
        fewest_served >= KEYS * (REPLICAS - 1),
        format!("{fewest_served} keys served at one moment"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// A controller upgrade, then a config change warm restarts take: the
/// workload's stamps set as a controller that rendered another supervisor
/// (another base digest, another template digest) and stamped no intent
/// leaves them, and the controller restarted; then `threads` and
/// `maxConnections` changed (as [`warm_config_change`]): every pod takes it
/// in place, 0 pods replaced, every key kept.
pub(crate) fn warm_change_after_upgrade(env: &mut Env) -> Result<(), String> {
    changed_in_place(
        env,
        "warm-upgrade",
        "Deployment",
        Warm::ConfigAfterUpgrade,
        Asked::Yes,
    )
}

/// The workload `kind`/`name` stamped as an older controller with another
/// supervisor leaves it, the controller restarted; until the new one holds
/// the running template and stamps the intent it runs.
fn upgraded_from_another_supervisor(env: &mut Env, kind: &str, name: &str) -> Result<(), String> {
    const OLDER: &str = "00000000000000000000000000000000";
    annotate(
        env,
        kind,
        name,
        &[
            &format!("{BASE_ANNOTATION}={OLDER}"),
            &format!("{TEMPLATE_ANNOTATION}={OLDER}"),
            &format!("{INTENT_SPEC_ANNOTATION}-"),
        ],
    )?;
    env.replace_operator("operator-upgraded-warm")?;
    wait_for("the template held, the intent stamped", SETTLE, || {
        let workload = env.kubectl.get(&[kind, name, "-n", NAMESPACE])?;
        let annotations = &workload["metadata"]["annotations"];
        (annotations[BASE_ANNOTATION] == OLDER && annotations[INTENT_SPEC_ANNOTATION].is_string())
            .then_some(())
            .ok_or_else(|| format!("annotations {annotations}"))
    })?;
    println!("     {kind}/{name} stamped as by a controller with another supervisor; held");
    Ok(())
}

/// What memcached cannot start warm starts cold: Memcacheds created with
/// `maxMemoryMB` 16 (the schema's least) and 39 (the least warm restarts need
/// with the default geometry), neither naming warm restarts. The first is
/// stored with them off and `kubectl apply` says why, the second with them
/// on; each pod runs on the node, serves its `-m`, and never restarted.
pub(crate) fn small_caches_start(env: &mut Env) -> Result<(), String> {
    ensure_namespace(env, NAMESPACE)?;
    for (name, mb, warm) in [("small-16", 16, false), ("small-39", 39, true)] {
        let mut spec = node::scheduling();
        spec["memcached"] = json!({"maxMemoryMB": mb});
        let manifest = memcached_as_written(NAMESPACE, name, spec);
        let applied = env.kubectl.run(&["apply", "-f", "-"], Some(&manifest));
        let warned = applied
            .stderr
            .contains("spec.warmRestart.enabled defaulted to false");
        check(
            applied.success && warned != warm,
            format!(
                "{name}: kubectl apply: {}{}",
                applied.stdout, applied.stderr
            ),
        )?;
        let stored = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        check(
            stored["spec"]["warmRestart"]["enabled"] == warm,
            format!("{name} stored {}", stored["spec"]),
        )?;
        wait_ready(env, NAMESPACE, name, 1)?;
        let pods = instance_objects(env, "pods", NAMESPACE, name)?;
        let pod = pods.first().ok_or(format!("{name} has no pod"))?;
        let settings = Memcache::connect(&pod_ip(pod)?)?.stats("settings")?;
        let restarts = container_restarts(&pods);
        check(
            settings["maxbytes"] == (mb * 1024 * 1024).to_string() && restarts == 0,
            format!(
                "{name} serves maxbytes {}, {restarts} container restarts",
                settings["maxbytes"]
            ),
        )?;
        println!(
            "     maxMemoryMB {mb}: warm restarts {}, Ready and serving {} bytes, 0 container restarts",
            if warm {
                "on"
            } else {
                "off, and kubectl apply said why"
            },
            settings["maxbytes"]
        );
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// A cluster that rewrites memcached images to a registry mirror at
/// admission (a MutatingAdmissionPolicy, GA in Kubernetes 1.36, turning
/// `memcached:<tag>` into `docker.io/library/memcached:<tag>` on pod CREATE
/// and UPDATE): a config change ([`changed_in_place`]) and an image change
/// ([`image_changed_in_place`]) complete warm on pods whose image was
/// rewritten, and the pods are patched once per change each (no loop: the
/// API server's count of pod PATCHes, every client, the kubelet's status
/// patches apart). That a new configuration patches no image (what keeps a
/// CREATE-only rewrite) is `rollout::pod_change`'s unit test.
pub(crate) fn mirrored_images(env: &mut Env) -> Result<(), String> {
    const NAMES: [&str; 2] = ["mirror-config", "mirror-image"];
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "e2e-mirror-memcached"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "docker-hub-memcached",
                "expression": "object.spec.containers.exists(c, c.image.startsWith('memcached:'))"}],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                "Object{spec: Object.spec{containers: object.spec.containers.filter(c, \
                 c.image.startsWith('memcached:')).map(c, Object.spec.containers{name: c.name, \
                 image: 'docker.io/library/' + c.image})}}"}}],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "e2e-mirror-memcached"},
        "spec": {
            "policyName": "e2e-mirror-memcached",
            "matchResources": {"objectSelector": {"matchExpressions": [{
                "key": "app.kubernetes.io/instance", "operator": "In", "values": NAMES}]}},
        },
    });
    env.kubectl.apply(&policy.to_string())?;
    env.kubectl.apply(&binding.to_string())?;
    // The API server rewrites such a pod (admission policies are picked up
    // asynchronously: until then, a dry run).
    ensure_namespace(env, NAMESPACE)?;
    let probe = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "mirror-probe", "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/instance": NAMES[0]}},
        "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]}});
    wait_for("the mirror policy rewriting pods", SETTLE, || {
        let created = env.kubectl.run(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(&probe.to_string()),
        );
        let pod: Value = serde_json::from_str(&created.stdout)
            .map_err(|e| format!("{e}: {}", created.stderr))?;
        let image = &pod["spec"]["containers"][0]["image"];
        (image == "docker.io/library/memcached:1.6")
            .then_some(())
            .ok_or_else(|| format!("a pod of memcached:1.6 is admitted with {image}"))
    })?;
    let patches = |env: &Env| -> Result<f64, String> {
        Ok((request_counts(&env.kubectl)?.iter())
            .filter(|c| c.verb == "PATCH" && c.resource == "pods" && c.subresource.is_empty())
            .map(|c| c.count)
            .sum())
    };
    let before = patches(env)?;
    let outcome = changed_in_place(env, NAMES[0], "Deployment", Warm::Config, Asked::Yes)
        .and_then(|()| image_changed_in_place(env, NAMES[1], "Deployment"));
    let patched = patches(env)? - before;
    for object in [
        "mutatingadmissionpolicybinding/e2e-mirror-memcached",
        "mutatingadmissionpolicy/e2e-mirror-memcached",
    ] {
        env.kubectl
            .ok(&["delete", object, "--ignore-not-found", "--wait=true"])?;
    }
    outcome?;
    // 3 pods given a configuration, 2 an image: one patch each, a few retried.
    println!("     {patched} pod PATCHes for both changes (5 pods changed)");
    check(
        patched <= 10.0,
        format!("{patched} pod PATCHes for 5 pods: a re-patch loop"),
    )
}

/// A rotated password whose Secret files reach the pod after its new Secret
/// hash (the kubelet's Secret cache behind the controller): the controller
/// stopped, the pod is given a new hash as the controller would give it,
/// then the Secret changes. memcached keeps running with the old password
/// until the kubelet has refreshed the files, then restarts with the new one
/// (the old refused); the controller, back, gives the pod the hash it
/// computes, and the pod restarts once more at most. Every key kept, the
/// same pod, 0 container restarts.
pub(crate) fn rotation_with_late_files(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 2_000;
    let (name, secret) = ("late-files", "late-files-auth");
    ensure_namespace(env, NAMESPACE)?;
    let auth = |password: &str| auth_secret(NAMESPACE, secret, &format!("op:{password}\n"));
    env.kubectl.apply(&auth("first"))?;
    let mut spec = node::scheduling();
    spec["warmRestart"] = json!({"enabled": true});
    spec["security"] = json!({"sasl": {"enabled": true, "credentialsSecretRef": {"name": secret}}});
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let pods = pods_of(env, name)?;
    let pod = pods.first().ok_or("no pod")?.clone();
    let ip = pod_ip(&pod)?;
    let mut memcached = Memcache::login(&ip, "op", "first")?;
    memcached.fill(KEYS)?;
    let pid = memcached.stats("")?["pid"].clone();

    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let hash = format!("{SECRET_HASH_ANNOTATION}=rotated-before-its-files");
    env.kubectl.ok(&[
        "annotate",
        "pod",
        pod_name(&pod),
        "-n",
        NAMESPACE,
        "--overwrite",
        &hash,
    ])?;
    std::thread::sleep(Duration::from_secs(5));
    let waiting = Memcache::login(&ip, "op", "first")?.stats("")?["pid"].clone();
    check(
        waiting == pid,
        format!("memcached restarted before the files changed ({pid} -> {waiting})"),
    )?;
    let rotated = Instant::now();
    env.kubectl.apply(&auth("second"))?;
    wait_for("memcached restarted with the new password", SETTLE, || {
        let now = Memcache::login(&ip, "op", "second")?.stats("")?;
        (now["pid"] != pid)
            .then_some(())
            .ok_or_else(|| format!("pid {}", now["pid"]))
    })?;
    let took = rotated.elapsed();
    check(
        Memcache::login(&ip, "op", "first").is_err(),
        "the old password is still accepted",
    )?;
    let kept = Memcache::login(&ip, "op", "second")?.stats("")?["curr_items"].clone();

    env.replace_operator("operator-after-late-files")?;
    let after = wait_for(
        "the Memcached Ready, its rollout complete",
        SETTLE * 2,
        || {
            let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
            let pods = pods_of(env, name)?;
            (condition_status(&mc, "Ready") == Some("True")
                && condition_status(&mc, "Progressing") == Some("False")
                && pods.len() == 1
                && pods[0]["metadata"]["annotations"][SECRET_HASH_ANNOTATION]
                    != "rotated-before-its-files"
                && workload_settled(env, "deployment", name)?)
            .then_some(pods.clone())
            .ok_or_else(|| format!("status {}", mc["status"]))
        },
    )?;
    let finally = Memcache::login(&ip, "op", "second")?.stats("")?["curr_items"].clone();
    let restarts = container_restarts(&after);
    println!(
        "     the new password served {:.1}s after the Secret changed (the hash came first); keys \
         {kept} of {KEYS} then, {finally} after the controller's own hash; {restarts} container \
         restarts",
        took.as_secs_f64()
    );
    check(
        after[0]["metadata"]["uid"] == pod["metadata"]["uid"]
            && kept == KEYS.to_string()
            && finally == KEYS.to_string()
            && restarts == 0,
        format!("the same pod, every key ({kept}, {finally} of {KEYS}), {restarts} restarts"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}
