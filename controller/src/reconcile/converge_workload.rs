//! Applying a Memcached's workload, the Deployment or the StatefulSet
//! `spec.workload` names, once a change in place or pacing had its say
//! ([`super::converge_in_place`], [`super::pace_rollout`]): its running pod template held
//! while the user's intent is the same, the autoscaler handed its replicas,
//! and the other kind deleted once the new one runs every replica ready.

use kube::ResourceExt;
use kube::api::Api;
use kube::discovery::ApiResource;
use kube::runtime::reflector::Store;
use memcached_api::MemcachedSpec;

use crate::cluster::apply::{Outcome, ensure, ensure_held, hand_over_replicas, is_controlled_by};
use crate::cluster::cache::{self, scoped};
use crate::objects::workload::{Rollout, Workload, desired_replicas, initial_replicas};
use crate::reconcile::applied::Applied;
use crate::reconcile::context::Error;
use crate::reconcile::events::Target;
use crate::reconcile::running::serving;
use memcached_api::render::stamp::TemplateStamp;

/// The workloads of one Memcached after converging.
pub(super) struct Workloads {
    /// The kind `spec.workload` names, when this Memcached controls it.
    pub(super) current: Option<Rollout>,
    /// The other kind, still serving until `current` runs every replica ready.
    pub(super) previous: Option<Rollout>,
}

/// Converge the workload `spec.workload` names (`New`, desired as `desired`)
/// and delete the other kind (`Old`) once the new one runs every replica
/// ready: the Service selects the pods of both meanwhile, so switching
/// kinds never leaves it without ready endpoints. `hold`: a Secret is
/// missing or invalid, so a running workload is left as it is.
pub(super) async fn converge_workload<New: Workload, Old: Workload>(
    applied: &mut Applied<'_>,
    spec: &MemcachedSpec,
    mut desired: New,
    hold: bool,
    (new_store, old_store): (&Store<New>, &Store<Old>),
) -> Result<Workloads, Error> {
    let (client, mc) = (&applied.ctx.client, applied.mc);
    let (name, uid) = (mc.name_any(), applied.uid.clone());
    let ns = mc.namespace().unwrap_or_default();
    let news: Api<New> = scoped(client, Some(&ns));
    let olds: Api<Old> = scoped(client, Some(&ns));
    let resource = ApiResource::erase::<New>(&());
    let target = Target {
        resource: &resource,
        name: &name,
    };
    let live = cache::get(new_store, &ns, &name)
        .or_fetch(true, news.get_opt(&name))
        .await?;
    let old = cache::get(old_store, &ns, &name)
        .or_fetch(false, olds.get_opt(&name))
        .await?
        .filter(|o| is_controlled_by(o, &uid));
    let workload = if !hold || live.is_none() {
        if spec.autoscaling_enabled() {
            match (&live, &old) {
                (Some(live), _) if is_controlled_by(live, &uid) => {
                    let handover = hand_over_replicas(&news, live).await;
                    applied.check(&target, handover).await?;
                }
                // A new workload starts as large as the autoscaler made the old
                // one, or at its lower bound; the next reconcile hands the count
                // over to the autoscaler.
                (None, old) => {
                    let replicas = old.as_ref().and_then(|o| o.rollout().replicas);
                    desired.set_replicas(replicas.unwrap_or_else(|| initial_replicas(spec)));
                }
                _ => {}
            }
        }
        let meta = live.as_ref().map(|l| l.meta());
        let (last_applied, owner) = (&applied.ctx.applied, applied.owner());
        let result = match (held_template(&desired, live.as_ref(), &uid), meta) {
            (Some(running), Some(meta)) => {
                ensure_held(
                    &news,
                    last_applied,
                    &owner,
                    &name,
                    desired.clone(),
                    running,
                    meta,
                )
                .await
            }
            _ => ensure(&news, last_applied, &owner, &name, Some(&desired), meta).await,
        };
        // Unchanged or refused: the running workload still tells how many pods serve.
        let result = result.map(|(outcome, after)| (outcome, after.or_else(|| live.clone())));
        applied.record(&target, result).await?.unwrap_or(live)
    } else {
        live
    };
    // Someone else's workload: its readiness and pods are not this
    // Memcached's. One being deleted no longer counts either.
    let current = workload.and_then(|w| serving(&w, &uid));
    let replaced = current
        .as_ref()
        .is_some_and(|r| r.complete(desired_replicas(spec, Some(r))));
    let previous = match old {
        Some(old) if replaced && old.meta().deletion_timestamp.is_none() => {
            let deleted = ensure::<Old>(
                &olds,
                &applied.ctx.applied,
                &applied.owner(),
                &name,
                None,
                Some(old.meta()),
            )
            .await
            .map(|(outcome, _)| match outcome {
                Outcome::Deleted => Outcome::Replaced,
                other => other,
            });
            applied
                .record_outcome(
                    &Target {
                        resource: &ApiResource::erase::<Old>(&()),
                        name: &name,
                    },
                    deleted,
                )
                .await?;
            None
        }
        Some(old) if old.meta().deletion_timestamp.is_none() => Some(old.rollout()),
        _ => None,
    };
    Ok(Workloads { current, previous })
}

/// The stamp of `live`'s running pod template when it must be kept instead
/// of `desired`'s (see [`memcached_api::render::stamp`]); stamped by a controller
/// before the intent itself was, it gets the intent (the same as desired's),
/// so the next warm change goes in place.
fn held_template<W: Workload>(desired: &W, live: Option<&W>, uid: &str) -> Option<TemplateStamp> {
    let live = live.filter(|l| is_controlled_by(*l, uid))?;
    let mut running = TemplateStamp::of(live.meta())?;
    let desired = TemplateStamp::of(desired.meta())?;
    if !desired.held_by(&running) {
        return None;
    }
    running.spec = running.spec.or(desired.spec);
    Some(running)
}
