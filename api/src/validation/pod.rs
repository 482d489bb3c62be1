//! `spec.podLabels` and `spec.podAnnotations`, as the API server checks them
//! in the pod template the controller builds.

use std::collections::BTreeMap;

use crate::field::{ErrorList, FieldError, Path};
use crate::kubernetes::metadata::{TOTAL_ANNOTATION_SIZE, validate_annotations, validate_labels};
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

/// The most the args the operator renders take in the pod's args annotation
/// (warm restarts), `extraArgs` aside: the options it manages and the paths
/// of the memory file, the auth file and the TLS files.
const RENDERED_ARGS_ROOM: usize = 1024;
/// `memcached.c5c3.io/args`, the warm-restart supervisor's args annotation.
const ARGS_ANNOTATION_KEY: usize = "memcached.c5c3.io/args".len();
/// `memcached.c5c3.io/secret-hash` and its value, a hex HMAC-SHA256.
const SECRET_HASH_ANNOTATION_SIZE: usize = "memcached.c5c3.io/secret-hash".len() + 64;

/// Valid annotations, none the API server refuses in a pod of `shape`, and
/// room beside them for the annotations the operator adds to the same pod
/// template ([`operator_annotations_room`]): the API server limits them as a whole.
pub fn validate_pod_annotations(
    annotations: &BTreeMap<String, String>,
    shape: &PodShape<'_>,
    spec: &MemcachedSpec,
    path: &Path,
) -> ErrorList {
    let mut errors = validate_annotations(annotations, path);
    let size: usize = (annotations.iter())
        .map(|(key, value)| key.len().saturating_add(value.len()))
        .fold(0, usize::saturating_add);
    let room = TOTAL_ANNOTATION_SIZE.saturating_sub(operator_annotations_room(spec));
    if size <= TOTAL_ANNOTATION_SIZE && size > room {
        errors.push(FieldError::too_long(path.clone(), room));
    }
    errors.extend(validate_pod_specific_annotations(annotations, shape, path));
    errors
}

/// The most the operator's own pod annotations take: with warm restarts
/// memcached's args, with a referenced Secret its hash.
fn operator_annotations_room(spec: &MemcachedSpec) -> usize {
    let mut room = 0;
    if spec.warm_restart_enabled() {
        let extra = spec
            .memcached
            .as_ref()
            .and_then(|c| c.extra_args.as_deref());
        let extra: usize = extra.unwrap_or_default().iter().map(|a| a.len() + 1).sum();
        room += ARGS_ANNOTATION_KEY + RENDERED_ARGS_ROOM + extra;
    }
    if spec.sasl_enabled() || spec.tls_enabled() {
        room += SECRET_HASH_ANNOTATION_SIZE;
    }
    room
}
