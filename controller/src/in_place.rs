//! A change of the memcached image alone, with warm restarts on, applied to
//! the running pods in place: no pod is replaced, so none starts cold.
//!
//! A pod's container image can change without a new pod: the kubelet stops
//! that container (its preStop hook saves memcached's cache to the
//! memory-backed volume, see [`crate::pod_template`]) and starts the new
//! image in the same pod, which restores the cache. A Deployment would
//! instead replace every pod, so the change goes around it:
//!
//! 1. the Deployment is applied with the new template, paused: its
//!    controller creates no ReplicaSet for it;
//! 2. the running ReplicaSet's template gets the new image and, once the
//!    ReplicaSet controller has seen it (`observedGeneration`, from the
//!    informers the Deployment controller shares), the Deployment is resumed
//!    by the reconcile's apply: its controller finds that ReplicaSet equal to
//!    its template and replaces no pod;
//! 3. from the next reconcile on, one pod at a time gets the new image,
//!    the next once every pod is Ready again with its container restarted.
//!
//! The Deployment carries [`IN_PLACE_ANNOTATION`] (the image) from step 1
//! until every pod runs the image, so a restarted controller carries on.
//! A change that is not the image alone, or that meets a Deployment in the
//! middle of a rollout, is rolled out by the Deployment as usual. StatefulSet
//! mode: [`crate::stateful_in_place`].

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::apply::{is_controlled_by, owns_replicas_of};
use crate::intent::TemplateStamp;
use crate::labels::{MANAGER, VERSION_LABEL};
use crate::pod_template::MEMCACHED_CONTAINER;
use crate::workload::Workload;

/// Deployment annotation: the memcached image being applied in place.
pub const IN_PLACE_ANNOTATION: &str = "memcached.c5c3.io/in-place-image";
/// Pod annotation: the memcached container's restart count when its image
/// was changed; the pod is restarted once the count is higher.
pub const RESTARTS_ANNOTATION: &str = "memcached.c5c3.io/in-place-restarts";

/// How long step 2 waits for the ReplicaSet controller; the next reconcile
/// carries on after that.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(5);
const OBSERVE_POLL: Duration = Duration::from_millis(200);

/// Where an in-place image change stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The image being applied.
    pub image: String,
    /// Pods whose memcached container has it (restarted or not yet).
    pub updated: i32,
    /// Pods.
    pub pods: i32,
    /// The pod whose container is restarting now.
    pub restarting: Option<String>,
    /// Why the `restarting` pod's memcached container cannot run (a crash
    /// loop, an image that cannot be pulled): the change waits for a new image.
    pub stalled: Option<String>,
    /// This reconcile changed the image of the `restarting` pod.
    pub started: bool,
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
            "memcached image {} applied in place: {} of {} pods have it{now}",
            self.image, self.updated, self.pods
        )
    }

    /// The `Degraded` message while a pod cannot run the image: what holds
    /// the change, and the way on.
    pub fn stalled_message(&self) -> Option<String> {
        let (pod, reason) = self.restarting.as_ref().zip(self.stalled.as_ref())?;
        Some(format!(
            "pod {pod} does not come back with memcached image {}: its container is in {reason}; \
             the other pods keep their image and their cache until spec.image names one that runs \
             (applied in place too)",
            self.image
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

/// Start or carry on an in-place image change of the Deployment `live` (as
/// the cache holds it, without its template), controlled by the Memcached
/// `uid` whose pods `selector` selects, towards `desired`, which gets
/// [`IN_PLACE_ANNOTATION`] while the change goes on. `None`: no change in
/// place (none needed, done, or the Deployment rolls it out).
pub async fn converge(
    client: &Client,
    uid: &str,
    selector: &str,
    live: Option<&Deployment>,
    desired: &mut Deployment,
) -> Result<Option<Progress>, Failed> {
    let Some(live) = live.filter(|l| is_controlled_by(*l, uid)) else {
        return Ok(None);
    };
    let Some(template) = desired.template() else {
        return Ok(None);
    };
    let Some(image) = memcached_image(template) else {
        return Ok(None);
    };
    let change = template_change(template, &image);
    let ns = live.namespace().unwrap_or_default();
    let marked = annotation(live, IN_PLACE_ANNOTATION) == Some(image.as_str());
    let paused = live.spec.as_ref().and_then(|s| s.paused) == Some(true);
    let replicas = live.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let starting = TemplateStamp::of(desired)
        .zip(TemplateStamp::of(live))
        .is_some_and(|(new, running)| new.image_only_change(&running))
        && may_start(live, replicas);
    if !starting && !marked {
        return Ok(None);
    }
    mark(desired, Some(&image));
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
    let owned = owned_replica_sets(&sets, selector, live).await?;
    if starting || paused {
        let progress = Progress {
            image,
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
    // Step 3, on the pods of the one running ReplicaSet with the image
    // only; another running (a rollout started meanwhile) ends it.
    let running_sets = running(&owned);
    let [set] = running_sets.as_slice() else {
        mark(desired, None);
        return Ok(None);
    };
    if !has_image(set, &image) {
        mark(desired, None);
        return Ok(None);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = running_pods(&pods, selector, &set.uid().unwrap_or_default()).await?;
    let mut lagging: Vec<&Pod> = running.iter().filter(|p| lags(p, &image)).collect();
    lagging.sort_by_key(|p| p.name_any());
    // Every pod runs the image: the annotation goes with the apply.
    if lagging.is_empty() && running.iter().all(settled) {
        mark(desired, None);
        return Ok(None);
    }
    step(&pods, &image, &running, &lagging, change)
        .await
        .map(Some)
}

/// An image-only change may start on `live` of `replicas`: its last rollout
/// is complete, or an image change in place is under way (a newer image, or
/// one that runs where the last does not, takes it over), and it is not
/// being deleted.
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

/// One step of the change to `image` over the `running` pods, of which
/// `lagging` (in the order they go) lack it: none while a pod is not
/// settled (one at a time); else the next lagging pod gets `patch` and the
/// restart count it has now. A lagging pod whose container cannot run (on
/// an image an earlier change gave it) does not hold the change: it goes
/// first. One whose container does not exist yet is waited for, as its
/// restart count would not tell its first start from a restart.
pub(crate) async fn step(
    pods: &Api<Pod>,
    image: &str,
    running: &[Pod],
    lagging: &[&Pod],
    mut patch: Value,
) -> Result<Progress, Failed> {
    let broken = |p: &Pod| lags(p, image) && failing(p).is_some();
    let restarting = running.iter().find(|p| !settled(p) && !broken(p));
    let mut progress = Progress {
        image: image.to_string(),
        pods: len(running),
        updated: len(running) - len(lagging),
        restarting: restarting.map(ResourceExt::name_any),
        stalled: restarting.and_then(failing),
        started: false,
    };
    let next = lagging.iter().find(|p| broken(p)).or(lagging.first());
    let (None, Some(next)) = (restarting, next) else {
        return Ok(progress);
    };
    let restarts = memcached_status(next).map_or(0, |s| s.restart_count);
    patch["metadata"]["annotations"] = json!({RESTARTS_ANNOTATION: restarts.to_string()});
    let name = next.name_any();
    pods.patch(&name, &manager(), &Patch::Strategic(patch))
        .await
        .map_err(|error| Failed {
            error,
            retemplated: true,
        })?;
    progress.updated += 1;
    progress.restarting = Some(name);
    progress.started = true;
    Ok(progress)
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
    change: &Value,
) -> Result<Retemplated, Failed> {
    let running_sets = running(owned);
    let [set] = running_sets.as_slice() else {
        return Ok(Retemplated::NotOneReplicaSet);
    };
    let image = change["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default();
    if owned
        .iter()
        .any(|s| s.uid() != set.uid() && has_image(s, image))
    {
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
    if !has_image(set, image) {
        let patch = json!({"spec": {"template": change}});
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

/// What changes in a pod template for `image`, as a strategic merge patch:
/// the memcached container's image and the version label that follows it.
pub(crate) fn template_change(template: &PodTemplateSpec, image: &str) -> Value {
    let version = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref()?.get(VERSION_LABEL));
    json!({
        "metadata": {"labels": {VERSION_LABEL: version}},
        "spec": {"containers": [{"name": MEMCACHED_CONTAINER, "image": image}]},
    })
}

/// The ReplicaSet's template runs `image` in its memcached container.
fn has_image(set: &ReplicaSet, image: &str) -> bool {
    let template = set.spec.as_ref().and_then(|s| s.template.as_ref());
    template.and_then(memcached_image).as_deref() == Some(image)
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
pub(crate) fn mark(desired: &mut impl Resource, image: Option<&str>) {
    let annotations = desired.meta_mut().annotations.get_or_insert_default();
    match image {
        Some(image) => annotations.insert(IN_PLACE_ANNOTATION.into(), image.into()),
        None => annotations.remove(IN_PLACE_ANNOTATION),
    };
}

/// The memcached container's image in a pod template.
pub fn memcached_image(template: &PodTemplateSpec) -> Option<String> {
    template
        .spec
        .as_ref()
        .and_then(pod_memcached_image)
        .map(str::to_string)
}

fn pod_memcached_image(spec: &PodSpec) -> Option<&str> {
    spec.containers
        .iter()
        .find(|c| c.name == MEMCACHED_CONTAINER)?
        .image
        .as_deref()
}

pub(crate) fn memcached_status(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == MEMCACHED_CONTAINER)
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

/// The pod's memcached container does not have `image` in its spec.
pub(crate) fn lags(pod: &Pod, image: &str) -> bool {
    pod.spec.as_ref().and_then(pod_memcached_image) != Some(image)
}

/// The pod's `Ready` condition is true.
pub(crate) fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The pod is Ready and, if its image was changed in place, its memcached
/// container has restarted since.
pub(crate) fn settled(pod: &Pod) -> bool {
    let ready = ready(pod);
    let before: Option<i32> = pod
        .annotations()
        .get(RESTARTS_ANNOTATION)
        .and_then(|r| r.parse().ok());
    let status = memcached_status(pod);
    let restarted = match before {
        Some(before) => status.is_some_and(|s| s.restart_count > before),
        None => true,
    };
    ready && restarted && status.is_some_and(|s| s.ready)
}

pub(crate) fn len<T>(items: &[T]) -> i32 {
    i32::try_from(items.len()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, image: &str, ready: bool, restarts: i32, annotated: Option<i32>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotated.map(|a| json!({RESTARTS_ANNOTATION: a.to_string()}))},
            "spec": {"containers": [{"name": "memcached", "image": image}]},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "memcached", "ready": ready, "restartCount": restarts,
                    "image": image, "imageID": "", "started": ready}],
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_is_settled_once_ready_after_its_restart() {
        assert!(settled(&pod("a", "m:2", true, 0, None)));
        assert!(!settled(&pod("a", "m:2", false, 0, None)), "not ready");
        assert!(
            !settled(&pod("a", "m:2", true, 3, Some(3))),
            "patched, the old container still runs"
        );
        assert!(settled(&pod("a", "m:2", true, 4, Some(3))));
        assert!(
            !settled(&pod("a", "m:2", false, 4, Some(3))),
            "restarted, not ready yet"
        );
    }

    #[test]
    fn a_container_that_cannot_run_is_failing_one_that_starts_is_not() {
        let waiting = |reason: &str| {
            let mut pod = pod("a", "m:2", false, 1, Some(0));
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
        assert_eq!(failing(&pod("a", "m:2", true, 0, None)), None);
    }

    #[test]
    fn progress_says_which_pod_restarts() {
        let progress = Progress {
            image: "memcached:1.6.39".into(),
            updated: 2,
            pods: 3,
            restarting: Some("c-1".into()),
            stalled: None,
            started: false,
        };
        assert_eq!(
            progress.message(),
            "memcached image memcached:1.6.39 applied in place: 2 of 3 pods have it; c-1 is restarting warm"
        );
        assert_eq!(progress.summary(), "in place 2/3, c-1 restarting warm");
        assert_eq!(progress.stalled_message(), None);
        let stalled = Progress {
            stalled: Some("ImagePullBackOff".into()),
            ..progress
        };
        assert_eq!(stalled.summary(), "in place 2/3, c-1 ImagePullBackOff");
        assert_eq!(
            stalled.stalled_message().as_deref(),
            Some(
                "pod c-1 does not come back with memcached image memcached:1.6.39: its container is \
                 in ImagePullBackOff; the other pods keep their image and their cache until \
                 spec.image names one that runs (applied in place too)"
            )
        );
        assert!(lags(&pod("a", "m:1", true, 0, None), "m:2"));
        assert!(!lags(&pod("a", "m:2", true, 0, None), "m:2"));
    }
}
