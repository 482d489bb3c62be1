//! Keys handed over when a StatefulSet whose clients' hashing is known
//! (`spec.clientHashing`) scales: the server list clients hash over changes
//! only once the keys that move are copied where clients will ask for them
//! ([`crate::handover`]), and a leaving pod runs until its keys are copied
//! (not under autoscaling: the HorizontalPodAutoscaler sets the replicas,
//! and its scale-down removes a pod at once). The published list
//! (`status.serverList`) is what clients use now; the move is from it to
//! the list of the pods wanted (`spec.replicas`, or the autoscaler's),
//! level-triggered: a restarted controller copies again (a copy never
//! overwrites what a client wrote). Once published, the keys a scale-up
//! moved are retired where they were ([`crate::handover::retire`]).
//!
//! A pod deleted or evicted (terminating while it still serves, in its
//! preStop delay) leaves the list the same way: its keys are copied to the
//! pods clients will ask while it is away, then it is unlisted; its
//! replacement (the same name) is listed again once the keys clients will
//! ask it for are copied back, as a new pod's are.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::discovery::ApiResource;
use kube::{Resource, ResourceExt};
use memcached_api::types::{KETAMA, RENDEZVOUS};
use memcached_api::{Defaulted, Memcached};

use crate::cluster::secrets::SecretData;
use crate::handover::board::{DEADLINE, Plan, State};
use crate::handover::placement::Algorithm;
use crate::objects::meta;
use crate::objects::server_list::{self, pod_server};
use crate::objects::workload::desired_replicas;
use crate::reconcile::context::{Context, key};
use crate::reconcile::events::{Target, inform};
use crate::reconcile::running::{leaving_endpoints, ready_endpoints, running_workload};
use crate::stats::setup::client_for;

/// A move held while its keys are copied, or just done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Servers to publish: those clients use now, or the move's new list
    /// once its copy is done.
    pub listed: Vec<String>,
    /// Replicas the StatefulSet runs meanwhile: the leaving pods kept
    /// (`None` under autoscaling, the HorizontalPodAutoscaler sets them, or
    /// once done).
    pub replicas: Option<i32>,
    /// What the move waits for, for the status (`None`: done).
    pub message: Option<String>,
}

/// The pods of a Memcached whose keys are handed over that are leaving
/// (terminating: deleted, evicted), read once per reconcile.
#[derive(Default)]
pub struct Leaving {
    /// Their servers: away until their replacements are listed again.
    pub servers: BTreeSet<String>,
    /// Where those that still serve (in their preStop delay) answer.
    serving: BTreeMap<String, SocketAddr>,
}

/// The move `mc` holds back while keys are handed over, or the list to
/// publish once its copy is done (`None`: no move).
pub(super) async fn hand_over_keys(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
    leaving: &Leaving,
) -> Option<Held> {
    let key = key(mc);
    let running = spec
        .autoscaling_enabled()
        .then(|| running_workload(ctx, mc.meta(), true).1);
    let wanted = desired_replicas(spec, running.flatten().as_ref());
    // What this controller published last, else the status (after a restart).
    let status = || mc.status.as_ref().and_then(|s| s.server_list.clone());
    let listed = ctx.handovers.published(&key, mc.uid()).or_else(status);
    // A copy under way goes on while its pods come and go (a leaving pod
    // gone before it ends), unless another move is needed.
    let unfinished =
        || (ctx.handovers.unfinished(&key)).filter(|p| listed.as_ref() == Some(&p.from));
    let needed = needed_move(mc, spec, wanted, listed.clone(), &leaving.servers);
    let Some(plan) = needed.or_else(unfinished) else {
        let client = || client_for(mc, spec, secrets).ok();
        ctx.handovers
            .settle(&key, listed.as_deref().unwrap_or_default(), client);
        return None;
    };
    let held = |message: String| Held {
        listed: plan.from.clone(),
        replicas: (!spec.autoscaling_enabled()).then(|| pods_spanned(mc, &plan).max(wanted)),
        message: Some(message),
    };
    let ready: BTreeMap<String, SocketAddr> = (ready_endpoints(&ctx.cache, mc).into_iter())
        .filter_map(|e| Some((pod_server(mc, &e.hostname?), e.address)))
        .collect();
    // New pods are listed once ready and filled; an old pod not ready has
    // no keys to give or take, and does not hold the move.
    let waiting: Vec<&str> = (plan.to.iter())
        .filter(|s| !plan.from.contains(s) && !ready.contains_key(*s))
        .filter_map(|s| s.split('.').next())
        .collect();
    if !waiting.is_empty() {
        return Some(held(waiting_for(&waiting)));
    }
    // Without a client (TLS cannot be set up: the stats warn about it), the
    // move goes on.
    let client = || client_for(mc, spec, secrets).ok();
    let mut addresses = ready;
    addresses.extend(leaving.serving.clone());
    let state = ctx.handovers.step(&key, &plan, client, &addresses)?;
    if !state.done {
        return Some(held(copying(&state)));
    }
    let pod = (plan.first_moved().and_then(|s| server_list::ordinal(mc, s)))
        .map(|ordinal| format!("{}-{ordinal}", meta::name(mc)))
        .unwrap_or_default();
    report_end(ctx, mc, &plan, &state, &pod).await;
    // Done: the new list is published, even if a pod it left out is gone
    // meanwhile (its replacement is listed once it took its keys back).
    Some(Held {
        listed: plan.to,
        replicas: None,
        message: None,
    })
}

/// Once per handover of `mc`, once `plan`'s copy is done (`state`): the
/// metric counts its keys, and an Event about `pod` (the first that joins or
/// leaves) says what it did. Events of one reason about one object fold
/// into a series that keeps the first note: each direction has its reason.
pub(super) async fn report_end(
    ctx: &Context,
    mc: &Memcached,
    plan: &Plan,
    state: &State,
    pod: &str,
) {
    if !ctx.handovers.first_report(&key(mc)) {
        return;
    }
    let p = &state.progress;
    ctx.metrics
        .handed_over(p.copied, p.skipped + p.unfit, p.failed);
    let grows = plan.to.iter().any(|s| !plan.from.contains(s));
    let reason = if grows {
        "KeysCopiedToNewPods"
    } else {
        "KeysCopiedFromLeavingPods"
    };
    let pods = ApiResource::erase::<Pod>(&());
    let target = Target {
        resource: &pods,
        name: pod,
    };
    inform(ctx, mc, reason, handed_over(plan, state), &target).await;
}

/// Record `servers` as what `mc`'s clients use, when its keys are handed
/// over: the next reconcile moves from them, even if it reads `mc` before
/// the status written with them.
pub(super) fn published(ctx: &Context, mc: &Memcached, spec: &Defaulted, servers: &[String]) {
    let handed_over = clients_hashing(spec).is_some();
    (ctx.handovers).publish(&key(mc), mc.uid(), handed_over.then_some(servers));
}

/// `mc`'s leaving pods, when its keys are handed over (a StatefulSet whose
/// clients' hashing is known; else none).
pub(super) fn leaving(ctx: &Context, mc: &Memcached, spec: &Defaulted) -> Leaving {
    if clients_hashing(spec).is_none() {
        return Leaving::default();
    }
    let mut leaving = Leaving::default();
    for endpoint in leaving_endpoints(&ctx.cache, mc) {
        let Some(server) = endpoint.hostname.map(|host| pod_server(mc, &host)) else {
            continue;
        };
        if endpoint.serving {
            leaving.serving.insert(server.clone(), endpoint.address);
        }
        leaving.servers.insert(server);
    }
    leaving
}

/// How `spec`'s clients place keys, when its keys are handed over as a
/// StatefulSet's are (through `status.serverList`).
fn clients_hashing(spec: &Defaulted) -> Option<Algorithm> {
    spec.stateful_set().then(|| algorithm(spec)).flatten()
}

/// How `spec`'s clients place keys (`spec.clientHashing`), when known.
pub(super) fn algorithm(spec: &Defaulted) -> Option<Algorithm> {
    match spec.client_hashing.as_deref()? {
        RENDEZVOUS => Some(Algorithm::Rendezvous),
        KETAMA => Some(Algorithm::Ketama),
        _ => None,
    }
}

/// The pods a StatefulSet runs while `plan` moves: up to the highest
/// ordinal of either list.
fn pods_spanned(mc: &Memcached, plan: &Plan) -> i32 {
    (plan.from.iter().chain(&plan.to))
        .filter_map(|s| server_list::ordinal(mc, s))
        .max()
        .map_or(0, |last| last + 1)
}

/// The move `mc` needs from the servers its clients were given (`listed`)
/// to its `wanted` pods: its StatefulSet scales (not to or from zero) or a
/// pod is `away` (leaving, or replaced and not listed yet), the clients'
/// hashing is known, and the list names its pods. Listed pods that leave
/// hand their keys over first, alone: a move that also waits for a new pod
/// to be ready would hold them until they are gone.
fn needed_move(
    mc: &Memcached,
    spec: &Defaulted,
    wanted: i32,
    listed: Option<Vec<String>>,
    away: &BTreeSet<String>,
) -> Option<Plan> {
    let algorithm = clients_hashing(spec)?;
    let from = listed?;
    let mut to = if from.iter().any(|s| away.contains(s)) {
        from.clone()
    } else {
        server_list::build(mc, true, wanted)
    };
    to.retain(|s| !away.contains(s));
    let pods = from.iter().all(|s| server_list::ordinal(mc, s).is_some());
    let moves = !from.is_empty() && !to.is_empty() && from != to;
    (pods && moves).then_some(Plan {
        algorithm,
        to,
        from,
    })
}

/// `keys are handed over once c-7d9f-x2x4q is ready`.
pub(super) fn waiting_for(pods: &[&str]) -> String {
    match pods {
        [one] => format!("keys are handed over once {one} is ready"),
        many => format!("keys are handed over once {} are ready", many.join(", ")),
    }
}

/// `handing over keys: 3210 of 5051 tried (1 s of at most 60 s)`.
pub(super) fn copying(state: &State) -> String {
    let p = &state.progress;
    format!(
        "handing over keys: {} of {} tried ({} s of at most {} s)",
        p.copied + p.skipped + p.failed + p.unfit,
        p.moving,
        state.elapsed.as_secs(),
        DEADLINE.as_secs()
    )
}

/// What a finished handover did, and how long after its copy the reconcile
/// that publishes the new list (and releases the leaving pods) began, for
/// its Event.
pub(super) fn handed_over(plan: &Plan, state: &State) -> String {
    let p = &state.progress;
    let mut note = format!(
        "{} -> {} servers: {} of {} keys that move copied ({} taken back: changed meanwhile), {} already there or gone, {} more than the servers hold, {} failed, in {:.1} s; the reconcile publishing the new list began {:.2} s later",
        plan.from.len(),
        plan.to.len(),
        p.copied,
        p.moving,
        p.withdrawn,
        p.skipped,
        p.unfit,
        p.failed,
        state.elapsed.as_secs_f64(),
        state.since_done.as_secs_f64()
    );
    if let Some(why) = &p.stopped {
        note.push_str(&format!("; stopped early: {why}"));
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::workload::Rollout;
    use serde_json::{Value, json};

    /// Memcached `c` in `ns` with `spec`, its clients last given `listed`
    /// servers, its StatefulSet set to `running` replicas.
    fn plan_of(spec: Value, listed: Value, running: Option<i32>) -> Option<Plan> {
        plan_away(spec, listed, running, &[])
    }

    /// [`plan_of`] while the pods of ordinals `away` are leaving.
    fn plan_away(spec: Value, listed: Value, running: Option<i32>, away: &[usize]) -> Option<Plan> {
        let mc = memcached(spec);
        let listed = serde_json::from_value(listed).unwrap();
        let rollout = running.map(|replicas| Rollout {
            replicas: Some(replicas),
            ..Default::default()
        });
        let away = away.iter().map(|i| server(*i)).collect();
        let spec = memcached_api::apply_defaults(mc.spec.clone());
        let wanted = desired_replicas(&spec, rollout.as_ref());
        needed_move(&mc, &spec, wanted, listed, &away)
    }

    fn server(ordinal: usize) -> String {
        format!("c-{ordinal}.c.ns.svc:11211")
    }

    /// The Memcached `c` of the tests, its spec `spec`.
    fn memcached(spec: Value) -> Memcached {
        serde_json::from_value(json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    fn pods(n: usize) -> Value {
        json!((0..n).map(server).collect::<Vec<_>>())
    }

    /// A deleted or evicted pod hands its keys to the others and leaves the
    /// list; its replacement is listed again once filled, as a new pod is.
    #[test]
    fn a_leaving_pod_hands_its_keys_over_and_its_replacement_takes_them_back() {
        let spec = json!({"workload": "StatefulSet", "replicas": 3, "clientHashing": "rendezvous"});
        let leaving = plan_away(spec.clone(), pods(3), None, &[1]).expect("c-1 leaves");
        assert_eq!(leaving.to, vec![server(0), server(2)]);
        let mc = memcached(spec.clone());
        assert_eq!(pods_spanned(&mc, &leaving), 3, "no pod removed meanwhile");
        let listed = json!([server(0), server(2)]);
        assert_eq!(
            plan_away(spec.clone(), listed.clone(), None, &[1]),
            None,
            "away"
        );
        let back = plan_away(spec.clone(), listed, None, &[]).expect("c-1 replaced");
        assert_eq!(
            (back.from.len(), back.to),
            (2, (0..3).map(server).collect())
        );
        let one = json!({"workload": "StatefulSet", "replicas": 1, "clientHashing": "ketama"});
        assert_eq!(
            plan_away(one, pods(1), None, &[0]),
            None,
            "no pod to take them"
        );
        // c-1 leaves while a scale-up waits for c-3: its keys go first.
        let four = json!({"workload": "StatefulSet", "replicas": 4, "clientHashing": "rendezvous"});
        let first = plan_away(four, pods(3), None, &[1]).expect("c-1 leaves");
        assert_eq!(first.to, vec![server(0), server(2)]);
        // Scaled to 2 while c-1 is away: c-2 runs until its keys are copied.
        let two = json!({"workload": "StatefulSet", "replicas": 2, "clientHashing": "rendezvous"});
        let plan = plan_away(two.clone(), json!([server(0), server(2)]), None, &[]).unwrap();
        assert_eq!(plan.to, vec![server(0), server(1)]);
        assert_eq!(pods_spanned(&memcached(two), &plan), 3);
    }

    #[test]
    fn a_scaled_stateful_set_with_known_hashing_moves_from_the_published_list() {
        let spec = json!({"workload": "StatefulSet", "replicas": 4, "clientHashing": "ketama"});
        let plan = plan_of(spec, pods(3), None).expect("3 -> 4");
        assert_eq!(plan.algorithm, Algorithm::Ketama);
        assert_eq!((plan.from.len(), plan.to.len()), (3, 4));
        assert_eq!(plan.to[3], "c-3.c.ns.svc:11211");
    }

    #[test]
    fn an_autoscaled_stateful_set_moves_to_the_replicas_it_runs() {
        let spec = json!({"workload": "StatefulSet", "clientHashing": "rendezvous",
            "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 5}});
        let plan = plan_of(spec.clone(), pods(3), Some(4)).expect("3 -> 4");
        assert_eq!((plan.from.len(), plan.to.len()), (3, 4));
        assert_eq!(plan_of(spec, pods(3), Some(3)), None, "no move");
    }

    #[test]
    fn no_move_without_one_to_hand_over() {
        let stateful = |extra: Value| {
            let mut spec =
                json!({"workload": "StatefulSet", "replicas": 2, "clientHashing": "rendezvous"});
            spec.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            spec
        };
        let cases = [
            (
                "the clients' hashing unknown",
                stateful(json!({"clientHashing": null})),
                pods(3),
            ),
            (
                "a Deployment",
                stateful(json!({"workload": "Deployment"})),
                pods(3),
            ),
            ("the list already published", stateful(json!({})), pods(2)),
            ("nothing published yet", stateful(json!({})), json!([])),
            ("scaled to zero", stateful(json!({"replicas": 0})), pods(3)),
            (
                "a Deployment's list published (a switch)",
                stateful(json!({})),
                json!(["c.ns:11211"]),
            ),
            (
                "autoscaling",
                stateful(
                    json!({"replicas": null, "autoscaling": {"enabled": true, "maxReplicas": 4}}),
                ),
                pods(3),
            ),
        ];
        for (name, spec, listed) in cases {
            assert_eq!(plan_of(spec, listed, None), None, "{name}");
        }
    }
}
