//! The completion of a defaulted spec for a Pod Security level: the fields
//! of the security contexts the level requires and the user left unset.

use k8s_openapi::api::core::v1::SeccompProfile;

use crate::defaults::{Defaulted, MEMCACHED_UID, apply_defaults};
use crate::field::Path;
use crate::kubernetes::pod_annotations::{SECCOMP_CONTAINER_PREFIX, SECCOMP_POD};
use crate::pod_security::level::Level;
use crate::types::{MemcachedSpec, SecuritySpec};

/// A field [`apply_defaults_at`] set so that the pods meet a Pod Security level.
#[derive(Clone, Debug, PartialEq)]
pub struct Addition {
    /// The field, under `spec`.
    pub field: Path,
    /// Its value, as YAML would show it.
    pub value: String,
}

impl std::fmt::Display for Addition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.value)
    }
}

/// [`apply_defaults`], then, for `level`, every field of the security
/// contexts the level requires and the user left unset, with the value it
/// requires (`restricted`: `allowPrivilegeEscalation: false`,
/// `capabilities.drop: [ALL]`, `runAsNonRoot: true` with memcached's UID
/// when no user is set, seccomp `RuntimeDefault`); what was added. A value
/// the user set is never changed, and nothing is added that would contradict
/// one (`allowPrivilegeEscalation: false` beside `privileged: true`,
/// `runAsNonRoot: true` beside `runAsUser: 0`, a seccomp field beside the
/// deprecated seccomp annotations): those stay violations. `baseline` and
/// `privileged` only forbid values, so they add nothing. Pure and idempotent.
pub fn apply_defaults_at(spec: MemcachedSpec, level: Level) -> (Defaulted, Vec<Addition>) {
    complete_for(apply_defaults(spec), level)
}

/// The second half of [`apply_defaults_at`]: a defaulted spec completed for
/// `level`. Every value it adds is one the API server accepts beside the
/// user's, so validating the spec before or after changes nothing.
pub fn complete_for(spec: Defaulted, level: Level) -> (Defaulted, Vec<Addition>) {
    let mut added = Vec::new();
    if level < Level::Restricted {
        return (spec, added);
    }
    let mut spec = spec.into_inner();
    let seccomp_annotated = spec.pod_annotations.as_ref().is_some_and(|a| {
        a.keys()
            .any(|k| k == SECCOMP_POD || k.starts_with(SECCOMP_CONTAINER_PREFIX))
    });
    if let Some(security) = spec.security.as_mut() {
        complete_restricted(security, seccomp_annotated, &mut added);
    }
    (Defaulted::completed(spec), added)
}

/// The `restricted` part of [`apply_defaults_at`], on contexts defaulting made present.
fn complete_restricted(
    security: &mut SecuritySpec,
    seccomp_annotated: bool,
    added: &mut Vec<Addition>,
) {
    let path = Path::new("spec").child("security");
    let pod_path = path.child("podSecurityContext");
    let container_path = path.child("containerSecurityContext");
    let pod = security.pod_security_context.get_or_insert_default();
    let container = security.container_security_context.get_or_insert_default();
    let mut add = |field: Path, value: &str| {
        added.push(Addition {
            field,
            value: value.to_string(),
        });
    };

    // `false` beside privilege the API server refuses it with (ValidateSecurityContext).
    let adds_sys_admin = container
        .capabilities
        .as_ref()
        .and_then(|c| c.add.as_deref())
        .is_some_and(|a| a.iter().any(|c| c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN"));
    if container.allow_privilege_escalation.is_none()
        && container.privileged != Some(true)
        && !adds_sys_admin
    {
        container.allow_privilege_escalation = Some(false);
        add(container_path.child("allowPrivilegeEscalation"), "false");
    }
    let capabilities = container.capabilities.get_or_insert_default();
    if capabilities.drop.is_none() {
        capabilities.drop = Some(vec!["ALL".to_string()]);
        add(container_path.child("capabilities").child("drop"), "[ALL]");
    }
    let root = pod.run_as_user == Some(0) || container.run_as_user == Some(0);
    if pod.run_as_non_root.is_none() && container.run_as_non_root.is_none() && !root {
        pod.run_as_non_root = Some(true);
        add(pod_path.child("runAsNonRoot"), "true");
    }
    // The kubelet checks runAsNonRoot against a numeric user, and the
    // memcached and exporter images name theirs (`memcache`, `nobody`):
    // without one it refuses to start the containers.
    let non_root = container.run_as_non_root.or(pod.run_as_non_root) == Some(true);
    if non_root && pod.run_as_user.is_none() && container.run_as_user.is_none() {
        pod.run_as_user = Some(MEMCACHED_UID);
        add(pod_path.child("runAsUser"), &MEMCACHED_UID.to_string());
    }
    if pod.seccomp_profile.is_none() && container.seccomp_profile.is_none() && !seccomp_annotated {
        pod.seccomp_profile = Some(SeccompProfile {
            type_: "RuntimeDefault".to_string(),
            ..Default::default()
        });
        add(
            pod_path.child("seccompProfile").child("type"),
            "RuntimeDefault",
        );
    }
}
