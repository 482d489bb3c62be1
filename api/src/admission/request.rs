//! What a request brings to the decision: its parts, what the caller read
//! of the cluster for it, and how to judge.

use serde_json::Value;

use crate::pod_security::Level;
use crate::validation::Options;

/// The parts of an AdmissionRequest the decision needs.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// Group of the request's kind.
    pub group: String,
    /// Version of the request's kind.
    pub version: String,
    /// The request's kind.
    pub kind: String,
    /// Group of the resource addressed.
    pub resource_group: String,
    /// The resource addressed (plural, e.g. `memcacheds`).
    pub resource: String,
    /// Subresource (`status`, `scale`), empty for the object itself.
    pub sub_resource: String,
    /// Name of the object in the request.
    pub name: String,
    /// The object as submitted.
    pub object: Value,
    /// The stored object (UPDATE).
    pub old_object: Value,
    /// The request's namespace.
    pub namespace: String,
    /// The namespace's Pod Security `enforce` label, when the caller read it.
    pub namespace_enforce: NamespaceEnforce,
    /// The stored Memcached a `scale` update addresses, when the caller read
    /// it ([`crate::admission::needs_memcached`]).
    pub memcached: StoredMemcached,
}

/// The `pod-security.kubernetes.io/enforce` label of the request's namespace,
/// as the caller read it from the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum NamespaceEnforce {
    /// Not read: no lookup was needed (see [`crate::admission::needs_namespace`]).
    #[default]
    NotRead,
    /// The label's value, `None` when the namespace has none.
    Label(Option<String>),
    /// The namespace could not be read: `restricted` is judged, with a warning.
    Unreadable(String),
}

/// The Memcached a `scale` subresource update addresses, as the caller read
/// it from the cluster (`memcached.c5c3.io/v1beta1`, the request's name and
/// namespace): the Scale says nothing of the pods it adds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum StoredMemcached {
    /// Not read: no lookup was needed (see [`crate::admission::needs_memcached`]).
    #[default]
    NotRead,
    /// The object as the cluster stores it.
    Object(Value),
    /// It could not be read (RBAC not granted, not found): the scale-up is
    /// admitted with a warning.
    Unreadable(String),
}

/// How to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Validation tunables.
    pub options: Options,
    /// Return the defaulted object; when false, judge it but never mutate.
    pub mutate: bool,
    /// The Pod Security level the pods must meet at least; a namespace's
    /// `enforce` label may ask for more.
    pub pod_security: Level,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            options: Options::default(),
            mutate: true,
            pod_security: Level::Restricted,
        }
    }
}

/// The resource (plural) whose `scale` subresource is judged.
pub const RESOURCE: &str = "memcacheds";
