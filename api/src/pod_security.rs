//! The Pod Security Standards, judged on the pods the controller builds from a
//! spec as Kubernetes' Pod Security admission judges pods
//! (k8s.io/pod-security-admission `policy/check_*.go` at v1.36, the version
//! `latest` means there), with its reasons and details.
//!
//! Those pods carry the spec's pod security context, the spec's container
//! security context on every container (memcached, and the exporter with
//! monitoring on) and `spec.podAnnotations`; they mount Secrets only and never
//! use host namespaces, host ports, host paths, probe hosts or `hostUsers`, so
//! the checks of those can never fail here and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{PodSecurityContext, SecurityContext};
use serde::Deserialize;

use crate::field::Path;
use crate::kubernetes::pod_annotations::APPARMOR_CONTAINER_PREFIX;
use crate::pod;
use crate::types::MemcachedSpec;

/// The namespace label that sets the level Pod Security admission enforces.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// A Pod Security Standards level, least strict first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// No known privilege escalation.
    Baseline,
    /// Hardened: what the operator's defaults meet.
    #[default]
    Restricted,
}

impl Level {
    /// The level's name, as in labels and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// The level an `enforce` label value sets; like Pod Security admission,
    /// a value it cannot read enforces `restricted`.
    pub fn from_label(value: &str) -> Level {
        match value {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            _ => Level::Restricted,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed check: the spec field that fails it, and Pod Security
/// admission's reason and detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The field of the Memcached to change.
    pub path: Path,
    /// Pod Security admission's reason, e.g. `privileged`.
    pub reason: String,
    /// Pod Security admission's detail, e.g. `container "memcached" must not set ...`.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.path, self.reason, self.detail)
    }
}

/// Every check of `level` the pods built from the defaulted `spec` fail, in
/// Pod Security admission's order (baseline checks, then restricted ones).
pub fn check(spec: &MemcachedSpec, level: Level, path: &Path) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let security = spec.security.as_ref();
    let security_path = path.child("security");
    let pod = Pod {
        pod: security.and_then(|s| s.pod_security_context.as_ref()),
        container: security.and_then(|s| s.container_security_context.as_ref()),
        containers: pod::containers(spec),
        annotations: spec.pod_annotations.as_ref(),
        pod_path: security_path.child("podSecurityContext"),
        container_path: security_path.child("containerSecurityContext"),
        annotations_path: path.child("podAnnotations"),
    };
    let restricted = level == Level::Restricted;
    let checks: [Option<Check>; 14] = [
        Some(app_armor_profile),
        (!restricted).then_some(capabilities_baseline),
        Some(privileged),
        (!restricted).then_some(proc_mount),
        Some(se_linux_options),
        (!restricted).then_some(seccomp_profile_baseline),
        Some(sysctls),
        Some(windows_host_process),
        restricted.then_some(allow_privilege_escalation),
        restricted.then_some(capabilities_restricted),
        restricted.then_some(proc_mount),
        restricted.then_some(run_as_non_root),
        restricted.then_some(run_as_user),
        restricted.then_some(seccomp_profile_restricted),
    ];
    checks
        .into_iter()
        .flatten()
        .filter_map(|c| c(&pod))
        .collect()
}

/// One of Pod Security admission's checks.
type Check = fn(&Pod) -> Option<Violation>;

/// The security-relevant parts of the pods, and where the spec sets them.
struct Pod<'a> {
    pod: Option<&'a PodSecurityContext>,
    /// The one security context every container gets.
    container: Option<&'a SecurityContext>,
    containers: &'static [&'static str],
    annotations: Option<&'a BTreeMap<String, String>>,
    pod_path: Path,
    container_path: Path,
    annotations_path: Path,
}

impl Pod<'_> {
    /// `container "memcached"` or `containers "memcached", "exporter"`.
    fn containers(&self) -> String {
        let noun = if self.containers.len() == 1 {
            "container"
        } else {
            "containers"
        };
        format!("{noun} {}", join_quote(self.containers))
    }

    /// A field of the container security context.
    fn container_field(&self, field: &str) -> Path {
        self.container_path.child(field)
    }
}

fn violation(path: Path, reason: &str, detail: String) -> Option<Violation> {
    Some(Violation {
        path,
        reason: reason.to_string(),
        detail,
    })
}

/// `"a", "b"` (Go's `joinQuote`).
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    quoted.join(", ")
}

fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// Who sets a forbidden value, for details like `pod and container "x" must not ...`.
#[derive(Default)]
struct Setters {
    names: Vec<String>,
    first_path: Option<Path>,
}

impl Setters {
    fn add(&mut self, name: String, path: Path) {
        self.names.push(name);
        self.first_path.get_or_insert(path);
    }

    fn joined(&self) -> String {
        self.names.join(" and ")
    }
}

/// appArmorProfile: only RuntimeDefault or Localhost, in fields and annotations.
fn app_armor_profile(p: &Pod) -> Option<Violation> {
    let allowed_type = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut setters = Setters::default();
    let mut values = BTreeSet::new();
    if let Some(profile) = p.pod.and_then(|c| c.app_armor_profile.as_ref())
        && !allowed_type(&profile.type_)
    {
        setters.add("pod".into(), p.pod_path.child("appArmorProfile"));
        values.insert(profile.type_.clone());
    }
    if let Some(profile) = p.container.and_then(|c| c.app_armor_profile.as_ref())
        && !allowed_type(&profile.type_)
    {
        setters.add(p.containers(), p.container_field("appArmorProfile"));
        values.insert(profile.type_.clone());
    }
    let mut values: Vec<String> = values.into_iter().collect();
    let forbidden: Vec<(&String, &String)> = p
        .annotations
        .into_iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_CONTAINER_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .collect();
    if let Some((first, _)) = forbidden.first() {
        let noun = pluralize("annotation", "annotations", forbidden.len());
        setters.add(noun.into(), p.annotations_path.key(first));
        values.extend(forbidden.iter().map(|(k, v)| format!("{k}={v:?}")));
    }
    let path = setters.first_path.clone()?;
    let reason = pluralize(
        "forbidden AppArmor profile",
        "forbidden AppArmor profiles",
        values.len(),
    );
    violation(
        path,
        reason,
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.joined(),
            join_quote(&values)
        ),
    )
}

/// The capabilities baseline allows adding (Docker's default set).
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn added_capabilities<'a>(p: &Pod<'a>) -> &'a [String] {
    p.container
        .and_then(|c| c.capabilities.as_ref())
        .and_then(|c| c.add.as_deref())
        .unwrap_or_default()
}

/// capabilities_baseline: add nothing beyond the default set.
fn capabilities_baseline(p: &Pod) -> Option<Violation> {
    let extra: BTreeSet<&String> = added_capabilities(p)
        .iter()
        .filter(|c| !BASELINE_CAPABILITIES.contains(&c.as_str()))
        .collect();
    if extra.is_empty() {
        return None;
    }
    let extra: Vec<&String> = extra.into_iter().collect();
    violation(
        p.container_field("capabilities").child("add"),
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            p.containers(),
            join_quote(&extra)
        ),
    )
}

/// capabilities_restricted: drop ALL, add at most NET_BIND_SERVICE.
fn capabilities_restricted(p: &Pod) -> Option<Violation> {
    let capabilities = p.container.and_then(|c| c.capabilities.as_ref());
    let drops_all = capabilities
        .and_then(|c| c.drop.as_deref())
        .is_some_and(|d| d.iter().any(|c| c == "ALL"));
    let forbidden: BTreeSet<&String> = added_capabilities(p)
        .iter()
        .filter(|c| *c != "NET_BIND_SERVICE")
        .collect();
    let mut details = Vec::new();
    if !drops_all {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            p.containers()
        ));
    }
    if !forbidden.is_empty() {
        let forbidden: Vec<&String> = forbidden.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            p.containers(),
            join_quote(&forbidden)
        ));
    }
    if details.is_empty() {
        return None;
    }
    let field = if drops_all { "add" } else { "drop" };
    violation(
        p.container_field("capabilities").child(field),
        "unrestricted capabilities",
        details.join("; "),
    )
}

/// privileged: never.
fn privileged(p: &Pod) -> Option<Violation> {
    if p.container.and_then(|c| c.privileged) != Some(true) {
        return None;
    }
    violation(
        p.container_field("privileged"),
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            p.containers()
        ),
    )
}

/// procMount (baseline, and restricted since v1.35): the default /proc masks.
fn proc_mount(p: &Pod) -> Option<Violation> {
    let mount = p.container.and_then(|c| c.proc_mount.as_ref())?;
    if mount == "Default" {
        return None;
    }
    violation(
        p.container_field("procMount"),
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            p.containers(),
            join_quote(&[mount])
        ),
    )
}

/// seLinuxOptions: a container type at most; no user, no role.
fn se_linux_options(p: &Pod) -> Option<Violation> {
    const ALLOWED_TYPES: [&str; 5] = [
        "",
        "container_t",
        "container_init_t",
        "container_kvm_t",
        "container_engine_t",
    ];
    let mut setters = Setters::default();
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let pod = p.pod.and_then(|c| c.se_linux_options.as_ref());
    let container = p.container.and_then(|c| c.se_linux_options.as_ref());
    for (options, name, path) in [
        (pod, "pod".to_string(), p.pod_path.child("seLinuxOptions")),
        (
            container,
            p.containers(),
            p.container_field("seLinuxOptions"),
        ),
    ] {
        let Some(options) = options else { continue };
        let kind = options.type_.as_deref().unwrap_or_default();
        let user = options.user.as_deref().is_some_and(|u| !u.is_empty());
        let role = options.role.as_deref().is_some_and(|r| !r.is_empty());
        if !ALLOWED_TYPES.contains(&kind) {
            bad_types.insert(kind.to_string());
        }
        set_user |= user;
        set_role |= role;
        if !ALLOWED_TYPES.contains(&kind) || user || role {
            setters.add(name, path);
        }
    }
    let path = setters.first_path.clone()?;
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        let types: Vec<String> = bad_types.into_iter().collect();
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if set_user {
        data.push("user may not be set".to_string());
    }
    if set_role {
        data.push("role may not be set".to_string());
    }
    violation(
        path,
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.joined(),
            data.join("; ")
        ),
    )
}

fn allowed_seccomp(kind: &str) -> bool {
    matches!(kind, "RuntimeDefault" | "Localhost")
}

/// The explicitly set seccomp types outside RuntimeDefault and Localhost,
/// and who sets them.
fn forbidden_seccomp(p: &Pod) -> (Setters, Vec<String>) {
    let mut setters = Setters::default();
    let mut values = BTreeSet::new();
    if let Some(profile) = p.pod.and_then(|c| c.seccomp_profile.as_ref())
        && !allowed_seccomp(&profile.type_)
    {
        setters.add(
            "pod".into(),
            p.pod_path.child("seccompProfile").child("type"),
        );
        values.insert(profile.type_.clone());
    }
    if let Some(profile) = p.container.and_then(|c| c.seccomp_profile.as_ref())
        && !allowed_seccomp(&profile.type_)
    {
        setters.add(
            p.containers(),
            p.container_field("seccompProfile").child("type"),
        );
        values.insert(profile.type_.clone());
    }
    (setters, values.into_iter().collect())
}

fn seccomp_violation(setters: Setters, values: &[String]) -> Option<Violation> {
    let path = setters.first_path.clone()?;
    violation(
        path,
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.joined(),
            join_quote(values)
        ),
    )
}

/// seccompProfile_baseline: if set, RuntimeDefault or Localhost.
fn seccomp_profile_baseline(p: &Pod) -> Option<Violation> {
    let (setters, values) = forbidden_seccomp(p);
    seccomp_violation(setters, &values)
}

/// seccompProfile_restricted: RuntimeDefault or Localhost, set on the pod or every container.
fn seccomp_profile_restricted(p: &Pod) -> Option<Violation> {
    let (setters, values) = forbidden_seccomp(p);
    if !setters.names.is_empty() {
        return seccomp_violation(setters, &values);
    }
    let set = |profile: Option<&k8s_openapi::api::core::v1::SeccompProfile>| profile.is_some();
    if set(p.pod.and_then(|c| c.seccomp_profile.as_ref()))
        || set(p.container.and_then(|c| c.seccomp_profile.as_ref()))
    {
        return None;
    }
    violation(
        p.pod_path.child("seccompProfile"),
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            p.containers()
        ),
    )
}

/// The sysctls baseline allows (namespaced and isolated), as of v1.32.
const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// sysctls: the safe set only.
fn sysctls(p: &Pod) -> Option<Violation> {
    let sysctls = p.pod.and_then(|c| c.sysctls.as_deref()).unwrap_or_default();
    let forbidden: Vec<&str> = sysctls
        .iter()
        .map(|s| s.name.as_str())
        .filter(|name| !SAFE_SYSCTLS.contains(name))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    violation(
        p.pod_path.child("sysctls"),
        "forbidden sysctls",
        forbidden.join(", "),
    )
}

/// windowsHostProcess: never.
fn windows_host_process(p: &Pod) -> Option<Violation> {
    let host_process = |options: Option<
        &k8s_openapi::api::core::v1::WindowsSecurityContextOptions,
    >| { options.and_then(|o| o.host_process) == Some(true) };
    let mut setters = Setters::default();
    if host_process(p.pod.and_then(|c| c.windows_options.as_ref())) {
        setters.add(
            "pod".into(),
            p.pod_path.child("windowsOptions").child("hostProcess"),
        );
    }
    if host_process(p.container.and_then(|c| c.windows_options.as_ref())) {
        setters.add(
            p.containers(),
            p.container_field("windowsOptions").child("hostProcess"),
        );
    }
    let path = setters.first_path.clone()?;
    violation(
        path,
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.joined()
        ),
    )
}

/// allowPrivilegeEscalation: explicitly false.
fn allow_privilege_escalation(p: &Pod) -> Option<Violation> {
    if p.container.and_then(|c| c.allow_privilege_escalation) == Some(false) {
        return None;
    }
    violation(
        p.container_field("allowPrivilegeEscalation"),
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            p.containers()
        ),
    )
}

/// runAsNonRoot: true on the pod or every container, false nowhere.
fn run_as_non_root(p: &Pod) -> Option<Violation> {
    let pod = p.pod.and_then(|c| c.run_as_non_root);
    let container = p.container.and_then(|c| c.run_as_non_root);
    let mut setters = Setters::default();
    if pod == Some(false) {
        setters.add("pod".into(), p.pod_path.child("runAsNonRoot"));
    }
    if container == Some(false) {
        setters.add(p.containers(), p.container_field("runAsNonRoot"));
    }
    if let Some(path) = setters.first_path.clone() {
        return violation(
            path,
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.joined()
            ),
        );
    }
    if pod == Some(true) || container == Some(true) {
        return None;
    }
    violation(
        p.pod_path.child("runAsNonRoot"),
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            p.containers()
        ),
    )
}

/// runAsUser: never 0.
fn run_as_user(p: &Pod) -> Option<Violation> {
    let mut setters = Setters::default();
    if p.pod.and_then(|c| c.run_as_user) == Some(0) {
        setters.add("pod".into(), p.pod_path.child("runAsUser"));
    }
    if p.container.and_then(|c| c.run_as_user) == Some(0) {
        setters.add(p.containers(), p.container_field("runAsUser"));
    }
    let path = setters.first_path.clone()?;
    violation(
        path,
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.joined()),
    )
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
