//! Keys handed over for a Deployment whose clients' hashing is known
//! (`spec.clientHashing`). Its clients hash over the ready pods' addresses
//! (`<ip>:11211`: configured with the pods' IPs, or resolving the headless
//! Service, which answers the ready ones), so the ready pods are the list
//! they use. Its pods carry a readiness gate ([`gate`]): a new pod whose
//! memcached is ready is filled with the keys clients will ask it for,
//! copied from the ready pods, then its gate is set and it turns ready; a
//! leaving pod (deleted, evicted, scaled down, replaced by a rollout:
//! terminating, in its preStop delay) hands its keys to the pods clients
//! ask once it is gone. Both at once are one move, run by
//! [`crate::handover`] as a StatefulSet's are ([`super::hand_over_keys`]):
//! a copy that ends has its Memcached reconciled again, a copy under way
//! goes on while pods come and go, a restarted controller copies again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use kube::ResourceExt;
use memcached_api::{Defaulted, Memcached};

use crate::cluster::gate;
use crate::cluster::secrets::SecretData;
use crate::handover::board::{Plan, State};
use crate::handover::placement::Algorithm;
use crate::objects::meta::selector_string;
use crate::reconcile::context::{Context, key};
use crate::reconcile::hand_over_keys::{algorithm, copying, handed_over, report_end};
use crate::reconcile::running::{Ready, leaving_endpoints, ready_endpoints, starting_endpoints};
use crate::stats::setup::client_for;

/// Pods of one move, by server (`<ip>:11211`): name and address.
type Pods = BTreeMap<String, (String, SocketAddr)>;

/// Hand `mc`'s keys over as its Deployment's pods come and go; what the
/// move waits for, for the status, while its keys are copied. A copy under
/// way goes on while pods come and go, unless a pod leaves that it does not
/// copy from. Else the leaving pods not handed over yet go first (their
/// preStop delay is short), to the ready pods; then the new pods are
/// filled from the ready pods, and their gates set.
pub(super) async fn hand_over_pod_keys(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
) -> Option<String> {
    let algorithm = (!spec.stateful_set()).then(|| algorithm(spec)).flatten()?;
    let key = key(mc);
    let ready = by_server(ready_endpoints(&ctx.cache, mc));
    // Those that still serve (in their preStop delay) hand their keys over.
    let serving = leaving_endpoints(&ctx.cache, mc)
        .into_iter()
        .filter(|e| e.serving);
    let leaving: Pods = (by_server(serving).into_iter())
        .filter(|(server, _)| !ready.contains_key(server))
        .collect();
    let joining = waiting(ctx, mc).await;
    let pods = Moving {
        ready: &ready,
        leaving: &leaving,
        joining: &joining,
    };
    let leaving_servers = leaving.keys().cloned().collect();
    let handed = || ctx.handovers.handed_over_by(&key, &leaving_servers);
    let mut unfinished = (ctx.handovers.unfinished(&key))
        .filter(|p| pods.pending(&handed()).keys().all(|s| p.from.contains(s)));
    // A leaving pod's move done, the new pods' starts at once.
    for _ in 0..2 {
        let next = || pods.next(&handed(), algorithm);
        let Some(plan) = unfinished.take().or_else(next) else {
            let client = || client_for(mc, spec, secrets).ok();
            let listed: Vec<String> = ready.keys().cloned().collect();
            ctx.handovers.settle(&key, &listed, client);
            return None;
        };
        if let Some(copying) = run(ctx, mc, (spec, secrets), &plan, &pods).await {
            return Some(copying);
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

    /// The next move: from the pending leaving pods to the ready ones, else
    /// from the ready pods to them and the new ones; none without either.
    fn next(&self, handed: &BTreeSet<String>, algorithm: Algorithm) -> Option<Plan> {
        let pending = self.pending(handed);
        // Sorted, as the list settled is.
        let servers = |more: &Pods| -> Vec<String> {
            let all: BTreeSet<&String> = self.ready.keys().chain(more.keys()).collect();
            all.into_iter().cloned().collect()
        };
        let (from, to) = match (pending.is_empty(), self.joining.is_empty()) {
            (false, _) => (servers(&pending), servers(&Pods::new())),
            (true, false) => (servers(&Pods::new()), servers(self.joining)),
            (true, true) => return None,
        };
        Some(Plan {
            algorithm,
            from,
            to,
        })
    }

    /// Where every pod answers, by server.
    fn addresses(&self) -> BTreeMap<String, SocketAddr> {
        (self.ready.iter().chain(self.leaving).chain(self.joining))
            .map(|(server, (_, address))| (server.clone(), *address))
            .collect()
    }
}

/// Run `plan` for `mc`: what it waits for while its keys are copied; once
/// done (or with nothing to copy, or no client to copy with) its leaving
/// pods are recorded as handed over and its new pods' gates set.
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
    if let Some(state) = &state {
        if !state.done {
            return Some(copying(state));
        }
        let moved = (plan.to.iter().chain(&plan.from))
            .find(|s| !plan.from.contains(s) || !plan.to.contains(s))
            .and_then(|s| pods.joining.get(s).or_else(|| pods.leaving.get(s)));
        let pod = moved.map_or("", |(name, _)| name.as_str());
        report_end(ctx, mc, plan, state, pod).await;
    }
    let gone = (plan.from.iter()).filter(|s| !plan.to.contains(s));
    ctx.handovers.left(&key, gone.cloned());
    let joined = (pods.joining.iter()).filter(|(server, _)| plan.to.contains(server));
    for (_, (pod, _)) in joined {
        open(ctx, mc, pod, plan, state.as_ref()).await;
    }
    None
}

/// `endpoints` by server, with their pod's name.
fn by_server(endpoints: impl IntoIterator<Item = Ready>) -> Pods {
    (endpoints.into_iter())
        .filter_map(|e| Some((e.address.to_string(), (e.pod?, e.address))))
        .collect()
}

/// `mc`'s pods waiting for their gate, listed only while one of its
/// endpoints is neither ready nor leaving; none when they cannot be listed
/// (the next reconcile tries again).
async fn waiting(ctx: &Context, mc: &Memcached) -> Pods {
    if starting_endpoints(&ctx.cache, mc).is_empty() {
        return Pods::new();
    }
    let namespace = mc.namespace().unwrap_or_default();
    match gate::waiting(&ctx.client, &namespace, &selector_string(mc)).await {
        Ok(pods) => (pods.into_iter())
            .map(|(pod, address)| (address.to_string(), (pod, address)))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, memcached = %key(mc), "cannot list the pods waiting for their keys");
            Pods::new()
        }
    }
}

/// Set `pod`'s gate once `plan` is done (`state`; `None`: nothing was
/// copied), saying what the move did.
async fn open(ctx: &Context, mc: &Memcached, pod: &str, plan: &Plan, state: Option<&State>) {
    let message = match state {
        Some(state) => handed_over(plan, state),
        None => "no keys to take: no other pod was ready".to_string(),
    };
    let namespace = mc.namespace().unwrap_or_default();
    if let Err(error) = gate::open(&ctx.client, &namespace, pod, &message).await {
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
        assert_eq!(
            servers(&[3, 4, 10]),
            ready.keys().cloned().collect::<Vec<_>>(),
            "the ready pods' order"
        );
    }
}
