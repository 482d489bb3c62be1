//! The key of the pod-template Secret hash, and who owns the controller's
//! own objects.
//!
//! A plain hash of Secret data in a pod-template annotation lets anyone who
//! can read Deployments test password guesses offline. The hash is an HMAC
//! whose key lives in a Secret of the controller's own namespace, created on
//! first start (random, 32 bytes) and read by every replica, so the
//! annotation is stable across restarts and leaders. Only the controller
//! (and whoever may read Secrets in its namespace) can read the key.
//!
//! The Secret and the Lease are the only objects the controller creates for
//! itself. Both name the controller's ServiceAccount as their owner when the
//! controller runs as one in that namespace (as in a pod), so deleting the
//! installation (`helm uninstall`, `kubectl delete -f deploy/rbac.yaml`)
//! deletes them too (the garbage collector): nothing of it is left behind.

use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::de::DeserializeOwned;

use memcached_api::render::labels::MANAGER;

/// Default name of the Secret holding the key (`--hash-key-secret`).
pub const SECRET_NAME: &str = "memcached-operator-hash-key";
/// Key inside that Secret.
pub const DATA_KEY: &str = "key";

/// Read the key from the Secret `name` in `namespace`, creating it (owned
/// by `owner`, when given) when absent.
pub async fn load_or_create(
    client: &Client,
    namespace: &str,
    name: &str,
    owner: Option<&OwnerReference>,
) -> anyhow::Result<hmac::Key> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    // The API server's message alone: it says what was refused and why.
    let refused = |e: kube::Error| match e {
        kube::Error::Api(e) => anyhow::anyhow!("{}", e.message),
        e => e.into(),
    };
    for _ in 0..3 {
        if let Some(secret) = api.get_opt(name).await.map_err(refused)? {
            let key = secret
                .data
                .and_then(|mut d| d.remove(DATA_KEY))
                .filter(|k| k.0.len() >= 32)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "Secret {namespace}/{name} has no {DATA_KEY:?} of 32 bytes or more"
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
                name: Some(name.into()),
                owner_references: owner.map(|o| vec![o.clone()]),
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
                 (POD_NAMESPACE); it holds the Secret {name} and the Lease"
            ),
            Err(e) => return Err(refused(e)),
        }
    }
    anyhow::bail!("cannot read or create Secret {namespace}/{name}")
}

/// The owner of the objects the controller creates for itself in
/// `namespace`: the ServiceAccount it authenticates as (asked of the API
/// server, a SelfSubjectReview, which every authenticated user may create),
/// when that ServiceAccount lives in `namespace`. `None` otherwise (another
/// kind of user, another namespace: an owner in another namespace would let
/// the garbage collector delete the objects at once), or when the API
/// server does not answer the review (then the objects are created unowned,
/// as before).
pub async fn service_account_owner(client: &Client, namespace: &str) -> Option<OwnerReference> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = match api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Ok(review) => review,
        Err(error) => {
            tracing::warn!(%error, "cannot ask who this controller is (SelfSubjectReview): its Lease and hash-key Secret get no owner");
            return None;
        }
    };
    let user = review.status?.user_info?;
    owner_of(user.username.as_deref()?, user.uid.as_deref()?, namespace)
}

/// The ServiceAccount `username` (`system:serviceaccount:<ns>:<name>`) as
/// an owner reference, when it lives in `namespace`.
pub fn owner_of(username: &str, uid: &str, namespace: &str) -> Option<OwnerReference> {
    let (ns, name) = username
        .strip_prefix("system:serviceaccount:")?
        .split_once(':')?;
    (ns == namespace && !name.is_empty() && !uid.is_empty()).then(|| OwnerReference {
        api_version: "v1".into(),
        kind: "ServiceAccount".into(),
        name: name.into(),
        uid: uid.into(),
        ..OwnerReference::default()
    })
}

/// Add `owner` to the owner references of the object `name` of `api`
/// unless it is there (an object created by an older controller, or
/// created unowned). A failure is logged, not fatal: the object only
/// outlives the installation.
pub async fn ensure_owned<K>(api: &Api<K>, name: &str, owner: &OwnerReference)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    // A conflict (the holder renewed the Lease meanwhile) reads it again.
    for _ in 0..3 {
        let object = match api.get_opt(name).await {
            Ok(Some(object)) => object,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, name, "cannot read the object to give it its owner");
                return;
            }
        };
        let mut owners = object.meta().owner_references.clone().unwrap_or_default();
        if owners.iter().any(|o| o.uid == owner.uid) {
            return;
        }
        owners.push(owner.clone());
        // Only when unchanged since the read: another writer's owners are never dropped.
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": object.meta().resource_version,
                "ownerReferences": owners,
            }
        });
        match api.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {
                tracing::info!(
                    name,
                    owner = %owner.name,
                    "owned by the controller's ServiceAccount: deleted with the installation"
                );
                return;
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(error) => {
                tracing::warn!(%error, name, "cannot give the object its owner");
                return;
            }
        }
    }
    tracing::warn!(name, "cannot give the object its owner: it kept changing");
}

#[cfg(test)]
mod tests {
    use super::owner_of;

    #[test]
    fn only_a_service_account_of_the_namespace_owns() {
        let owner = owner_of(
            "system:serviceaccount:ops:rel-memcached-operator",
            "u-1",
            "ops",
        )
        .expect("owner");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("ServiceAccount", "rel-memcached-operator", "u-1")
        );
        assert_eq!(owner.controller, None);
        assert_eq!(owner.block_owner_deletion, None);
        assert!(owner_of("system:serviceaccount:other:sa", "u-1", "ops").is_none());
        assert!(owner_of("kubernetes-admin", "u-1", "ops").is_none());
        assert!(owner_of("system:serviceaccount:ops:sa", "", "ops").is_none());
    }
}
