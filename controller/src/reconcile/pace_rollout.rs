//! A reconcile's side of pacing ([`crate::rollout::pacing`]): the live
//! workload, the rollout's pods and the last stats collected, handed to the
//! pacing rules; a Deployment rollout whose newest pod finds no node reported.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::ResourceExt;
use memcached_api::{Defaulted, Memcached};

use crate::objects::server_list::pod_server;
use crate::reconcile::context::{Context, Error, Problem, ROLLOUT_UNSCHEDULABLE, key};
use crate::reconcile::running::{live_workload, pod_stats, ready_endpoints};
use crate::rollout::{generations, pacing};
use memcached_api::render::pod_template::hard_anti_affinity;

/// [`pacing::pace`] of `mc`'s StatefulSet `desired`, from the live
/// StatefulSet and the last stats collected. When its keys are handed over,
/// a pod counts as ready, and warm, once it is listed again (its keys taken
/// back): the next pod leaves only then.
pub(super) async fn pace(
    ctx: &Context,
    mc: &Memcached,
    desired: &mut StatefulSet,
) -> Result<Option<pacing::Warming>, Error> {
    let name = mc.name_any();
    let live = live_workload(ctx, &ctx.cache.stateful_sets, mc).await?;
    let listed = ctx.handovers.published(&key(mc), mc.uid());
    let pods = || pacing::Pods {
        ready: (ready_endpoints(&ctx.cache, mc).into_iter())
            .filter_map(|e| Some((e.hostname?, e.address)))
            .filter(|(pod, _)| (listed.as_ref()).is_none_or(|l| l.contains(&pod_server(mc, pod))))
            .collect(),
        stats: pod_stats(ctx, mc),
        handed_over: listed.is_some(),
    };
    Ok(pacing::pace(
        &ctx.waits,
        &key(mc),
        &name,
        live.as_ref(),
        desired,
        pods,
    ))
}

/// [`pacing::pace_deployment`] of `mc`'s Deployment `desired`, from the
/// cache, the rollout's pods (listed only while one runs) and the last stats
/// collected; pods that cannot be listed pace nothing. A new pod the
/// scheduler finds no node for is added to `problems`: the rollout cannot
/// go on (a rotated Secret never reaches the pods) until it is placed.
pub(super) async fn pace_deployment(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    desired: &mut Deployment,
    problems: &mut Vec<Problem>,
) -> Result<Option<pacing::Warming>, Error> {
    let live = live_workload(ctx, &ctx.cache.deployments, mc).await?;
    // A new template (the next change, or the fix of one that cannot run)
    // goes to the Deployment unpaused: it starts the next rollout.
    let live = live.filter(|l| pacing::deployment_rolling(l) && !pacing::retemplated(desired, l));
    let Some(live) = live else {
        ctx.waits.done(&key(mc));
        return Ok(None);
    };
    let selector = crate::objects::meta::selector_string(mc);
    let stats = pod_stats(ctx, mc);
    let generations = match generations::of(&ctx.client, &live, &selector, stats).await {
        Ok(generations) => generations,
        Err(error) => {
            // Held as it is: a failed list neither pauses nor resumes.
            desired.spec.get_or_insert_default().paused = live.spec.as_ref().and_then(|s| s.paused);
            tracing::warn!(%error, memcached = %key(mc), "cannot list the rollout's pods: the Deployment is held as it is");
            return Ok(None);
        }
    };
    if let Some(newest) = &generations.newest
        && let Some(why) = &newest.unschedulable
    {
        problems.push(unschedulable_problem(spec, &newest.pod, why));
    }
    Ok(pacing::pace_deployment(
        &ctx.waits,
        &key(mc),
        desired,
        generations,
    ))
}

/// The rollout is stuck on `pod`, which the scheduler cannot place (`why`).
fn unschedulable_problem(spec: &Defaulted, pod: &str, why: &str) -> Problem {
    let hint = if hard_anti_affinity(spec) {
        ": the hard anti-affinity preset lets no two of its pods share a node, and a Deployment \
         rollout adds a pod before it removes one, so it needs a node free of this Memcached's pods \
         (add a node, run fewer replicas than nodes, or choose workload StatefulSet, which replaces \
         pods without a surge)"
    } else {
        ""
    };
    Problem {
        reason: ROLLOUT_UNSCHEDULABLE,
        message: format!("the rollout waits for pod {pod}, which no node can take ({why}){hint}"),
    }
}
