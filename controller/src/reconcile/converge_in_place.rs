//! A reconcile's side of changes applied in place
//! ([`crate::rollout::in_place`], [`crate::rollout::stateful_in_place`]): each
//! run from the live workload and the last stats collected; a refusal (RBAC
//! without pods or ReplicaSets, an admission webhook) reported and rolled
//! out with new pods instead; a pod that cannot run its change reported.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::discovery::ApiResource;
use memcached_api::{Defaulted, Memcached};

use crate::reconcile::applied::Applied;
use crate::reconcile::context::{
    Context, Error, IN_PLACE_FORBIDDEN, IN_PLACE_MISMATCH, IN_PLACE_STALLED, Problem, key,
};
use crate::reconcile::events::{self, Target, warn};
use crate::reconcile::running::{last_stats, live_workload};
use crate::rollout::pod_change::Seen;
use crate::rollout::{in_place, stateful_in_place};
use crate::stats::client::ClusterStats;
use memcached_api::render::args;

/// What a change in place judges its pods by, owned: the last stats of the
/// Memcached's pods, the settings its args give, its key for the waits.
struct Observed {
    last: ClusterStats,
    settings: Vec<(&'static str, String)>,
    key: String,
}

impl Observed {
    fn of(ctx: &Context, mc: &Memcached, spec: &Defaulted) -> Self {
        Observed {
            last: last_stats(ctx, mc),
            settings: args::confirmed_settings(spec),
            key: key(mc),
        }
    }

    fn seen<'a>(&'a self, ctx: &'a Context) -> Seen<'a> {
        Seen {
            stats: &self.last.pods,
            refused: &self.last.refused,
            settings: &self.settings,
            waits: (&ctx.waits, &self.key),
        }
    }
}

/// [`in_place::converge`] of the Deployment `desired`; refused (403), the
/// change is reported and rolled out by the Deployment with new pods.
pub(super) async fn converge_in_place(
    applied: &mut Applied<'_>,
    spec: &Defaulted,
    uid: &str,
    desired: &mut Deployment,
) -> Result<Option<in_place::Progress>, Error> {
    let (ctx, mc) = (applied.ctx, applied.mc);
    let live = live_workload(ctx, &ctx.cache.deployments, mc).await?;
    let selector = crate::objects::meta::selector_string(mc);
    let original = desired.clone();
    let observed = Observed::of(ctx, mc, spec);
    let seen = observed.seen(ctx);
    let converged =
        in_place::converge(&ctx.client, uid, &selector, live.as_ref(), desired, &seen).await;
    let failed = match converged {
        Ok(progress) => return Ok(stalled_in_place(applied, progress)),
        Err(failed) => failed,
    };
    let message = refusal(failed.error)?;
    // Refused: the Deployment is resumed either way. Before the ReplicaSet
    // had the image, it rolls the change out with new pods; after, it
    // replaces nothing and the pods follow once the refusal is lifted.
    let message = if failed.retemplated {
        desired.spec.get_or_insert_default().paused = None;
        format!(
            "the memcached image is not applied in place yet, the pods keep the old one: {message}"
        )
    } else {
        *desired = original;
        format!(
            "the memcached image cannot be changed in place, so new pods start cold: {message} \
             (deploy/rbac.yaml grants patch on replicasets and pods)"
        )
    };
    refuse_in_place(applied, message).await;
    Ok(None)
}

/// [`stateful_in_place::converge`] of the StatefulSet `desired`; refused
/// (403), the change is reported and rolled out with new pods, paced.
pub(super) async fn converge_stateful_in_place(
    applied: &mut Applied<'_>,
    spec: &Defaulted,
    uid: &str,
    desired: &mut StatefulSet,
) -> Result<Option<in_place::Progress>, Error> {
    let (ctx, mc) = (applied.ctx, applied.mc);
    let live = live_workload(ctx, &ctx.cache.stateful_sets, mc).await?;
    let selector = crate::objects::meta::selector_string(mc);
    let original = desired.clone();
    let observed = Observed::of(ctx, mc, spec);
    let seen = observed.seen(ctx);
    let converged =
        stateful_in_place::converge(&ctx.client, uid, &selector, live.as_ref(), desired, &seen)
            .await;
    let failed = match converged {
        Ok(progress) => return Ok(stalled_in_place(applied, progress)),
        Err(failed) => failed,
    };
    let message = refusal(failed.error)?;
    // Unmarked, pacing rolls the change out: the pods not yet changed are
    // replaced one at a time, cold.
    *desired = original;
    let message = format!(
        "the memcached image cannot be changed in place, so new pods start cold: {message} \
         (deploy/rbac.yaml grants patch on pods)"
    );
    refuse_in_place(applied, message).await;
    Ok(None)
}

/// `progress`, reported as [`IN_PLACE_STALLED`] when a pod cannot run its
/// change, as [`IN_PLACE_MISMATCH`] when memcached does not run it.
fn stalled_in_place(
    applied: &mut Applied<'_>,
    progress: Option<in_place::Progress>,
) -> Option<in_place::Progress> {
    let reported = progress.as_ref().and_then(|p| {
        let stalled = p.stalled_message().map(|m| (IN_PLACE_STALLED, m));
        stalled.or_else(|| p.mismatch_message().map(|m| (IN_PLACE_MISMATCH, m)))
    });
    if let Some((reason, message)) = reported {
        applied.problems.push(Problem { reason, message });
    }
    progress
}

/// The API server's message when it refused an in-place change (400, 403,
/// 422): reported, not retried. Any other error is the reconcile's, retried
/// with the change kept: a pod or ReplicaSet gone meanwhile (404), a
/// conflict (409).
fn refusal(error: kube::Error) -> Result<String, Error> {
    match error {
        kube::Error::Api(e) if matches!(e.code, 400 | 403 | 422) => Ok(e.message),
        error => Err(error.into()),
    }
}

/// An in-place change refused: a warning Event, and `Degraded` with
/// [`IN_PLACE_FORBIDDEN`].
async fn refuse_in_place(applied: &mut Applied<'_>, message: String) {
    warn(
        applied.ctx,
        applied.mc,
        IN_PLACE_FORBIDDEN,
        message.clone(),
        None,
    )
    .await;
    applied.problems.push(Problem {
        reason: IN_PLACE_FORBIDDEN,
        message,
    });
}

/// An Event on the Memcached naming the pod an in-place image change restarts.
pub(super) async fn inform_in_place(
    ctx: &Context,
    mc: &Memcached,
    progress: Option<&in_place::Progress>,
) {
    let Some(progress) = progress.filter(|p| p.started) else {
        return;
    };
    let pod = progress.restarting.as_deref().unwrap_or_default();
    let note = format!(
        "pod {pod} restarts with {} in place: its cache is saved and restored",
        progress.change
    );
    let pods = ApiResource::erase::<Pod>(&());
    let target = Target {
        resource: &pods,
        name: pod,
    };
    events::inform(ctx, mc, "RestartingInPlace", note, &target).await;
}
