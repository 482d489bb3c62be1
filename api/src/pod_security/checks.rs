//! Pod Security admission's checks (`policy/check_*.go`), each on the
//! rendered pod: its containers one by one, as Pod Security admission
//! visits them, and the pod.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, SeccompProfile, SecurityContext, WindowsSecurityContextOptions,
};

use crate::kubernetes::pod_annotations::APPARMOR_CONTAINER_PREFIX;
use crate::pod_security::host::{
    host_namespaces, host_path_volumes, host_ports, host_probes_and_lifecycle, restricted_volumes,
};
use crate::pod_security::level::Level;
use crate::pod_security::pod::{Pod, Setters, Violation, join_quote, named, pluralize, violation};

/// One of Pod Security admission's checks.
pub(super) type Check = fn(&Pod) -> Option<Violation>;

/// The checks of `level`, in Pod Security admission's order: baseline's,
/// then restricted's, each by its id; a restricted check replaces the
/// baseline check it overrides.
pub(super) fn of(level: Level) -> Vec<Check> {
    let restricted = level == Level::Restricted;
    let checks: [Option<Check>; 19] = [
        Some(app_armor_profile),
        (!restricted).then_some(capabilities_baseline),
        Some(host_namespaces),
        (!restricted).then_some(host_path_volumes),
        Some(host_ports),
        Some(host_probes_and_lifecycle),
        Some(privileged),
        (!restricted).then_some(proc_mount),
        Some(se_linux_options),
        (!restricted).then_some(seccomp_profile_baseline),
        Some(sysctls),
        Some(windows_host_process),
        restricted.then_some(allow_privilege_escalation),
        restricted.then_some(capabilities_restricted),
        restricted.then_some(proc_mount),
        restricted.then_some(restricted_volumes),
        restricted.then_some(run_as_non_root),
        restricted.then_some(run_as_user),
        restricted.then_some(seccomp_profile_restricted),
    ];
    checks.into_iter().flatten().collect()
}

/// appArmorProfile: only RuntimeDefault or Localhost, in fields and annotations.
fn app_armor_profile(p: &Pod) -> Option<Violation> {
    let allowed_type = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut setters = Setters::default();
    let mut values = BTreeSet::new();
    if let Some(profile) = p.context().and_then(|c| c.app_armor_profile.as_ref())
        && !allowed_type(&profile.type_)
    {
        setters.add("pod".into(), p.pod_path.child("appArmorProfile"));
        values.insert(profile.type_.clone());
    }
    fn profile(c: Option<&SecurityContext>) -> Option<&AppArmorProfile> {
        c.and_then(|c| c.app_armor_profile.as_ref())
    }
    if let Some(names) = p.containers_where(|c| profile(c).is_some_and(|p| !allowed_type(&p.type_)))
    {
        setters.add(names, p.container_field("appArmorProfile"));
        for container in p.containers() {
            if let Some(profile) = profile(container.security_context.as_ref())
                && !allowed_type(&profile.type_)
            {
                values.insert(profile.type_.clone());
            }
        }
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

fn added_capabilities(c: Option<&SecurityContext>) -> &[String] {
    c.and_then(|c| c.capabilities.as_ref())
        .and_then(|c| c.add.as_deref())
        .unwrap_or_default()
}

/// The capabilities the containers add that `allowed` refuses, and which
/// containers add them.
fn forbidden_capabilities(p: &Pod, allowed: impl Fn(&str) -> bool) -> Option<(String, String)> {
    let forbidden = |c: Option<&SecurityContext>| {
        let added = added_capabilities(c).iter();
        added
            .filter(|c| !allowed(c))
            .cloned()
            .collect::<BTreeSet<String>>()
    };
    let names = p.containers_where(|c| !forbidden(c).is_empty())?;
    let all: BTreeSet<String> = (p.containers())
        .flat_map(|c| forbidden(c.security_context.as_ref()))
        .collect();
    let all: Vec<String> = all.into_iter().collect();
    Some((names, join_quote(&all)))
}

/// capabilities_baseline: add nothing beyond the default set.
fn capabilities_baseline(p: &Pod) -> Option<Violation> {
    let (names, extra) = forbidden_capabilities(p, |c| BASELINE_CAPABILITIES.contains(&c))?;
    violation(
        p.container_field("capabilities").child("add"),
        "non-default capabilities",
        format!("{names} must not include {extra} in securityContext.capabilities.add"),
    )
}

/// capabilities_restricted: drop ALL, add at most NET_BIND_SERVICE.
fn capabilities_restricted(p: &Pod) -> Option<Violation> {
    let drops_all = |c: Option<&SecurityContext>| {
        (c.and_then(|c| c.capabilities.as_ref()))
            .and_then(|c| c.drop.as_deref())
            .is_some_and(|d| d.iter().any(|c| c == "ALL"))
    };
    let missing_drop = p.containers_where(|c| !drops_all(c));
    let forbidden = forbidden_capabilities(p, |c| c == "NET_BIND_SERVICE");
    let mut details = Vec::new();
    if let Some(names) = &missing_drop {
        details.push(format!(
            "{names} must set securityContext.capabilities.drop=[\"ALL\"]"
        ));
    }
    if let Some((names, forbidden)) = &forbidden {
        details.push(format!(
            "{names} must not include {forbidden} in securityContext.capabilities.add"
        ));
    }
    if details.is_empty() {
        return None;
    }
    let field = if missing_drop.is_none() {
        "add"
    } else {
        "drop"
    };
    violation(
        p.container_field("capabilities").child(field),
        "unrestricted capabilities",
        details.join("; "),
    )
}

/// privileged: never.
fn privileged(p: &Pod) -> Option<Violation> {
    let names = p.containers_where(|c| c.and_then(|c| c.privileged) == Some(true))?;
    violation(
        p.container_field("privileged"),
        "privileged",
        format!("{names} must not set securityContext.privileged=true"),
    )
}

/// procMount (baseline, and restricted since v1.35): the default /proc
/// masks, unless the pod runs in a user namespace.
fn proc_mount(p: &Pod) -> Option<Violation> {
    if p.spec.host_users == Some(false) {
        return None;
    }
    let mount = |c: Option<&SecurityContext>| {
        c.and_then(|c| c.proc_mount.clone())
            .filter(|m| m != "Default")
    };
    let names = p.containers_where(|c| mount(c).is_some())?;
    let mounts: BTreeSet<String> = (p.containers())
        .filter_map(|c| mount(c.security_context.as_ref()))
        .collect();
    let mounts: Vec<String> = mounts.into_iter().collect();
    violation(
        p.container_field("procMount"),
        "procMount",
        format!(
            "{names} must not set securityContext.procMount to {}",
            join_quote(&mounts)
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
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |options: &k8s_openapi::api::core::v1::SELinuxOptions| {
        let kind = options.type_.as_deref().unwrap_or_default();
        let user = options.user.as_deref().is_some_and(|u| !u.is_empty());
        let role = options.role.as_deref().is_some_and(|r| !r.is_empty());
        if !ALLOWED_TYPES.contains(&kind) {
            bad_types.insert(kind.to_string());
        }
        set_user |= user;
        set_role |= role;
        ALLOWED_TYPES.contains(&kind) && !user && !role
    };
    let mut setters = Setters::default();
    if let Some(options) = p.context().and_then(|c| c.se_linux_options.as_ref())
        && !valid(options)
    {
        setters.add("pod".into(), p.pod_path.child("seLinuxOptions"));
    }
    let bad: Vec<&str> = (p.containers())
        .filter(|c| {
            let options = c.security_context.as_ref();
            options
                .and_then(|c| c.se_linux_options.as_ref())
                .is_some_and(|o| !valid(o))
        })
        .map(|c| c.name.as_str())
        .collect();
    if !bad.is_empty() {
        setters.add(
            named("container", "containers", &bad),
            p.container_field("seLinuxOptions"),
        );
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

fn seccomp(c: Option<&SecurityContext>) -> Option<&SeccompProfile> {
    c.and_then(|c| c.seccomp_profile.as_ref())
}

/// The explicitly set seccomp types outside RuntimeDefault and Localhost,
/// and who sets them.
fn forbidden_seccomp(p: &Pod) -> (Setters, Vec<String>) {
    let mut setters = Setters::default();
    let mut values = BTreeSet::new();
    if let Some(profile) = p.context().and_then(|c| c.seccomp_profile.as_ref())
        && !allowed_seccomp(&profile.type_)
    {
        setters.add(
            "pod".into(),
            p.pod_path.child("seccompProfile").child("type"),
        );
        values.insert(profile.type_.clone());
    }
    fn forbidden(c: Option<&SecurityContext>) -> Option<&SeccompProfile> {
        seccomp(c).filter(|p| !allowed_seccomp(&p.type_))
    }
    if let Some(names) = p.containers_where(|c| forbidden(c).is_some()) {
        setters.add(names, p.container_field("seccompProfile").child("type"));
        for container in p.containers() {
            if let Some(profile) = forbidden(container.security_context.as_ref()) {
                values.insert(profile.type_.clone());
            }
        }
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
    if p.context()
        .and_then(|c| c.seccomp_profile.as_ref())
        .is_some()
    {
        return None;
    }
    let names = p.containers_where(|c| seccomp(c).is_none())?;
    violation(
        p.pod_path.child("seccompProfile"),
        "seccompProfile",
        format!(
            "pod or {names} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
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
    let sysctls = (p.context().and_then(|c| c.sysctls.as_deref())).unwrap_or_default();
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
    let host_process = |options: Option<&WindowsSecurityContextOptions>| {
        options.and_then(|o| o.host_process) == Some(true)
    };
    let mut setters = Setters::default();
    if host_process(p.context().and_then(|c| c.windows_options.as_ref())) {
        setters.add(
            "pod".into(),
            p.pod_path.child("windowsOptions").child("hostProcess"),
        );
    }
    if let Some(names) =
        p.containers_where(|c| host_process(c.and_then(|c| c.windows_options.as_ref())))
    {
        setters.add(
            names,
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
    let names =
        p.containers_where(|c| c.and_then(|c| c.allow_privilege_escalation) != Some(false))?;
    violation(
        p.container_field("allowPrivilegeEscalation"),
        "allowPrivilegeEscalation != false",
        format!("{names} must set securityContext.allowPrivilegeEscalation=false"),
    )
}

/// runAsNonRoot: true on the pod or every container, false nowhere (a pod
/// in a user namespace aside).
fn run_as_non_root(p: &Pod) -> Option<Violation> {
    if p.spec.host_users == Some(false) {
        return None;
    }
    let pod = p.context().and_then(|c| c.run_as_non_root);
    let container = |c: Option<&SecurityContext>| c.and_then(|c| c.run_as_non_root);
    let mut setters = Setters::default();
    if pod == Some(false) {
        setters.add("pod".into(), p.pod_path.child("runAsNonRoot"));
    }
    if let Some(names) = p.containers_where(|c| container(c) == Some(false)) {
        setters.add(names, p.container_field("runAsNonRoot"));
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
    if pod == Some(true) {
        return None;
    }
    let names = p.containers_where(|c| container(c).is_none())?;
    violation(
        p.pod_path.child("runAsNonRoot"),
        "runAsNonRoot != true",
        format!("pod or {names} must set securityContext.runAsNonRoot=true"),
    )
}

/// runAsUser: never 0 (a pod in a user namespace aside).
fn run_as_user(p: &Pod) -> Option<Violation> {
    if p.spec.host_users == Some(false) {
        return None;
    }
    let mut setters = Setters::default();
    if p.context().and_then(|c| c.run_as_user) == Some(0) {
        setters.add("pod".into(), p.pod_path.child("runAsUser"));
    }
    if let Some(names) = p.containers_where(|c| c.and_then(|c| c.run_as_user) == Some(0)) {
        setters.add(names, p.container_field("runAsUser"));
    }
    let path = setters.first_path.clone()?;
    violation(
        path,
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.joined()),
    )
}
