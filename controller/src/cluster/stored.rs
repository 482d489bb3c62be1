//! A Memcached as the API server stores it: decoded, or unreadable.
//!
//! The CRD's schema is looser than the Rust types (`minAvailable:
//! 4294967296` passes it; an `i32` cannot hold it). Without the policy such
//! an object is stored, and a typed watch would fail on the whole list: no
//! Memcached anywhere would be reconciled. The watch decodes each object on
//! its own instead, so an unreadable one is reported on itself
//! ([`crate::reconcile::refuse`]) and every other one keeps being reconciled.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use memcached_api::STATEFUL_SET;
use memcached_api::admission::decode_spec;
use memcached_api::{Memcached, MemcachedStatus};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One stored Memcached.
#[derive(Clone, Debug)]
pub enum Stored {
    /// Decoded: reconciled.
    Readable(Arc<Memcached>),
    /// Its spec cannot be decoded: reported, nothing else is done.
    Unreadable(Arc<Unreadable>),
}

/// A Memcached whose spec cannot be decoded.
#[derive(Clone, Debug)]
pub struct Unreadable {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// Its status, when that decodes.
    pub status: Option<MemcachedStatus>,
    /// Its `spec.workload` names a StatefulSet.
    pub stateful_set: bool,
    /// Why the spec cannot be decoded, naming the field.
    pub error: String,
}

impl Stored {
    /// The decoded Memcached, if it is readable.
    pub fn readable(&self) -> Option<&Arc<Memcached>> {
        match self {
            Stored::Readable(mc) => Some(mc),
            Stored::Unreadable(_) => None,
        }
    }
}

impl<'de> Deserialize<'de> for Stored {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The parts of the object, each decoded on its own.
        #[derive(Deserialize)]
        struct Parts {
            metadata: ObjectMeta,
            #[serde(default)]
            spec: Value,
            #[serde(default)]
            status: Value,
        }
        let Parts {
            metadata,
            spec,
            status,
        } = Parts::deserialize(deserializer)?;
        let status = Option::<MemcachedStatus>::deserialize(status).unwrap_or_default();
        let stateful_set = spec["workload"] == STATEFUL_SET;
        let spec = match spec {
            Value::Null => Ok(Default::default()),
            spec => decode_spec(&spec),
        };
        Ok(match spec {
            Ok(spec) => Stored::Readable(Arc::new(Memcached {
                metadata,
                spec,
                status,
            })),
            Err(error) => Stored::Unreadable(Arc::new(Unreadable {
                metadata,
                status,
                stateful_set,
                error,
            })),
        })
    }
}

impl Resource for Stored {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Memcached::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Memcached::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Memcached::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Memcached::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Stored::Readable(mc) => &mc.metadata,
            Stored::Unreadable(u) => &u.metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Stored::Readable(mc) => &mut Arc::make_mut(mc).metadata,
            Stored::Unreadable(u) => &mut Arc::make_mut(u).metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(object: Value) -> Stored {
        serde_json::from_value(object).expect("metadata decodes")
    }

    #[test]
    fn a_valid_object_is_readable_with_its_status() {
        let stored = decode(json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"replicas": 2},
            "status": {"replicas": 2},
        }));
        let mc = stored.readable().expect("readable");
        assert_eq!(mc.spec.replicas, Some(2));
        assert_eq!(mc.status.as_ref().and_then(|s| s.replicas), Some(2));
        assert_eq!(stored.meta().name.as_deref(), Some("a"));
    }

    #[test]
    fn no_spec_is_the_empty_spec() {
        let stored = decode(json!({"metadata": {"name": "a"}}));
        assert_eq!(
            stored.readable().map(|mc| &mc.spec),
            Some(&Default::default())
        );
    }

    #[test]
    fn a_value_the_types_cannot_hold_is_unreadable_naming_the_field() {
        let stored = decode(json!({
            "metadata": {"name": "b", "namespace": "ns"},
            "spec": {
                "workload": "StatefulSet",
                "highAvailability": {"podDisruptionBudget": {"minAvailable": 4294967296_u64}},
            },
            "status": {"replicas": 1},
        }));
        let Stored::Unreadable(unreadable) = &stored else {
            panic!("decoded: {stored:?}");
        };
        assert!(
            unreadable
                .error
                .starts_with("spec.highAvailability.podDisruptionBudget.minAvailable: "),
            "{}",
            unreadable.error
        );
        assert_eq!(unreadable.status.as_ref().and_then(|s| s.replicas), Some(1));
        assert!(unreadable.stateful_set);
        assert_eq!(stored.meta().name.as_deref(), Some("b"));
    }

    #[test]
    fn a_status_that_does_not_decode_is_dropped_not_fatal() {
        let stored = decode(json!({
            "metadata": {"name": "a"},
            "status": {"replicas": "two"},
        }));
        assert_eq!(stored.readable().map(|mc| mc.status.is_none()), Some(true));
    }

    #[test]
    fn a_list_with_one_unreadable_object_decodes() {
        let list: Vec<Stored> = serde_json::from_value(json!([
            {"metadata": {"name": "a"}, "spec": {}},
            {"metadata": {"name": "b"}, "spec": {"replicas": "many"}},
        ]))
        .expect("the list decodes");
        assert!(list[0].readable().is_some());
        assert!(list[1].readable().is_none());
    }
}
