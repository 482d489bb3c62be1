//! What a cache keeps through rollouts (`make bench-rollout`), on the real
//! node of `make e2e-node`, with the client OpenStack uses: pymemcache's
//! `HashClient` (`e2e-tests/testbed/sharding.py`), configured as an application
//! would: the ready pods' IPs (Deployment) or `status.serverList`, the names
//! resolved as cluster DNS answers them (StatefulSet). Memcacheds of 3
//! replicas with warm restarts, 20,000 keys:
//!
//! 1. in each mode, an image change (the same image by digest: a new
//!    reference, as a patched image is), which the controller applies to
//!    each pod in place: the keys the client still finds afterwards, and the
//!    pods kept;
//! 2. in each mode, a config change memcached restarts warm
//!    (`memcached.threads` and `verbosity`), which the controller applies to
//!    each pod in place (the pod's supervisor restarts memcached with its
//!    memory file): passes read every key meanwhile, the client configured
//!    anew before each pass, each pass twice: what the cache keeps
//!    (`sharding.py kept`: a memcached restarting is waited for) and what an
//!    application with a read-through cache is served at that moment
//!    (`sharding.py serve`, oslo.cache's get-or-create: a memcached
//!    restarting misses); the worst of each, the pods kept and the time;
//! 3. in each mode, a config change that needs new pods (the memory
//!    geometry: `memcached.maxMemoryMB`, which a save cannot be restored
//!    into), read the same way while the workload replaces the pods, paced;
//! 4. a controller upgrade whose rendering differs: every workload's
//!    template stamp is set to another digest (what an older controller
//!    leaves) and the controller restarted; the pods restarted within 30 s
//!    of its first reconcile.
//!
//! The last line: `rollout: image change kept X% of keys, warm config change
//! kept W% of keys at its worst moment, cold config change served Y% at its
//! worst moment, controller upgrade restarted Z pods`. Reported, never
//! asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use e2e_tests::harness::clients::hash_client::{
    Mode, bench_env, count, kept, ready_pods, serve, sharding_with, store,
};
use e2e_tests::harness::environment::node;
use e2e_tests::harness::scenarios::scenario::{SETTLE, instance_objects, memcached, wait_ready};
use e2e_tests::harness::{Env, condition_status, wait_for};
use serde_json::{Value, json};

const NAMESPACE: &str = "rollout";
const KEYS: u64 = 20_000;
const REPLICAS: usize = 3;
/// How long the pods are watched after the upgraded controller starts.
const AFTER_UPGRADE: Duration = Duration::from_secs(30);

/// A Memcached of [`REPLICAS`] with warm restarts on the real node.
fn warm_spec(mode: Mode) -> Value {
    let mut spec = node::scheduling();
    spec["replicas"] = json!(REPLICAS);
    spec["warmRestart"] = json!({"enabled": true});
    spec["workload"] = json!(mode.workload());
    spec
}

fn main() {
    e2e_tests::harness::enter_network_namespace();
    if let Err(e) = bench() {
        eprintln!("bench-rollout: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let Some(mut env) = bench_env("memcached-rollout-bench", true, NAMESPACE)? else {
        return Ok(());
    };
    println!(
        "{REPLICAS} replicas with warm restarts on the real node, {KEYS} keys, pymemcache HashClient \
         (Deployment: over the ready pods' IPs; StatefulSet: over status.serverList)"
    );
    let mut kept = BTreeMap::new();
    for mode in [Mode::Deployment, Mode::StatefulSet] {
        let (found, same_pods, took) = image_change(&env, mode)?;
        println!(
            "image change, {}, applied in place: {found} of {KEYS} keys found afterwards, \
             {same_pods} of {REPLICAS} pods kept, {:.1} s",
            mode.workload(),
            took.as_secs_f64()
        );
        kept.insert(mode.workload(), found);
    }
    let mut warm = BTreeMap::new();
    for mode in [Mode::Deployment, Mode::StatefulSet] {
        let change = config_change(&env, mode, Change::Warm)?;
        println!(
            "warm config change (in place), {}: worst of {} passes {} of {KEYS} keys kept ({} served \
             by a read-through pass that met a memcached restarting), {} of {REPLICAS} pods kept, \
             {:.1} s end to end; Rollout column seen {:?}",
            mode.workload(),
            change.passes,
            change.worst_kept,
            change.worst,
            change.pods_kept,
            change.took.as_secs_f64(),
            change.column
        );
        warm.insert(mode.workload(), change.worst_kept);
    }
    let mut served = BTreeMap::new();
    for mode in [Mode::Deployment, Mode::StatefulSet] {
        let change = config_change(&env, mode, Change::Cold)?;
        println!(
            "cold config change (new pods, paced), {}: worst of {} read-through passes {} of {KEYS} keys served \
             ({} kept), {:.1} s; Rollout column seen {:?}",
            mode.workload(),
            change.passes,
            change.worst,
            change.worst_kept,
            change.took.as_secs_f64(),
            change.column
        );
        served.insert(mode.workload(), change.worst);
    }
    let restarted = controller_upgrade(&mut env)?;
    println!(
        "controller upgrade (rendering differs) over both: {restarted} pods restarted in {} s",
        AFTER_UPGRADE.as_secs()
    );
    println!(
        "a node drain replaces the pods: cold, as any new pod (an emptyDir lives as long as its pod)"
    );
    println!(
        "rollout: image change kept {:.1}% of keys (the lower of Deployment {:.1}% and StatefulSet {:.1}%), \
         warm config change kept {:.1}% of keys at its worst moment (the lower of Deployment {:.1}% and \
         StatefulSet {:.1}%), cold config change served {:.1}% at its worst moment (StatefulSet; \
         Deployment {:.1}%), controller upgrade restarted {restarted} pods",
        percent(kept.values().copied().min().unwrap_or(0)),
        percent(kept["Deployment"]),
        percent(kept["StatefulSet"]),
        percent(warm.values().copied().min().unwrap_or(0)),
        percent(warm["Deployment"]),
        percent(warm["StatefulSet"]),
        percent(served["StatefulSet"]),
        percent(served["Deployment"]),
    );
    Ok(())
}

/// Step 1: a full cache in a Memcached of `mode`, then a new `spec.image`;
/// the keys found once every pod runs it, the pods that are the same, and
/// the time it took.
fn image_change(env: &Env, mode: Mode) -> Result<(u64, usize, Duration), String> {
    let kind = mode.workload().to_lowercase();
    let name = format!("image-{kind}");
    let name = name.as_str();
    let client = || mode.client_of(env, NAMESPACE, name);
    let mut spec = warm_spec(mode);
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, REPLICAS as i64)?;
    let before = ready_pods(env, NAMESPACE, name)?;
    wait_for("every server reachable", SETTLE, || store(&client()?, KEYS))?;
    let pods = instance_objects(env, "pods", NAMESPACE, name)?;
    let image = node::image_by_digest(&pods[0])?;
    spec["image"] = json!(image);
    let started = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_for(
        "every pod on the new image, the rollout complete",
        SETTLE * 2,
        || {
            let workload = env.kubectl.get(&[&kind, name, "-n", NAMESPACE])?;
            let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
            let pods = instance_objects(env, "pods", NAMESPACE, name)?;
            let on_image = pods.iter().all(|p| {
                p["spec"]["containers"][0]["image"] == image.as_str()
                    && condition_status(p, "Ready") == Some("True")
            });
            let partition = &workload["spec"]["updateStrategy"]["rollingUpdate"]["partition"];
            (on_image
                && workload["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"]
                    .is_null()
                && partition.as_i64().unwrap_or(0) == 0
                && condition_status(&mc, "Progressing") == Some("False"))
            .then_some(())
            .ok_or_else(|| format!("status {}", mc["status"]))
        },
    )?;
    let took = started.elapsed();
    let after = ready_pods(env, NAMESPACE, name)?;
    let kept = count(&sharding_with("check", &client()?, KEYS)?, "hits")?;
    let same = after
        .iter()
        .filter(|p| before.iter().any(|b| b.uid == p.uid))
        .count();
    Ok((kept, same, took))
}

/// A config change: one memcached restarts warm, or one that needs new pods.
#[derive(Clone, Copy)]
enum Change {
    /// `threads` 4 -> 2 and `verbosity` 0 -> 1: applied in place.
    Warm,
    /// `maxMemoryMB` 64 -> 80: another memory geometry, new pods.
    Cold,
}

impl Change {
    fn name(self, mode: Mode) -> String {
        let kind = mode.workload().to_lowercase();
        match self {
            Change::Warm => format!("warm-{kind}"),
            Change::Cold => format!("cold-{kind}"),
        }
    }

    fn memcached(self) -> Value {
        match self {
            Change::Warm => json!({"threads": 2, "verbosity": 1}),
            Change::Cold => json!({"maxMemoryMB": 80}),
        }
    }

    /// What every pod's args annotation holds once the change is in.
    fn arg(self) -> &'static str {
        match self {
            Change::Warm => "-v",
            Change::Cold => "80",
        }
    }
}

/// What [`config_change`] saw.
struct ConfigChange {
    /// The hits of the worst read-through pass.
    worst: u64,
    /// The keys the cache held at the worst moment.
    worst_kept: u64,
    /// Passes.
    passes: usize,
    /// The pods that are the same afterwards.
    pods_kept: usize,
    /// The time the rollout took.
    took: Duration,
    /// The Rollout column of `kubectl get memcached` at each pass.
    column: BTreeSet<String>,
}

/// Steps 2 and 3: a full cache in a Memcached of `mode`, then `change`,
/// read through in passes until every pod runs it.
fn config_change(env: &Env, mode: Mode, change: Change) -> Result<ConfigChange, String> {
    let mut spec = warm_spec(mode);
    let name = change.name(mode);
    let name = name.as_str();
    let client = || mode.client_of(env, NAMESPACE, name);
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, REPLICAS as i64)?;
    wait_for("every server reachable", SETTLE, || store(&client()?, KEYS))?;
    let before = ready_pods(env, NAMESPACE, name)?;
    spec["memcached"] = change.memcached();
    let started = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    let (mut worst, mut worst_kept, mut passes, mut column) = (KEYS, KEYS, 0, BTreeSet::new());
    loop {
        if started.elapsed() > SETTLE * 3 {
            return Err(format!(
                "the config change did not roll out in {:?}",
                SETTLE * 3
            ));
        }
        let complete = rolled_out(env, mode, name, change.arg())?;
        worst_kept = worst_kept.min(kept(&client()?, KEYS)?);
        worst = worst.min(serve(&client()?, KEYS)?);
        passes += 1;
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        column.extend(mc["status"]["rollout"].as_str().map(str::to_string));
        // The last pass reads from the pods of the complete rollout.
        if complete {
            let took = started.elapsed();
            let after = ready_pods(env, NAMESPACE, name)?;
            let pods_kept = (after.iter())
                .filter(|p| before.iter().any(|b| b.uid == p.uid))
                .count();
            return Ok(ConfigChange {
                worst,
                worst_kept,
                passes,
                pods_kept,
                took,
                column,
            });
        }
    }
}

/// Every pod of `name`'s workload runs args with `arg`, each ready, none of
/// the old template left, no change in place under way.
fn rolled_out(env: &Env, mode: Mode, name: &str, arg: &str) -> Result<bool, String> {
    let kind = mode.workload().to_lowercase();
    let workload = env.kubectl.get(&[&kind, name, "-n", NAMESPACE])?;
    let pods = instance_objects(env, "pods", NAMESPACE, name)?;
    let runs = |p: &Value| {
        let args = p["metadata"]["annotations"]["memcached.c5c3.io/args"].as_str();
        args.is_some_and(|a| a.lines().any(|l| l == arg))
    };
    let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
    let status = &workload["status"];
    let replicas = json!(REPLICAS);
    Ok(pods.len() == REPLICAS
        && pods.iter().all(runs)
        && workload["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null()
        && status["observedGeneration"] == workload["metadata"]["generation"]
        && status["readyReplicas"] == replicas
        && status["replicas"] == replicas
        && condition_status(&mc, "Progressing") == Some("False"))
}

/// Step 3: the Deployment's template stamp as an older controller version
/// leaves it, and the controller restarted; the pods restarted (replaced, or
/// a container restarted) within [`AFTER_UPGRADE`].
fn controller_upgrade(env: &mut Env) -> Result<usize, String> {
    let memcacheds = env.kubectl.get(&["memcached", "-n", NAMESPACE])?;
    let instances = memcacheds["items"].as_array().map_or(0, Vec::len);
    let before = wait_for("the replaced pods gone", SETTLE, || {
        let pods = restarts(env)?;
        (pods.len() == REPLICAS * instances)
            .then_some(pods.clone())
            .ok_or_else(|| format!("{} pods", pods.len()))
    })?;
    for kind in ["deployments", "statefulsets"] {
        env.kubectl.ok(&[
            "annotate",
            kind,
            "--all",
            "-n",
            NAMESPACE,
            "--overwrite",
            "memcached.c5c3.io/template-hash=00000000000000000000000000000000",
        ])?;
    }
    env.replace_operator("memcached-operator-upgraded")?;
    std::thread::sleep(AFTER_UPGRADE);
    let after = restarts(env)?;
    Ok(before
        .iter()
        .filter(|(uid, count)| after.get(*uid) != Some(count))
        .count())
}

/// The memcached container's restart count of each pod not being deleted,
/// by pod uid.
fn restarts(env: &Env) -> Result<BTreeMap<String, i64>, String> {
    let pods = env.kubectl.get(&["pods", "-n", NAMESPACE])?;
    Ok(pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            Some((
                p["metadata"]["uid"].as_str()?.to_string(),
                p["status"]["containerStatuses"][0]["restartCount"].as_i64()?,
            ))
        })
        .collect())
}

fn percent(hits: u64) -> f64 {
    100.0 * hits as f64 / KEYS as f64
}
