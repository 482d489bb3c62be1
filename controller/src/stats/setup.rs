//! The stats client a Memcached's pods call for: plain or TLS, with or
//! without ASCII authentication, as its spec says, with what its Secrets
//! hold; and the settings a change in place confirms with `stats settings`,
//! asked only of a pod whose memcached cannot crash on it
//! ([`may_run_napi_ids`]).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use memcached_api::Defaulted;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::cluster::secrets::{self, SecretData};
use crate::objects::args::{self, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use crate::objects::labels::MEMCACHED_CONTAINER;
use crate::objects::pod_template::{AUTH_VOLUME, TLS_VOLUME, secret_mounts};
use crate::objects::warm_start::{self, ARGS_ANNOTATION, NAPI_IDS_RAN_ANNOTATION};
use crate::stats::client::{Credentials, StatsClient, Tls};
use crate::stats::tls;

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
        })
    } else {
        None
    };
    // What a pod runs is confirmed from its `stats settings` during a change
    // in place; whether a pod is asked is decided per pod, from what it runs
    // (`StatsClient::may_ask_settings`, with `without_napi_ids`).
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

/// `pod`'s memcached may be running NAPI ids (`-N`, in any spelling getopt
/// accepts: [`args::napi_ids`]), by the pod's own record, never by the
/// desired spec: its memcached container's command line, the args its
/// warm-restart supervisor reads ([`ARGS_ANNOTATION`]), or the record that
/// args it was given before ran them ([`NAPI_IDS_RAN_ANNOTATION`]: the
/// process keeps them until the supervisor restarts it).
pub fn may_run_napi_ids(pod: &Pod) -> bool {
    let annotations = pod.annotations();
    let supervised = (annotations.get(ARGS_ANNOTATION))
        .is_some_and(|a| args::napi_ids(&warm_start::annotation_args(a)));
    let containers = pod.spec.iter().flat_map(|s| &s.containers);
    let container = (containers.filter(|c| c.name == MEMCACHED_CONTAINER)).any(|c| {
        let command = c.command.iter().chain(&c.args).flatten().cloned();
        args::napi_ids(&command.collect::<Vec<_>>())
    });
    annotations.contains_key(NAPI_IDS_RAN_ANNOTATION) || supervised || container
}

/// The addresses of the `ready` endpoints (pod uid, address) whose pod, of
/// the `pods` listed, cannot be running NAPI ids: those asked `stats
/// settings` whatever their version ([`StatsClient::without_napi_ids`]).
pub fn without_napi_ids<'a>(
    pods: &[Pod],
    ready: impl IntoIterator<Item = (&'a str, SocketAddr)>,
) -> BTreeSet<SocketAddr> {
    let free: BTreeSet<String> = (pods.iter())
        .filter(|p| !may_run_napi_ids(p))
        .filter_map(|p| p.uid())
        .collect();
    (ready.into_iter())
        .filter(|(uid, _)| free.contains(*uid))
        .map(|(_, address)| address)
        .collect()
}

#[cfg(test)]
mod tests {
    use memcached_api::apply_defaults;
    use serde_json::json;

    use super::*;

    /// A pod whose memcached container has `args`, with `annotations`.
    fn pod(args: &[&str], annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "c-abc-12345", "annotations": annotations},
            "spec": {"containers": [{"name": "memcached", "args": args},
                {"name": "exporter", "args": ["-N", "1"]}]},
        }))
        .unwrap()
    }

    fn supervised(args: &str) -> Pod {
        pod(&[], json!({ARGS_ANNOTATION: args}))
    }

    #[test]
    fn napi_ids_are_read_from_the_pods_container_args_in_every_spelling() {
        for spelling in [
            &["-N", "1"][..],
            &["-N1"],
            &["-vN", "1"],
            &["--napi=1"],
            &["--napi-ids", "1"],
        ] {
            assert!(may_run_napi_ids(&pod(spelling, json!({}))), "{spelling:?}");
        }
        assert!(!may_run_napi_ids(&pod(&["-m", "64", "-v"], json!({}))));
        assert!(
            !may_run_napi_ids(&pod(&["-m", "64"], json!({}))),
            "another container's -N is not memcached's"
        );
    }

    #[test]
    fn napi_ids_are_read_from_the_args_the_supervisor_reads() {
        for spelling in [
            "-m\n64\n-N\n1",
            "-N1",
            "-vN\n1",
            "--napi=1",
            "-t\n4\n--n=2\n",
        ] {
            assert!(may_run_napi_ids(&supervised(spelling)), "{spelling:?}");
        }
        assert!(!may_run_napi_ids(&supervised(
            "-m\n64\n-e\n/var/lib/memcached/memory_file"
        )));
        assert!(!may_run_napi_ids(&supervised("--\n-N\n1")), "an operand");
    }

    /// `-N` removed from a running pod's args: its memcached runs `-N` until
    /// the supervisor restarts it, and the pod's record says so.
    #[test]
    fn a_pod_whose_earlier_args_ran_napi_ids_may_still_run_them() {
        let removed = pod(
            &[],
            json!({ARGS_ANNOTATION: "-m\n64", NAPI_IDS_RAN_ANNOTATION: "true"}),
        );
        assert!(may_run_napi_ids(&removed));
        let mut pods = vec![removed, supervised("-m\n64")];
        for (pod, uid) in pods.iter_mut().zip(["u-1", "u-2"]) {
            pod.metadata.uid = Some(uid.into());
        }
        let (first, second, unknown): (SocketAddr, SocketAddr, SocketAddr) = (
            "10.0.0.1:11211".parse().unwrap(),
            "10.0.0.2:11211".parse().unwrap(),
            "10.0.0.3:11211".parse().unwrap(),
        );
        let ready = [("u-1", first), ("u-2", second), ("u-3", unknown)];
        let client = StatsClient {
            settings: args::CONFIRMED_SETTINGS,
            without_napi_ids: Arc::new(without_napi_ids(&pods, ready)),
            ..Default::default()
        };
        assert!(!client.may_ask_settings(first, "1.6.18"), "not sent");
        assert!(client.may_ask_settings(first, "1.6.40"));
        assert!(client.may_ask_settings(second, "1.6.18"), "never ran -N");
        assert!(
            !client.may_ask_settings(unknown, "1.6.18"),
            "a pod not listed"
        );
    }

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
                    password: "pw".into()
                }),
                "{key}"
            );
        }
    }
}
