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

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};

use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::objects::workload::Workload;
use memcached_api::render::labels::MANAGER;
use memcached_api::render::stamp::TemplateStamp;

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
    /// Applied with the running pod template, not a new rendering made for
    /// the same intent (see [`memcached_api::render::stamp`]).
    Held,
}

/// The Memcached an object belongs to.
pub struct Owner<'a> {
    /// `namespace/name`: what [`LastApplied`] remembers it by.
    pub key: &'a str,
    /// Its uid: what the objects' controller references name.
    pub uid: &'a str,
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
    /// `desired`: the desired object's hash ([`desired_hash`]).
    fn new(desired: u64, live: &ObjectMeta) -> Self {
        Fingerprint {
            uid: live.uid.clone(),
            desired,
            owned: owned_fields(live),
        }
    }
}

fn desired_hash<K: Serialize>(desired: &K) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(&serde_json::to_vec(desired).unwrap_or_default());
    hasher.finish()
}

/// A hash of the fields this manager's applies own in `meta`, and of when
/// they last changed. Another manager that changes one of them takes it
/// over, which changes the hash.
fn owned_fields(meta: &ObjectMeta) -> u64 {
    let mut hasher = DefaultHasher::new();
    // The time moves whenever the entry changes: a value changed under this
    // manager's name (an old leader's late apply) changes no field set.
    for entry in own_applies(meta) {
        fields_digest(entry).hash(&mut hasher);
        entry.api_version.hash(&mut hasher);
        entry
            .time
            .as_ref()
            .map(|t| t.0.as_millisecond())
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// Key of a compacted fieldsV1 (real ones only have `f:`, `k:`, `v:`, `i:`
/// and `.` keys).
const DIGEST: &str = "digest";

/// The digest of one managedFields entry's fields, compacted or not.
fn fields_digest(entry: &ManagedFieldsEntry) -> u64 {
    let fields = entry.fields_v1.as_ref().map(|f| &f.0);
    if let Some(digest) = fields.and_then(|f| f[DIGEST].as_str()?.parse().ok()) {
        return digest;
    }
    let mut hasher = DefaultHasher::new();
    hasher.write(&serde_json::to_vec(&fields).unwrap_or_default());
    hasher.finish()
}

/// The managedFields entries of this manager's applies to the object itself.
fn own_applies(meta: &ObjectMeta) -> impl Iterator<Item = &ManagedFieldsEntry> {
    meta.managed_fields.iter().flatten().filter(|m| {
        m.manager.as_deref() == Some(MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.is_none()
    })
}

/// Keep only what reconcile reads of `meta`'s managedFields: this manager's
/// applies, each as the digest of its fields (plus `f:spec.f:replicas` when
/// owned, for the replicas handover), and the handover manager's entry. A
/// Deployment's full field set is several KB of JSON; the digest is a number.
pub fn compact_managed_fields(meta: &mut ObjectMeta) {
    let Some(entries) = &mut meta.managed_fields else {
        return;
    };
    entries.retain(|m| matches!(m.manager.as_deref(), Some(MANAGER | HANDOVER_MANAGER)));
    for entry in entries
        .iter_mut()
        .filter(|m| m.manager.as_deref() == Some(MANAGER))
    {
        let mut compact = json!({DIGEST: fields_digest(entry).to_string()});
        if owns_replicas(entry) {
            compact["f:spec"] = json!({"f:replicas": {}});
        }
        entry.fields_v1 = Some(FieldsV1(compact));
    }
}

/// This manager's applies own `spec.replicas` of the object of `meta`.
pub fn owns_replicas_of(meta: &ObjectMeta) -> bool {
    own_applies(meta).any(owns_replicas)
}

fn owns_replicas(entry: &ManagedFieldsEntry) -> bool {
    entry
        .fields_v1
        .as_ref()
        .is_some_and(|f| f.0["f:spec"].get("f:replicas").is_some())
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

    /// Forget what was applied for the Memcached objects `keep` rejects (by `namespace/name`).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut memory) = self.0.lock() {
            memory.retain(|owner, _| keep(owner));
        }
    }
}

/// Make the object `name` match `desired` (`None`: should not exist), given
/// `live`, its metadata as the cache or the API server has it (`None`:
/// absent). Returns what happened and, when applied, the object as the API
/// server returned it.
pub async fn ensure<K>(
    api: &Api<K>,
    applied: &LastApplied,
    owner: &Owner<'_>,
    name: &str,
    desired: Option<&K>,
    live: Option<&ObjectMeta>,
) -> Result<(Outcome, Option<K>), kube::Error>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let owned = live.is_some_and(|e| is_controlled_by_meta(e, owner.uid));
    let terminating = live.is_some_and(|e| e.deletion_timestamp.is_some());
    let key = (api.resource_url().to_string(), name.to_string());
    let hash = desired.map(desired_hash).unwrap_or_default();
    match (desired, live) {
        (Some(_), Some(_)) if !owned => Ok((Outcome::Conflict, None)),
        (Some(_), Some(_)) if terminating => Ok((Outcome::Terminating, None)),
        (Some(_), Some(live))
            if applied.get(owner.key, &key).as_ref() == Some(&Fingerprint::new(hash, live)) =>
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
            applied.set(owner.key, key, Some(Fingerprint::new(hash, result.meta())));
            Ok((outcome, Some(result)))
        }
        (None, Some(live)) if owned && !terminating => {
            // The cache may be behind: delete only the object it showed,
            // never one created since under the same name.
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: live.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::background()
            };
            applied.set(owner.key, key, None);
            match api.delete(name, &params).await {
                Ok(_) => Ok((Outcome::Deleted, None)),
                // Already gone, or another object now has the name.
                Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {
                    Ok((Outcome::Unchanged, None))
                }
                Err(e) => Err(e),
            }
        }
        (None, _) => {
            applied.set(owner.key, key, None);
            Ok((Outcome::Unchanged, None))
        }
    }
}

/// [`ensure`] for a workload whose new pod template is held (see
/// [`memcached_api::render::stamp`]): `desired` is applied with the template `live` runs,
/// stamped `running`, so everything else (replicas, labels) still converges
/// and no pod restarts. The running template is read from the API server
/// only when an apply is due: after a restart, or when `desired` changed
/// otherwise.
pub async fn ensure_held<K: Workload>(
    api: &Api<K>,
    applied: &LastApplied,
    owner: &Owner<'_>,
    name: &str,
    mut desired: K,
    running: TemplateStamp,
    live: &ObjectMeta,
) -> Result<(Outcome, Option<K>), kube::Error> {
    running.annotate(desired.meta_mut().annotations.get_or_insert_default());
    let mut without_template = desired.clone();
    without_template.drop_template();
    let hash = desired_hash(&without_template);
    let key = (api.resource_url().to_string(), name.to_string());
    if applied.get(owner.key, &key) == Some(Fingerprint::new(hash, live)) {
        return Ok((Outcome::Unchanged, None));
    }
    // Gone since the cache saw it: the next reconcile creates it anew.
    let Some(running) = api.get_opt(name).await? else {
        return Ok((Outcome::Unchanged, None));
    };
    desired.keep_template_of(running);
    let (outcome, result) = ensure(api, applied, owner, name, Some(&desired), Some(live)).await?;
    let Some(result) = result else {
        return Ok((outcome, None));
    };
    applied.set(owner.key, key, Some(Fingerprint::new(hash, result.meta())));
    Ok((Outcome::Held, Some(result)))
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
    if replicas.is_null() || !owns_replicas_of(live.meta()) {
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
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;

    fn deployment(own: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "c", "managedFields": [
            {"manager": "memcached-operator", "operation": "Apply", "apiVersion": "apps/v1",
             "fieldsType": "FieldsV1", "fieldsV1": own},
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:paused": {}}}}
        ]}}))
        .unwrap()
    }

    #[test]
    fn reads_replicas_ownership_of_this_managers_applies_only() {
        let d = deployment(json!({"f:spec": {"f:replicas": {}, "f:template": {}}}));
        assert!(own_applies(&d.metadata).any(owns_replicas));
        let d = deployment(json!({"f:spec": {"f:template": {}}}));
        assert!(!own_applies(&d.metadata).any(owns_replicas));
    }

    #[test]
    fn compacted_fields_keep_their_digest_and_replicas_ownership() {
        let full = deployment(json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {}}}}));
        let mut compact = full.metadata.clone();
        compact_managed_fields(&mut compact);
        assert_eq!(owned_fields(&compact), owned_fields(&full.metadata));
        assert!(own_applies(&compact).any(owns_replicas));
        let entries = compact.managed_fields.as_ref().unwrap();
        assert_eq!(entries.len(), 1, "another manager's entry is dropped");
        assert!(
            entries[0]
                .fields_v1
                .as_ref()
                .unwrap()
                .0
                .get("f:spec")
                .unwrap()
                .get("f:template")
                .is_none()
        );
        // A field taken over changes the digest.
        let other = deployment(json!({"f:spec": {"f:template": {"f:spec": {}}}}));
        assert_ne!(owned_fields(&other.metadata), owned_fields(&compact));
    }
}
