//! A pod's and its containers' security contexts as the API server validates
//! them (`validatePodSpecSecurityContext`, `ValidateSecurityContext` and
//! `validateWindowsHostProcessPod` of `k8s.io/kubernetes/pkg/apis/core/validation`),
//! with its messages. The controller's pods never set `hostUsers`,
//! `hostNetwork` or `os`, so the rules that depend on them take those defaults.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, PodSecurityContext, SeccompProfile, SecurityContext,
    WindowsSecurityContextOptions,
};

use super::names::is_dns1123_subdomain;
use crate::field::{BadValue, ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};

/// Highest user and group ID (`IsValidUserID`, `IsValidGroupID`: 0 to MaxInt32).
pub const MAX_ID: i64 = i32::MAX as i64;
/// `validFSGroupChangePolicies`, sorted as the API server lists them.
pub const FS_GROUP_CHANGE_POLICIES: [&str; 2] = ["Always", "OnRootMismatch"];
/// `validSupplementalGroupsPolicies`.
pub const SUPPLEMENTAL_GROUPS_POLICIES: [&str; 2] = ["Merge", "Strict"];
/// `seLinuxChangePolicy` values a new pod template may take: only `Recursive`
/// while the `SELinuxMount` feature gate is off (its default through 1.36;
/// `MountOption` needs it).
pub const SELINUX_CHANGE_POLICIES: [&str; 1] = ["Recursive"];
/// `ValidateProcMountType`.
pub const PROC_MOUNT_TYPES: [&str; 2] = ["Default", "Unmasked"];
/// Seccomp and AppArmor profile types.
pub const PROFILE_TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];
/// `SysctlMaxLength`.
pub const SYSCTL_MAX_LENGTH: usize = 253;
/// `maxLocalhostProfileLength` of an AppArmor profile (PATH_MAX - 1).
pub const MAX_APPARMOR_PROFILE_LENGTH: usize = 4095;
/// `maxGMSACredentialSpecLength`.
pub const MAX_GMSA_CREDENTIAL_SPEC: usize = 64 * 1024;
/// `maxRunAsUserNameDomainLength` (exclusive) and `maxRunAsUserNameUserLength`.
pub const MAX_RUN_AS_USER_NAME_DOMAIN: usize = 256;
/// Longest user part of `runAsUserName`.
pub const MAX_RUN_AS_USER_NAME_USER: usize = 104;

const SYSCTL_REGEX: &str =
    r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
const HOST_PROCESS_NEEDS_HOST_NETWORK: &str =
    "hostNetwork must be true if pod contains any hostProcess containers";

/// `validatePodSpecSecurityContext`.
pub fn validate_pod_security_context(ctx: &PodSecurityContext, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    errors.extend(validate_id(ctx.fs_group, || path.child("fsGroup")));
    errors.extend(validate_id(ctx.run_as_user, || path.child("runAsUser")));
    errors.extend(validate_id(ctx.run_as_group, || path.child("runAsGroup")));
    let groups = || path.child("supplementalGroups");
    for (i, gid) in ctx.supplemental_groups.iter().flatten().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        errors.extend(validate_id(Some(*gid), || groups().index(i)));
    }
    if ctx.sysctls.is_some() {
        errors.extend(validate_sysctls(ctx, &path.child("sysctls")));
    }
    errors.extend(one_of(
        ctx.fs_group_change_policy.as_deref(),
        &FS_GROUP_CHANGE_POLICIES,
        || path.child("fsGroupChangePolicy"),
    ));
    if ctx.seccomp_profile.is_some() {
        errors.extend(validate_seccomp_profile(
            ctx.seccomp_profile.as_ref(),
            &path.child("seccompProfile"),
        ));
    }
    if ctx.windows_options.is_some() {
        errors.extend(validate_windows_options(
            ctx.windows_options.as_ref(),
            &path.child("windowsOptions"),
        ));
    }
    if ctx.app_armor_profile.is_some() {
        errors.extend(validate_app_armor_profile(
            ctx.app_armor_profile.as_ref(),
            &path.child("appArmorProfile"),
        ));
    }
    errors.extend(one_of(
        ctx.supplemental_groups_policy.as_deref(),
        &SUPPLEMENTAL_GROUPS_POLICIES,
        || path.child("supplementalGroupsPolicy"),
    ));
    errors.extend(one_of(
        ctx.se_linux_change_policy.as_deref(),
        &SELINUX_CHANGE_POLICIES,
        || path.child("seLinuxChangePolicy"),
    ));
    errors
}

/// `ValidateSecurityContext` with `hostUsers` true (the pod does not set it).
pub fn validate_security_context(ctx: &SecurityContext, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    errors.extend(validate_id(ctx.run_as_user, || path.child("runAsUser")));
    errors.extend(validate_id(ctx.run_as_group, || path.child("runAsGroup")));
    if let Some(proc_mount) = ctx.proc_mount.as_deref() {
        let field = path.child("procMount");
        errors.extend(one_of(Some(proc_mount), &PROC_MOUNT_TYPES, || {
            field.clone()
        }));
        if proc_mount == "Unmasked" {
            errors.push(FieldError::invalid(
                field,
                proc_mount,
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    if ctx.seccomp_profile.is_some() {
        errors.extend(validate_seccomp_profile(
            ctx.seccomp_profile.as_ref(),
            &path.child("seccompProfile"),
        ));
    }
    if ctx.allow_privilege_escalation == Some(false) {
        if ctx.privileged == Some(true) {
            errors.push(FieldError::invalid(
                path.clone(),
                BadValue::Raw(go_security_context(ctx)),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let added = ctx.capabilities.as_ref().and_then(|c| c.add.as_deref());
        for _ in added
            .into_iter()
            .flatten()
            .filter(|c| *c == "CAP_SYS_ADMIN")
        {
            errors.push(FieldError::invalid(
                path.clone(),
                BadValue::Raw(go_security_context(ctx)),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
    if ctx.windows_options.is_some() {
        errors.extend(validate_windows_options(
            ctx.windows_options.as_ref(),
            &path.child("windowsOptions"),
        ));
    }
    if ctx.app_armor_profile.is_some() {
        errors.extend(validate_app_armor_profile(
            ctx.app_armor_profile.as_ref(),
            &path.child("appArmorProfile"),
        ));
    }
    errors
}

/// `validateWindowsHostProcessPod` for a pod whose containers all share one
/// security context and whose `hostNetwork` is false.
pub fn validate_host_process(
    pod: Option<&PodSecurityContext>,
    container: Option<&SecurityContext>,
    pod_path: &Path,
    container_path: &Path,
) -> ErrorList {
    let host_process = |w: Option<&WindowsSecurityContextOptions>| w.and_then(|w| w.host_process);
    let pod_value = host_process(pod.and_then(|p| p.windows_options.as_ref()));
    let container_value = host_process(container.and_then(|c| c.windows_options.as_ref()));
    let container_field = container_path.child("windowsOptions").child("hostProcess");
    let mut errors = ErrorList::new();
    if let (Some(p), Some(c)) = (pod_value, container_value)
        && p != c
    {
        errors.push(FieldError::invalid(
            container_field.clone(),
            c,
            format!("pod hostProcess value must be identical if both are specified, was {p}"),
        ));
    }
    let field = match (container_value, pod_value) {
        (Some(true), _) => container_field,
        (None, Some(true)) => pod_path.child("windowsOptions").child("hostProcess"),
        _ => return errors,
    };
    errors.push(FieldError::invalid(
        field,
        true,
        HOST_PROCESS_NEEDS_HOST_NETWORK,
    ));
    errors
}

/// `IsValidUserID` / `IsValidGroupID` of the field at `path` (built only
/// for an error).
fn validate_id(id: Option<i64>, path: impl FnOnce() -> Path) -> Option<FieldError> {
    let id = id.filter(|id| !(0..=MAX_ID).contains(id))?;
    Some(FieldError::invalid(
        path(),
        id,
        format!("must be between 0 and {MAX_ID}, inclusive"),
    ))
}

/// An enum of the API server: `value`, when set, is one of `supported`
/// (the field's `path` is built only for an error).
fn one_of(
    value: Option<&str>,
    supported: &[&str],
    path: impl FnOnce() -> Path,
) -> Option<FieldError> {
    let value = value.filter(|v| !supported.contains(v))?;
    Some(FieldError::not_supported(path(), value, supported))
}

/// `validateSysctls`: valid, distinct names.
fn validate_sysctls(ctx: &PodSecurityContext, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut seen = HashSet::new();
    for (i, sysctl) in ctx.sysctls.iter().flatten().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let field = path.index(i).child("name");
        let name = sysctl.name.as_str();
        if name.is_empty() {
            errors.push(FieldError::required(field, ""));
        } else if !is_sysctl_name(name) {
            errors.push(FieldError::invalid(
                field,
                name,
                format!("must have at most {SYSCTL_MAX_LENGTH} characters and match regex {SYSCTL_REGEX}"),
            ));
        } else if !seen.insert(name) {
            errors.push(FieldError::duplicate(field, name));
        }
    }
    errors
}

/// `IsValidSysctlName`: dot- or slash-separated segments of `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`.
pub fn is_sysctl_name(name: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= SYSCTL_MAX_LENGTH
        && name.split(['.', '/']).all(|segment| {
            let b = segment.as_bytes();
            !b.is_empty()
                && alnum(b[0])
                && alnum(b[b.len() - 1])
                && b.iter().all(|&c| alnum(c) || c == b'-' || c == b'_')
        })
}

/// `validateSeccompProfileField`.
fn validate_seccomp_profile(profile: Option<&SeccompProfile>, path: &Path) -> ErrorList {
    let Some(profile) = profile else {
        return ErrorList::new();
    };
    let mut errors = ErrorList::new();
    let kind = profile.type_.as_str();
    if kind.is_empty() {
        errors.push(FieldError::required(
            path.child("type"),
            "type is required when seccompProfile is set",
        ));
    } else {
        errors.extend(one_of(Some(kind), &PROFILE_TYPES, || path.child("type")));
    }
    let local = path.child("localhostProfile");
    match (kind, profile.localhost_profile.as_deref()) {
        ("Localhost", None) => errors.push(FieldError::required(
            local,
            "must be set when seccomp type is Localhost",
        )),
        ("Localhost", Some(file)) => errors.extend(validate_local_descending_path(file, &local)),
        (_, Some(_)) => errors.push(FieldError::invalid(
            local,
            BadValue::Raw(go_object(&[
                ("Type", go_string(kind)),
                ("LocalhostProfile", go_option(&profile.localhost_profile)),
            ])),
            "can only be set when seccomp type is Localhost",
        )),
        (_, None) => {}
    }
    errors
}

/// `validateLocalDescendingPath`: relative, without `..`.
pub fn validate_local_descending_path(file: &str, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if file.starts_with('/') {
        errors.push(FieldError::invalid(
            path.clone(),
            file,
            "must be a relative path",
        ));
    }
    if file.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(
            path.clone(),
            file,
            "must not contain '..'",
        ));
    }
    errors
}

/// `ValidateAppArmorProfileField`.
fn validate_app_armor_profile(profile: Option<&AppArmorProfile>, path: &Path) -> ErrorList {
    let Some(profile) = profile else {
        return ErrorList::new();
    };
    let local = path.child("localhostProfile");
    let mut errors = ErrorList::new();
    match (profile.type_.as_str(), profile.localhost_profile.as_deref()) {
        ("Localhost", None) => errors.push(FieldError::required(
            local,
            "must be set when AppArmor type is Localhost",
        )),
        ("Localhost", Some(name)) => {
            if name.trim() != name {
                errors.push(FieldError::invalid(
                    local.clone(),
                    name,
                    "must not be padded with whitespace",
                ));
            } else if name.is_empty() {
                errors.push(FieldError::required(
                    local.clone(),
                    "must be set when AppArmor type is Localhost",
                ));
            }
            if name.len() > MAX_APPARMOR_PROFILE_LENGTH {
                errors.push(FieldError::too_long(local, MAX_APPARMOR_PROFILE_LENGTH));
            }
        }
        ("RuntimeDefault" | "Unconfined", Some(name)) => errors.push(FieldError::invalid(
            local,
            name,
            "can only be set when AppArmor type is Localhost",
        )),
        ("RuntimeDefault" | "Unconfined", None) => {}
        ("", _) => errors.push(FieldError::required(
            path.child("type"),
            "type is required when appArmorProfile is set",
        )),
        (other, _) => errors.push(FieldError::not_supported(
            path.child("type"),
            other,
            &PROFILE_TYPES,
        )),
    }
    errors
}

/// `validateWindowsSecurityContextOptions`.
fn validate_windows_options(
    options: Option<&WindowsSecurityContextOptions>,
    path: &Path,
) -> ErrorList {
    let Some(options) = options else {
        return ErrorList::new();
    };
    let mut errors = ErrorList::new();
    if let Some(name) = options.gmsa_credential_spec_name.as_deref() {
        let field = path.child("gmsaCredentialSpecName");
        errors.extend(
            is_dns1123_subdomain(name)
                .into_iter()
                .map(|m| FieldError::invalid(field.clone(), name, m)),
        );
    }
    if let Some(spec) = options.gmsa_credential_spec.as_deref() {
        let detail = if spec.is_empty() {
            Some("gmsaCredentialSpec cannot be an empty string".to_string())
        } else if spec.len() > MAX_GMSA_CREDENTIAL_SPEC {
            Some(format!(
                "gmsaCredentialSpec size must be under {} KiB",
                MAX_GMSA_CREDENTIAL_SPEC / 1024
            ))
        } else {
            None
        };
        errors
            .extend(detail.map(|d| FieldError::invalid(path.child("gmsaCredentialSpec"), spec, d)));
    }
    if let Some(name) = options.run_as_user_name.as_deref() {
        let field = path.child("runAsUserName");
        errors.extend(
            run_as_user_name_errors(name)
                .into_iter()
                .map(|d| FieldError::invalid(field.clone(), name, d)),
        );
    }
    errors
}

/// The messages of `runAsUserName` (`DOMAIN\USER`, the domain optional).
fn run_as_user_name_errors(name: &str) -> Vec<String> {
    if name.is_empty() {
        return vec!["runAsUserName cannot be an empty string".into()];
    }
    if name.chars().any(|c| c.is_ascii_control()) {
        return vec!["runAsUserName cannot contain control characters".into()];
    }
    let parts: Vec<&str> = name.split('\\').collect();
    let (domain, user) = match parts.as_slice() {
        [user] => (None, *user),
        [domain, user] => (Some(*domain), *user),
        _ => return vec!["runAsUserName cannot contain more than one backslash".into()],
    };
    let mut errors = Vec::new();
    if domain.is_some_and(|d| d.len() >= MAX_RUN_AS_USER_NAME_DOMAIN) {
        errors.push(format!(
            "runAsUserName's Domain length must be under {MAX_RUN_AS_USER_NAME_DOMAIN} characters"
        ));
    }
    if domain.is_some_and(|d| !is_netbios_domain(d) && !is_dns_domain(d)) {
        errors.push("runAsUserName's Domain doesn't match the NetBios nor the DNS format".into());
    }
    if user.is_empty() {
        errors.push("runAsUserName's User cannot be empty".into());
    } else if user.len() > MAX_RUN_AS_USER_NAME_USER {
        errors.push(format!(
            "runAsUserName's User length must not be longer than {MAX_RUN_AS_USER_NAME_USER} characters"
        ));
    }
    if !user.is_empty() && user.bytes().all(|b| b == b'.' || b == b' ') {
        errors.push("runAsUserName's User cannot contain only periods or spaces".into());
    }
    if user.contains(|c| r#""/\:;|=,+*?<>@[]"#.contains(c)) {
        errors.push(
            r#"runAsUserName's User cannot contain the following characters: "/\:;|=,+*?<>@[]"#
                .into(),
        );
    }
    errors
}

/// `^[^\\/:\*\?"<>|\.][^\\/:\*\?"<>|]{0,14}$`
fn is_netbios_domain(domain: &str) -> bool {
    let forbidden = |c: char| r#"\/:*?"<>|"#.contains(c);
    let mut chars = domain.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    !forbidden(first)
        && first != '.'
        && domain.chars().count() <= 15
        && chars.all(|c| !forbidden(c))
}

/// Dot-separated `[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?` labels.
fn is_dns_domain(domain: &str) -> bool {
    domain.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    })
}

/// The container context as the API server's `json.Marshal` of its internal
/// `core.SecurityContext` shows it in an error (Go field names, every field).
fn go_security_context(ctx: &SecurityContext) -> String {
    let capabilities = ctx.capabilities.as_ref().map_or_else(
        || "null".to_string(),
        |c| go_object(&[("Add", go_option(&c.add)), ("Drop", go_option(&c.drop))]),
    );
    let se_linux = ctx.se_linux_options.as_ref().map_or_else(
        || "null".to_string(),
        |o| {
            let s = |v: &Option<String>| go_string(v.as_deref().unwrap_or_default());
            go_object(&[
                ("User", s(&o.user)),
                ("Role", s(&o.role)),
                ("Type", s(&o.type_)),
                ("Level", s(&o.level)),
            ])
        },
    );
    let windows = ctx.windows_options.as_ref().map_or_else(
        || "null".to_string(),
        |w| {
            go_object(&[
                (
                    "GMSACredentialSpecName",
                    go_option(&w.gmsa_credential_spec_name),
                ),
                ("GMSACredentialSpec", go_option(&w.gmsa_credential_spec)),
                ("RunAsUserName", go_option(&w.run_as_user_name)),
                ("HostProcess", go_option(&w.host_process)),
            ])
        },
    );
    let profile = |kind: Option<&str>, local: Option<&Option<String>>| match (kind, local) {
        (Some(kind), Some(local)) => go_object(&[
            ("Type", go_string(kind)),
            ("LocalhostProfile", go_option(local)),
        ]),
        _ => "null".to_string(),
    };
    let seccomp = ctx.seccomp_profile.as_ref();
    let app_armor = ctx.app_armor_profile.as_ref();
    go_object(&[
        ("Capabilities", capabilities),
        ("Privileged", go_option(&ctx.privileged)),
        ("SELinuxOptions", se_linux),
        ("WindowsOptions", windows),
        ("RunAsUser", go_option(&ctx.run_as_user)),
        ("RunAsGroup", go_option(&ctx.run_as_group)),
        ("RunAsNonRoot", go_option(&ctx.run_as_non_root)),
        (
            "ReadOnlyRootFilesystem",
            go_option(&ctx.read_only_root_filesystem),
        ),
        (
            "AllowPrivilegeEscalation",
            go_option(&ctx.allow_privilege_escalation),
        ),
        ("ProcMount", go_option(&ctx.proc_mount)),
        (
            "SeccompProfile",
            profile(
                seccomp.map(|p| p.type_.as_str()),
                seccomp.map(|p| &p.localhost_profile),
            ),
        ),
        (
            "AppArmorProfile",
            profile(
                app_armor.map(|p| p.type_.as_str()),
                app_armor.map(|p| &p.localhost_profile),
            ),
        ),
    ])
}

/// `{"Name":value,...}` in the given order.
fn go_object(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("\"{name}\":{value}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn go_option<T: serde::Serialize>(value: &Option<T>) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

fn go_string(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_names() {
        for good in [
            "net.core.somaxconn",
            "kernel.shm_rmid_forced",
            "net/ipv4/ip_local_port_range",
            "a",
        ] {
            assert!(is_sysctl_name(good), "{good}");
        }
        for bad in [
            "bad name",
            "",
            "net..core",
            ".net",
            "net.",
            "Net.core",
            "net.core-",
            &"a".repeat(254),
        ] {
            assert!(!is_sysctl_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_container_context_is_shown_like_the_api_server_shows_it() {
        let ctx: SecurityContext = serde_json::from_value(
            serde_json::json!({"privileged": true, "allowPrivilegeEscalation": false}),
        )
        .unwrap();
        assert_eq!(
            go_security_context(&ctx),
            r#"{"Capabilities":null,"Privileged":true,"SELinuxOptions":null,"WindowsOptions":null,"RunAsUser":null,"RunAsGroup":null,"RunAsNonRoot":null,"ReadOnlyRootFilesystem":null,"AllowPrivilegeEscalation":false,"ProcMount":null,"SeccompProfile":null,"AppArmorProfile":null}"#
        );
    }
}
