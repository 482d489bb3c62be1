//! Keys handed over for a Deployment whose clients' hashing is known
//! (`spec.clientHashing`). Its clients hash over the ready pods' addresses
//! (`<ip>:11211`: configured with the pods' IPs, or resolving the headless
//! Service, which answers the ready ones), so the ready pods are the list
//! they use. Its pods carry a readiness gate ([`gate`]): a new pod whose
//! memcached is ready is filled with the keys clients will ask it for,
//! copied from the ready pods, then its gate is set and it turns ready; a
//! leaving pod (deleted, evicted, scaled down, replaced by a rollout:
//! terminating, in its preStop delay) hands its keys to the pods clients
//! ask once it is gone. One move at a time, run by [`crate::handover`] as a
//! StatefulSet's are ([`super::hand_over_keys`]): a copy that ends has its
//! Memcached reconciled again, a restarted controller copies again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use kube::ResourceExt;
use memcached_api::{Defaulted, Memcached};

use crate::cluster::gate::{self, Gated};
use crate::cluster::secrets::SecretData;
use crate::handover::board::Plan;
use crate::handover::placement::Algorithm;
use crate::objects::meta::selector_string;
use crate::reconcile::context::{Context, key};
use crate::reconcile::hand_over_keys::{algorithm, copying, handed_over, report_end, waiting_for};
use crate::reconcile::running::{Ready, leaving_endpoints, ready_endpoints, starting_endpoints};
use crate::stats::setup::client_for;

/// Pods of one move, by server (`<ip>:11211`): name and address.
type Pods = BTreeMap<String, (String, SocketAddr)>;

/// Hand `mc`'s keys over as its Deployment's pods come and go; what the
/// move waits for, for the status, while its keys are copied or a new pod
/// is not ready yet. In order:
///
/// 1. a move done: its leaving pods are recorded as handed over and the
///    gates of its new pods set, whatever changed since (then they are
///    waited for);
/// 2. a copy under way goes on, unless a pod leaves that it does not hand
///    over (their preStop delay is short);
/// 3. the next move: the leaving pods not handed over yet, to the ready
///    pods; then the new pods, filled from the ready pods; with no move, the
///    list settles (a move's copies are retired once it is the list the
///    move made).
///
/// The ready pods count those whose gate is set, whose endpoints turn ready
/// a moment later: the list clients are about to use.
pub(super) async fn hand_over_pod_keys(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
) -> Option<String> {
    let algorithm = (!spec.stateful_set()).then(|| algorithm(spec)).flatten()?;
    let key = key(mc);
    // Not listed: nothing is decided (the next reconcile lists again).
    let gated = gated(ctx, mc).await?;
    // The ready pods, and those whose gate is set (ready in a moment): the
    // list clients use.
    let mut ready = by_server(ready_endpoints(&ctx.cache, mc));
    for pod in &gated {
        if let Gated::Opened(name, address) = pod {
            (ready.entry(address.to_string())).or_insert_with(|| (name.clone(), *address));
        }
    }
    // Those that still serve (in their preStop delay) hand their keys over.
    let serving = leaving_endpoints(&ctx.cache, mc)
        .into_iter()
        .filter(|e| e.serving);
    let leaving: Pods = (by_server(serving).into_iter())
        .filter(|(server, _)| !ready.contains_key(server))
        .collect();
    let joining: Pods = (gated.iter())
        .filter_map(|pod| match pod {
            Gated::Waiting(name, address) => Some((address.to_string(), (name.clone(), *address))),
            _ => None,
        })
        .collect();
    let leaving_servers = leaving.keys().cloned().collect();
    let handed = || ctx.handovers.handed_over_by(&key, &leaving_servers);
    let pods = Moving {
        ready: &ready,
        leaving: &leaving,
        joining: &joining,
    };
    // 1. Its pods' gates set, they are waited for.
    if let Some(plan) = ctx.handovers.finished(&key) {
        run(ctx, mc, (spec, secrets), &plan, &pods).await;
        if let Some(opened) = pods.joining_in(&plan) {
            return Some(opened);
        }
    }
    // 2.
    let pending = pods.pending(&handed());
    let addresses = pods.addresses();
    let goes_on = |p: &Plan| {
        let hands_over = |s: &String| p.from.contains(s) && !p.to.contains(s);
        // Not a StatefulSet's, before a switch.
        let ours = (p.from.iter().chain(&p.to)).all(|s| addresses.contains_key(s));
        ours && pending.keys().all(hands_over)
    };
    if let Some(plan) = ctx.handovers.unfinished(&key).filter(goes_on) {
        return run(ctx, mc, (spec, secrets), &plan, &pods).await;
    }
    // 3. A leaving pod's move done, the new pods' starts at once.
    for _ in 0..2 {
        let Some(plan) = pods.next(&handed(), algorithm) else {
            let client = || client_for(mc, spec, secrets).ok();
            let listed: Vec<String> = ready.keys().cloned().collect();
            ctx.handovers.settle(&key, &listed, client);
            // Pods still starting: looked at again soon (pods are not watched).
            let starting: Vec<&str> = (gated.iter())
                .filter_map(|pod| match pod {
                    Gated::Starting(name) => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            return (!starting.is_empty()).then(|| waiting_for(&starting));
        };
        let fills = pods.joining_in(&plan);
        if let Some(copying) = run(ctx, mc, (spec, secrets), &plan, &pods).await {
            return Some(copying);
        }
        if fills.is_some() {
            return fills;
        }
    }
    None
}

/// The pods of a Deployment's moves, by server.
struct Moving<'a> {
    /// Ready: the list clients use.
    ready: &'a Pods,
    /// Terminating, still serving.
    leaving: &'a Pods,
    /// Waiting for their gate.
    joining: &'a Pods,
}

impl Moving<'_> {
    /// The leaving pods not among those that `handed` their keys over.
    fn pending(&self, handed: &BTreeSet<String>) -> Pods {
        (self.leaving.iter())
            .filter(|(server, _)| !handed.contains(*server))
            .map(|(server, pod)| (server.clone(), pod.clone()))
            .collect()
    }

    /// The next move: from the pending leaving pods to the ready ones (to
    /// the new ones, when none is ready), else from the ready pods to them
    /// and the new ones; none without either, or with no pod to take them.
    fn next(&self, handed: &BTreeSet<String>, algorithm: Algorithm) -> Option<Plan> {
        let pending = self.pending(handed);
        let none = Pods::new();
        // Sorted, as the list settled is.
        let servers = |first: &Pods, more: &Pods| -> Vec<String> {
            let all: BTreeSet<&String> = first.keys().chain(more.keys()).collect();
            all.into_iter().cloned().collect()
        };
        let (from, to) = match (pending.is_empty(), self.joining.is_empty()) {
            // No pod to take them yet: a replacement may come.
            (false, true) if self.ready.is_empty() => return None,
            (false, _) if self.ready.is_empty() => {
                (servers(&pending, &none), servers(self.joining, &none))
            }
            (false, _) => (servers(self.ready, &pending), servers(self.ready, &none)),
            (true, false) => (
                servers(self.ready, &none),
                servers(self.ready, self.joining),
            ),
            (true, true) => return None,
        };
        Some(Plan {
            algorithm,
            from,
            to,
        })
    }

    /// The new pods of `plan` waiting for their gate, for the status:
    /// `keys are handed over once c-7d9f-x2x4q is ready`; none without.
    fn joining_in(&self, plan: &Plan) -> Option<String> {
        let names: Vec<&str> = (self.joining.iter())
            .filter(|(server, _)| plan.to.contains(server))
            .map(|(_, (pod, _))| pod.as_str())
            .collect();
        (!names.is_empty()).then(|| waiting_for(&names))
    }

    /// Where every pod answers, by server.
    fn addresses(&self) -> BTreeMap<String, SocketAddr> {
        (self.ready.iter().chain(self.leaving).chain(self.joining))
            .map(|(server, (_, address))| (server.clone(), *address))
            .collect()
    }
}

/// Run `plan` for `mc`: what it waits for while its keys are copied. Once
/// done (or with nothing to copy, or no client to copy with) its leaving
/// pods are recorded as handed over and the gates of its new pods that
/// still wait are set.
async fn run(
    ctx: &Context,
    mc: &Memcached,
    (spec, secrets): (&Defaulted, &SecretData),
    plan: &Plan,
    pods: &Moving<'_>,
) -> Option<String> {
    let key = key(mc);
    // Nothing to copy from or to: a first pod, a last one leaving.
    let nothing = plan.from.is_empty() || plan.to.is_empty();
    let client = || client_for(mc, spec, secrets).ok();
    // Without a client (TLS cannot be set up: the stats warn about it),
    // the move goes on.
    let state = (!nothing)
        .then(|| ctx.handovers.step(&key, plan, client, &pods.addresses()))
        .flatten();
    let message = match &state {
        Some(state) if !state.done => return Some(copying(state)),
        Some(state) => {
            let moved = (plan.first_moved())
                .and_then(|s| pods.joining.get(s).or_else(|| pods.leaving.get(s)));
            let pod = moved.map_or("", |(name, _)| name.as_str());
            report_end(ctx, mc, plan, state, pod).await;
            handed_over(plan, state)
        }
        None if nothing => "no keys to take: no other pod was ready".to_string(),
        None => {
            "keys not copied: no client for memcached (see the Memcached's conditions)".to_string()
        }
    };
    let gone = (plan.from.iter()).filter(|s| !plan.to.contains(s));
    ctx.handovers.left(&key, gone.cloned());
    let joined = (pods.joining.iter()).filter(|(server, _)| plan.to.contains(server));
    for (_, (pod, _)) in joined {
        open(ctx, mc, pod, &message).await;
    }
    None
}

/// `endpoints` by server, with their pod's name.
fn by_server(endpoints: impl IntoIterator<Item = Ready>) -> Pods {
    (endpoints.into_iter())
        .filter_map(|e| Some((e.address.to_string(), (e.pod?, e.address))))
        .collect()
}

/// `mc`'s pods whose readiness waits for their gate, listed only while one
/// of its endpoints is neither ready nor leaving; `None` when they cannot
/// be listed.
async fn gated(ctx: &Context, mc: &Memcached) -> Option<Vec<Gated>> {
    if starting_endpoints(&ctx.cache, mc).is_empty() {
        return Some(Vec::new());
    }
    let namespace = mc.namespace().unwrap_or_default();
    match gate::gated(&ctx.client, &namespace, &selector_string(mc)).await {
        Ok(pods) => Some(pods),
        Err(error) => {
            tracing::warn!(%error, memcached = %key(mc), "cannot list the pods waiting for their keys");
            None
        }
    }
}

/// Set `pod`'s gate, saying what its move did (`message`).
async fn open(ctx: &Context, mc: &Memcached, pod: &str, message: &str) {
    let namespace = mc.namespace().unwrap_or_default();
    if let Err(error) = gate::open(&ctx.client, &namespace, pod, message).await {
        tracing::warn!(%error, pod, memcached = %key(mc), "cannot set the pod's readiness gate");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pods by server, `10.0.0.<n>:11211`, named `c-<n>`.
    fn pods(ns: &[u8]) -> Pods {
        (ns.iter())
            .map(|n| {
                let address = SocketAddr::from(([10, 0, 0, *n], 11211));
                (address.to_string(), (format!("c-{n}"), address))
            })
            .collect()
    }

    fn servers(ns: &[u8]) -> Vec<String> {
        pods(ns).into_keys().collect()
    }

    /// A leaving pod hands its keys to the ready ones first; once it did,
    /// the new pods are filled from the ready ones; the lists sorted as
    /// the ready pods are.
    #[test]
    fn leaving_pods_go_first_then_new_pods_are_filled() {
        let (ready, leaving, joining) = (pods(&[3, 10, 4]), pods(&[5]), pods(&[12]));
        let moving = Moving {
            ready: &ready,
            leaving: &leaving,
            joining: &joining,
        };
        let plan = |handed: &[u8]| {
            let handed = servers(handed).into_iter().collect();
            moving
                .next(&handed, Algorithm::Rendezvous)
                .map(|p| (p.from, p.to))
        };
        assert_eq!(
            plan(&[]),
            Some((servers(&[3, 4, 5, 10]), servers(&[3, 4, 10]))),
            "the leaving pod first, to the ready ones"
        );
        assert_eq!(
            plan(&[5]),
            Some((servers(&[3, 4, 10]), servers(&[3, 4, 10, 12]))),
            "then the new pod, from the ready ones"
        );
        let none = Pods::new();
        let still = Moving {
            joining: &none,
            ..moving
        };
        let handed = servers(&[5]).into_iter().collect();
        assert_eq!(still.next(&handed, Algorithm::Ketama), None, "no move");
        // The only pod deleted: its keys go to its replacement.
        let alone = Moving {
            ready: &none,
            ..moving
        };
        let to_the_new = alone.next(&BTreeSet::new(), Algorithm::Rendezvous);
        assert_eq!(
            to_the_new.map(|p| (p.from, p.to)),
            Some((servers(&[5]), servers(&[12])))
        );
        let nobody = Moving {
            joining: &none,
            ..alone
        };
        assert_eq!(
            nobody.next(&BTreeSet::new(), Algorithm::Rendezvous),
            None,
            "no pod to take them yet"
        );
        assert_eq!(
            servers(&[3, 4, 10]),
            ready.keys().cloned().collect::<Vec<_>>(),
            "the ready pods' order"
        );
    }
}
