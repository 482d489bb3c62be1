//! Reconcile against an in-memory API server (tower-test): the real
//! reconcile code, its real HTTP requests, a fake store behind them.

mod fake_api;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use memcached_controller::objects::labels::MEMCACHED_PORT;
use memcached_controller::stats::client::READ_TIMEOUT;

use fake_api::{NS, Shared, context, path};
use kube::runtime::controller::Action;
use memcached_api::Memcached;
use memcached_controller::cluster::stored::Stored;
use memcached_controller::reconcile::context::Error;
use memcached_controller::reconcile::report::{REQUEUE_NOT_READY, REQUEUE_ROLLOUT};
use memcached_controller::reconcile::{reconcile, reconcile_stored};
use serde_json::{Value, json};

fn cr_path() -> String {
    path("memcached.c5c3.io/v1beta1", "memcacheds", "c")
}

/// Store the CR with `spec` as the API server would: the generation moves
/// when the spec changes, the status stays. Returns it as a watch delivers it.
fn store_cr(api: &Shared, spec: Value) -> Arc<Memcached> {
    Arc::new(serde_json::from_value(store_object(api, spec)).unwrap())
}

/// [`store_cr`] as the controller's watch decodes it, readable or not.
fn store_stored(api: &Shared, spec: Value) -> Arc<Stored> {
    Arc::new(serde_json::from_value(store_object(api, spec)).unwrap())
}

fn store_object(api: &Shared, spec: Value) -> Value {
    let mut api = api.lock().unwrap();
    let old = api.objects.get(&cr_path()).cloned().unwrap_or(Value::Null);
    let generation =
        old["metadata"]["generation"].as_i64().unwrap_or(0) + i64::from(old["spec"] != spec);
    let mut object = json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
        "metadata": {"name": "c", "namespace": NS, "uid": "uid-1", "generation": generation}, "spec": spec});
    if !old["status"].is_null() {
        object["status"] = old["status"].clone();
    }
    api.objects.insert(cr_path(), object.clone());
    object
}

/// Apply `spec` and reconcile it; returns the CR with the status it wrote.
async fn converge(api: &Shared, spec: Value) -> Arc<Memcached> {
    reconcile(store_cr(api, spec.clone()), context(api.clone()))
        .await
        .unwrap();
    store_cr(api, spec)
}

fn writes(api: &Shared) -> Vec<String> {
    std::mem::take(&mut api.lock().unwrap().writes)
}

#[tokio::test]
async fn creates_deployment_service_and_status() {
    let api = Shared::default();
    let ctx = context(api.clone());
    let action = reconcile(store_cr(&api, json!({})), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(REQUEUE_NOT_READY));
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {}", path("apps/v1", "deployments", "c")),
            format!("PATCH {}", path("v1", "services", "c")),
            format!("PATCH {}/status", cr_path()),
        ]
    );
    let deployment = &api.lock().unwrap().objects[&path("apps/v1", "deployments", "c")];
    assert_eq!(deployment["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    assert_eq!(deployment["spec"]["replicas"], 1);
}

#[tokio::test]
async fn a_converged_memcached_causes_no_write() {
    let api = Shared::default();
    let mc = converge(&api, json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}})).await;
    writes(&api);
    reconcile(mc, context(api.clone())).await.unwrap();
    assert_eq!(writes(&api), Vec::<String>::new());
}

#[tokio::test]
async fn a_spec_change_updates_only_what_changed() {
    let api = Shared::default();
    converge(&api, json!({})).await;
    writes(&api);
    let changed = converge(&api, json!({"memcached": {"maxMemoryMB": 128}})).await;
    let status_write = format!("PATCH {}/status", cr_path());
    assert_eq!(
        writes(&api),
        [
            format!("PATCH {}", path("apps/v1", "deployments", "c")),
            status_write
        ],
        "observedGeneration moves too"
    );
    let args = api.lock().unwrap().objects[&path("apps/v1", "deployments", "c")]["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert_eq!(args[1], "128");
    reconcile(changed, context(api.clone())).await.unwrap();
    assert!(writes(&api).is_empty());
}

#[tokio::test]
async fn turning_a_feature_off_deletes_its_object() {
    let api = Shared::default();
    converge(&api, json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 0}}, "networkPolicy": {"enabled": true}})).await;
    assert!(api.lock().unwrap().objects.contains_key(&path(
        "policy/v1",
        "poddisruptionbudgets",
        "c"
    )));
    writes(&api);
    converge(&api, json!({"highAvailability": {"podDisruptionBudget": {"enabled": false}}, "networkPolicy": {"enabled": true}})).await;
    assert_eq!(
        writes(&api),
        [
            // The workload's intent stamp follows the spec (its pods do not change).
            format!("PATCH {}", path("apps/v1", "deployments", "c")),
            format!("DELETE {}", path("policy/v1", "poddisruptionbudgets", "c")),
            format!("PATCH {}/status", cr_path())
        ]
    );
}

#[tokio::test]
async fn never_touches_an_object_it_does_not_own() {
    let api = Shared::default();
    let foreign = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", "namespace": NS}, "spec": {"ports": [{"port": 80}]}});
    api.lock()
        .unwrap()
        .objects
        .insert(path("v1", "services", "c"), foreign.clone());
    let foreign_pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "c", "namespace": NS}});
    api.lock()
        .unwrap()
        .objects
        .insert(path("policy/v1", "poddisruptionbudgets", "c"), foreign_pdb);
    reconcile(store_cr(&api, json!({})), context(api.clone()))
        .await
        .unwrap();
    let w = writes(&api);
    assert!(
        !w.iter()
            .any(|w| w.contains("/services/") || w.contains("/poddisruptionbudgets/")),
        "{w:?}"
    );
    assert_eq!(
        api.lock().unwrap().objects[&path("v1", "services", "c")],
        foreign
    );
}

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

#[tokio::test]
async fn a_missing_secret_degrades_and_keeps_running_pods() {
    let api = Shared::default();
    let spec =
        json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "certs"}}}});
    let mc = converge(&api, spec.clone()).await;
    let status = mc.status.clone().unwrap();
    let degraded = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Degraded")
        .unwrap();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "SecretNotFound")
    );
    assert!(degraded.message.contains("certs"));
    writes(&api);
    // With the Deployment in place, a still-missing Secret changes nothing.
    let changed = store_cr(
        &api,
        json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "certs"}}}, "memcached": {"threads": 2}}),
    );
    reconcile(changed, context(api.clone())).await.unwrap();
    assert!(!writes(&api).iter().any(|w| w.contains("/deployments/")));
}

/// An auth Secret memcached would misread (no newline after the last
/// line: that user could not log in) is not rolled out: the running pods
/// keep the Secret they have, the status says why, and the fixed Secret
/// rolls them.
#[tokio::test]
async fn an_invalid_auth_secret_keeps_running_pods() {
    let api = Shared::default();
    insert(&api, path("v1", "secrets", "auth"), auth_secret("1"));
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    let spec =
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}}}});
    reconcile(store_cr(&api, spec.clone()), ctx.clone())
        .await
        .unwrap();
    let deployment = path("apps/v1", "deployments", "c");
    let before = api.lock().unwrap().objects[&deployment].clone();
    events(&api);

    let mut unterminated = auth_secret("2");
    unterminated["data"]["auth"] = json!("dTpw"); // "u:p"
    insert(&api, path("v1", "secrets", "auth"), unterminated);
    fake_api::sync(&mut writers, &api);
    requests(&api);
    reconcile(store_cr(&api, spec.clone()), ctx.clone())
        .await
        .unwrap();
    assert_eq!(
        requests(&api),
        [
            format!("GET {}", path("v1", "secrets", "auth")),
            format!("PATCH {}/status", cr_path()),
        ],
        "the Deployment is left as it is"
    );
    assert_eq!(api.lock().unwrap().objects[&deployment], before);
    let degraded = condition(&api, "Degraded");
    assert_eq!(
        (degraded["status"].as_str(), degraded["reason"].as_str()),
        (Some("True"), Some("InvalidAuthSecret"))
    );
    assert!(
        degraded["message"]
            .as_str()
            .is_some_and(|m| m.contains("must end with a newline")),
        "{degraded}"
    );
    assert!(
        events(&api)
            .iter()
            .any(|e| e["reason"] == "InvalidAuthSecret" && e["type"] == "Warning"),
        "no InvalidAuthSecret Warning Event"
    );

    // Fixed (another password): the pods roll to it.
    let mut fixed = auth_secret("3");
    fixed["data"]["auth"] = json!("dTpxCg=="); // "u:q\n"
    insert(&api, path("v1", "secrets", "auth"), fixed);
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec), ctx).await.unwrap();
    let after = api.lock().unwrap().objects[&deployment].clone();
    assert_ne!(
        after["spec"]["template"]["metadata"]["annotations"],
        before["spec"]["template"]["metadata"]["annotations"],
        "the fixed Secret rolls the pods"
    );
    assert_ne!(condition(&api, "Degraded")["reason"], "InvalidAuthSecret");
}

/// A controller with another hash key (its key Secret deleted and created
/// again, or a second installation) changes no pod template while the
/// Secrets stay the same; changed Secret data still rolls the pods.
#[tokio::test]
async fn a_new_hash_key_restarts_no_pod() {
    let api = Shared::default();
    insert(&api, path("v1", "secrets", "auth"), auth_secret("1"));
    let spec =
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}}}});
    let deployment = path("apps/v1", "deployments", "c");
    let template_hash = |api: &Shared| {
        api.lock().unwrap().objects[&deployment]["spec"]["template"]["metadata"]["annotations"]
            ["memcached.c5c3.io/secret-hash"]
            .clone()
    };
    let (first, mut writers, _) = fake_api::context_with_key(api.clone(), b"first key");
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec.clone()), first)
        .await
        .unwrap();
    let before = template_hash(&api);
    assert!(before.is_string(), "no Secret hash on the pod template");

    let (second, mut writers, _) = fake_api::context_with_key(api.clone(), b"second key");
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec.clone()), second.clone())
        .await
        .unwrap();
    assert_eq!(template_hash(&api), before, "the new key rolled the pods");

    let mut rotated = auth_secret("2");
    rotated["data"]["auth"] = json!("dTpxCg=="); // "u:q\n"
    insert(&api, path("v1", "secrets", "auth"), rotated);
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec), second).await.unwrap();
    assert_ne!(
        template_hash(&api),
        before,
        "new Secret data rolls the pods"
    );
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
    insert(
        &api,
        path("discovery.k8s.io/v1", "endpointslices", "c-abc"),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "c-abc", "namespace": NS, "labels": {"kubernetes.io/service-name": "c",
                "app.kubernetes.io/managed-by": "memcached-operator"}},
            "endpoints": [{"addresses": ["127.0.0.9"], "conditions": {"ready": true}}]}),
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

/// Nothing but the Memcached (its status) differs between the two snapshots.
fn assert_only_the_memcached_changed(
    before: &BTreeMap<String, Value>,
    after: &BTreeMap<String, Value>,
) {
    for (path, object) in before {
        if !path.contains("/memcacheds/") {
            assert_eq!(after.get(path), Some(object), "{path} changed");
        }
    }
    assert_eq!(
        after.len(),
        before.len(),
        "an object was created or deleted"
    );
}

/// Exactly one Event with `reason` was recorded since the last call: a Warning saying `note`.
fn assert_one_warning(api: &Shared, reason: &str, note: &str) {
    let warnings: Vec<Value> = events(api)
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0]["type"] == "Warning" && warnings[0]["note"] == note,
        "{warnings:?}"
    );
}

fn condition(api: &Shared, type_: &str) -> Value {
    api.lock().unwrap().objects[&cr_path()]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap()
        .clone()
}

/// Every Event the controller recorded since the last call.
fn events(api: &Shared) -> Vec<Value> {
    std::mem::take(&mut api.lock().unwrap().events)
}

/// A stored Memcached the policy would refuse (admitted without it) is
/// refused visibly: Degraded/InvalidSpec with the policy's message, a
/// Warning Event, and no request but the status write; fixing it converges.
#[tokio::test]
async fn an_invalid_stored_spec_is_refused_visibly() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    let invalid = json!({"replicas": 99, "memcached": {"maxMemoryMB": 8}});
    let action = reconcile(store_cr(&api, invalid.clone()), ctx.clone())
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(
        requests(&api),
        [format!("PATCH {}/status", cr_path())],
        "nothing but the status is written"
    );
    let degraded = condition(&api, "Degraded");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert_eq!(
        (degraded["status"].as_str(), degraded["reason"].as_str()),
        (Some("True"), Some("InvalidSpec"))
    );
    assert!(
        message.starts_with(r#"Memcached.memcached.c5c3.io "c" is invalid: ["#)
            && message.contains("spec.replicas: Invalid value: 99")
            && message.contains("spec.memcached.maxMemoryMB: Invalid value: 8"),
        "{message}"
    );
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["state"], "Degraded: InvalidSpec");
    for type_ in ["Available", "Progressing", "Ready"] {
        let c = condition(&api, type_);
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some("InvalidSpec")),
            "{type_}: nothing ran, so neither ScaledToZero nor DeploymentComplete"
        );
    }
    assert_eq!(
        (&status["replicas"], &status["ready"]),
        (&Value::Null, &Value::Null),
        "no replica count (kubectl shows blanks) for a Memcached that never ran: {status}"
    );
    assert_one_warning(&api, "InvalidSpec", message);

    // Fixed: converges as usual.
    reconcile(store_cr(&api, json!({"replicas": 2})), ctx)
        .await
        .unwrap();
    let objects = &api.lock().unwrap().objects;
    assert_eq!(
        objects[&path("apps/v1", "deployments", "c")]["spec"]["replicas"],
        2
    );
    assert!(objects.contains_key(&path("v1", "services", "c")));
    assert_eq!(
        objects[&cr_path()]["status"]["conditions"][2]["reason"],
        "ReplicasNotReady"
    );
}

/// Autoscaling turned off without a replica count (admitted without the
/// policy, which would set one): the pods the autoscaler ran stay, none is
/// removed, and the autoscaler goes.
#[tokio::test]
async fn turning_autoscaling_off_keeps_the_pods_the_autoscaler_ran() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    let requests =
        json!({"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}});
    let autoscaled = json!({"resources": requests,
        "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 10}});
    reconcile(store_cr(&api, autoscaled), ctx.clone())
        .await
        .unwrap();
    let deployment = path("apps/v1", "deployments", "c");
    let hpa = path("autoscaling/v2", "horizontalpodautoscalers", "c");
    assert!(api.lock().unwrap().objects.contains_key(&hpa));
    // The autoscaler scaled the Deployment to 10.
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["spec"]["replicas"] = json!(10);
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, json!({"resources": requests})), ctx)
        .await
        .unwrap();
    let objects = api.lock().unwrap().objects.clone();
    assert_eq!(
        objects[&deployment]["spec"]["replicas"], 10,
        "not the default 1"
    );
    assert!(!objects.contains_key(&hpa), "the autoscaler is gone");
    assert_eq!(objects[&cr_path()]["status"]["replicas"], 10);
}

/// A running Memcached whose stored spec turns invalid keeps its workload,
/// Service and server list as they are, and the status still counts its pods.
#[tokio::test]
async fn an_invalid_spec_changes_nothing_that_runs() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    let valid = json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}});
    reconcile(store_cr(&api, valid.clone()), ctx.clone())
        .await
        .unwrap();
    let key = path("apps/v1", "deployments", "c");
    api.lock().unwrap().objects.get_mut(&key).unwrap()["status"] = json!({"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}]});
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, valid), ctx.clone()).await.unwrap();
    let before = api.lock().unwrap().objects.clone();
    requests(&api);
    // Valid, this spec would delete the PDB and scale the Deployment.
    let invalid = json!({"replicas": 99});
    reconcile(store_cr(&api, invalid), ctx).await.unwrap();
    assert_eq!(requests(&api), [format!("PATCH {}/status", cr_path())]);
    let after = api.lock().unwrap().objects.clone();
    assert_only_the_memcached_changed(&before, &after);
    let status = &after[&cr_path()]["status"];
    assert_eq!(status["serverList"], json!(["c.default:11211"]));
    assert_eq!(
        (
            status["replicas"].as_i64(),
            status["readyReplicas"].as_i64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(status["state"], "Degraded: InvalidSpec");
}

/// A stored spec the types cannot hold (the CRD's schema lets
/// `minAvailable: 4294967296` through) is reported on the Memcached, naming
/// the field; what runs stays as it is, and the fixed spec converges.
#[tokio::test]
async fn an_unreadable_stored_spec_is_reported_and_changes_nothing() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    let valid = json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}});
    reconcile_stored(store_stored(&api, valid.clone()), ctx.clone())
        .await
        .unwrap();
    fake_api::sync(&mut writers, &api);
    let before = api.lock().unwrap().objects.clone();
    requests(&api);
    events(&api);

    let unreadable = json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 4294967296_u64}}});
    let stored = store_stored(&api, unreadable);
    assert!(stored.readable().is_none());
    let action = reconcile_stored(stored, ctx.clone()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert_eq!(requests(&api), [format!("PATCH {}/status", cr_path())]);
    let degraded = condition(&api, "Degraded");
    let message = degraded["message"].as_str().unwrap_or_default();
    assert_eq!(
        (degraded["status"].as_str(), degraded["reason"].as_str()),
        (Some("True"), Some("InvalidSpec"))
    );
    assert!(
        message.starts_with(
            r#"Memcached.memcached.c5c3.io "c" cannot be read: spec.highAvailability.podDisruptionBudget.minAvailable: "#
        ),
        "{message}"
    );
    assert_one_warning(&api, "InvalidSpec", message);
    let after = api.lock().unwrap().objects.clone();
    assert_only_the_memcached_changed(&before, &after);

    // Fixed: converges as usual.
    reconcile_stored(store_stored(&api, valid), ctx)
        .await
        .unwrap();
    assert_eq!(condition(&api, "Degraded")["reason"], "ReplicasNotReady");
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

#[tokio::test]
async fn a_foreign_deployment_is_never_reported_as_this_memcacheds() {
    let api = Shared::default();
    let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "c", "namespace": NS, "resourceVersion": "7"},
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}]}});
    let key = path("apps/v1", "deployments", "c");
    api.lock()
        .unwrap()
        .objects
        .insert(key.clone(), foreign.clone());
    reconcile(store_cr(&api, json!({"replicas": 1})), context(api.clone()))
        .await
        .unwrap();
    assert_eq!(api.lock().unwrap().objects[&key], foreign);
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["readyReplicas"], 0, "{status}");
    assert!(status["serverList"].is_null(), "{status}");
    assert_eq!(condition(&api, "Degraded")["reason"], "ResourceConflict");
    assert_eq!(condition(&api, "Ready")["status"], "False");
}

#[tokio::test]
async fn a_memcached_being_deleted_is_left_to_the_garbage_collector() {
    let api = Shared::default();
    let mut mc = (*store_cr(&api, json!({}))).clone();
    mc.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let action = reconcile(Arc::new(mc), context(api.clone())).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert!(writes(&api).is_empty());
}

#[tokio::test]
async fn switching_to_a_stateful_set_keeps_the_deployment_until_the_set_serves() {
    let api = Shared::default();
    let deployment = path("apps/v1", "deployments", "c");
    let set = path("apps/v1", "statefulsets", "c");
    let config_map = path("v1", "configmaps", "servers");
    let data = |api: &Shared| api.lock().unwrap().objects[&config_map]["data"].clone();
    converge(
        &api,
        json!({"replicas": 2, "serverListConfigMap": "servers"}),
    )
    .await;
    assert_eq!(
        data(&api),
        json!({"memcache_servers": "c.default:11211", "servers": "c.default:11211\n"})
    );
    writes(&api);

    let spec = json!({"replicas": 2, "workload": "StatefulSet", "serverListConfigMap": "servers"});
    let mc = converge(&api, spec.clone()).await;
    let w = writes(&api);
    assert!(w.contains(&format!("PATCH {set}")), "{w:?}");
    assert!(
        !w.iter().any(|w| w.starts_with("DELETE")),
        "the Deployment serves until the StatefulSet does: {w:?}"
    );
    assert_eq!(
        data(&api),
        json!({"memcache_servers": "c.default:11211", "servers": "c.default:11211\n"}),
        "clients keep the Service until the pods' names resolve"
    );
    assert_eq!(
        mc.status.as_ref().unwrap().conditions.as_ref().unwrap()[1].status,
        "True",
        "Progressing while switching"
    );

    api.lock().unwrap().objects.get_mut(&set).unwrap()["status"] =
        json!({"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
    reconcile(mc, context(api.clone())).await.unwrap();
    let w = writes(&api);
    assert_eq!(w[0], format!("DELETE {deployment}"), "{w:?}");
    assert!(w.contains(&format!("PATCH {config_map}")), "{w:?}");
    assert!(api.lock().unwrap().objects.contains_key(&set));
    let servers = ["c-0.c.default.svc:11211", "c-1.c.default.svc:11211"];
    assert_eq!(
        data(&api),
        json!({"memcache_servers": servers.join(","), "servers": format!("{}\n", servers.join("\n"))})
    );
    let status = api.lock().unwrap().objects[&cr_path()]["status"].clone();
    assert_eq!(status["serverList"], json!(servers));

    converge(&api, json!({"replicas": 2, "workload": "StatefulSet"})).await;
    assert!(writes(&api).contains(&format!("DELETE {config_map}")));
}

fn requests(api: &Shared) -> Vec<String> {
    std::mem::take(&mut api.lock().unwrap().requests)
}

fn insert(api: &Shared, path: String, object: Value) {
    api.lock().unwrap().objects.insert(path, object);
}

/// Every feature that creates an object or reads a Secret, converged.
fn full_spec() -> Value {
    json!({"replicas": 2, "serverListConfigMap": "servers",
        "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}}},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}},
        "networkPolicy": {"enabled": true},
        "monitoring": {"enabled": true, "serviceMonitor": {"enabled": true}}})
}

fn auth_secret(version: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "auth", "namespace": NS, "resourceVersion": version},
        "data": {"auth": "dTpwCg=="}})
}

/// A converged Memcached is reconciled from the cache alone: no read, no
/// apply, no status write.
#[tokio::test]
async fn a_converged_memcached_sends_no_request() {
    let api = Shared::default();
    insert(&api, path("v1", "secrets", "auth"), auth_secret("1"));
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, full_spec()), ctx.clone())
        .await
        .unwrap();
    let mc = store_cr(&api, full_spec());
    let first = requests(&api);
    for kind in [
        "deployments",
        "services",
        "poddisruptionbudgets",
        "networkpolicies",
        "servicemonitors",
        "configmaps",
    ] {
        assert!(
            first
                .iter()
                .any(|r| r.starts_with("PATCH") && r.contains(&format!("/{kind}/"))),
            "{kind} not applied: {first:?}"
        );
    }
    fake_api::sync(&mut writers, &api);
    reconcile(mc.clone(), ctx.clone()).await.unwrap();
    assert_eq!(requests(&api), Vec::<String>::new());

    // A Secret written again with the same data is read again; the
    // Deployment records its new version, and the pods keep their hash.
    let deployment = path("apps/v1", "deployments", "c");
    let template =
        |api: &Shared| api.lock().unwrap().objects[&deployment]["spec"]["template"].clone();
    let before = template(&api);
    insert(&api, path("v1", "secrets", "auth"), auth_secret("2"));
    fake_api::sync(&mut writers, &api);
    reconcile(mc, ctx).await.unwrap();
    assert_eq!(
        requests(&api),
        [
            format!("GET {}", path("v1", "secrets", "auth")),
            format!("PATCH {deployment}")
        ],
    );
    assert_eq!(
        template(&api),
        before,
        "the same data: the pods keep their hash"
    );
    assert_eq!(
        api.lock().unwrap().objects[&deployment]["metadata"]["annotations"]["memcached.c5c3.io/secret-versions"],
        "auth=2"
    );
}

/// Someone else took over a field of the Deployment (its managedFields
/// entry for this controller changed): the next reconcile applies again.
#[tokio::test]
async fn a_field_taken_over_is_applied_again() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    reconcile(store_cr(&api, json!({})), ctx.clone())
        .await
        .unwrap();
    let mc = store_cr(&api, json!({}));
    let deployment = path("apps/v1", "deployments", "c");
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["metadata"]["managedFields"] = json!([
        {"manager": "memcached-operator", "operation": "Apply", "apiVersion": "apps/v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}]);
    fake_api::sync(&mut writers, &api);
    requests(&api);
    reconcile(mc, ctx).await.unwrap();
    assert_eq!(requests(&api), [format!("PATCH {deployment}")]);
}

/// Objects the watches do not see (no managed-by label) are read from the
/// API server before anything would create one under their name.
#[tokio::test]
async fn an_unlabelled_object_is_read_before_applying() {
    let api = Shared::default();
    let foreign = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c", "namespace": NS}, "spec": {"ports": [{"port": 80}]}});
    insert(&api, path("v1", "services", "c"), foreign.clone());
    reconcile(store_cr(&api, json!({})), context(api.clone()))
        .await
        .unwrap();
    let sent = requests(&api);
    assert!(
        sent.contains(&format!("GET {}", path("v1", "services", "c"))),
        "{sent:?}"
    );
    assert!(
        !sent.contains(&format!("PATCH {}", path("v1", "services", "c"))),
        "{sent:?}"
    );
    assert_eq!(
        api.lock().unwrap().objects[&path("v1", "services", "c")],
        foreign
    );
}

/// A value changed under this controller's own manager name (an old
/// leader's late apply) changes the entry's time: applied again.
#[tokio::test]
async fn a_change_under_this_managers_name_is_applied_again() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    let deployment = path("apps/v1", "deployments", "c");
    let entry = |time: &str| {
        json!([{"manager": "memcached-operator", "operation": "Apply",
        "apiVersion": "apps/v1", "time": time, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
    };
    reconcile(store_cr(&api, json!({})), ctx.clone())
        .await
        .unwrap();
    let mc = store_cr(&api, json!({}));
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["metadata"]["managedFields"] =
        entry("2026-01-01T00:00:00Z");
    fake_api::sync(&mut writers, &api);
    reconcile(mc.clone(), ctx.clone()).await.unwrap();
    fake_api::sync(&mut writers, &api);
    requests(&api);
    reconcile(mc.clone(), ctx.clone()).await.unwrap();
    assert_eq!(requests(&api), Vec::<String>::new(), "converged");
    api.lock().unwrap().objects.get_mut(&deployment).unwrap()["metadata"]["managedFields"] =
        entry("2026-01-01T00:00:09Z");
    fake_api::sync(&mut writers, &api);
    reconcile(mc, ctx).await.unwrap();
    assert_eq!(requests(&api), [format!("PATCH {deployment}")]);
}

/// The cache still shows an object this Memcached owned, but the name now
/// belongs to a new object: the delete's uid precondition spares it.
#[tokio::test]
async fn a_stale_cache_never_deletes_a_newer_object() {
    let api = Shared::default();
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    let spec = json!({"serverListConfigMap": "servers"});
    reconcile(store_cr(&api, spec.clone()), ctx.clone())
        .await
        .unwrap();
    let config_map = path("v1", "configmaps", "servers");
    api.lock().unwrap().objects.get_mut(&config_map).unwrap()["metadata"]["uid"] = json!("uid-old");
    fake_api::sync(&mut writers, &api);
    // Deleted and created again by someone else; the watch has not seen it yet.
    let users = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "servers", "namespace": NS, "uid": "uid-users"}, "data": {"mine": "yes"}});
    insert(&api, config_map.clone(), users.clone());
    reconcile(store_cr(&api, json!({})), ctx).await.unwrap();
    assert_eq!(api.lock().unwrap().objects[&config_map], users);
    assert!(!writes(&api).iter().any(|w| w.starts_with("DELETE")));
}

/// A controller that renders the pod template differently (a new version)
/// restarts no pod: for the same spec the running template is kept, and
/// applied again as it is; scaling still converges; the next spec change
/// rolls out the new rendering.
#[tokio::test]
async fn a_new_rendering_waits_for_the_users_next_change() {
    let api = Shared::default();
    let deployment = path("apps/v1", "deployments", "c");
    let stored = |api: &Shared| api.lock().unwrap().objects[&deployment].clone();
    converge(&api, json!({"replicas": 1})).await;
    // The template as an older controller rendered it, for the same intent.
    {
        let mut api = api.lock().unwrap();
        let object = api.objects.get_mut(&deployment).unwrap();
        object["spec"]["template"]["metadata"]["labels"]["rendered-by"] = json!("old");
        object["metadata"]["annotations"]["memcached.c5c3.io/template-hash"] = json!("old");
    }
    let old_template = stored(&api)["spec"]["template"].clone();

    // The new controller starts: its first reconcile applies, with the old template.
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    writes(&api);
    reconcile(store_cr(&api, json!({"replicas": 1})), ctx.clone())
        .await
        .unwrap();
    assert_eq!(stored(&api)["spec"]["template"], old_template);
    let held: Vec<_> = events(&api)
        .into_iter()
        .filter(|e| e["reason"] == "PodTemplateHeld")
        .collect();
    assert_eq!(held.len(), 1, "{held:?}");
    fake_api::sync(&mut writers, &api);
    requests(&api);
    reconcile(store_cr(&api, json!({"replicas": 1})), ctx.clone())
        .await
        .unwrap();
    let sent = requests(&api);
    assert!(
        !sent.iter().any(|r| r.contains("deployments")),
        "a held template is read and applied once: {sent:?}"
    );

    // Scaling is no new intent for the pods: replicas change, the template stays.
    reconcile(store_cr(&api, json!({"replicas": 3})), ctx.clone())
        .await
        .unwrap();
    assert_eq!(stored(&api)["spec"]["replicas"], 3);
    assert_eq!(stored(&api)["spec"]["template"], old_template);

    // The user changes the spec: the new rendering rolls out.
    let changed = json!({"replicas": 3, "memcached": {"verbosity": 1}});
    reconcile(store_cr(&api, changed), ctx).await.unwrap();
    let template = &stored(&api)["spec"]["template"];
    assert!(template["metadata"]["labels"]["rendered-by"].is_null());
    assert_ne!(
        stored(&api)["metadata"]["annotations"]["memcached.c5c3.io/template-hash"],
        "old"
    );
}

/// The Deployment at `path` is not paused and carries no in-place change.
fn assert_resumed_without_change_in_place(api: &Shared, path: &str) -> Value {
    let d = api.lock().unwrap().objects[path].clone();
    assert!(d["spec"]["paused"].is_null(), "{}", d["spec"]);
    assert!(d["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].is_null());
    d
}

fn assert_no_pod_or_replica_set_written(api: &Shared) {
    let written = writes(api);
    assert!(
        !written
            .iter()
            .any(|w| w.contains("/pods/") || w.contains("/replicasets/")),
        "{written:?}"
    );
}

/// A running pod of ReplicaSet `c-abc` with the Deployment's `template`.
fn running_pod(name: &str, template: &Value, restarts: i32) -> Value {
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
fn marked_image(workload: &Value) -> &str {
    let mark = workload["metadata"]["annotations"]["memcached.c5c3.io/in-place-image"].as_str();
    mark.unwrap_or_default()
        .split(' ')
        .next()
        .unwrap_or_default()
}

fn image_of(api: &Shared, path: &str, pointer: &str) -> Value {
    api.lock().unwrap().objects[path]
        .pointer(pointer)
        .cloned()
        .unwrap_or_default()
}

/// A warm Memcached (`spec` of [`warm`]) whose Deployment runs 2 ready
/// pods of ReplicaSet `c-abc`; returns the paths of the Deployment, the
/// ReplicaSet and the pods.
async fn warm_and_running(api: &Shared) -> (String, String, [String; 2]) {
    warm_and_running_as(api, warm("memcached:1.6.38")).await
}

/// [`warm_and_running`] with `spec`.
async fn warm_and_running_as(api: &Shared, spec: Value) -> (String, String, [String; 2]) {
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

fn warm(image: &str) -> Value {
    json!({"replicas": 2, "image": image, "warmRestart": {"enabled": true}})
}

/// An in-place change to memcached:1.6.39 of the pods of
/// [`warm_and_running`]: the first restarts with it, the second cannot
/// pull it. The Memcached that asks for it.
async fn stall_the_second_pod(api: &Shared, pods: &[String; 2]) -> Arc<Memcached> {
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
fn container_state(api: &Shared, path: &str, restarts: i32, failing: Option<&str>) {
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
fn warm_stateful(image: &str) -> Value {
    json!({"replicas": 2, "workload": "StatefulSet", "image": image, "warmRestart": {"enabled": true}})
}

/// The StatefulSet at `set` as its controller reports it: generation
/// `generation` observed, `updated` pods on revision `update`.
fn stateful_set_status(api: &Shared, set: &str, generation: i64, update: &str, updated: i32) {
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
