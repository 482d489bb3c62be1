//! Changes in place (warm restarts): one pod at a time in either workload
//! mode, stalls and their back-off, autoscaling, RBAC refusals, a template
//! moved on meanwhile.

use super::*;

/// The Deployment at `path` is not paused and carries no in-place change.
pub(crate) fn assert_resumed_without_change_in_place(api: &Shared, path: &str) -> Value {
    let d = api.lock().unwrap().objects[path].clone();
    assert!(d["spec"]["paused"].is_null(), "{}", d["spec"]);
    assert!(d["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null());
    d
}

pub(crate) fn assert_no_pod_or_replica_set_written(api: &Shared) {
    let written = writes(api);
    assert!(
        !written
            .iter()
            .any(|w| w.contains("/pods/") || w.contains("/replicasets/")),
        "{written:?}"
    );
}

/// A running pod of ReplicaSet `c-abc` with the Deployment's `template`.
pub(crate) fn running_pod(name: &str, template: &Value, restarts: i32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "c-abc",
                "uid": "set-uid", "controller": true}]},
        "spec": template["spec"],
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "memcached", "ready": true, "restartCount": restarts,
                "image": "", "imageID": ""}]}})
}

/// The image of the change in place a workload is marked with (the mark is
/// the image and a digest of the args and Secret hash).
pub(crate) fn marked_image(workload: &Value) -> &str {
    let mark = workload["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].as_str();
    mark.unwrap_or_default()
        .split(' ')
        .next()
        .unwrap_or_default()
}

pub(crate) fn image_of(api: &Shared, path: &str, pointer: &str) -> Value {
    api.lock().unwrap().objects[path]
        .pointer(pointer)
        .cloned()
        .unwrap_or_default()
}

/// A warm Memcached (`spec` of [`warm`]) whose Deployment runs 2 ready
/// pods of ReplicaSet `c-abc`; returns the paths of the Deployment, the
/// ReplicaSet and the pods.
pub(crate) async fn warm_and_running(api: &Shared) -> (String, String, [String; 2]) {
    warm_and_running_as(api, warm("memcached:1.6.38")).await
}

/// [`warm_and_running`] with `spec`.
pub(crate) async fn warm_and_running_as(
    api: &Shared,
    spec: Value,
) -> (String, String, [String; 2]) {
    converge(api, spec).await;
    let deployment = path("apps/v1", "deployments", "c");
    let set = path("apps/v1", "replicasets", "c-abc");
    let pods = [path("v1", "pods", "c-abc-1"), path("v1", "pods", "c-abc-2")];
    let mut api = api.lock().unwrap();
    let d = api.objects.get_mut(&deployment).unwrap();
    d["metadata"]["uid"] = json!("deployment-uid");
    d["status"] = json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
        "updatedReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]});
    let template = d["spec"]["template"].clone();
    let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "c-abc", "namespace": NS, "uid": "set-uid", "generation": 1,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "c",
                "uid": "deployment-uid", "controller": true}]},
        "spec": {"replicas": 2, "selector": {}, "template": template},
        "status": {"replicas": 2, "observedGeneration": 1}});
    api.objects.insert(set.clone(), replica_set);
    for pod in &pods {
        let name = pod.rsplit('/').next().unwrap();
        api.objects
            .insert(pod.clone(), running_pod(name, &template, 0));
    }
    (deployment, set, pods)
}

pub(crate) fn warm(image: &str) -> Value {
    json!({"replicas": 2, "image": image, "warmRestart": {"enabled": true}})
}

/// An in-place change to memcached:1.6.39 of the pods of
/// [`warm_and_running`]: the first restarts with it, the second cannot
/// pull it. The Memcached that asks for it.
pub(crate) async fn stall_the_second_pod(api: &Shared, pods: &[String; 2]) -> Arc<Memcached> {
    let mc = store_cr(api, warm("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    container_state(api, &pods[0], 1, None);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        image_of(api, &pods[1], "/spec/containers/0/image"),
        "memcached:1.6.39"
    );
    container_state(api, &pods[1], 0, Some("ImagePullBackOff"));
    mc
}

/// A stalled change in place is looked at less and less often (each look
/// lists the ReplicaSets and pods): 2 s, then 4 s, 8 s... A new spec is
/// reconciled at once anyway.
#[tokio::test]
async fn a_stalled_change_in_place_backs_off() {
    let api = Shared::default();
    let (_, _, pods) = warm_and_running(&api).await;
    let mc = stall_the_second_pod(&api, &pods).await;
    let ctx = context(api.clone());
    let mut delays = Vec::new();
    for _ in 0..3 {
        delays.push(Box::pin(reconcile(mc.clone(), ctx.clone())).await.unwrap());
    }
    let expected = [1, 2, 4].map(|n| Action::requeue(REQUEUE_ROLLOUT * n));
    assert_eq!(delays, expected);
}

/// Under autoscaling, starting an image change in place leaves the replica
/// count to the autoscaler: a step it took after the cache saw the
/// Deployment is not undone.
#[tokio::test]
async fn an_image_change_in_place_under_autoscaling_leaves_the_replicas_to_the_autoscaler() {
    let api = Shared::default();
    let autoscaled = |image: &str| {
        json!({"image": image, "warmRestart": {"enabled": true},
            "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}},
            "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 6}})
    };
    let (deployment, _, _) = warm_and_running_as(&api, autoscaled("memcached:1.6.38")).await;
    let ctx = context(api.clone()); // its cache holds 2 replicas
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["spec"]["replicas"] = json!(5);
    reconcile(store_cr(&api, autoscaled("memcached:1.6.39")), ctx)
        .await
        .unwrap();
    let d = &api.lock().unwrap().objects[&deployment];
    assert_eq!(
        marked_image(d),
        "memcached:1.6.39",
        "the change goes in place"
    );
    assert_eq!(
        d["spec"]["replicas"], 5,
        "the autoscaler's last step stands"
    );
}

#[tokio::test]
async fn a_new_image_with_warm_restarts_restarts_each_pod_in_place() {
    let api = Shared::default();
    let (deployment, set, pods) = warm_and_running(&api).await;
    writes(&api);
    let container = "/spec/template/spec/containers/0/image";
    let pod_image = "/spec/containers/0/image";

    let mc = store_cr(&api, warm("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {deployment}"),
            format!("PATCH {set}"),
            format!("PATCH {deployment}"),
            format!("PATCH {}/status", cr_path()),
        ],
        "paused with the new template, the ReplicaSet given the image, resumed"
    );
    assert_eq!(
        condition(&api, "Progressing")["reason"],
        "RestartingInPlace"
    );

    // Then the first pod.
    let action = reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(action, Action::requeue(REQUEUE_ROLLOUT));
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {}", pods[0]),
            format!("PATCH {}/status", cr_path())
        ]
    );
    let d = api.lock().unwrap().objects[&deployment].clone();
    assert!(d["spec"]["paused"].is_null(), "resumed: {}", d["spec"]);
    assert_eq!(marked_image(&d), "memcached:1.6.39");
    assert_eq!(d.pointer(container).unwrap(), "memcached:1.6.39");
    assert_eq!(image_of(&api, &set, container), "memcached:1.6.39");
    assert_eq!(
        image_of(
            &api,
            &set,
            "/spec/template/metadata/labels/app.kubernetes.io~1version"
        ),
        "1.6.39",
        "the ReplicaSet's template equals the Deployment's"
    );
    assert_eq!(image_of(&api, &pods[0], pod_image), "memcached:1.6.39");
    assert_eq!(
        image_of(&api, &pods[1], pod_image),
        "memcached:1.6.38",
        "one pod at a time"
    );
    let progressing = condition(&api, "Progressing");
    assert_eq!(progressing["reason"], "RestartingInPlace");
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["rollout"], "in place 1/2, c-abc-1 restarting warm");
    let restarting = |api: &Shared| -> Vec<Value> {
        events(api)
            .into_iter()
            .filter(|e| e["reason"] == "RestartingInPlace")
            .collect()
    };
    let first = restarting(&api);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["related"]["kind"], "Pod");
    assert_eq!(first[0]["related"]["name"], "c-abc-1");

    // Its container has not restarted yet: the second pod waits.
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert!(!writes(&api).iter().any(|w| w.contains("/pods/")));

    // Back with the new image: the second pod's turn.
    api.lock().unwrap().objects.get_mut(&pods[0]).unwrap()["status"]["containerStatuses"][0]["restartCount"] =
        json!(1);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {}", pods[1]),
            format!("PATCH {}/status", cr_path())
        ]
    );
    let second = restarting(&api);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["related"]["name"], "c-abc-2");

    // Every pod back: the annotation goes, the rollout is complete.
    api.lock().unwrap().objects.get_mut(&pods[1]).unwrap()["status"]["containerStatuses"][0]["restartCount"] =
        json!(1);
    let action = reconcile(mc, context(api.clone())).await.unwrap();
    assert_ne!(action, Action::requeue(REQUEUE_ROLLOUT));
    let d = api.lock().unwrap().objects[&deployment].clone();
    assert!(d["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null());
    assert_eq!(condition(&api, "Progressing")["status"], "False");
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert!(status["rollout"].is_null(), "{status}");
}

/// Pod `path`'s memcached container restarted `restarts` times and Ready,
/// or waiting for `failing` (not Ready).
pub(crate) fn container_state(api: &Shared, path: &str, restarts: i32, failing: Option<&str>) {
    let mut api = api.lock().unwrap();
    let pod = api.objects.get_mut(path).unwrap();
    let ready = failing.is_none();
    pod["status"]["conditions"][0]["status"] = json!(if ready { "True" } else { "False" });
    let container = &mut pod["status"]["containerStatuses"][0];
    container["restartCount"] = json!(restarts);
    container["ready"] = json!(ready);
    container["state"] = match failing {
        Some(reason) => json!({"waiting": {"reason": reason}}),
        None => json!({"running": {}}),
    };
}

#[tokio::test]
async fn a_pod_that_cannot_run_the_new_image_stalls_the_change_until_the_next_image_in_place() {
    let api = Shared::default();
    let (deployment, set, pods) = warm_and_running(&api).await;
    let pod_image = "/spec/containers/0/image";
    let mc = stall_the_second_pod(&api, &pods).await;
    writes(&api);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert!(!writes(&api).iter().any(|w| w.contains("/pods/")));
    let degraded = condition(&api, "Degraded");
    assert_eq!(degraded["reason"], "InPlaceStalled");
    assert_eq!(
        degraded["message"],
        "pod c-abc-2 does not come back with memcached image memcached:1.6.39: its container is \
         in ImagePullBackOff; the other pods keep theirs and their cache until the spec names one \
         that runs (applied in place too)"
    );
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["rollout"], "in place 2/2, c-abc-2 ImagePullBackOff");

    // The next image takes the change over in place, the failing pod first.
    let mc = store_cr(&api, warm("memcached:1.6.40"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        image_of(&api, &set, "/spec/template/spec/containers/0/image"),
        "memcached:1.6.40"
    );
    assert_eq!(
        marked_image(&api.lock().unwrap().objects[&deployment]),
        "memcached:1.6.40"
    );
    writes(&api);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {}", pods[1]),
            format!("PATCH {}/status", cr_path())
        ],
        "the failing pod first"
    );
    assert_eq!(image_of(&api, &pods[1], pod_image), "memcached:1.6.40");
    assert_eq!(image_of(&api, &pods[0], pod_image), "memcached:1.6.39");
    assert_ne!(condition(&api, "Degraded")["reason"], "InPlaceStalled");

    // Back, then the other pod; then done.
    container_state(&api, &pods[1], 1, None);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(image_of(&api, &pods[0], pod_image), "memcached:1.6.40");
    container_state(&api, &pods[0], 2, None);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert_resumed_without_change_in_place(&api, &deployment);
}

/// A lagging pod whose container has not started yet (recreated meanwhile,
/// as a StatefulSet recreates from its current revision) is waited for: its
/// first start would look like no restart, and the change would wait for
/// ever.
#[tokio::test]
async fn a_lagging_pod_whose_container_has_not_started_is_waited_for() {
    let api = Shared::default();
    let (_, _, pods) = warm_and_running(&api).await;
    let mc = store_cr(&api, warm("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    api.lock().unwrap().objects.get_mut(&pods[1]).unwrap()["status"] =
        json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]});
    writes(&api);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert!(
        !writes(&api).iter().any(|w| w.contains("/pods/")),
        "no pod changed while one has not started"
    );
}

/// A warm Memcached in StatefulSet mode (`image`, 2 replicas).
pub(crate) fn warm_stateful(image: &str) -> Value {
    json!({"replicas": 2, "workload": "StatefulSet", "image": image, "warmRestart": {"enabled": true}})
}

/// The StatefulSet at `set` as its controller reports it: generation
/// `generation` observed, `updated` pods on revision `update`.
pub(crate) fn stateful_set_status(
    api: &Shared,
    set: &str,
    generation: i64,
    update: &str,
    updated: i32,
) {
    let mut api = api.lock().unwrap();
    let s = api.objects.get_mut(set).unwrap();
    s["metadata"]["uid"] = json!("set-uid");
    s["metadata"]["generation"] = json!(generation);
    s["status"] = json!({"observedGeneration": generation, "replicas": 2, "readyReplicas": 2,
        "availableReplicas": 2, "updatedReplicas": updated, "currentRevision": "c-old",
        "updateRevision": update});
}

#[tokio::test]
async fn a_new_image_with_warm_restarts_restarts_each_stateful_set_pod_in_place() {
    let api = Shared::default();
    converge(&api, warm_stateful("memcached:1.6.38")).await;
    let set = path("apps/v1", "statefulsets", "c");
    let pods = [path("v1", "pods", "c-0"), path("v1", "pods", "c-1")];
    stateful_set_status(&api, &set, 1, "c-old", 2);
    {
        let mut api = api.lock().unwrap();
        let template = api.objects[&set]["spec"]["template"].clone();
        for (ordinal, pod) in pods.iter().enumerate() {
            let mut running = running_pod(&format!("c-{ordinal}"), &template, 0);
            running["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
                "kind": "StatefulSet", "name": "c", "uid": "set-uid", "controller": true}]);
            running["metadata"]["labels"]["controller-revision-hash"] = json!("c-old");
            api.objects.insert(pod.clone(), running);
        }
    }
    writes(&api);
    let container = "/spec/template/spec/containers/0/image";
    let pod_image = "/spec/containers/0/image";
    let revision = "/metadata/labels/controller-revision-hash";
    let partition = "/spec/updateStrategy/rollingUpdate/partition";

    let mc = store_cr(&api, warm_stateful("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {set}"),
            format!("PATCH {}/status", cr_path())
        ],
        "the new template, every pod held"
    );
    assert_eq!(image_of(&api, &set, container), "memcached:1.6.39");
    assert_eq!(image_of(&api, &set, partition), i32::MAX, "no pod replaced");
    assert_eq!(
        marked_image(&api.lock().unwrap().objects[&set]),
        "memcached:1.6.39"
    );

    // The StatefulSet controller makes it the update revision: the highest
    // ordinal first, in place, on that revision.
    stateful_set_status(&api, &set, 2, "c-new", 0);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    let written = writes(&api);
    assert!(
        written.contains(&format!("PATCH {}", pods[1])),
        "{written:?}"
    );
    assert!(
        !written.contains(&format!("PATCH {}", pods[0])),
        "one at a time"
    );
    assert_eq!(image_of(&api, &pods[1], pod_image), "memcached:1.6.39");
    assert_eq!(image_of(&api, &pods[1], revision), "c-new");
    assert_eq!(image_of(&api, &pods[0], pod_image), "memcached:1.6.38");
    assert_eq!(image_of(&api, &set, partition), i32::MAX, "still held");
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["rollout"], "in place 1/2, c-1 restarting warm");

    // Its container has not restarted yet: the other pod waits.
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    assert!(!writes(&api).iter().any(|w| w.contains("/pods/")));

    api.lock().unwrap().objects.get_mut(&pods[1]).unwrap()["status"]["containerStatuses"][0]["restartCount"] =
        json!(1);
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    let written = writes(&api);
    assert!(
        written.contains(&format!("PATCH {}", pods[0])),
        "{written:?}"
    );
    assert_eq!(image_of(&api, &pods[0], revision), "c-new");

    // Every pod back on the new revision: the mark goes, and the partition
    // is left to pacing, which replaces none of them.
    api.lock().unwrap().objects.get_mut(&pods[0]).unwrap()["status"]["containerStatuses"][0]["restartCount"] =
        json!(1);
    stateful_set_status(&api, &set, 2, "c-new", 2);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert!(!writes(&api).iter().any(|w| w.contains("/pods/")));
    let s = api.lock().unwrap().objects[&set].clone();
    assert!(s["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null());
    assert_eq!(s.pointer(container).unwrap(), "memcached:1.6.39");
}

/// A controller that restarted mid-change and whose StatefulSet watch has
/// not listed yet reads the StatefulSet from the API server: the change goes
/// on in place, every pod still held (without the live object the partition
/// would go, and the StatefulSet would replace every pod, cold).
#[tokio::test]
async fn a_change_in_place_goes_on_before_the_watch_has_listed() {
    let api = Shared::default();
    converge(&api, warm_stateful("memcached:1.6.38")).await;
    let set = path("apps/v1", "statefulsets", "c");
    stateful_set_status(&api, &set, 1, "c-old", 2);
    let mc = store_cr(&api, warm_stateful("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    let partition = "/spec/updateStrategy/rollingUpdate/partition";
    assert_eq!(image_of(&api, &set, partition), i32::MAX);

    let (unsynced, _writers) = fake_api::context_and_writers(api.clone());
    reconcile(mc, unsynced).await.unwrap();
    assert_eq!(image_of(&api, &set, partition), i32::MAX, "still held");
    assert_eq!(
        marked_image(&api.lock().unwrap().objects[&set]),
        "memcached:1.6.39"
    );
}

#[tokio::test]
async fn a_stateful_set_template_moved_on_meanwhile_ends_the_change_in_place() {
    let api = Shared::default();
    converge(&api, warm_stateful("memcached:1.6.38")).await;
    let set = path("apps/v1", "statefulsets", "c");
    stateful_set_status(&api, &set, 1, "c-old", 2);
    let mc = store_cr(&api, warm_stateful("memcached:1.6.39"));
    reconcile(mc.clone(), context(api.clone())).await.unwrap();
    // One pod already changed, then `kubectl rollout restart` made another
    // revision: that pod has the image but not the update revision.
    stateful_set_status(&api, &set, 3, "c-restarted", 0);
    {
        let mut api = api.lock().unwrap();
        let template = api.objects[&set]["spec"]["template"].clone();
        let mut pod = running_pod("c-1", &template, 1);
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "StatefulSet", "name": "c", "uid": "set-uid", "controller": true}]);
        pod["metadata"]["labels"]["controller-revision-hash"] = json!("c-new");
        api.objects.insert(path("v1", "pods", "c-1"), pod);
    }
    writes(&api);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert!(
        !writes(&api).iter().any(|w| w.contains("/pods/")),
        "no pod relabelled"
    );
    let s = api.lock().unwrap().objects[&set].clone();
    assert!(
        s["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null(),
        "the StatefulSet rolls it, paced"
    );
}

#[tokio::test]
async fn without_warm_restarts_a_new_image_is_rolled_out_by_the_deployment() {
    let api = Shared::default();
    converge(&api, json!({"replicas": 2, "image": "memcached:1.6.38"})).await;
    writes(&api);
    converge(&api, json!({"replicas": 2, "image": "memcached:1.6.39"})).await;
    assert_no_pod_or_replica_set_written(&api);
}

#[tokio::test]
async fn an_in_place_change_refused_by_rbac_is_rolled_out_and_reported() {
    let api = Shared::default();
    let (deployment, set, _) = warm_and_running(&api).await;
    let forbidden = "replicasets.apps \"c-abc\" is forbidden".to_string();
    api.lock()
        .unwrap()
        .refuse
        .insert(set.clone(), (403, "Forbidden", forbidden));
    writes(&api);
    converge(&api, warm("memcached:1.6.39")).await;
    let written = writes(&api);
    assert!(!written.iter().any(|w| w.contains("/pods/")), "{written:?}");
    let d = assert_resumed_without_change_in_place(&api, &deployment);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"], "memcached:1.6.39",
        "rolled out by the Deployment"
    );
    let degraded = condition(&api, "Degraded");
    assert_eq!(degraded["reason"], "InPlaceForbidden");
    assert!(
        degraded["message"]
            .as_str()
            .unwrap()
            .contains("is forbidden"),
        "{degraded}"
    );
}

#[tokio::test]
async fn a_rendering_change_without_a_spec_change_restarts_no_pod_in_place() {
    let api = Shared::default();
    let (deployment, _, _) = warm_and_running(&api).await;
    // As an older controller version, rendering differently, left it.
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["metadata"]["annotations"]["memcached.c5c3.io/template-hash"] =
        json!("00000000000000000000000000000000");
    writes(&api);
    converge(&api, warm("memcached:1.6.38")).await;
    assert_no_pod_or_replica_set_written(&api);
    assert_resumed_without_change_in_place(&api, &deployment);
}

#[tokio::test]
async fn an_older_replica_set_with_the_new_image_leaves_the_change_to_the_deployment() {
    let api = Shared::default();
    let (deployment, set, _) = warm_and_running(&api).await;
    // A rolled-back-from ReplicaSet with the image the user goes back to:
    // the Deployment controller would take that older one on resume.
    let mut old = api.lock().unwrap().objects[&set].clone();
    old["metadata"]["name"] = json!("c-old");
    old["metadata"]["uid"] = json!("old-uid");
    old["spec"]["replicas"] = json!(0);
    old["spec"]["template"]["spec"]["containers"][0]["image"] = json!("memcached:1.6.39");
    old["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/version"] = json!("1.6.39");
    api.lock()
        .unwrap()
        .objects
        .insert(path("apps/v1", "replicasets", "c-old"), old);
    writes(&api);
    converge(&api, warm("memcached:1.6.39")).await;
    assert_no_pod_or_replica_set_written(&api);
    assert_resumed_without_change_in_place(&api, &deployment);
}
