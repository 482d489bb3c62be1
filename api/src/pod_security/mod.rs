//! The Pod Security Standards, judged on the pod spec and annotations the
//! controller renders from a spec ([`pod_template::pod_spec`],
//! [`pod_template::annotations`]; Pod Security reads no label) as
//! Kubernetes' Pod Security admission judges pods
//! (k8s.io/pod-security-admission `policy/check_*.go` at v1.36, the version
//! `latest` means there), with its reasons and details.
//!
//! Each violation names the field of the Memcached to change: the pod's
//! security context is `spec.security.podSecurityContext`, every
//! container's is `spec.security.containerSecurityContext`, the pod's
//! annotations are `spec.podAnnotations`; what the spec cannot set (host
//! namespaces, ports and paths, volume types, probe hosts) is the
//! operator's own doing and names `spec`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::defaults::Defaulted;
use crate::field::Path;
use crate::render::args::AUTH_FILE;
use crate::render::{Instance, pod_template};

mod checks;
pub mod completion;
mod host;
mod level;
mod pod;

pub use level::{ENFORCE_LABEL, Level};
use pod::Pod;
pub use pod::Violation;

/// Every check of `level` the pods rendered from the defaulted `spec` fail,
/// in Pod Security admission's order (baseline checks, then restricted
/// ones, each by its id).
pub fn check(spec: &Defaulted, level: Level, path: &Path) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let metadata = ObjectMeta::default();
    let instance = Instance {
        metadata: &metadata,
        spec,
    };
    let pod = pod_template::pod_spec(instance, spec, AUTH_FILE);
    let annotations = pod_template::annotations(instance, spec, None);
    let security_path = path.child("security");
    let pod = Pod {
        spec: &pod,
        annotations: Some(&annotations),
        spec_path: path.clone(),
        pod_path: security_path.child("podSecurityContext"),
        container_path: security_path.child("containerSecurityContext"),
        annotations_path: path.child("podAnnotations"),
    };
    checks::of(level)
        .into_iter()
        .filter_map(|check| check(&pod))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply_defaults;
    use serde_json::{Value, json};

    fn judged(spec: Value, level: Level) -> Vec<String> {
        let spec = apply_defaults(serde_json::from_value(spec).unwrap());
        check(&spec, level, &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_defaults_meet_restricted() {
        assert!(judged(json!({}), Level::Restricted).is_empty());
        assert!(judged(json!({"monitoring": {"enabled": true}}), Level::Restricted).is_empty());
    }

    #[test]
    fn privileged_judges_nothing() {
        let spec = json!({"security": {"containerSecurityContext": {"privileged": true}}});
        assert!(judged(spec, Level::Privileged).is_empty());
    }

    #[test]
    fn an_empty_container_context_fails_restricted_but_meets_baseline() {
        let spec =
            json!({"monitoring": {"enabled": true}, "security": {"containerSecurityContext": {}}});
        assert!(judged(spec.clone(), Level::Baseline).is_empty());
        assert_eq!(
            judged(spec, Level::Restricted),
            [
                "spec.security.containerSecurityContext.allowPrivilegeEscalation: allowPrivilegeEscalation != false \
                 (containers \"memcached\", \"exporter\" must set securityContext.allowPrivilegeEscalation=false)",
                "spec.security.containerSecurityContext.capabilities.drop: unrestricted capabilities \
                 (containers \"memcached\", \"exporter\" must set securityContext.capabilities.drop=[\"ALL\"])",
            ]
        );
    }

    #[test]
    fn baseline_refuses_privilege_in_pod_security_admissions_words() {
        let spec = json!({
            "podAnnotations": {"container.apparmor.security.beta.kubernetes.io/memcached": "unconfined"},
            "security": {
                "podSecurityContext": {"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
                                       "seLinuxOptions": {"user": "system_u"}},
                "containerSecurityContext": {
                    "privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_ADMIN"]},
                    "procMount": "Unmasked", "seccompProfile": {"type": "Unconfined"},
                    "windowsOptions": {"hostProcess": true}}}});
        assert_eq!(
            judged(spec, Level::Baseline),
            [
                "spec.podAnnotations[container.apparmor.security.beta.kubernetes.io/memcached]: forbidden AppArmor \
                 profile (annotation must not set AppArmor profile type to \
                 \"container.apparmor.security.beta.kubernetes.io/memcached=\"unconfined\"\")",
                "spec.security.containerSecurityContext.capabilities.add: non-default capabilities (container \
                 \"memcached\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
                "spec.security.containerSecurityContext.privileged: privileged (container \"memcached\" must not \
                 set securityContext.privileged=true)",
                "spec.security.containerSecurityContext.procMount: procMount (container \"memcached\" must not set \
                 securityContext.procMount to \"Unmasked\")",
                "spec.security.podSecurityContext.seLinuxOptions: seLinuxOptions (pod set forbidden \
                 securityContext.seLinuxOptions: user may not be set)",
                "spec.security.containerSecurityContext.seccompProfile.type: seccompProfile (container \"memcached\" \
                 must not set securityContext.seccompProfile.type to \"Unconfined\")",
                "spec.security.podSecurityContext.sysctls: forbidden sysctls (net.core.somaxconn)",
                "spec.security.containerSecurityContext.windowsOptions.hostProcess: hostProcess (container \
                 \"memcached\" must not set securityContext.windowsOptions.hostProcess=true)",
            ]
        );
    }

    #[test]
    fn restricted_refuses_root_and_missing_settings() {
        let spec = json!({"security": {
            "podSecurityContext": {"runAsUser": 0},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": false,
                                         "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "CHOWN"]}}}});
        assert_eq!(
            judged(spec, Level::Restricted),
            [
                "spec.security.containerSecurityContext.capabilities.add: unrestricted capabilities (container \
                 \"memcached\" must not include \"CHOWN\" in securityContext.capabilities.add)",
                "spec.security.containerSecurityContext.runAsNonRoot: runAsNonRoot != true (container \"memcached\" \
                 must not set securityContext.runAsNonRoot=false)",
                "spec.security.podSecurityContext.runAsUser: runAsUser=0 (pod must not set runAsUser=0)",
                "spec.security.podSecurityContext.seccompProfile: seccompProfile (pod or container \"memcached\" \
                 must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")",
            ]
        );
    }

    #[test]
    fn restricted_accepts_settings_on_the_container_instead_of_the_pod() {
        let spec = json!({"security": {
            "podSecurityContext": {},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
                                         "seccompProfile": {"type": "Localhost", "localhostProfile": "m.json"},
                                         "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}});
        assert!(judged(spec, Level::Restricted).is_empty());
    }

    #[test]
    fn unreadable_labels_enforce_restricted_as_pod_security_admission_does() {
        assert_eq!(Level::from_label("baseline"), Level::Baseline);
        assert_eq!(Level::from_label("privileged"), Level::Privileged);
        assert_eq!(Level::from_label("Baseline"), Level::Restricted);
        assert!(Level::Privileged < Level::Baseline && Level::Baseline < Level::Restricted);
    }
}
