//! `spec.podAnnotations` that mean something to the API server in a pod
//! template (`ValidatePodSpecificAnnotations`, `validateSeccompAnnotationsAndFields`
//! and `validateAppArmorAnnotationsAndFieldsMatchOnCreate`), with its messages.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, PodSecurityContext, SeccompProfile, SecurityContext, Toleration,
};

use super::scheduling::validate_tolerations;
use super::security_context::validate_local_descending_path;
use crate::field::{ErrorList, FieldError, Path};

/// Marks a mirror pod, which needs `spec.nodeName` (never set here).
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";
/// Tolerations as a JSON list (the alpha annotation).
pub const TOLERATIONS: &str = "scheduler.alpha.kubernetes.io/tolerations";
/// The ReplicaSet's deletion cost: a 32-bit integer.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
/// The pod's seccomp profile (deprecated annotation).
pub const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// A container's seccomp profile (deprecated annotation), suffixed by its name.
pub const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
/// A container's AppArmor profile (deprecated annotation), suffixed by its name.
pub const APPARMOR_CONTAINER_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The pod's security contexts and container names, as the controller builds them.
pub struct PodShape<'a> {
    /// `spec.securityContext` of the pod.
    pub pod: Option<&'a PodSecurityContext>,
    /// The one security context every container gets.
    pub container: Option<&'a SecurityContext>,
    /// Container names.
    pub containers: &'a [&'a str],
    /// Where the pod context is in the Memcached spec.
    pub pod_path: Path,
    /// Where the container context is.
    pub container_path: Path,
}

/// Every error the API server finds in the pod template's annotations.
pub fn validate_pod_specific_annotations(
    annotations: &BTreeMap<String, String>,
    pod: &PodShape<'_>,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(value) = annotations.get(MIRROR_POD) {
        errors.push(FieldError::invalid(
            path.key(MIRROR_POD),
            value.as_str(),
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    if let Some(value) = annotations.get(TOLERATIONS).filter(|v| !v.is_empty()) {
        match serde_json::from_str::<Vec<Toleration>>(value) {
            Err(e) => errors.push(FieldError::invalid(
                path.clone(),
                TOLERATIONS,
                e.to_string(),
            )),
            Ok(tolerations) => {
                errors.extend(validate_tolerations(&tolerations, &path.child(TOLERATIONS)));
            }
        }
    }
    if let Some(cost) = annotations.get(POD_DELETION_COST)
        && !is_deletion_cost(cost)
    {
        errors.push(FieldError::invalid(
            path.key(POD_DELETION_COST),
            cost.as_str(),
            "must be a 32bit integer",
        ));
    }
    for (key, value) in annotations {
        if key == SECCOMP_POD || key.starts_with(SECCOMP_CONTAINER_PREFIX) {
            errors.extend(validate_seccomp_annotation(value, &path.child(key)));
        }
        if let Some(container) = key.strip_prefix(APPARMOR_CONTAINER_PREFIX) {
            if !pod.containers.contains(&container) {
                errors.push(FieldError::invalid(
                    path.key(key),
                    container,
                    "container not found",
                ));
            }
            if !is_app_armor_annotation(value) {
                errors.push(FieldError::invalid(
                    path.key(key),
                    value.as_str(),
                    format!(
                        "invalid AppArmor profile name: {}",
                        crate::field::go_quote(value)
                    ),
                ));
            }
        }
    }
    errors.extend(fields_match(annotations, pod));
    errors
}

/// `validFirstDigit` and a 32-bit `ParseInt`.
fn is_deletion_cost(value: &str) -> bool {
    let first_ok = match value.as_bytes().first() {
        Some(b'-') | Some(b'1'..=b'9') => true,
        Some(b'0') => value == "0",
        _ => false,
    };
    first_ok && value.parse::<i32>().is_ok()
}

/// `ValidateSeccompProfile`.
fn validate_seccomp_annotation(profile: &str, path: &Path) -> ErrorList {
    match profile {
        "runtime/default" | "docker/default" | "unconfined" => ErrorList::new(),
        _ => match profile.strip_prefix("localhost/") {
            Some(file) => validate_local_descending_path(file, path),
            None => vec![FieldError::invalid(
                path.clone(),
                profile,
                "must be a valid seccomp profile",
            )],
        },
    }
}

/// `ValidateAppArmorProfileFormat`.
fn is_app_armor_annotation(profile: &str) -> bool {
    matches!(profile, "" | "runtime/default" | "unconfined") || profile.starts_with("localhost/")
}

/// Annotations and security context fields that both name a profile must agree.
fn fields_match(annotations: &BTreeMap<String, String>, pod: &PodShape<'_>) -> ErrorList {
    let mut errors = ErrorList::new();
    let pod_seccomp = pod.pod.and_then(|p| p.seccomp_profile.as_ref());
    if let (Some(field), Some(annotation)) = (pod_seccomp, annotations.get(SECCOMP_POD)) {
        errors.extend(seccomp_match(
            annotation,
            field,
            &pod.pod_path.child("seccompProfile"),
        ));
    }
    let container_seccomp = pod.container.and_then(|c| c.seccomp_profile.as_ref());
    let container_app_armor = pod.container.and_then(|c| c.app_armor_profile.as_ref());
    let (app_armor, app_armor_path) = match container_app_armor {
        Some(profile) => (Some(profile), &pod.container_path),
        None => (
            pod.pod.and_then(|p| p.app_armor_profile.as_ref()),
            &pod.pod_path,
        ),
    };
    for name in pod.containers {
        if let (Some(field), Some(annotation)) = (
            container_seccomp,
            annotations.get(&format!("{SECCOMP_CONTAINER_PREFIX}{name}")),
        ) {
            errors.extend(seccomp_match(
                annotation,
                field,
                &pod.container_path.child("seccompProfile"),
            ));
        }
        if let (Some(field), Some(annotation)) = (
            app_armor,
            annotations.get(&format!("{APPARMOR_CONTAINER_PREFIX}{name}")),
        ) {
            errors.extend(app_armor_match(
                annotation,
                field,
                &app_armor_path.child("appArmorProfile"),
            ));
        }
    }
    errors
}

/// `validateSeccompAnnotationsAndFieldsMatch`.
fn seccomp_match(annotation: &str, field: &SeccompProfile, path: &Path) -> Option<FieldError> {
    profile_match(
        "seccomp",
        annotation,
        &field.type_,
        field.localhost_profile.as_deref(),
        &["runtime/default", "docker/default"],
        path,
    )
}

/// The AppArmor half of `validateAppArmorAnnotationsAndFieldsMatchOnCreate`.
fn app_armor_match(annotation: &str, field: &AppArmorProfile, path: &Path) -> Option<FieldError> {
    profile_match(
        "apparmor",
        annotation,
        &field.type_,
        field.localhost_profile.as_deref(),
        &["runtime/default"],
        path,
    )
}

fn profile_match(
    what: &str,
    annotation: &str,
    kind: &str,
    local: Option<&str>,
    runtime_default: &[&str],
    path: &Path,
) -> Option<FieldError> {
    let type_mismatch = || {
        FieldError::forbidden(
            path.child("type"),
            format!("{what} type in annotation and field must match"),
        )
    };
    match kind {
        "Unconfined" => (annotation != "unconfined").then(type_mismatch),
        "RuntimeDefault" => (!runtime_default.contains(&annotation)).then(type_mismatch),
        "Localhost" => match annotation.strip_prefix("localhost/") {
            None => Some(type_mismatch()),
            Some(file) if local != Some(file) => Some(FieldError::forbidden(
                path.child("localhostProfile"),
                format!("{what} profile in annotation and field must match"),
            )),
            Some(_) => None,
        },
        _ => None,
    }
}
