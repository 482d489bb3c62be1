//! Server-side apply of managed objects, and deleting only what this
//! Memcached owns.
//!
//! Every reconcile applies the whole desired object: the API server then
//! removes the fields this field manager stopped sending, and an apply that
//! changes nothing leaves the resourceVersion alone (no write, no watch
//! event). Comparing the resourceVersion before and after tells an update
//! from a no-op, so values the server normalises (`1024Mi` stored as `1Gi`)
//! never count as changes.

use std::fmt::Debug;

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
    let terminating = existing
        .as_ref()
        .is_some_and(|e| e.meta().deletion_timestamp.is_some());
    match (desired, existing) {
        (Some(_), Some(e)) if !owned => Ok((Outcome::Conflict, Some(e))),
        (Some(_), Some(e)) if terminating => Ok((Outcome::Terminating, Some(e))),
        (Some(d), existing) => {
            let before = existing.as_ref().and_then(|e| e.resource_version());
            let applied = api
                .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(d))
                .await?;
            let outcome = match before {
                None => Outcome::Created,
                Some(rv) if applied.resource_version().as_ref() == Some(&rv) => Outcome::Unchanged,
                Some(_) => Outcome::Updated,
            };
            Ok((outcome, Some(applied)))
        }
        (None, Some(_)) if owned && !terminating => {
            api.delete(name, &DeleteParams::background()).await?;
            Ok((Outcome::Deleted, None))
        }
        (None, existing) => Ok((Outcome::Unchanged, existing)),
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
    object
        .owner_references()
        .iter()
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
