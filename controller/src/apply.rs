//! Server-side apply of managed objects, and deleting only what this
//! Memcached owns.
//!
//! An apply sends the whole desired object: the API server then removes the
//! fields this field manager stopped sending, and an apply that changes
//! nothing leaves the resourceVersion alone (no write, no watch event).
//! Comparing the resourceVersion before and after tells an update from a
//! no-op, so values the server normalises (`1024Mi` stored as `1Gi`) never
//! count as changes.
//!
//! An apply is skipped when it would be a no-op: the desired object is the
//! one last applied, and the fields the apply left this manager owning are
//! still its own (a user who edits one of them takes it over; the next
//! reconcile applies and takes it back).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::labels::MANAGER;

/// Field manager that holds `spec.replicas` while the HPA takes it over.
pub const HANDOVER_MANAGER: &str = "memcached-operator-handover";

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
    /// Deleted because the workload of the other kind replaced it.
    Replaced,
    /// An object of that name exists but belongs to someone else: left alone.
    Conflict,
    /// The object is being deleted: left alone until it is gone.
    Terminating,
}

/// What this controller last applied to the objects of each Memcached, so
/// that a reconcile whose desired object did not change, of an object whose
/// fields nobody took over since, sends nothing. Forgotten with the
/// Memcached; after a restart, the first reconcile applies everything once.
#[derive(Default)]
pub struct LastApplied(Mutex<HashMap<String, ByObject>>);

/// One Memcached's objects, by resource URL and name.
type ByObject = HashMap<(String, String), Fingerprint>;

/// One apply: the object it reached, the desired object sent, and the
/// fields the apply left this manager owning.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    uid: Option<String>,
    desired: u64,
    owned: u64,
}

impl Fingerprint {
    fn new<K: Serialize>(desired: &K, live: &ObjectMeta) -> Self {
        let mut hasher = DefaultHasher::new();
        hasher.write(&serde_json::to_vec(desired).unwrap_or_default());
        Fingerprint {
            uid: live.uid.clone(),
            desired: hasher.finish(),
            owned: owned_fields(live),
        }
    }
}

/// A hash of the fields this manager's applies own in `meta`. Another
/// manager that changes one of them takes it over, which changes the hash.
fn owned_fields(meta: &ObjectMeta) -> u64 {
    let mut hasher = DefaultHasher::new();
    for entry in meta.managed_fields.iter().flatten().filter(|m| {
        m.manager.as_deref() == Some(MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.is_none()
    }) {
        let fields = entry.fields_v1.as_ref().map(|f| &f.0);
        hasher.write(&serde_json::to_vec(&fields).unwrap_or_default());
        entry.api_version.hash(&mut hasher);
    }
    hasher.finish()
}

impl LastApplied {
    fn get(&self, owner: &str, key: &(String, String)) -> Option<Fingerprint> {
        let memory = self.0.lock().ok()?;
        memory.get(owner)?.get(key).cloned()
    }

    fn set(&self, owner: &str, key: (String, String), fingerprint: Option<Fingerprint>) {
        let Ok(mut memory) = self.0.lock() else {
            return;
        };
        match fingerprint {
            Some(f) => {
                memory.entry(owner.to_string()).or_default().insert(key, f);
            }
            None => {
                if let Some(objects) = memory.get_mut(owner) {
                    objects.remove(&key);
                }
            }
        }
    }

    /// Forget what was applied for the Memcached objects `keep` rejects (by uid).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut memory) = self.0.lock() {
            memory.retain(|owner, _| keep(owner));
        }
    }

    /// Number of Memcached objects remembered.
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Make the object `name` match `desired` (`None`: should not exist), given
/// `live`, its metadata as the cache or the API server has it (`None`:
/// absent). Returns what happened and, when applied, the object as the API
/// server returned it.
pub async fn ensure<K>(
    api: &Api<K>,
    applied: &LastApplied,
    owner_uid: &str,
    name: &str,
    desired: Option<&K>,
    live: Option<&ObjectMeta>,
) -> Result<(Outcome, Option<K>), kube::Error>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let owned = live.is_some_and(|e| is_controlled_by_meta(e, owner_uid));
    let terminating = live.is_some_and(|e| e.deletion_timestamp.is_some());
    let key = (api.resource_url().to_string(), name.to_string());
    match (desired, live) {
        (Some(_), Some(_)) if !owned => Ok((Outcome::Conflict, None)),
        (Some(_), Some(_)) if terminating => Ok((Outcome::Terminating, None)),
        (Some(d), Some(live))
            if applied.get(owner_uid, &key).as_ref() == Some(&Fingerprint::new(d, live)) =>
        {
            Ok((Outcome::Unchanged, None))
        }
        (Some(d), live) => {
            let before = live.and_then(|e| e.resource_version.clone());
            let result = api
                .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(d))
                .await?;
            let outcome = match before {
                None => Outcome::Created,
                Some(rv) if result.resource_version().as_ref() == Some(&rv) => Outcome::Unchanged,
                Some(_) => Outcome::Updated,
            };
            applied.set(owner_uid, key, Some(Fingerprint::new(d, result.meta())));
            Ok((outcome, Some(result)))
        }
        (None, Some(_)) if owned && !terminating => {
            api.delete(name, &DeleteParams::background()).await?;
            applied.set(owner_uid, key, None);
            Ok((Outcome::Deleted, None))
        }
        (None, _) => {
            applied.set(owner_uid, key, None);
            Ok((Outcome::Unchanged, None))
        }
    }
}

/// Before this manager stops applying `spec.replicas` (autoscaling switched
/// on), a second manager applies the live value, so the field keeps an owner
/// and the API server does not reset it to 1 until the HPA writes it. This is
/// the ownership transfer of the Kubernetes server-side apply documentation;
/// without force, a conflict means the HPA owns the field already (nothing
/// to do). The handover manager disappears when the HPA first scales.
pub async fn hand_over_replicas<K>(api: &Api<K>, live: &K) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
{
    let value = serde_json::to_value(live).unwrap_or_default();
    let replicas = &value["spec"]["replicas"];
    if replicas.is_null() || !owns_field(live, MANAGER, "f:replicas") {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": live.name_any()},
        "spec": {"replicas": replicas},
    });
    match api
        .patch(
            &live.name_any(),
            &PatchParams::apply(HANDOVER_MANAGER),
            &Patch::Apply(patch),
        )
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// True when `manager` applied `spec.<field>` (`field` as in managedFields, `f:name`).
fn owns_field<K: Resource>(object: &K, manager: &str, field: &str) -> bool {
    object.meta().managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(manager)
            && m.operation.as_deref() == Some("Apply")
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0["f:spec"].get(field).is_some())
    })
}

/// True when `object` has a controller owner reference to `uid`.
pub fn is_controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    is_controlled_by_meta(object.meta(), uid)
}

/// [`is_controlled_by`] on metadata.
pub fn is_controlled_by_meta(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::owns_field;
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    #[test]
    fn reads_field_ownership_from_managed_fields() {
        let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "c", "managedFields": [
            {"manager": "memcached-operator", "operation": "Apply", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]}}))
        .unwrap();
        assert!(owns_field(&d, "memcached-operator", "f:replicas"));
        assert!(!owns_field(&d, "memcached-operator", "f:paused"));
        assert!(!owns_field(&d, "kube-controller-manager", "f:paused"));
        assert!(!owns_field(&d, "someone", "f:replicas"));
    }
}
