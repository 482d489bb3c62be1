//! The metadata every managed object shares: the Memcached's name and
//! namespace, the labels that select its pods, and its ownership.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;
use memcached_api::Memcached;
use memcached_api::render::labels::selector_labels;

/// The labels that select a Memcached's pods.
pub fn selector(mc: &Memcached) -> LabelSelector {
    LabelSelector {
        match_labels: Some(selector_labels(name(mc))),
        ..Default::default()
    }
}

/// The labels that select a Memcached's pods as a label selector string (`status.selector`).
pub fn selector_string(mc: &impl Resource) -> String {
    selector_labels(name(mc))
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The CR's name.
pub fn name(mc: &impl Resource) -> &str {
    mc.meta().name.as_deref().unwrap_or_default()
}

/// Metadata of a managed object: the CR's name and namespace, the common
/// labels and [`owner`].
pub fn object_meta(mc: &Memcached) -> ObjectMeta {
    ObjectMeta {
        name: mc.metadata.name.clone(),
        namespace: mc.metadata.namespace.clone(),
        labels: Some(selector_labels(name(mc))),
        owner_references: owner(mc),
        ..Default::default()
    }
}

/// The controller owner reference to `mc` (absent when rendering a CR that
/// has no uid yet).
pub fn owner(mc: &Memcached) -> Option<Vec<OwnerReference>> {
    mc.controller_owner_ref(&()).map(|r| {
        vec![OwnerReference {
            block_owner_deletion: Some(true),
            ..r
        }]
    })
}
