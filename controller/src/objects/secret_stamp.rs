//! The stamp a workload carries of the Secrets its pods mount: their hash
//! (the pod template's [`SECRET_HASH_ANNOTATION`], which rolls the pods when
//! the data changes) and the Secret versions it was computed from, kept on the
//! workload's own metadata, so a reconcile that finds the same versions keeps
//! the hash without computing it again ([`crate::cluster::secrets`] reads the Secrets
//! and computes it).

use std::collections::BTreeMap;

use memcached_api::render::labels::SECRET_HASH_ANNOTATION;

/// Workload annotation: the [`Mounted::versions`] the pods' Secret hash was
/// computed from (the hash is beside it, under the pod template's name).
///
/// [`Mounted::versions`]: crate::cluster::secrets::Mounted::versions
pub const SECRET_VERSIONS_ANNOTATION: &str = "memcached.c5c3.io/secret-versions";

/// The pods' Secret hash and the Secret versions it was computed from, kept
/// on the workload's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretStamp {
    /// The pod template's `memcached.c5c3.io/secret-hash`.
    pub hash: String,
    /// [`Mounted::versions`](crate::cluster::secrets::Mounted::versions).
    pub versions: String,
}

impl SecretStamp {
    /// The stamp in `annotations`, if both parts are there.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Self> {
        Some(SecretStamp {
            hash: annotations.get(SECRET_HASH_ANNOTATION)?.clone(),
            versions: annotations.get(SECRET_VERSIONS_ANNOTATION)?.clone(),
        })
    }

    /// Write the stamp into `annotations`.
    pub fn annotate(self, annotations: &mut BTreeMap<String, String>) {
        annotations.insert(SECRET_HASH_ANNOTATION.into(), self.hash);
        annotations.insert(SECRET_VERSIONS_ANNOTATION.into(), self.versions);
    }
}
