//! `spec.podLabels` and `spec.podAnnotations`, as the API server checks them
//! in the pod template the controller builds.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::defaults::Defaulted;
use crate::field::{ErrorList, FieldError, Path};
use crate::kubernetes::metadata::{TOTAL_ANNOTATION_SIZE, validate_annotations, validate_labels};
use crate::kubernetes::pod_annotations::{PodShape, validate_pod_specific_annotations};
use crate::render::containers;
use crate::render::labels::{SECRET_HASH_LENGTH, VERSION_LABEL, selector_labels};
use crate::render::{Instance, pod_template};
use crate::types::MemcachedSpec;

/// Valid labels, none of which the operator sets itself: the workload's
/// selector (name, instance, managed-by) and the version it reads from the
/// image tag.
pub fn validate_pod_labels(labels: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = validate_labels(labels, path);
    let mut operator_labels: Vec<String> = selector_labels("").into_keys().collect();
    operator_labels.push(VERSION_LABEL.to_string());
    for key in operator_labels.iter().filter(|k| labels.contains_key(*k)) {
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
        containers: containers::names(spec),
        pod_path: security_path.child("podSecurityContext"),
        container_path: security_path.child("containerSecurityContext"),
    }
}

/// Valid annotations, none the API server refuses in a pod of `shape`, and
/// room beside them for the annotations the operator adds to the same pod
/// template ([`operator_annotations_room`]): the API server limits them as a whole.
pub fn validate_pod_annotations(
    annotations: &BTreeMap<String, String>,
    shape: &PodShape<'_>,
    spec: &Defaulted,
    path: &Path,
) -> ErrorList {
    let mut errors = validate_annotations(annotations, path);
    let size: usize = (annotations.iter())
        .map(|(key, value)| key.len().saturating_add(value.len()))
        .fold(0, usize::saturating_add);
    let room = TOTAL_ANNOTATION_SIZE.saturating_sub(operator_annotations_room(spec, size));
    if size <= TOTAL_ANNOTATION_SIZE && size > room {
        errors.push(FieldError::too_long(path.clone(), room));
    }
    errors.extend(validate_pod_specific_annotations(annotations, shape, path));
    errors
}

/// What the operator's own annotations take in the pod template rendered
/// from `spec` (with warm restarts memcached's args and image, with a
/// referenced Secret its hash): the rendered annotations but the user's,
/// which take `user`.
fn operator_annotations_room(spec: &Defaulted, user: usize) -> usize {
    let hash = "0".repeat(SECRET_HASH_LENGTH);
    let hashed = spec.sasl_enabled() || spec.tls_enabled();
    let metadata = ObjectMeta::default();
    let instance = Instance {
        metadata: &metadata,
        spec,
    };
    let annotations = pod_template::annotations(instance, spec, hashed.then_some(&*hash));
    let rendered: usize = (annotations.iter())
        .map(|(key, value)| key.len().saturating_add(value.len()))
        .fold(0, usize::saturating_add);
    rendered.saturating_sub(user)
}
