//! The moves of issue 44 on one StatefulSet whose clients hash with
//! pymemcache (`spec.clientHashing: rendezvous`, warm restarts on, as users
//! get them), each from a full cache: scale 3 -> 4 and 4 -> 3, one pod
//! deleted, its node drained, `maxMemoryMB` 64 -> 128. A client that follows
//! `status.serverList` reads every key, pass after pass, while each move
//! runs and once after it; the move's figure is its worst pass (a server it
//! cannot reach, a pod restarting or a name not resolved, misses its keys).

use e2e_tests::harness::clients::hash_client::serve;
use e2e_tests::harness::scenarios::pods::rolled_out_with_memory;
use e2e_tests::harness::scenarios::scenario::event_notes;
use e2e_tests::harness::{check, condition};

use super::*;

/// The Memcached the moves run on.
const NAME: &str = "moves";

/// Every figure of the `moves:` line.
pub struct Moves {
    scale_up: u64,
    scale_down: u64,
    deleted: u64,
    drained: u64,
    resized: u64,
    /// The controller's time for the copy of 3 -> 4 (its Event).
    copy_seconds: f64,
    /// How long after the copy of 4 -> 3 the reconcile releasing its
    /// leaving pod began (its Event).
    held_seconds: f64,
}

impl Moves {
    /// `moves: scale 3->4 served A%, ...`.
    pub fn line(&self) -> String {
        let served = |hits: u64| format!("{:.1}%", 100.0 * hits as f64 / KEYS as f64);
        format!(
            "moves: scale 3->4 served {}, scale 4->3 served {}, deleted pod served {}, \
             drained node served {}, maxMemoryMB 64->128 served {}, copy took {:.1} s for {KEYS} keys, \
             release of the leaving pod began {:.2} s after its copy",
            served(self.scale_up),
            served(self.scale_down),
            served(self.deleted),
            served(self.drained),
            served(self.resized),
            self.copy_seconds,
            self.held_seconds,
        )
    }
}

/// Run every move and measure it.
pub fn run(env: &Env) -> Result<Moves, String> {
    let spec = json!({
        "workload": "StatefulSet",
        "replicas": 3,
        "clientHashing": "rendezvous",
        "warmRestart": {"enabled": true},
        "memcached": {"maxMemoryMB": 64},
        "resources": {"limits": {"memory": "256Mi"}},
    });
    env.kubectl.apply(&memcached(NAMESPACE, NAME, spec))?;
    let scale_up = scale(env, 3, 4)?;
    let copy_seconds = event_seconds(env, "KeysCopiedToNewPods", " failed, in ")?;
    let scale_down = scale(env, 4, 3)?;
    let held_seconds = event_seconds(env, "KeysCopiedFromLeavingPods", " began ")?;
    let victim = pod_one(env)?;
    let deleted = worst_pass(
        env,
        3,
        || delete_pod(env, &victim.name),
        || replaced(env, &victim),
    )?;
    let victim = pod_one(env)?;
    let node = env.kubectl.get(&["pod", &victim.name, "-n", NAMESPACE])?["spec"]["nodeName"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} has no node", victim.name))?;
    let drained = worst_pass(env, 3, || drain(env, &node), || replaced(env, &victim))?;
    env.kubectl.ok(&["uncordon", &node])?;
    let resized = worst_pass(
        env,
        3,
        || {
            patch(
                env,
                NAMESPACE,
                NAME,
                json!({"spec": {"memcached": {"maxMemoryMB": 128}}}),
            )
        },
        || rolled_out_with(env, 128),
    )?;
    delete(env, NAME)?;
    Ok(Moves {
        scale_up,
        scale_down,
        deleted,
        drained,
        resized,
        copy_seconds,
        held_seconds,
    })
}

/// [`worst_pass`] of scaling from `from` replicas to `to`.
fn scale(env: &Env, from: usize, to: usize) -> Result<u64, String> {
    worst_pass(
        env,
        from,
        || patch(env, NAMESPACE, NAME, json!({"spec": {"replicas": to}})),
        || settled(env, to),
    )
}

/// From a full cache in `replicas` servers: the fewest keys a client
/// following `status.serverList` read in one pass from `start` of the move
/// until it is `done`, the pass after it included.
fn worst_pass(
    env: &Env,
    replicas: usize,
    start: impl FnOnce() -> Result<(), String>,
    mut done: impl FnMut() -> Result<(), String>,
) -> Result<u64, String> {
    wait_ready(env, NAMESPACE, NAME, replicas as i64)?;
    store(
        &Mode::StatefulSet.wait_client(env, NAMESPACE, NAME, replicas)?,
        KEYS,
    )?;
    start()?;
    let began = Instant::now();
    let mut worst = KEYS;
    loop {
        let finished = done();
        let client = Mode::StatefulSet.client_of(env, NAMESPACE, NAME)?;
        worst = worst.min(serve(&client, KEYS)?);
        match finished {
            Ok(()) => return Ok(worst),
            // A paced rollout may wait the warm timeout (2 minutes) per pod.
            Err(e) if began.elapsed() > SETTLE * 4 => {
                return Err(format!("move not done in {}s: {e}", SETTLE.as_secs() * 4));
            }
            Err(_) => {}
        }
    }
}

/// Ready with `replicas`, its generation observed, and as many servers listed.
fn settled(env: &Env, replicas: usize) -> Result<(), String> {
    let mc = env.kubectl.get(&["memcached", NAME, "-n", NAMESPACE])?;
    let status = &mc["status"];
    check(
        condition(&mc, "Ready").is_some_and(|c| c["status"] == "True")
            && status["readyReplicas"] == replicas
            && status["observedGeneration"] == mc["metadata"]["generation"]
            && status["serverList"].as_array().map(Vec::len) == Some(replicas),
        status.to_string(),
    )
}

/// Pod `<NAME>-1`, Ready.
fn pod_one(env: &Env) -> Result<Pod, String> {
    (ready_pods(env, NAMESPACE, NAME)?.into_iter())
        .find(|p| p.name == format!("{NAME}-1"))
        .ok_or_else(|| format!("no pod {NAME}-1 Ready"))
}

/// A new pod of `victim`'s name is Ready, and the Memcached is settled.
fn replaced(env: &Env, victim: &Pod) -> Result<(), String> {
    let now = ready_pods(env, NAMESPACE, NAME)?;
    check(
        now.iter()
            .any(|p| p.name == victim.name && p.uid != victim.uid),
        format!("ready pods {now:?}"),
    )?;
    settled(env, 3)
}

/// `kubectl drain` of `node` for this Memcached's pods (it returns once
/// they are evicted; the node stays cordoned).
fn drain(env: &Env, node: &str) -> Result<(), String> {
    let selector = format!("--pod-selector=app.kubernetes.io/instance={NAME}");
    env.kubectl
        .ok(&[
            "drain",
            node,
            &selector,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=180s",
        ])
        .map(drop)
}

/// Every pod runs the StatefulSet's template with `-m <megabytes>`, and
/// the Memcached is settled.
fn rolled_out_with(env: &Env, megabytes: u32) -> Result<(), String> {
    let workload = env.kubectl.get(&["statefulset", NAME, "-n", NAMESPACE])?;
    check(
        rolled_out_with_memory(&workload, megabytes),
        format!("statefulset status {}", workload["status"]),
    )?;
    settled(env, 3)
}

/// The seconds the first `reason` Event gives between `before` and ` s`
/// (its note: `... failed, in 1.2 s; the reconcile publishing the new list
/// began 0.01 s later`).
fn event_seconds(env: &Env, reason: &str, before: &str) -> Result<f64, String> {
    let notes = event_notes(env, NAMESPACE, reason)?;
    (notes.iter())
        .find_map(|m| m.split_once(before)?.1.split_once(" s")?.0.parse().ok())
        .ok_or_else(|| format!("no {reason} Event with a time after {before:?}: {notes:?}"))
}
