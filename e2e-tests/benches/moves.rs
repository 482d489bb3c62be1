//! The moves of issue 44 (`make bench-moves`) on the real node of `make
//! e2e-node`, where pods run their preStop hooks: a StatefulSet and a
//! Deployment whose clients hash with pymemcache (`spec.clientHashing:
//! rendezvous`), warm restarts on and a preStop delay of 15 s (the time a
//! leaving pod hands its keys over in), each move from a full cache of
//! 20,000 keys: scale 3 -> 4 and 4 -> 3, a pod deleted, a pod evicted by a
//! drain of its node, `maxMemoryMB` 64 -> 128. A client configured as an
//! application would (StatefulSet: `status.serverList`; Deployment: the
//! ready pods' IPs, as the headless Service answers them) reads every key
//! (each miss stored again, as a read-through cache does), pass after
//! pass, while each move runs and once after it; the move's
//! figure is its worst pass (a server it cannot reach, a pod restarting or
//! a name not resolved, misses its keys). One line per mode: `moves
//! (StatefulSet): scale 3->4 served A%, ...`. Reported, never asserted:
//! the node suite's handover scenarios assert.

use std::collections::BTreeSet;
use std::time::Instant;

use e2e_tests::harness::clients::hash_client::{Mode, Pod, bench_env, ready_pods, serve, store};
use e2e_tests::harness::environment::node;
use e2e_tests::harness::scenarios::pods::rolled_out_with_memory;
use e2e_tests::harness::scenarios::scenario::{
    SETTLE, ensure_namespace, event_notes, instance_objects, memcached, patch, wait_ready,
};
use e2e_tests::harness::{Env, check, condition};
use serde_json::json;

const KEYS: u64 = 20_000;
const REPLICAS: usize = 3;
/// The Memcached of each mode, in a namespace of its own (its Events).
const NAME: &str = "moves";
/// Events of the copies to new pods, and from leaving ones.
const JOINING: &str = "KeysCopiedToNewPods";
const LEAVING: &str = "KeysCopiedFromLeavingPods";

fn main() {
    e2e_tests::harness::enter_network_namespace();
    if let Err(e) = bench() {
        eprintln!("bench-moves: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let namespace = |mode: Mode| format!("moves-{}", mode.instance());
    let first = namespace(Mode::StatefulSet);
    let Some(env) = bench_env("memcached-moves-bench", true, &first)? else {
        return Ok(());
    };
    println!(
        "{REPLICAS} replicas on the real node, clientHashing rendezvous, preStopDelaySeconds 15, {KEYS} keys, \
         pymemcache HashClient (Deployment: over the ready pods' IPs; StatefulSet: over status.serverList)"
    );
    for mode in [Mode::StatefulSet, Mode::Deployment] {
        let cache = Cache {
            env: &env,
            mode,
            namespace: namespace(mode),
        };
        ensure_namespace(&env, &cache.namespace)?;
        println!("{}", cache.moves()?.line(mode));
    }
    Ok(())
}

/// Every figure of one mode's `moves:` line.
struct Moves {
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
    /// `moves (StatefulSet): scale 3->4 served A%, ...`.
    fn line(&self, mode: Mode) -> String {
        let served = |hits: u64| format!("{:.1}%", 100.0 * hits as f64 / KEYS as f64);
        format!(
            "moves ({}): scale 3->4 served {}, scale 4->3 served {}, deleted pod served {}, \
             drained node served {}, maxMemoryMB 64->128 served {}, copy took {:.1} s for {KEYS} keys, \
             release of the leaving pod began {:.2} s after its copy",
            mode.workload(),
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

/// The Memcached [`NAME`] of `mode` in `namespace`.
struct Cache<'a> {
    env: &'a Env,
    mode: Mode,
    namespace: String,
}

impl Cache<'_> {
    /// Run every move and measure it.
    fn moves(&self) -> Result<Moves, String> {
        let mut spec = node::scheduling();
        spec["workload"] = json!(self.mode.workload());
        spec["replicas"] = json!(REPLICAS);
        spec["clientHashing"] = json!("rendezvous");
        spec["warmRestart"] = json!({"enabled": true});
        spec["memcached"] = json!({"maxMemoryMB": 64});
        spec["resources"] = json!({"limits": {"memory": "256Mi"}});
        spec["highAvailability"] = json!({"gracefulShutdown": {
            "enabled": true, "preStopDelaySeconds": 15, "terminationGracePeriodSeconds": 40,
        }});
        let env = self.env;
        env.kubectl.apply(&memcached(&self.namespace, NAME, spec))?;
        // Ready: the Events of its first pods' fills (a Deployment's) are out.
        wait_ready(env, &self.namespace, NAME, REPLICAS as i64)?;
        let joined = self.notes(JOINING)?;
        let scale_up = self.scale(3, 4)?;
        let copy_seconds = self.new_event_seconds(JOINING, &joined, " failed, in ")?;
        let left = self.notes(LEAVING)?;
        let scale_down = self.scale(4, 3)?;
        let held_seconds = self.new_event_seconds(LEAVING, &left, " began ")?;
        let victim = self.a_ready_pod()?;
        let deleted = self.worst_pass(
            REPLICAS,
            || {
                let args = ["delete", "pod", &victim.name, "-n", &self.namespace];
                env.kubectl
                    .ok(&[&args[..], &["--wait=false"]].concat())
                    .map(drop)
            },
            || self.replaced(&victim),
        )?;
        let victim = self.a_ready_pod()?;
        let drained = self.worst_pass(REPLICAS, || self.evict(&victim), || self.drained(&victim));
        // Uncordoned whatever the move did: the next mode's pods need the node.
        env.kubectl.ok(&["uncordon", node::NAME])?;
        let drained = drained?;
        let resized = self.worst_pass(
            REPLICAS,
            || {
                let resize = json!({"spec": {"memcached": {"maxMemoryMB": 128}}});
                patch(env, &self.namespace, NAME, resize)
            },
            || self.rolled_out_with(128),
        )?;
        let args = ["delete", "memcached", NAME, "-n", &self.namespace];
        env.kubectl.ok(&[&args[..], &["--wait=true"]].concat())?;
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

    /// [`Cache::worst_pass`] of scaling from `from` replicas to `to`.
    fn scale(&self, from: usize, to: usize) -> Result<u64, String> {
        self.worst_pass(
            from,
            || {
                patch(
                    self.env,
                    &self.namespace,
                    NAME,
                    json!({"spec": {"replicas": to}}),
                )
            },
            || self.settled(to),
        )
    }

    /// From a full cache in `replicas` servers: the fewest keys the client
    /// read in one pass from `start` of the move until it is `done`, the
    /// pass after it included.
    fn worst_pass(
        &self,
        replicas: usize,
        start: impl FnOnce() -> Result<(), String>,
        mut done: impl FnMut() -> Result<(), String>,
    ) -> Result<u64, String> {
        let (env, mode, namespace) = (self.env, self.mode, &self.namespace);
        wait_ready(env, namespace, NAME, replicas as i64)?;
        store(&mode.wait_client(env, namespace, NAME, replicas)?, KEYS)?;
        start()?;
        let began = Instant::now();
        let mut worst = KEYS;
        loop {
            let finished = done();
            worst = worst.min(serve(&mode.client_of(env, namespace, NAME)?, KEYS)?);
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

    /// Ready with `replicas`, its generation observed, and as many servers
    /// clients use: listed (StatefulSet), or pods, every one ready
    /// (Deployment).
    fn settled(&self, replicas: usize) -> Result<(), String> {
        let (env, namespace) = (self.env, &self.namespace);
        let mc = env.kubectl.get(&["memcached", NAME, "-n", namespace])?;
        let status = &mc["status"];
        let servers = match self.mode {
            Mode::StatefulSet => status["serverList"].as_array().map_or(0, Vec::len),
            Mode::Deployment => {
                let pods = instance_objects(env, "pods", namespace, NAME)?.len();
                let ready = ready_pods(env, namespace, NAME)?.len();
                if pods == ready { ready } else { 0 }
            }
        };
        check(
            condition(&mc, "Ready").is_some_and(|c| c["status"] == "True")
                && status["readyReplicas"] == replicas
                && status["observedGeneration"] == mc["metadata"]["generation"]
                && servers == replicas,
            format!("{servers} servers, status {status}"),
        )
    }

    /// A ready pod (`<NAME>-1` of a StatefulSet).
    fn a_ready_pod(&self) -> Result<Pod, String> {
        let pods = ready_pods(self.env, &self.namespace, NAME)?;
        let one = format!("{NAME}-1");
        (pods.iter().find(|p| p.name == one).or(pods.first()))
            .cloned()
            .ok_or_else(|| format!("no pod of {NAME} ready"))
    }

    /// `victim` is gone, replaced (a StatefulSet's by a pod of its name),
    /// and the Memcached is settled.
    fn replaced(&self, victim: &Pod) -> Result<(), String> {
        let pods = instance_objects(self.env, "pods", &self.namespace, NAME)?;
        let uids: BTreeSet<&str> = (pods.iter())
            .filter_map(|p| p["metadata"]["uid"].as_str())
            .collect();
        let successor = match self.mode {
            Mode::StatefulSet => (ready_pods(self.env, &self.namespace, NAME)?.iter())
                .any(|p| p.name == victim.name && p.uid != victim.uid),
            Mode::Deployment => true,
        };
        check(
            successor && !uids.contains(victim.uid.as_str()),
            format!("{} not replaced yet", victim.name),
        )?;
        self.settled(REPLICAS)
    }

    /// What `kubectl drain` does to `victim`: its node cordoned, the pod
    /// evicted (the Eviction API, which honours its disruption budget).
    /// Its node is uncordoned once it is gone ([`Cache::drained`]): it is
    /// the only node the pods can run on.
    fn evict(&self, victim: &Pod) -> Result<(), String> {
        let env = self.env;
        env.kubectl.ok(&["cordon", node::NAME])?;
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": victim.name, "namespace": self.namespace}});
        let path = format!(
            "/api/v1/namespaces/{}/pods/{}/eviction",
            self.namespace, victim.name
        );
        let outcome = env.kubectl.run(
            &["create", "--raw", &path, "-f", "-"],
            Some(&eviction.to_string()),
        );
        check(
            outcome.success,
            format!("eviction: {}", outcome.stderr.trim()),
        )
    }

    /// The node uncordoned once `victim` is gone; [`Cache::replaced`].
    fn drained(&self, victim: &Pod) -> Result<(), String> {
        let pods = instance_objects(self.env, "pods", &self.namespace, NAME)?;
        if !pods
            .iter()
            .any(|p| p["metadata"]["uid"] == victim.uid.as_str())
        {
            self.env.kubectl.ok(&["uncordon", node::NAME])?;
        }
        self.replaced(victim)
    }

    /// Every pod runs the workload's template with `-m <megabytes>`, and
    /// the Memcached is settled.
    fn rolled_out_with(&self, megabytes: u32) -> Result<(), String> {
        let kind = self.mode.workload().to_lowercase();
        let workload = (self.env.kubectl).get(&[&kind, NAME, "-n", &self.namespace])?;
        check(
            rolled_out_with_memory(&workload, megabytes),
            format!("{kind} status {}", workload["status"]),
        )?;
        self.settled(REPLICAS)
    }

    /// The notes of the Events of `reason`.
    fn notes(&self, reason: &str) -> Result<BTreeSet<String>, String> {
        Ok(event_notes(self.env, &self.namespace, reason)?
            .into_iter()
            .collect())
    }

    /// The seconds a `reason` Event not among `before` gives between
    /// `after` and ` s` (its note: `... failed, in 1.2 s; the reconcile
    /// publishing the new list began 0.01 s later`).
    fn new_event_seconds(
        &self,
        reason: &str,
        before: &BTreeSet<String>,
        after: &str,
    ) -> Result<f64, String> {
        let notes = self.notes(reason)?;
        (notes.difference(before))
            .find_map(|m| m.split_once(after)?.1.split_once(" s")?.0.parse().ok())
            .ok_or_else(|| format!("no new {reason} Event with a time after {after:?}: {notes:?}"))
    }
}
