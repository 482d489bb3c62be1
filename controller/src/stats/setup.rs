//! The stats client a Memcached's pods call for: plain or TLS, with or
//! without ASCII authentication, as its spec says, with what its Secrets
//! hold; and the settings a change in place confirms with `stats settings`.

use std::sync::Arc;

use kube::ResourceExt;
use memcached_api::{Defaulted, Memcached};
use tokio_rustls::rustls::pki_types::ServerName;

use crate::cluster::secrets::{self, SecretData};
use crate::stats::client::StatsClient;
use crate::stats::credentials::Credentials;
use crate::stats::tls;
use crate::stats::tls::{Mounted, Tls};
use memcached_api::render::args::{self, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use memcached_api::render::volumes::{AUTH_VOLUME, TLS_VOLUME, secret_mounts};

/// The stats client of `mc`'s pods: [`stats_client`] for the server name
/// its certificates are issued to.
pub fn client_for(
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
) -> Result<StatsClient, String> {
    let namespace = mc.namespace().unwrap_or_default();
    tls::server_name(&mc.name_any(), &namespace).and_then(|n| stats_client(spec, secrets, n))
}

/// A stats client that speaks what the pods speak, with what the Secrets
/// hold; an error when TLS is on but cannot be set up (never plain text then).
pub fn stats_client(
    spec: &Defaulted,
    secrets: &SecretData,
    server_name: ServerName<'static>,
) -> Result<StatsClient, String> {
    let mounted = |volume: &str, key: &str| {
        secret_mounts(spec)
            .into_iter()
            .find(|(v, _, _)| *v == volume)
            .and_then(|(_, secret, _)| secrets.get(&secret)?.get(key).cloned())
    };
    let credentials = if spec.sasl_enabled() {
        mounted(AUTH_VOLUME, secrets::mounted_auth_key(spec, secrets))
            .and_then(|f| Credentials::from_auth_file(&String::from_utf8_lossy(&f)))
    } else {
        None
    };
    let tls = if spec.tls_enabled() {
        let cert = mounted(TLS_VOLUME, TLS_CERT_KEY)
            .ok_or_else(|| format!("the TLS Secret has no {TLS_CERT_KEY:?}"))?;
        let key = mounted(TLS_VOLUME, TLS_KEY_KEY);
        let ca = mounted(TLS_VOLUME, TLS_CA_KEY);
        let identity = key
            .as_deref()
            .filter(|_| args::client_cert_required(spec))
            .map(|k| (cert.as_slice(), k));
        Some(Tls {
            config: Arc::new(tls::client_config(ca.as_deref(), &cert, identity)?),
            server_name,
            mounted: match tls::loadable(&cert, key.as_deref()) {
                Ok(certificate) => Mounted::Loadable(certificate),
                Err(why) => Mounted::Unloadable(why),
            },
        })
    } else {
        None
    };
    // What a pod runs is confirmed from its `stats settings` during a change
    // in place; whether a pod is asked is decided from what that pod runs
    // (`StatsClient::may_ask_settings`).
    let settings = if spec.warm_restart_enabled() {
        args::CONFIRMED_SETTINGS
    } else {
        &[]
    };
    Ok(StatsClient {
        tls,
        credentials,
        settings,
        without_napi_ids: Arc::default(),
    })
}

#[cfg(test)]
mod tests {
    use memcached_api::apply_defaults;

    use super::*;
    use crate::stats::credentials::Credentials;

    /// The stats client logs in with the auth file under each of its keys.
    #[test]
    fn credentials_come_from_each_auth_key() {
        let spec = apply_defaults(
            serde_json::from_value(serde_json::json!({"security": {"sasl": {
                "enabled": true, "credentialsSecretRef": {"name": "creds"}}}}))
            .unwrap(),
        );
        for key in ["auth", "password-file", "memcached-sasl-db"] {
            let data = [(key.to_string(), b"app:pw\n".to_vec())].into();
            let secrets = SecretData::from([("creds".to_string(), data)]);
            let name = ServerName::try_from("my-cache.default.svc").unwrap();
            let client = stats_client(&spec, &secrets, name).unwrap();
            assert_eq!(
                client.credentials,
                Some(Credentials {
                    username: "app".into(),
                    password: "pw".into(),
                    misread_password: None,
                }),
                "{key}"
            );
        }
    }
}
