//! The Memcached object the tests send and store: `memcached(spec)` is a
//! `memcached.c5c3.io/v1beta1` Memcached `my-cache`, and each method changes
//! one thing of it (version, name, namespace, uid, generation, an annotation).

use serde_json::{Value, json};

/// A Memcached object being built.
#[derive(Clone, Debug)]
pub struct Object(Value);

/// A `memcached.c5c3.io/v1beta1` Memcached `my-cache` of `spec`, in no namespace.
pub fn memcached(spec: Value) -> Object {
    Object(json!({
        "apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": "my-cache"},
        "spec": spec,
    }))
}

impl Object {
    /// Of the API version `memcached.c5c3.io/<version>` (`v1alpha1`, `v1beta1`).
    pub fn version(mut self, version: &str) -> Self {
        self.0["apiVersion"] = json!(format!("memcached.c5c3.io/{version}"));
        self
    }

    /// Named `name`.
    pub fn name(self, name: &str) -> Self {
        self.metadata("name", json!(name))
    }

    /// In the namespace `namespace`.
    pub fn namespace(self, namespace: &str) -> Self {
        self.metadata("namespace", json!(namespace))
    }

    /// With the uid `uid`, as the API server gives one.
    pub fn uid(self, uid: &str) -> Self {
        self.metadata("uid", json!(uid))
    }

    /// At the generation `generation`, as the API server counts spec changes.
    pub fn generation(self, generation: i64) -> Self {
        self.metadata("generation", json!(generation))
    }

    /// With the annotation `key: value`.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["annotations"][key] = json!(value);
        self
    }

    /// The object as JSON.
    pub fn json(self) -> Value {
        self.0
    }

    /// The object as the controller's type.
    #[cfg(feature = "controller")]
    pub fn typed(self) -> memcached_api::Memcached {
        serde_json::from_value(self.0).expect("a Memcached object decodes")
    }

    fn metadata(mut self, field: &str, value: Value) -> Self {
        self.0["metadata"][field] = value;
        self
    }
}
