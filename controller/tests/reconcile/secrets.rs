//! Secrets: a missing or invalid auth Secret, a new hash key; running pods kept.

use super::*;

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

/// The TLS Secret `certs` at `version` with `ca.crt` and `tls.crt` as
/// given (base64 of any bytes: the stamp reads no certificate).
fn tls_secret(version: &str, ca: &str, leaf: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "certs", "namespace": NS, "resourceVersion": version},
        "data": {"ca.crt": ca, "tls.crt": leaf, "tls.key": leaf}})
}

/// A certificate renewed under the same CA changes no pod template (the
/// running memcached loads it), even one stamped by an older controller
/// whose hash covered every key; another CA restarts the pods.
#[tokio::test]
async fn a_renewed_certificate_changes_no_pod_template() {
    let api = Shared::default();
    insert(
        &api,
        path("v1", "secrets", "certs"),
        tls_secret("1", "Q0E=", "TDE="),
    );
    let spec =
        json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "certs"}}}});
    let deployment = path("apps/v1", "deployments", "c");
    let hash = "memcached.c5c3.io/secret-hash";
    let template_hash = |api: &Shared| {
        api.lock().unwrap().objects[&deployment]["spec"]["template"]["metadata"]["annotations"]
            [hash]
            .clone()
    };
    let (ctx, mut writers) = fake_api::context_and_writers(api.clone());
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec.clone()), ctx.clone())
        .await
        .unwrap();
    // As an older controller stamped it: a hash of every key.
    const OLDER: &str = "0123456789abcdef0123456789abcdef";
    {
        let mut api = api.lock().unwrap();
        let workload = api.objects.get_mut(&deployment).unwrap();
        workload["metadata"]["annotations"][hash] = json!(OLDER);
        workload["spec"]["template"]["metadata"]["annotations"][hash] = json!(OLDER);
    }
    fake_api::sync(&mut writers, &api);
    let renew = |version: &str, ca: &str, leaf: &str| {
        insert(
            &api,
            path("v1", "secrets", "certs"),
            tls_secret(version, ca, leaf),
        );
    };
    let template = |api: &Shared| api.lock().unwrap().objects[&deployment]["spec"].clone();
    let before = template(&api);
    for (version, leaf) in [("2", "TDI="), ("3", "TDM=")] {
        renew(version, "Q0E=", leaf);
        fake_api::sync(&mut writers, &api);
        reconcile(store_cr(&api, spec.clone()), ctx.clone())
            .await
            .unwrap();
        // Only the stamp's Secret versions, on the Deployment's own metadata.
        assert_eq!(template(&api), before, "renewal {version}");
        fake_api::sync(&mut writers, &api);
    }
    renew("4", "Q0Iy", "TDQ=");
    fake_api::sync(&mut writers, &api);
    reconcile(store_cr(&api, spec), ctx).await.unwrap();
    assert_ne!(template_hash(&api), OLDER, "another CA restarts the pods");
}
