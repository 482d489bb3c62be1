//! The request namespace's Pod Security `enforce` label, read with
//! Kubewarden's `kubernetes/get_resource` host capability ([`crate::host`]).

use std::collections::BTreeMap;

use memcached_api::admission::NamespaceEnforce;
use memcached_api::pod_security::ENFORCE_LABEL;
use serde::Deserialize;

use crate::host::{GetResource, get_resource};

/// The label as the cluster holds it, or why it could not be read.
pub fn enforce_label(namespace: &str) -> NamespaceEnforce {
    let request = GetResource {
        api_version: "v1",
        kind: "Namespace",
        name: namespace,
        namespace: None,
        disable_cache: false,
        field_masks: Some(["metadata.labels"]),
    };
    match get_resource(&request).and_then(|answer| label_of(&answer)) {
        Ok(label) => NamespaceEnforce::Label(label),
        Err(why) => NamespaceEnforce::Unreadable(why),
    }
}

/// The `enforce` label of a Namespace object (JSON).
fn label_of(namespace: &[u8]) -> Result<Option<String>, String> {
    #[derive(Deserialize)]
    struct Namespace {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(Default, Deserialize)]
    struct Metadata {
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }
    let mut namespace: Namespace = serde_json::from_slice(namespace)
        .map_err(|e| format!("the host answered no Namespace: {e}"))?;
    Ok(namespace.metadata.labels.remove(ENFORCE_LABEL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_enforce_label() {
        let namespace = br#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a",
            "labels": {"pod-security.kubernetes.io/enforce": "baseline", "team": "x"}}}"#;
        assert_eq!(label_of(namespace), Ok(Some("baseline".into())));
        assert_eq!(label_of(br#"{"metadata": {"name": "a"}}"#), Ok(None));
        assert!(label_of(b"\"gone\"").unwrap_err().contains("no Namespace"));
    }

    #[test]
    fn without_a_host_the_namespace_is_unreadable() {
        assert!(matches!(
            enforce_label("a"),
            NamespaceEnforce::Unreadable(_)
        ));
    }
}
