//! `spec.podLabels` and `spec.podAnnotations`, as the API server checks them
//! in the pod template the controller builds.

use std::collections::BTreeMap;

use crate::field::{ErrorList, FieldError, Path};
use crate::kubernetes::metadata::{validate_annotations, validate_labels};
use crate::kubernetes::pod_annotations::{PodShape, validate_pod_specific_annotations};
use crate::pod;
use crate::types::MemcachedSpec;

/// Pod labels the operator sets itself: the Deployment's selector (name,
/// instance, managed-by) and the version it reads from the image tag.
pub const OPERATOR_LABELS: [&str; 4] = [
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
];

/// Valid labels, none of which the operator sets itself.
pub fn validate_pod_labels(labels: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = validate_labels(labels, path);
    for key in OPERATOR_LABELS.iter().filter(|k| labels.contains_key(**k)) {
        errors.push(FieldError::forbidden(
            path.key(key),
            "the operator sets this label on the pods (the Deployment's selector matches name, instance \
             and managed-by; version comes from the image tag); remove it from podLabels",
        ));
    }
    errors
}

/// The pod `spec` builds: its security contexts (at their places under
/// `path`, the spec's) and containers.
pub fn pod_shape<'a>(spec: &'a MemcachedSpec, path: &Path) -> PodShape<'a> {
    let security = spec.security.as_ref();
    let security_path = path.child("security");
    PodShape {
        pod: security.and_then(|s| s.pod_security_context.as_ref()),
        container: security.and_then(|s| s.container_security_context.as_ref()),
        containers: pod::containers(spec),
        pod_path: security_path.child("podSecurityContext"),
        container_path: security_path.child("containerSecurityContext"),
    }
}

/// Valid annotations, and none the API server refuses in a pod of `shape`.
pub fn validate_pod_annotations(
    annotations: &BTreeMap<String, String>,
    shape: &PodShape<'_>,
    path: &Path,
) -> ErrorList {
    let mut errors = validate_annotations(annotations, path);
    errors.extend(validate_pod_specific_annotations(annotations, shape, path));
    errors
}
