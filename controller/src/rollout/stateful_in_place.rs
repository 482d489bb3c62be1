//! StatefulSet mode of [`crate::rollout::in_place`]: a change warm restarts can take
//! (the memcached image, memcached's args, the Secrets), applied to the
//! running pods in place, so none is replaced and none starts cold.
//!
//! A StatefulSet replaces a pod whose `controller-revision-hash` label is not
//! its update revision, unless the pod's ordinal is below the `partition`;
//! it never compares the pod's spec with the template. So:
//!
//! 1. the StatefulSet is applied with the new template and the partition
//!    above every ordinal: its controller records the new revision and
//!    replaces no pod;
//! 2. once its controller has seen that template, one pod at a time (the
//!    highest ordinal first, as a StatefulSet rolls) gets the change and
//!    the update revision's label: the kubelet restarts just its memcached
//!    container for a new image, the pod's supervisor restarts memcached for
//!    new args or Secrets (saved and restored either way), and the
//!    StatefulSet counts the pod as updated; the next once every pod has
//!    taken its change;
//! 3. with every pod on the update revision the mark goes and the partition
//!    is left to [`crate::rollout::pacing`], which lowers it one ordinal per warm pod:
//!    every pod is on the update revision, so none is replaced, and the
//!    StatefulSet makes that revision current.
//!
//! [`IN_PLACE_ANNOTATION`] marks the StatefulSet from step 1 until every
//! pod runs the change, so a restarted controller carries on. A change a
//! pod cannot take in place, or that meets a rollout, is paced as usual.

use k8s_openapi::api::apps::v1::{RollingUpdateStatefulSetStrategy, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::cluster::apply::is_controlled_by;
use crate::objects::workload::{IN_PLACE_ANNOTATION, Workload};
use crate::rollout::in_place::{
    Failed, Progress, annotation, len, mark, may_start, running_pods, step, taken,
};
use crate::rollout::pod_change::{Change, Seen, Taken};
use memcached_api::render::stamp::TemplateStamp;

/// The pod label a StatefulSet compares with its update revision.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// Start or carry on a change in place of the StatefulSet `live` (as the
/// cache holds it, without its template), controlled by the Memcached `uid`
/// whose pods `selector` selects, towards `desired`, which gets
/// [`IN_PLACE_ANNOTATION`] and a partition that holds every pod while the
/// change goes on; `seen` tells what the pods run. `None`: no change in
/// place (none needed, done, or the StatefulSet rolls it out).
pub async fn converge(
    client: &Client,
    uid: &str,
    selector: &str,
    live: Option<&StatefulSet>,
    desired: &mut StatefulSet,
    seen: &Seen<'_>,
) -> Result<Option<Progress>, Failed> {
    let Some(live) = live.filter(|l| is_controlled_by(*l, uid)) else {
        return Ok(None);
    };
    let Some(change) = desired.template().and_then(Change::of) else {
        return Ok(None);
    };
    let (new, running) = (
        TemplateStamp::of(&desired.metadata),
        TemplateStamp::of(&live.metadata),
    );
    let replicas = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let starting = new
        .as_ref()
        .zip(running.as_ref())
        .is_some_and(|(new, running)| new.in_place_change(running))
        && may_start(live, replicas);
    let marked = annotation(live, IN_PLACE_ANNOTATION) == Some(change.mark().as_str());
    // Marked for this image, but the template changed again (not a new
    // rendering of the same intent, which is held): paced as usual.
    let retemplated = new
        .zip(running)
        .is_some_and(|(n, r)| n.template != r.template && !n.held_by(&r));
    if !starting && (!marked || retemplated) {
        mark(desired, None);
        return Ok(None);
    }
    mark(desired, Some(&change));
    hold_every_pod(desired);
    let progress = Progress {
        change: change.describe(None),
        pods: replicas,
        ..Default::default()
    };
    // Step 1 is this reconcile's apply; step 2 once the StatefulSet
    // controller has made the template its update revision.
    let status = live.status.clone().unwrap_or_default();
    let revision = status.update_revision.unwrap_or_default();
    if starting || !live.rollout().observed || revision.is_empty() {
        return Ok(Some(progress));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &live.namespace().unwrap_or_default());
    let running = running_pods(&pods, selector, &live.uid().unwrap_or_default()).await?;
    let mut lagging: Vec<&Pod> = running
        .iter()
        .filter(|p| change.lags(p) || p.labels().get(REVISION_LABEL) != Some(&revision))
        .collect();
    // A pod with the change but not the update revision: the template moved
    // on outside this change (`kubectl rollout restart`, a webhook), so the
    // StatefulSet rolls it, paced.
    if lagging.iter().any(|p| !change.lags(p)) {
        mark(desired, None);
        return Ok(None);
    }
    // Every pod runs the change on the update revision: pacing lowers the
    // partition, replacing none. A pod missing (being recreated from the
    // current, old revision) gets it first.
    let all_taken = running
        .iter()
        .all(|p| taken(&change, p, seen, &running) == Taken::Yes);
    if lagging.is_empty() && all_taken && len(&running) >= replicas {
        mark(desired, None);
        return Ok(None);
    }
    // The highest ordinal first, as a StatefulSet rolls.
    lagging.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));
    let mut patch = change.patch();
    patch["metadata"]["labels"][REVISION_LABEL] = json!(revision);
    step(&pods, &change, &running, &lagging, patch, seen)
        .await
        .map(Some)
}

/// A partition above any ordinal (the replica count in the cache may lag a
/// scale-up): the StatefulSet replaces no pod.
fn hold_every_pod(desired: &mut StatefulSet) {
    let strategy = desired
        .spec
        .get_or_insert_default()
        .update_strategy
        .get_or_insert_default();
    strategy.rolling_update = Some(RollingUpdateStatefulSetStrategy {
        partition: Some(i32::MAX),
        max_unavailable: None,
    });
}

/// The pod's ordinal (`<name>-<ordinal>`); -1 when it has none.
fn ordinal(pod: &Pod) -> i64 {
    pod.name_any()
        .rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_ordinal_goes_first() {
        let pod = |name: &str| Pod {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let pods = [pod("c-2"), pod("c-10"), pod("c-0")];
        let first = pods.iter().max_by_key(|p| ordinal(p)).map(|p| p.name_any());
        assert_eq!(first.as_deref(), Some("c-10"));
        assert_eq!(ordinal(&pod("nameless")), -1);
    }

    #[test]
    fn every_pod_is_held() {
        let mut set = StatefulSet::default();
        hold_every_pod(&mut set);
        let strategy = set.spec.unwrap().update_strategy.unwrap();
        assert_eq!(strategy.rolling_update.unwrap().partition, Some(i32::MAX));
    }
}
