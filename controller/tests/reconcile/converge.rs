//! Converging by server-side apply: what it creates, no write (and no request)
//! when converged, only what changed, a feature turned off deleted, objects it
//! does not own left alone, fields taken over applied again, a stale cache.

use super::*;

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
