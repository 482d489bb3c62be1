//! Server-side apply of managed objects, touching the API server only when
//! something differs, and deleting only what this Memcached owns.

use std::fmt::Debug;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::labels::MANAGER;

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Already as desired (or absent and not wanted): no write.
    Unchanged,
    /// Created.
    Created,
    /// Changed.
    Updated,
    /// Deleted because its feature was turned off.
    Deleted,
    /// An object of that name exists but belongs to someone else: left alone.
    Conflict,
}

/// Make the object `name` match `desired` (`None`: should not exist).
pub async fn ensure<K>(
    api: &Api<K>,
    name: &str,
    owner_uid: &str,
    desired: Option<&K>,
) -> Result<Outcome, kube::Error>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let existing = api.get_opt(name).await?;
    Ok(ensure_from(api, name, owner_uid, desired, existing)
        .await?
        .0)
}

/// [`ensure`] for an object already read; also returns the object as it is afterwards.
pub async fn ensure_from<K>(
    api: &Api<K>,
    name: &str,
    owner_uid: &str,
    desired: Option<&K>,
    existing: Option<K>,
) -> Result<(Outcome, Option<K>), kube::Error>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let owned = existing
        .as_ref()
        .is_some_and(|e| is_controlled_by(e, owner_uid));
    match (desired, existing) {
        (Some(_), Some(e)) if !owned => Ok((Outcome::Conflict, Some(e))),
        (Some(d), Some(e)) if contains(&to_value(&e), &to_value(d)) => {
            Ok((Outcome::Unchanged, Some(e)))
        }
        (Some(d), existing) => {
            let applied = api
                .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(d))
                .await?;
            let outcome = if existing.is_some() {
                Outcome::Updated
            } else {
                Outcome::Created
            };
            Ok((outcome, Some(applied)))
        }
        (None, Some(_)) if owned => {
            api.delete(name, &DeleteParams::background()).await?;
            Ok((Outcome::Deleted, None))
        }
        (None, existing) => Ok((Outcome::Unchanged, existing)),
    }
}

/// True when `object` has a controller owner reference to `uid`.
pub fn is_controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// True when every field set in `wanted` has the same value in `actual`
/// (which also carries server defaults and other managers' fields).
pub fn contains(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(a), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| a.get(k).is_some_and(|av| contains(av, wv))),
        (Value::Array(a), Value::Array(w)) => {
            a.len() == w.len() && a.iter().zip(w).all(|(av, wv)| contains(av, wv))
        }
        _ => actual == wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::contains;
    use serde_json::json;

    #[test]
    fn contains_ignores_server_added_fields_only() {
        let actual = json!({"spec": {"replicas": 1, "progressDeadlineSeconds": 600, "ports": [{"port": 1, "protocol": "TCP"}]}});
        assert!(contains(
            &actual,
            &json!({"spec": {"replicas": 1, "ports": [{"port": 1}]}})
        ));
        assert!(!contains(&actual, &json!({"spec": {"replicas": 2}})));
        assert!(!contains(
            &actual,
            &json!({"spec": {"ports": [{"port": 1}, {"port": 2}]}})
        ));
        assert!(!contains(&actual, &json!({"spec": {"paused": true}})));
    }
}
