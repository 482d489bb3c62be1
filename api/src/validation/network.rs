//! `spec.networkPolicy` (or `spec.security.networkPolicy`, where the Go
//! operator has it) and `spec.service`: who may reach the pods, and the
//! Service in front of them.

use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::metadata::validate_annotations;
use crate::kubernetes::network::validate_peers;
use crate::types::{MemcachedSpec, NetworkPolicySpec, ServiceSpec};

/// `spec.networkPolicy` and `spec.security.networkPolicy`, one setting in
/// two places (the second is the Go operator's): each validated where it is
/// set, and when both are, they must be equal (then the second is not
/// validated again).
pub fn validate_network_policies(spec: &MemcachedSpec, path: &Path) -> ErrorList {
    let own_path = path.child("networkPolicy");
    let go_path = path.child("security").child("networkPolicy");
    let own = spec.network_policy.as_ref();
    let go = spec
        .security
        .as_ref()
        .and_then(|s| s.network_policy.as_ref());
    let mut errors = ErrorList::new();
    if let (Some(own), Some(go)) = (own, go)
        && own != go
    {
        errors.push(
            FieldError::forbidden(
                go_path.clone(),
                format!(
                    "differs from {own_path}: both set the NetworkPolicy ({go_path} is where the Go \
                     operator has it); set only one of them, or both to the same value"
                ),
            )
            .at(Stage::Rule),
        );
    }
    if let Some(own) = own {
        errors.extend(validate_network_policy(own, &own_path));
    }
    if let Some(go) = go.filter(|go| own != Some(*go)) {
        errors.extend(validate_network_policy(go, &go_path));
    }
    errors
}

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
