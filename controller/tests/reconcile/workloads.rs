//! Workload handovers: autoscaling off, Deployment to StatefulSet, a new
//! rendering waiting for the user's next change.

use super::*;

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
