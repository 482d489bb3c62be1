//! Converging one Memcached, level-triggered: everything is computed from
//! the CR and the cluster as they are now. [`reconcile`] is its steps:
//!
//! 1. judge the stored spec as the policy would; a refused one is reported on
//!    itself and nothing is applied ([`refuse`]);
//! 2. read the Secrets it mounts ([`read_secrets`]);
//! 3. converge its objects, one after the other: the workload first, changed
//!    in place or paced, switching kinds without a gap
//!    ([`converge_workload`], with [`converge_in_place`] and
//!    [`pace_rollout`]; under `spec.clientHashing` a StatefulSet scaling
//!    held while its keys are handed over, [`hand_over_keys`], and a
//!    Deployment's new pods gated until they hold theirs,
//!    [`hand_over_pod_keys`]); then the Service, PodDisruptionBudget,
//!    HorizontalPodAutoscaler, NetworkPolicy and ServiceMonitor ([`applied`]
//!    records each outcome), and the server list ([`publish_server_list`]);
//! 4. report: the metrics, memcached's numbers, the status ([`report`],
//!    computed purely by [`status`]), and when to look again.
//!
//! [`context`] holds what every step shares: the [`Context`], the [`Error`],
//! the [`Problem`](context::Problem)s reported as `Degraded` and their
//! reasons. [`events`] writes the Events; [`running`] tells what runs for a
//! Memcached, as the cache sees it; [`streaks`] counts the failures and
//! stalls behind the backoff.
//!
//! The API server is called from here and from the rooms below: the applies
//! of [`crate::cluster::apply`], the Secrets' data
//! ([`crate::cluster::secrets`]), the pods and ReplicaSets of a change in
//! place or a paced rollout ([`crate::rollout`]). memcached is never waited
//! for: its numbers are collected in the background ([`crate::stats::live`]).
//!
//! May use: `objects`, `cluster`, `stats`, `handover`, `rollout`, `metrics`.

pub mod applied;
pub mod certificates;
pub mod context;
pub mod converge_in_place;
pub mod converge_workload;
pub mod events;
pub mod hand_over_keys;
pub mod hand_over_pod_keys;
pub mod pace_rollout;
pub mod publish_server_list;
pub mod read_secrets;
pub mod refuse;
pub mod report;
pub mod running;
pub mod status;
pub mod streaks;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use memcached_api::validation;
use memcached_api::{Defaulted, Memcached, MemcachedSpec};

use crate::cluster::secrets::mounted_auth_key;
use crate::cluster::stored::Stored;
use crate::objects::desired::{Desired, Workload as DesiredWorkload};
use crate::reconcile::applied::Applied;
use crate::reconcile::context::{Context, Error, key};
use crate::reconcile::converge_in_place::{
    converge_in_place, converge_stateful_in_place, inform_in_place,
};
use crate::reconcile::converge_workload::{Workloads, converge_workload};
use crate::reconcile::hand_over_keys::hand_over_keys;
use crate::reconcile::hand_over_pod_keys::hand_over_pod_keys;
use crate::reconcile::pace_rollout::{pace, pace_deployment};
use crate::reconcile::read_secrets::{SecretsSeen, read_secrets};
use crate::reconcile::refuse::{refuse_invalid, refuse_unreadable};
use crate::reconcile::report::{Converged, report};
use crate::reconcile::running::running_workload;
use crate::reconcile::status::observe;

/// Converge one Memcached: judge its spec, read the Secrets it mounts,
/// converge its objects, then write what was found to its status.
#[tracing::instrument(skip_all, fields(namespace = mc.namespace().unwrap_or_default(), name = mc.name_any()))]
pub async fn reconcile(mc: Arc<Memcached>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Being deleted: the garbage collector removes the children; applying now would race it.
    if mc.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // 1. Judge the spec as the policy would: refused, nothing is applied.
    let name = mc.name_any();
    let object = validation::ObjectName {
        name: &name,
        generate_name: mc.metadata.generate_name.as_deref().unwrap_or_default(),
    };
    let checked = validation::check(object, carry_scale_over(&ctx, &mc), &ctx.validation);
    let spec = checked.spec;
    if !checked.errors.is_empty() {
        return refuse_invalid(&ctx, &mc, &spec, &checked.errors).await;
    }
    // 2. Read the Secrets it mounts.
    let secrets = read_secrets(&ctx, &mc, &spec).await?;
    // 3. Converge its objects, the workload first.
    let converged = converge_children(&ctx, &mc, &spec, &secrets).await?;
    // 4. Report what was found, and say when to look again.
    report(&ctx, &mc, &spec, &secrets.data, converged).await
}

/// Apply every object `spec` asks for and delete what it no longer does,
/// one object after the other as the Go operator's `reconcileDeployment`,
/// `reconcileService`... do, the workload first; then tell what was found.
async fn converge_children(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretsSeen,
) -> Result<Converged, Error> {
    mc.namespace().ok_or(Error::Incomplete("namespace"))?;
    let uid = mc.uid().ok_or(Error::Incomplete("uid"))?;
    let hash = secrets.stamp.as_ref().map(|s| s.hash.as_str());
    let auth_key = mounted_auth_key(spec, &secrets.data);
    let mut desired = Desired::new(mc, spec, hash, auth_key, &ctx.installation);
    if let Some(stamp) = secrets.stamp.clone() {
        desired.workload.stamp(stamp);
    }

    let mut applied = Applied::new(ctx, mc);
    // A missing or invalid Secret would break running pods on rollout
    // (every client login would fail): keep them until it is fixed.
    let hold = !secrets.missing.is_empty() || secrets.invalid_auth.is_some();
    let cache = &ctx.cache;
    // The workload: a change warm restarts can take applied in place (not
    // while held), any other rollout paced, then applied, and the other
    // kind deleted once it is replaced.
    let (mut in_place, mut warming, mut handover) = (None, None, None);
    let mut pods_handing_over = None;
    // Read once: the handover and the published list agree on who leaves.
    let leaving = hand_over_keys::leaving(ctx, mc, spec);
    let workloads = match desired.workload {
        DesiredWorkload::Deployment(mut d) => {
            pods_handing_over = hand_over_pod_keys(ctx, mc, spec, &secrets.data).await;
            if !hold && spec.warm_restart_enabled() {
                in_place = converge_in_place(&mut applied, spec, &uid, &mut d).await?;
            }
            if in_place.is_none() {
                warming = pace_deployment(ctx, mc, spec, &mut d, &mut applied.problems).await?;
            }
            let stores = (&cache.deployments, &cache.stateful_sets);
            converge_workload(&mut applied, spec, d, hold, stores).await?
        }
        DesiredWorkload::StatefulSet(mut s) => {
            handover = hand_over_keys(ctx, mc, spec, &secrets.data, &leaving).await;
            let held = handover.as_ref().and_then(|h| h.replicas);
            if let (Some(replicas), Some(s)) = (held, s.spec.as_mut()) {
                s.replicas = Some(replicas);
            }
            if !hold && spec.warm_restart_enabled() {
                in_place = converge_stateful_in_place(&mut applied, spec, &uid, &mut s).await?;
            }
            if in_place.is_none() {
                warming = pace(ctx, mc, &mut s).await?;
            }
            let stores = (&cache.stateful_sets, &cache.deployments);
            converge_workload(&mut applied, spec, s, hold, stores).await?
        }
    };
    applied
        .converge_kind(&cache.services, Some(&desired.service))
        .await?;
    applied
        .converge_kind(&cache.pdbs, desired.pdb.as_ref())
        .await?;
    applied
        .converge_kind(&cache.hpas, desired.hpa.as_ref())
        .await?;
    applied
        .converge_kind(&cache.network_policies, desired.network_policy.as_ref())
        .await?;
    applied
        .converge_service_monitor(desired.service_monitor.as_ref())
        .await?;
    let (servers, list_stable) = publish_server_list::converge(
        &mut applied,
        spec,
        &workloads,
        handover.as_ref(),
        &leaving.servers,
    )
    .await?;
    hand_over_keys::published(ctx, mc, spec, &servers);

    // What was found.
    let Applied {
        mut problems,
        foreign,
        ..
    } = applied;
    problems.splice(0..0, secrets.invalid_auth.clone());
    let (kind, other_kind) = if spec.stateful_set() {
        ("StatefulSet", "Deployment")
    } else {
        ("Deployment", "StatefulSet")
    };
    let Workloads { current, previous } = workloads;
    let switching = previous.is_some();
    let (serving_kind, serving) = match previous {
        Some(p) if current.as_ref().is_none_or(|c| c.ready < p.ready) => (other_kind, Some(p)),
        _ => (kind, current),
    };
    inform_in_place(ctx, mc, in_place.as_ref()).await;
    let mut observed = observe(
        mc,
        spec,
        serving_kind,
        serving.as_ref(),
        secrets.missing.clone(),
    );
    if let Some(progress) = &in_place {
        observed.updated = progress.updated;
    }
    let handing_over = handover.and_then(|h| h.message).or(pods_handing_over);
    let rolling = in_place.is_some() || warming.is_some() || handing_over.is_some();
    let stalled = in_place.as_ref().is_some_and(|p| p.stalled.is_some());
    observed.in_place = in_place;
    observed.warming = warming;
    observed.handover = handing_over;
    observed.server_list = servers;
    observed.stable_names = list_stable;
    observed.switching = switching;
    observed.foreign = foreign;
    observed.problems = problems;
    Ok(Converged {
        observed,
        serving: serving.is_some(),
        rolling,
        stalled,
    })
}

/// `mc`'s spec, with a replica count left unset while autoscaling is off
/// taken from its running workload: turning autoscaling off (admitted
/// without the policy, which sets the count the autoscaler left) keeps the
/// pods the autoscaler ran instead of dropping to the default of 1.
fn carry_scale_over(ctx: &Context, mc: &Memcached) -> MemcachedSpec {
    let mut spec = mc.spec.clone();
    if spec.replicas.is_none() && !spec.autoscaling_enabled() {
        let (_, running) = running_workload(ctx, mc.meta(), spec.stateful_set());
        spec.replicas = running.and_then(|r| r.replicas);
    }
    spec
}

/// Converge one stored Memcached: a readable one with [`reconcile`], an
/// unreadable one is reported on itself.
pub async fn reconcile_stored(stored: Arc<Stored>, ctx: Arc<Context>) -> Result<Action, Error> {
    match stored.as_ref() {
        Stored::Readable(mc) => reconcile(mc.clone(), ctx).await,
        Stored::Unreadable(unreadable) => refuse_unreadable(&ctx, &stored, unreadable).await,
    }
}

/// The first retry of a failed reconcile; it doubles with each failure...
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);
/// ...up to this.
const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(160);

/// Requeue a failed reconcile with exponential backoff: 5 s doubling to 160 s.
pub fn error_policy(mc: Arc<Stored>, error: &Error, ctx: Arc<Context>) -> Action {
    let (failures, delay) =
        (ctx.failures).next(&key(mc.as_ref()), FAILURE_BACKOFF, MAX_FAILURE_BACKOFF);
    tracing::warn!(error = %error, failures, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}
