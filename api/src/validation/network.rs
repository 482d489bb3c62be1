//! `spec.networkPolicy` and `spec.service`: who may reach the pods, and the
//! Service in front of them.

use crate::field::{ErrorList, Path};
use crate::kubernetes::metadata::validate_annotations;
use crate::kubernetes::network::validate_peers;
use crate::types::{NetworkPolicySpec, ServiceSpec};

/// The NetworkPolicy's sources, as the API server checks its peers.
pub fn validate_network_policy(policy: &NetworkPolicySpec, path: &Path) -> ErrorList {
    policy
        .allowed_sources
        .as_deref()
        .map(|peers| validate_peers(peers, &path.child("allowedSources")))
        .unwrap_or_default()
}

/// The Service's annotations.
pub fn validate_service(service: &ServiceSpec, path: &Path) -> ErrorList {
    service
        .annotations
        .as_ref()
        .map(|a| validate_annotations(a, &path.child("annotations")))
        .unwrap_or_default()
}
