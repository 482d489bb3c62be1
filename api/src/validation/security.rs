//! `spec.security`: SASL and TLS name their Secrets, and the pod's and
//! containers' security contexts are valid where the controller puts them
//! (the one container context on every container).

use k8s_openapi::api::core::v1::{PodSecurityContext, SecurityContext};

use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::security_context::{
    validate_host_process, validate_pod_security_context, validate_security_context,
};
use crate::types::SecuritySpec;

/// Enabled SASL and TLS name their Secrets (REQ-004/005); the security
/// contexts.
pub fn validate_security(security: &SecuritySpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(sasl) = security.sasl.as_ref().filter(|s| s.enabled == Some(true))
        && sasl
            .credentials_secret_ref
            .as_ref()
            .is_none_or(|r| r.name.is_empty())
    {
        errors.push(
            FieldError::required(
                path.child("sasl")
                    .child("credentialsSecretRef")
                    .child("name"),
                "credentialsSecretRef.name is required when SASL is enabled",
            )
            .at(Stage::Rule),
        );
    }
    if let Some(tls) = security.tls.as_ref().filter(|t| t.enabled == Some(true))
        && tls
            .certificate_secret_ref
            .as_ref()
            .is_none_or(|r| r.name.is_empty())
    {
        errors.push(
            FieldError::required(
                path.child("tls")
                    .child("certificateSecretRef")
                    .child("name"),
                "certificateSecretRef.name is required when TLS is enabled",
            )
            .at(Stage::Rule),
        );
    }
    errors.extend(validate_security_contexts(
        security.pod_security_context.as_ref(),
        security.container_security_context.as_ref(),
        path,
    ));
    errors
}

/// Both contexts, and what they decide together (`hostProcess`).
fn validate_security_contexts(
    pod: Option<&PodSecurityContext>,
    container: Option<&SecurityContext>,
    path: &Path,
) -> ErrorList {
    let pod_path = path.child("podSecurityContext");
    let container_path = path.child("containerSecurityContext");
    let mut errors = ErrorList::new();
    if let Some(pod) = pod {
        errors.extend(validate_pod_security_context(pod, &pod_path));
    }
    if let Some(container) = container {
        errors.extend(validate_security_context(container, &container_path));
    }
    errors.extend(validate_host_process(
        pod,
        container,
        &pod_path,
        &container_path,
    ));
    errors
}
