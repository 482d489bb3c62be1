//! Names, labels and ownership shared by every managed object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;
use memcached_api::Memcached;

/// Field manager of every server-side apply, and the managed-by label value.
pub const MANAGER: &str = "memcached-operator";
/// Label of the workload and its pods: the memcached image's tag.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// Port memcached serves on.
pub const MEMCACHED_PORT: i32 = 11211;
/// Port the exporter sidecar serves metrics on.
pub const METRICS_PORT: i32 = 9150;
/// The containers' names, as the policy judges them.
pub use memcached_api::pod::{EXPORTER_CONTAINER, MEMCACHED_CONTAINER};
/// Pod-template annotation with a hash of the referenced Secrets' data.
pub const SECRET_HASH_ANNOTATION: &str = "memcached.c5c3.io/secret-hash";
/// Pod-template annotation (warm restarts): the memcached image the pod was
/// given, which a webhook that rewrites container images (a registry
/// mirror) leaves as it is, so a change in place reads what was asked.
pub const IMAGE_ANNOTATION: &str = "memcached.c5c3.io/image";

/// The labels that select a Memcached's pods.
pub fn selector_labels(mc: &impl Resource) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/name".to_string(),
            "memcached".to_string(),
        ),
        (
            "app.kubernetes.io/instance".to_string(),
            name(mc).to_string(),
        ),
        (
            "app.kubernetes.io/managed-by".to_string(),
            MANAGER.to_string(),
        ),
    ])
}

/// A label selector matching [`selector_labels`].
pub fn selector(mc: &Memcached) -> LabelSelector {
    LabelSelector {
        match_labels: Some(selector_labels(mc)),
        ..Default::default()
    }
}

/// [`selector_labels`] as a label selector string (`status.selector`).
pub fn selector_string(mc: &impl Resource) -> String {
    selector_labels(mc)
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
/// labels and a controller owner reference (absent when rendering a CR that
/// has no uid yet).
pub fn object_meta(mc: &Memcached) -> ObjectMeta {
    ObjectMeta {
        name: mc.metadata.name.clone(),
        namespace: mc.metadata.namespace.clone(),
        labels: Some(selector_labels(mc)),
        owner_references: mc.controller_owner_ref(&()).map(|r| {
            vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..r
            }]
        }),
        ..Default::default()
    }
}

/// The tag of an image reference (`memcached:1.6.28` -> `1.6.28`), `latest` when untagged.
pub fn image_tag(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag,
        _ => "latest",
    }
}

#[cfg(test)]
mod tests {
    use super::image_tag;

    #[test]
    fn image_tag_handles_registries_ports_and_digests() {
        assert_eq!(image_tag("memcached:1.6"), "1.6");
        assert_eq!(image_tag("registry:5000/memcached"), "latest");
        assert_eq!(image_tag("registry:5000/memcached:1.6.28"), "1.6.28");
        assert_eq!(image_tag("memcached:1.6@sha256:abc"), "1.6");
    }
}
