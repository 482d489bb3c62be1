//! Specs the controller refuses (stored without the policy, invalid,
//! unreadable): reported, nothing that runs changed.

use super::*;

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
