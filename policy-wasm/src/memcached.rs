//! The stored Memcached a `scale` subresource update addresses, read with
//! Kubewarden's `kubernetes/get_resource` host capability ([`crate::host`]):
//! the Scale carries only a replica count, the pods a scale-up adds are built
//! from the stored spec.

use memcached_api::admission::StoredMemcached;
use memcached_api::types::KIND;
use serde_json::Value;

use crate::host::{GetResource, get_resource};

/// The version read: the CRD's storage version, which serves every field.
const API_VERSION: &str = "memcached.c5c3.io/v1beta1";

/// The Memcached `name` of `namespace` as the cluster stores it, or why it
/// could not be read (policy-server's ServiceAccount not granted it, gone).
pub fn stored(namespace: &str, name: &str) -> StoredMemcached {
    let request = GetResource {
        api_version: API_VERSION,
        kind: KIND,
        name,
        namespace: Some(namespace),
        // The spec judged must be the one the new pods get, not one 5 s old.
        disable_cache: true,
        field_masks: None,
    };
    match get_resource(&request).and_then(|answer| object_of(&answer)) {
        Ok(object) => StoredMemcached::Object(object),
        Err(why) => StoredMemcached::Unreadable(why),
    }
}

/// The host's answer as a JSON object.
fn object_of(answer: &[u8]) -> Result<Value, String> {
    match serde_json::from_slice(answer) {
        Ok(object @ Value::Object(_)) => Ok(object),
        Ok(_) => Err("the host answered no Memcached: not a JSON object".to_string()),
        Err(e) => Err(format!("the host answered no Memcached: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_object_the_host_answers() {
        let answer = br#"{"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c"}, "spec": {"replicas": 3}}"#;
        assert_eq!(object_of(answer).unwrap()["spec"]["replicas"], 3);
        assert!(object_of(b"[1]").unwrap_err().contains("no Memcached"));
        assert!(object_of(b"gone").unwrap_err().contains("no Memcached"));
    }

    #[test]
    fn reads_the_storage_version_of_the_group() {
        let (group, version) = API_VERSION.split_once('/').unwrap();
        assert_eq!(group, memcached_api::types::GROUP);
        assert_eq!(version, *memcached_api::types::VERSIONS.last().unwrap());
    }

    #[test]
    fn without_a_host_the_memcached_is_unreadable() {
        assert!(matches!(stored("a", "c"), StoredMemcached::Unreadable(_)));
    }
}
