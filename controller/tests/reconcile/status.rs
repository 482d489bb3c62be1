//! What the status and Events say: ready replicas, a frozen pod named, Events
//! naming their object, an apply the API server refused.

use super::*;

#[tokio::test]
async fn ready_replicas_change_the_status() {
    let api = Shared::default();
    let mc = converge(&api, json!({"replicas": 2})).await;
    assert_eq!(mc.status.as_ref().unwrap().ready_replicas, Some(0));
    writes(&api);
    let key = path("apps/v1", "deployments", "c");
    api.lock().unwrap().objects.get_mut(&key).unwrap()["status"] = json!({"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}]});
    let action = reconcile(mc, context(api.clone())).await.unwrap();
    assert_eq!(writes(&api), [format!("PATCH {}/status", cr_path())]);
    assert_eq!(
        action,
        Action::requeue(memcached_controller::reconcile::report::REQUEUE_READY)
    );
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(status["serverList"], json!(["c.default:11211"]));
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("True"), Some("MemcachedReady"))
    );
}

/// Scaled to zero, a Memcached has no pod to wait for and what could change
/// it is watched: it is looked at again as seldom as a ready one (1,000 of
/// them polled every 10 s kept a loaded controller from converging new ones).
/// A missing Secret is still looked for soon.
#[tokio::test]
async fn scaled_to_zero_is_at_rest() {
    use memcached_controller::reconcile::report::REQUEUE_READY;
    let api = Shared::default();
    let at_rest = json!({"replicas": 0});
    let action = reconcile(store_cr(&api, at_rest), context(api.clone()))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(REQUEUE_READY));
    let waiting = json!({"replicas": 0, "security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "certs"}}}});
    let action = reconcile(store_cr(&api, waiting), context(api.clone()))
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(REQUEUE_NOT_READY));
}

/// A pod that accepts connections and never answers (a frozen memcached)
/// delays no reconcile: the stats are read in the background, and once the
/// read timed out the Memcached is reconciled again and names the pod
/// (Degraded and Ready: PodsNotAnswering); the server list stays.
#[tokio::test]
async fn a_frozen_pod_delays_no_reconcile_and_is_named() {
    // Never answers; keeps every connection open.
    let frozen = tokio::net::TcpListener::bind(("127.0.0.9", MEMCACHED_PORT as u16))
        .await
        .expect("127.0.0.9:11211 is free");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = frozen.accept().await {
            held.push(socket);
        }
    });
    let api = Shared::default();
    let (ctx, mut writers, mut stats_changed) = fake_api::context_parts(api.clone());
    reconcile(store_cr(&api, json!({})), ctx.clone())
        .await
        .unwrap();
    let deployment = path("apps/v1", "deployments", "c");
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["status"] = json!({"replicas": 1,
        "readyReplicas": 1, "updatedReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]});
    // The Service's EndpointSlice, as the EndpointSlice controller keeps it.
    let service = path("v1", "services", "c");
    api.lock().unwrap().objects.get_mut(&service).unwrap()["metadata"]["uid"] = json!("svc-uid");
    insert(
        &api,
        path("discovery.k8s.io/v1", "endpointslices", "c-abc"),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "c-abc", "namespace": NS, "labels": {"kubernetes.io/service-name": "c",
                "app.kubernetes.io/managed-by": "memcached-operator"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "c",
                    "uid": "svc-uid", "controller": true}]},
            "endpoints": [{"addresses": ["127.0.0.9"], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "namespace": NS, "name": "c-abc-x1y2z"}}]}),
    );
    fake_api::sync(&mut writers, &api);

    let started = Instant::now();
    reconcile(store_cr(&api, json!({})), ctx.clone())
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < READ_TIMEOUT,
        "the reconcile waited {took:?} for the pod"
    );
    assert_eq!(condition(&api, "Ready")["reason"], "MemcachedReady");

    let again = tokio::time::timeout(READ_TIMEOUT * 3, stats_changed.next())
        .await
        .expect("reconciled again once the read timed out");
    assert_eq!(again, Some(ObjectRef::new("c").within(NS)));
    reconcile(store_cr(&api, json!({})), ctx).await.unwrap();
    let (ready, degraded) = (condition(&api, "Ready"), condition(&api, "Degraded"));
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("PodsNotAnswering"))
    );
    assert_eq!(degraded["reason"], "PodsNotAnswering");
    assert!(
        degraded["message"]
            .as_str()
            .is_some_and(|m| m.ends_with(": 127.0.0.9:11211 (no complete answer within 3s)")),
        "{degraded}"
    );
    let status = &api.lock().unwrap().objects[&cr_path()]["status"];
    assert_eq!(status["serverList"], json!(["c.default:11211"]));
}

/// Each Event about a managed object names it (`related`, and the note), so
/// kubectl shows one per object instead of one merged series.
#[tokio::test]
async fn events_name_the_object_they_are_about() {
    let api = Shared::default();
    events(&api);
    converge(&api, json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}})).await;
    let created: Vec<(String, String, String)> = events(&api)
        .into_iter()
        .filter(|e| e["reason"] == "Created")
        .map(|e| {
            let related = &e["related"];
            (
                related["kind"].as_str().unwrap_or_default().to_string(),
                related["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [
            (
                "Deployment".into(),
                "apps/v1".into(),
                "created Deployment c".into()
            ),
            ("Service".into(), "v1".into(), "created Service c".into()),
            (
                "PodDisruptionBudget".into(),
                "policy/v1".into(),
                "created PodDisruptionBudget c".into()
            ),
        ]
    );
}

#[tokio::test]
async fn a_refused_apply_degrades_with_the_api_servers_message() {
    let api = Shared::default();
    let message =
        "Deployment.apps \"c\" is invalid: spec.template.spec.nodeSelector: Invalid value";
    api.lock().unwrap().refuse.insert(
        path("apps/v1", "deployments", "c"),
        (422, "Invalid", message.to_string()),
    );
    let result = reconcile(store_cr(&api, json!({})), context(api.clone())).await;
    assert!(
        matches!(&result, Err(Error::Refused(m)) if m.contains("nodeSelector")),
        "{result:?}"
    );
    let degraded = condition(&api, "Degraded");
    assert_eq!(degraded["status"], "True");
    assert_eq!(degraded["reason"], "ApplyFailed");
    assert!(
        degraded["message"].as_str().unwrap().contains(message),
        "{degraded}"
    );
    // The other objects are still applied.
    assert!(writes(&api).iter().any(|w| w.contains("/services/")),);
}
