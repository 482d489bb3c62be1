//! The args the controller renders, run by a real memcached with files where
//! the Secrets would be mounted, and read back with the stats client built
//! from the same Secret data.

mod common;

use std::collections::BTreeMap;

use common::{make_pki, readable_tempdir, start};
use memcached_api::{MemcachedSpec, apply_defaults};
use memcached_controller::args::{AUTH_DIR, TLS_DIR, memcached_args};
use memcached_controller::reconcile::{SecretData, stats_client};
use memcached_controller::tls::server_name;
use serde_json::json;

/// Start memcached with the rendered args of `spec`, Secret files in a temp dir.
async fn serves(spec: serde_json::Value, secrets: SecretData) {
    let mut spec: MemcachedSpec = serde_json::from_value(spec).unwrap();
    apply_defaults(&mut spec);
    let dir = readable_tempdir();
    for (folder, secret) in [("auth", "auth-secret"), ("tls", "tls-secret")] {
        for (key, value) in secrets.get(secret).into_iter().flatten() {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join(key), value).unwrap();
        }
    }
    let root = dir.path().display().to_string();
    let args: Vec<String> = memcached_args(&spec)
        .into_iter()
        .map(|a| {
            a.replace(AUTH_DIR, &format!("{root}/auth"))
                .replace(TLS_DIR, &format!("{root}/tls"))
        })
        .collect();
    let server = start(&args);
    let name = server_name("cache", "default").unwrap();
    let stats = stats_client(&spec, &secrets, name)
        .unwrap()
        .fetch(server.addr)
        .await;
    assert!(
        stats.as_ref().is_ok_and(|s| s.version.starts_with("1.6")),
        "{args:?}: {stats:?}"
    );
}

fn tls_secret() -> SecretData {
    let pki = make_pki();
    let data = BTreeMap::from([
        ("tls.crt".to_string(), pki.cert.into_bytes()),
        ("tls.key".to_string(), pki.key.into_bytes()),
        ("ca.crt".to_string(), pki.ca.into_bytes()),
    ]);
    BTreeMap::from([("tls-secret".to_string(), data)])
}

#[tokio::test]
async fn plain_args_serve() {
    serves(json!({"memcached": {"maxMemoryMB": 128, "maxConnections": 64, "threads": 2, "maxItemSize": "2m", "verbosity": 1}}), SecretData::new()).await;
}

#[tokio::test]
async fn tls_args_serve() {
    serves(json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}}}}), tls_secret()).await;
}

#[tokio::test]
async fn mtls_args_serve_clients_with_certificates() {
    let spec = json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}, "enableClientCert": true}}});
    serves(spec, tls_secret()).await;
}

#[tokio::test]
async fn sasl_args_serve_authenticated_clients() {
    let secrets = BTreeMap::from([(
        "auth-secret".to_string(),
        BTreeMap::from([("auth".to_string(), b"app:pa55word\n".to_vec())]),
    )]);
    let spec = json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth-secret"}}}, "memcached": {"extraArgs": ["-o", "modern"]}});
    serves(spec, secrets).await;
}

#[tokio::test]
async fn tls_and_auth_together_serve() {
    let mut secrets = tls_secret();
    secrets.insert(
        "auth-secret".into(),
        BTreeMap::from([("auth".to_string(), b"app:pw\n".to_vec())]),
    );
    let spec = json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth-secret"}},
        "tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}, "enableClientCert": true}}});
    serves(spec, secrets).await;
}

/// Why the controller warns about an auth Secret without a final newline:
/// memcached 1.6 ignores an unterminated last line of its `-Y` file.
#[tokio::test]
async fn memcached_ignores_an_unterminated_last_auth_line() {
    let dir = readable_tempdir();
    let file = dir.path().join("auth");
    std::fs::write(&file, "app:pw").unwrap();
    let server = start(&["-Y".into(), file.display().to_string()]);
    let client = memcached_controller::stats::StatsClient {
        credentials: memcached_controller::stats::Credentials::from_auth_file("app:pw"),
        ..Default::default()
    };
    assert!(client.fetch(server.addr).await.is_err());
}
