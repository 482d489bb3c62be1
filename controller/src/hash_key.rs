//! The key of the pod-template Secret hash.
//!
//! A plain hash of Secret data in a pod-template annotation lets anyone who
//! can read Deployments test password guesses offline. The hash is an HMAC
//! whose key lives in a Secret of the controller's own namespace, created on
//! first start (random, 32 bytes) and read by every replica, so the
//! annotation is stable across restarts and leaders. Only the controller
//! (and whoever may read Secrets in its namespace) can read the key.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Name of the Secret holding the key.
pub const SECRET_NAME: &str = "memcached-operator-hash-key";
/// Key inside that Secret.
pub const DATA_KEY: &str = "key";

/// Read the key from `namespace`, creating it when absent.
pub async fn load_or_create(client: &Client, namespace: &str) -> anyhow::Result<hmac::Key> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    // The API server's message alone: it says what was refused and why.
    let refused = |e: kube::Error| match e {
        kube::Error::Api(e) => anyhow::anyhow!("{}", e.message),
        e => e.into(),
    };
    for _ in 0..3 {
        if let Some(secret) = api.get_opt(SECRET_NAME).await.map_err(refused)? {
            let key = secret
                .data
                .and_then(|mut d| d.remove(DATA_KEY))
                .filter(|k| k.0.len() >= 32)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "Secret {namespace}/{SECRET_NAME} has no {DATA_KEY:?} of 32 bytes or more"
                    )
                })?;
            return Ok(hmac::Key::new(hmac::HMAC_SHA256, &key.0));
        }
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| anyhow::anyhow!("no system randomness"))?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET_NAME.into()),
                ..Default::default()
            },
            data: Some([(DATA_KEY.to_string(), ByteString(bytes.to_vec()))].into()),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => return Ok(hmac::Key::new(hmac::HMAC_SHA256, &bytes)),
            // Another replica created it first: read theirs.
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(kube::Error::Api(e)) if e.code == 404 => anyhow::bail!(
                "the controller's namespace {namespace:?} does not exist: create it \
                 (kubectl create namespace {namespace}) or name another with --lease-namespace \
                 (POD_NAMESPACE); it holds the Secret {SECRET_NAME} and the Lease"
            ),
            Err(e) => return Err(refused(e)),
        }
    }
    anyhow::bail!("cannot read or create Secret {namespace}/{SECRET_NAME}")
}
