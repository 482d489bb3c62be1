//! The labels and annotations a Memcached's pods and workload carry.

use std::collections::BTreeMap;

/// Field manager of every server-side apply, and the managed-by label value.
pub const MANAGER: &str = "memcached-operator";
/// Selector label of the workload and its pods: the application
/// (`memcached`; the operator's own pods carry it too).
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// Selector label of the workload and its pods: the Memcached's name.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Selector label of the workload and its pods: who manages them
/// ([`MANAGER`]).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Label of the workload and its pods: the memcached image's tag.
pub const VERSION_LABEL: &str = "app.kubernetes.io/version";
/// Label the StatefulSet controller puts on each of its pods.
pub const STATEFUL_SET_POD_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Pod-template annotation with a hash of the referenced Secrets' data.
pub const SECRET_HASH_ANNOTATION: &str = "memcached.c5c3.io/secret-hash";
/// The length of [`SECRET_HASH_ANNOTATION`]'s value: the first 16 bytes of
/// an HMAC-SHA256, in hex.
pub const SECRET_HASH_LENGTH: usize = 32;
/// Pod-template annotation (warm restarts): the memcached image the pod was
/// given, which a webhook that rewrites container images (a registry
/// mirror) leaves as it is, so a change in place reads what was asked.
pub const IMAGE_ANNOTATION: &str = "memcached.c5c3.io/image";

/// The labels that select the pods of the Memcached named `name`.
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_string(), "memcached".to_string()),
        (INSTANCE_LABEL.to_string(), name.to_string()),
        (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
    ])
}

/// The tag of an image reference (`memcached:1.6.28` -> `1.6.28`), `latest` when untagged.
pub fn image_tag(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag,
        _ => "latest",
    }
}

/// [`VERSION_LABEL`]'s value for `image`: its tag as a valid label value, at
/// most 63 characters, alphanumeric at both ends.
pub fn version_label(image: &str) -> String {
    let cut: String = image_tag(image).chars().take(63).collect();
    cut.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
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
