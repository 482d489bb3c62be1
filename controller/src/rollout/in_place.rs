//! A change warm restarts can take, applied to the running pods in place:
//! no pod is replaced, so none starts cold. It is what
//! [`crate::rollout::pod_change::Change`] holds: the memcached image and, with warm
//! restarts, memcached's args and the Secret hash the pod's supervisor reads
//! from its annotations ([`memcached_api::render::warm_restart`]); the memory geometry stays.
//!
//! A pod's container image can change without a new pod: the kubelet stops
//! that container (its preStop hook saves memcached's cache to the
//! memory-backed volume) and starts the new image in the same pod, which
//! restores the cache; a pod's annotations can change too, and its
//! supervisor then restarts memcached warm with the new args and the Secret
//! files the kubelet refreshed. A Deployment would instead replace every
//! pod, so the change goes around it:
//!
//! 1. the Deployment is applied with the new template, paused: its
//!    controller creates no ReplicaSet for it;
//! 2. the running ReplicaSet's template gets the change and, once the
//!    ReplicaSet controller has seen it (`observedGeneration`, from the
//!    informers the Deployment controller shares), the Deployment is resumed
//!    by the reconcile's apply: its controller finds that ReplicaSet equal to
//!    its template and replaces no pod;
//! 3. from the next reconcile on, one pod at a time gets the change, the
//!    next once every pod has taken its change
//!    ([`crate::rollout::pod_change::taken`]: restarted, running what it was given,
//!    warm again).
//!
//! The Deployment carries [`IN_PLACE_ANNOTATION`] (the change's mark) from
//! step 1 until every pod runs it, so a restarted controller carries on. A
//! change a pod cannot take in place, or one that meets a Deployment in the
//! middle of a rollout, is rolled out by the Deployment as usual.
//! StatefulSet mode: [`crate::rollout::stateful_in_place`].

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::cluster::apply::{is_controlled_by, owns_replicas_of};
use crate::objects::workload::{IN_PLACE_ANNOTATION, Workload};
use crate::rollout::pacing::Peers;
use crate::rollout::pod_change::{self, Change, Seen, Taken, address, memcached_status, ready};
use memcached_api::render::labels::MANAGER;
use memcached_api::render::stamp::TemplateStamp;

/// How long step 2 waits for the ReplicaSet controller; the next reconcile
/// carries on after that.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(5);
const OBSERVE_POLL: Duration = Duration::from_millis(200);

/// Where a change in place stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// What it gives the pods, in words ([`Change::describe`]).
    pub change: String,
    /// Pods whose memcached container has it (restarted or not yet).
    pub updated: i32,
    /// Pods.
    pub pods: i32,
    /// The pod whose container is restarting now.
    pub restarting: Option<String>,
    /// Why the `restarting` pod's memcached container cannot run (a crash
    /// loop, an image that cannot be pulled): the change waits for a new image.
    pub stalled: Option<String>,
    /// How the `restarting` pod, restarted, does not run what it was given.
    pub mismatch: Option<String>,
    /// This reconcile changed the image of the `restarting` pod.
    pub started: bool,
    /// The pods that cannot be running NAPI ids, by their own record
    /// ([`pod_change::without_napi_ids`]): asked `stats settings` whatever
    /// memcached release they run.
    pub without_napi_ids: BTreeSet<SocketAddr>,
}

impl Progress {
    /// The Rollout column: `in place 1/3, <pod> restarting warm`.
    pub fn summary(&self) -> String {
        let now = match (&self.restarting, &self.stalled) {
            (Some(pod), Some(reason)) => format!(", {pod} {reason}"),
            (Some(pod), None) => format!(", {pod} restarting warm"),
            (None, _) => String::new(),
        };
        format!("in place {}/{}{now}", self.updated, self.pods)
    }

    /// The `Progressing` condition's message.
    pub fn message(&self) -> String {
        let now = match (&self.restarting, &self.stalled) {
            (Some(pod), Some(reason)) => format!("; {pod} does not come back ({reason})"),
            (Some(pod), None) => format!("; {pod} is restarting warm"),
            (None, _) => String::new(),
        };
        format!(
            "{} applied in place: {} of {} pods have it{now}",
            self.change, self.updated, self.pods
        )
    }

    /// The `Degraded` message while a pod cannot run the image: what holds
    /// the change, and the way on.
    pub fn stalled_message(&self) -> Option<String> {
        let (pod, reason) = self.restarting.as_ref().zip(self.stalled.as_ref())?;
        Some(format!(
            "pod {pod} does not come back with {}: its container is in {reason}; \
             the other pods keep theirs and their cache until the spec names one that runs \
             (applied in place too)",
            self.change
        ))
    }

    /// The `Degraded` message while a restarted pod does not run its change.
    pub fn mismatch_message(&self) -> Option<String> {
        let (pod, how) = self.restarting.as_ref().zip(self.mismatch.as_ref())?;
        Some(format!(
            "pod {pod} was given {} in place but memcached says otherwise: {how}; \
             the other pods wait (kubectl delete pod {pod} replaces it with the new template)",
            self.change
        ))
    }
}

/// An in-place change that failed: refused after the running ReplicaSet
/// got the new image or not.
#[derive(Debug)]
pub struct Failed {
    /// What the API server answered.
    pub error: kube::Error,
    /// The running ReplicaSet already has the new template: resuming the
    /// Deployment then replaces no pod, and the pods follow later.
    pub retemplated: bool,
}

impl From<kube::Error> for Failed {
    fn from(error: kube::Error) -> Self {
        Failed {
            error,
            retemplated: false,
        }
    }
}

/// Start or carry on a change in place of the Deployment `live` (as the
/// cache holds it, without its template), controlled by the Memcached `uid`
/// whose pods `selector` selects, towards `desired`, which gets
/// [`IN_PLACE_ANNOTATION`] while the change goes on; `seen` tells what the
/// pods run. `None`: no change in place (none needed, done, or the
/// Deployment rolls it out).
pub async fn converge(
    client: &Client,
    uid: &str,
    selector: &str,
    live: Option<&Deployment>,
    desired: &mut Deployment,
    seen: &Seen<'_>,
) -> Result<Option<Progress>, Failed> {
    let Some(live) = live.filter(|l| is_controlled_by(*l, uid)) else {
        return Ok(None);
    };
    let Some(change) = desired.template().and_then(Change::of) else {
        return Ok(None);
    };
    let ns = live.namespace().unwrap_or_default();
    let marked = annotation(live, IN_PLACE_ANNOTATION) == Some(change.mark().as_str());
    let paused = live.spec.as_ref().and_then(|s| s.paused) == Some(true);
    let replicas = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let starting = TemplateStamp::of(desired.meta())
        .zip(TemplateStamp::of(live.meta()))
        .is_some_and(|(new, running)| new.in_place_change(&running))
        && may_start(live, replicas);
    if !starting && !marked {
        return Ok(None);
    }
    mark(desired, Some(&change));
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let owned = owned_replica_sets(&sets, selector, live).await?;
    if starting || paused {
        let progress = Progress {
            change: change.describe(None),
            pods: replicas,
            ..Default::default()
        };
        match retemplate(client, &sets, &owned, live, desired, &change).await? {
            // The reconcile's apply resumes the Deployment; the pods follow
            // from the next reconcile on.
            Retemplated::Seen => return Ok(Some(progress)),
            // Resuming now could make the Deployment roll: it stays paused,
            // and the next reconcile looks again.
            Retemplated::NotSeenYet => {
                desired.spec.get_or_insert_default().paused = Some(true);
                return Ok(Some(progress));
            }
            // The Deployment rolls the change out.
            Retemplated::NotOneReplicaSet => {
                mark(desired, None);
                return Ok(None);
            }
        }
    }
    // Step 3, on the pods of the one running ReplicaSet with the change;
    // another running (a rollout started meanwhile) ends it.
    let running_sets = running(&owned);
    let [set] = running_sets.as_slice() else {
        mark(desired, None);
        return Ok(None);
    };
    if !has(set, &change) {
        mark(desired, None);
        return Ok(None);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = running_pods(&pods, selector, &set.uid().unwrap_or_default()).await?;
    let mut lagging: Vec<&Pod> = running.iter().filter(|p| change.lags(p)).collect();
    lagging.sort_by_key(|p| p.name_any());
    // Every pod runs the change: the annotation goes with the apply.
    if lagging.is_empty()
        && running
            .iter()
            .all(|p| taken(&change, p, seen, &running) == Taken::Yes)
    {
        mark(desired, None);
        return Ok(None);
    }
    step(&pods, &change, &running, &lagging, change.patch(), seen)
        .await
        .map(Some)
}

/// An image change may start on `live` of `replicas`: its last rollout
/// is complete, or a change in place is under way (a newer one, or one that
/// runs where the last does not, takes it over), and it is not being deleted.
pub(crate) fn may_start<W: Workload>(live: &W, replicas: i32) -> bool {
    (live.rollout().complete(replicas) || annotation(live, IN_PLACE_ANNOTATION).is_some())
        && live.meta().deletion_timestamp.is_none()
}

/// The pods controlled by `owner` (a uid) that `selector` selects and that
/// still run (not being deleted, not finished).
pub(crate) async fn running_pods(
    pods: &Api<Pod>,
    selector: &str,
    owner: &str,
) -> Result<Vec<Pod>, Failed> {
    let listed = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|error| Failed {
            error,
            retemplated: true,
        })?;
    Ok(listed
        .items
        .into_iter()
        .filter(|p| is_controlled_by(p, owner) && still_running(p))
        .collect())
}

/// Whether `pod` has taken `change`, the other `running` pods its peers;
/// one not given it yet only needs to be Ready (one pod at a time is down).
pub(crate) fn taken(change: &Change, pod: &Pod, seen: &Seen<'_>, running: &[Pod]) -> Taken {
    if change.lags(pod) {
        return if ready(pod) {
            Taken::Yes
        } else {
            Taken::Waiting
        };
    }
    let others: Vec<SocketAddr> = (running.iter())
        .filter(|p| p.uid() != pod.uid() && ready(p))
        .filter_map(address)
        .collect();
    pod_change::taken(pod, seen, Peers::of(others.iter(), seen.stats))
}

/// One step of `change` over the `running` pods, of which `lagging` (in
/// the order they go) lack it: none while a pod has not taken its change
/// (one at a time); else the next lagging pod gets `patch` (the change, and
/// in StatefulSet mode the revision) and what tells its restart
/// ([`Change::patch_for`]). A lagging pod whose container cannot run (on an
/// image an earlier change gave it) does not hold the change: it goes
/// first. One whose container does not exist yet is waited for, as its
/// restart count would not tell its first start from a restart.
pub(crate) async fn step(
    pods: &Api<Pod>,
    change: &Change,
    running: &[Pod],
    lagging: &[&Pod],
    patch: Value,
    seen: &Seen<'_>,
) -> Result<Progress, Failed> {
    let broken = |p: &Pod| change.lags(p) && failing(p).is_some();
    let restarting = running
        .iter()
        .map(|p| (p, taken(change, p, seen, running)))
        .find(|(p, taken)| *taken != Taken::Yes && !broken(p));
    let pod = restarting.as_ref().map(|(p, _)| *p);
    let mut progress = Progress {
        change: change.describe(lagging.first().copied().or(pod)),
        pods: len(running),
        updated: len(running) - len(lagging),
        restarting: pod.map(ResourceExt::name_any),
        stalled: pod.and_then(failing),
        mismatch: match restarting {
            Some((_, Taken::Mismatch(how))) => Some(how),
            _ => None,
        },
        started: false,
        without_napi_ids: pod_change::without_napi_ids(running),
    };
    let next = lagging.iter().find(|p| broken(p)).or(lagging.first());
    let (None, Some(next)) = (pod, next) else {
        return Ok(progress);
    };
    // A new configuration alone waits for memcached's pid to be read.
    let Some(record) = change.patch_for(next, seen) else {
        return Ok(progress);
    };
    let mut patch = change.for_pod(next, patch);
    json_merge(&mut patch, record);
    let name = next.name_any();
    pods.patch(&name, &manager(), &Patch::Strategic(patch))
        .await
        .map_err(|error| Failed {
            error,
            retemplated: true,
        })?;
    progress.change = change.describe(Some(next));
    progress.updated += 1;
    progress.restarting = Some(name);
    progress.started = true;
    Ok(progress)
}

/// Merge the objects of `from` into `into`.
fn json_merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                json_merge(into.entry(key).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from,
    }
}

/// What [`retemplate`] did.
enum Retemplated {
    /// The running ReplicaSet has the image, and its controller has seen it.
    Seen,
    /// It has the image; its controller has not seen it within [`OBSERVE_TIMEOUT`].
    NotSeenYet,
    /// Not exactly one ReplicaSet runs pods, or an older one has the new
    /// template already (the Deployment controller would take the oldest).
    NotOneReplicaSet,
}

/// The ReplicaSets the Deployment `live` controls.
pub(crate) async fn owned_replica_sets(
    sets: &Api<ReplicaSet>,
    selector: &str,
    live: &Deployment,
) -> Result<Vec<ReplicaSet>, kube::Error> {
    let deployment_uid = live.uid().unwrap_or_default();
    Ok(sets
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|s| is_controlled_by(s, &deployment_uid))
        .collect())
}

/// Those of `sets` that run pods.
fn running(sets: &[ReplicaSet]) -> Vec<&ReplicaSet> {
    sets.iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) > 0)
        .collect()
}

/// Steps 1 and 2: pause `desired`, give the one running ReplicaSet of
/// `owned` the image and wait until its controller has seen it.
async fn retemplate(
    client: &Client,
    sets: &Api<ReplicaSet>,
    owned: &[ReplicaSet],
    live: &Deployment,
    desired: &Deployment,
    change: &Change,
) -> Result<Retemplated, Failed> {
    let running_sets = running(owned);
    let [set] = running_sets.as_slice() else {
        return Ok(Retemplated::NotOneReplicaSet);
    };
    if owned.iter().any(|s| s.uid() != set.uid() && has(s, change)) {
        return Ok(Retemplated::NotOneReplicaSet);
    }
    let deployments: Api<Deployment> =
        Api::namespaced(client.clone(), &live.namespace().unwrap_or_default());
    let mut paused = desired.clone();
    let spec = paused.spec.get_or_insert_default();
    spec.paused = Some(true);
    // Under autoscaling the desired object leaves replicas to the HPA, and
    // so does this apply once the HPA owns them (a count from the cache
    // could undo its last step). Still owned here (the handover not done
    // yet), leaving them out would reset them: the running count stays.
    if owns_replicas_of(live.meta()) {
        let running_replicas = live.spec.as_ref().and_then(|s| s.replicas);
        spec.replicas = spec.replicas.or(running_replicas);
    }
    let apply = PatchParams::apply(MANAGER).force();
    deployments
        .patch(&live.name_any(), &apply, &Patch::Apply(&paused))
        .await?;
    let name = set.name_any();
    let mut generation = set.metadata.generation;
    if !has(set, change) {
        let patch = json!({"spec": {"template": change.patch()}});
        let patched = sets
            .patch(&name, &manager(), &Patch::Strategic(patch))
            .await?;
        generation = patched.metadata.generation;
    }
    let deadline = tokio::time::Instant::now() + OBSERVE_TIMEOUT;
    loop {
        let set = sets.get(&name).await.map_err(|error| Failed {
            error,
            retemplated: true,
        })?;
        if set.status.as_ref().and_then(|s| s.observed_generation) >= generation {
            return Ok(Retemplated::Seen);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Retemplated::NotSeenYet);
        }
        tokio::time::sleep(OBSERVE_POLL).await;
    }
}

/// The ReplicaSet's template gives its pods `change`.
fn has(set: &ReplicaSet, change: &Change) -> bool {
    let template = set.spec.as_ref().and_then(|s| s.template.as_ref());
    template.and_then(Change::of).as_ref() == Some(change)
}

/// The pod is neither being deleted nor finished.
pub(crate) fn still_running(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Failed" | "Succeeded"))
}

pub(crate) fn manager() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

pub(crate) fn annotation<'a>(workload: &'a impl Resource, key: &str) -> Option<&'a str> {
    workload
        .meta()
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Set (or with `None` remove) [`IN_PLACE_ANNOTATION`] on `desired`.
pub(crate) fn mark(desired: &mut impl Resource, change: Option<&Change>) {
    let annotations = desired.meta_mut().annotations.get_or_insert_default();
    match change {
        Some(change) => annotations.insert(IN_PLACE_ANNOTATION.into(), change.mark()),
        None => annotations.remove(IN_PLACE_ANNOTATION),
    };
}

/// Why the pod's memcached container cannot run, when it waits for a
/// reason that does not pass by itself. The kubelet alternates
/// `ErrImagePull` with `ImagePullBackOff`: both read as the latter, so the
/// status does not change with each pull.
pub(crate) fn failing(pod: &Pod) -> Option<String> {
    const FAILURES: [&str; 7] = [
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
    ];
    let waiting = memcached_status(pod)?.state.as_ref()?.waiting.as_ref()?;
    let reason = match waiting.reason.as_deref()? {
        "ErrImagePull" => "ImagePullBackOff",
        reason => reason,
    };
    FAILURES.contains(&reason).then(|| reason.to_string())
}

/// The scheduler's message while it finds no node for the pod.
pub(crate) fn unschedulable(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let scheduled = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    (scheduled.status == "False" && scheduled.reason.as_deref() == Some("Unschedulable"))
        .then(|| scheduled.message.clone().unwrap_or_default())
}

pub(crate) fn len<T>(items: &[T]) -> i32 {
    i32::try_from(items.len()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(image: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "memcached", "image": image}]},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "memcached", "ready": ready, "restartCount": 1,
                    "image": image, "imageID": "", "started": ready}],
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_container_that_cannot_run_is_failing_one_that_starts_is_not() {
        let waiting = |reason: &str| {
            let mut pod = pod("m:2", false);
            let status = &mut pod
                .status
                .as_mut()
                .unwrap()
                .container_statuses
                .as_mut()
                .unwrap()[0];
            status.state = serde_json::from_value(json!({"waiting": {"reason": reason}})).unwrap();
            pod
        };
        assert_eq!(
            failing(&waiting("CrashLoopBackOff")).as_deref(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(
            failing(&waiting("ErrImagePull")).as_deref(),
            Some("ImagePullBackOff")
        );
        assert_eq!(failing(&waiting("ContainerCreating")), None);
        assert_eq!(failing(&pod("m:2", true)), None);
    }

    #[test]
    fn progress_says_which_pod_restarts() {
        let progress = Progress {
            change: "memcached image memcached:1.6.39".into(),
            updated: 2,
            pods: 3,
            restarting: Some("c-1".into()),
            ..Default::default()
        };
        assert_eq!(
            progress.message(),
            "memcached image memcached:1.6.39 applied in place: 2 of 3 pods have it; c-1 is restarting warm"
        );
        assert_eq!(progress.summary(), "in place 2/3, c-1 restarting warm");
        assert_eq!(progress.stalled_message(), None);
        let stalled = Progress {
            stalled: Some("ImagePullBackOff".into()),
            ..progress.clone()
        };
        assert_eq!(stalled.summary(), "in place 2/3, c-1 ImagePullBackOff");
        assert_eq!(
            stalled.stalled_message().as_deref(),
            Some(
                "pod c-1 does not come back with memcached image memcached:1.6.39: its container is \
                 in ImagePullBackOff; the other pods keep theirs and their cache until the spec \
                 names one that runs (applied in place too)"
            )
        );
        let mismatch = Progress {
            mismatch: Some("restarted, it runs maxconns 1024 (not 2048)".into()),
            ..progress
        };
        assert!(
            mismatch
                .mismatch_message()
                .is_some_and(|m| m.starts_with("pod c-1 was given memcached image memcached:1.6.39 in place but memcached says otherwise: restarted, it runs maxconns 1024 (not 2048)")),
            "{:?}",
            mismatch.mismatch_message()
        );
    }
}
