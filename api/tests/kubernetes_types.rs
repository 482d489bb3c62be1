//! The Kubernetes types the spec embeds, refused exactly where the API server
//! refuses them in the objects the controller builds, with its messages; and
//! accepted just inside every bound.

use serde_json::json;
use test_support::spec::errors;

/// `name: spec => [every error]`: one named test per case.
macro_rules! cases {
    ($($name:ident: $spec:expr => [$($error:expr),* $(,)?];)*) => {$(
        #[test]
        fn $name() {
            let expected: Vec<String> = vec![$($error.to_string()),*];
            assert_eq!(errors($spec), expected);
        }
    )*};
}

fn pod(context: serde_json::Value) -> serde_json::Value {
    json!({"security": {"podSecurityContext": context}})
}

fn container(context: serde_json::Value) -> serde_json::Value {
    json!({"security": {"containerSecurityContext": context}})
}

fn resources(resources: serde_json::Value) -> serde_json::Value {
    json!({"resources": resources})
}

fn sources(peers: serde_json::Value) -> serde_json::Value {
    json!({"networkPolicy": {"enabled": true, "allowedSources": peers}})
}

fn autoscaling(extra: serde_json::Value) -> serde_json::Value {
    let mut autoscaling = json!({"enabled": true, "maxReplicas": 3});
    autoscaling
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    json!({"resources": {"requests": {"cpu": "100m"}}, "autoscaling": autoscaling})
}

const P: &str = "spec.security.podSecurityContext";
const C: &str = "spec.security.containerSecurityContext";
const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";

cases! {
    // PodSecurityContext: IDs are 0..=MaxInt32.
    pod_ids_at_the_bounds: pod(json!({"runAsUser": 0, "runAsGroup": 2147483647, "fsGroup": 0, "supplementalGroups": [0, 2147483647]})) => [];
    pod_run_as_user_negative: pod(json!({"runAsUser": -1})) => [format!("{P}.runAsUser: Invalid value: -1: {ID_RANGE}")];
    pod_run_as_group_too_large: pod(json!({"runAsGroup": 2147483648_i64})) => [format!("{P}.runAsGroup: Invalid value: 2147483648: {ID_RANGE}")];
    pod_fs_group_negative: pod(json!({"fsGroup": -1})) => [format!("{P}.fsGroup: Invalid value: -1: {ID_RANGE}")];
    pod_supplemental_group_negative: pod(json!({"supplementalGroups": [1, -1]})) => [format!("{P}.supplementalGroups[1]: Invalid value: -1: {ID_RANGE}")];
    // Sysctls.
    pod_sysctls_valid: pod(json!({"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}, {"name": "net/ipv4/tcp_syncookies", "value": "1"}]})) => [];
    pod_sysctl_bad_name: pod(json!({"sysctls": [{"name": "bad name", "value": "1"}]})) => [
        format!(r#"{P}.sysctls[0].name: Invalid value: "bad name": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"#)
    ];
    pod_sysctl_empty_name: pod(json!({"sysctls": [{"name": "", "value": "1"}]})) => [format!("{P}.sysctls[0].name: Required value")];
    pod_sysctl_duplicate: pod(json!({"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "kernel.msgmax", "value": "2"}]})) => [
        format!(r#"{P}.sysctls[1].name: Duplicate value: "kernel.msgmax""#)
    ];
    // Enums.
    pod_fs_group_change_policy: pod(json!({"fsGroupChangePolicy": "Sometimes"})) => [
        format!(r#"{P}.fsGroupChangePolicy: Unsupported value: "Sometimes": supported values: "Always", "OnRootMismatch""#)
    ];
    pod_fs_group_change_policy_valid: pod(json!({"fsGroupChangePolicy": "OnRootMismatch"})) => [];
    pod_supplemental_groups_policy: pod(json!({"supplementalGroupsPolicy": "Sometimes"})) => [
        format!(r#"{P}.supplementalGroupsPolicy: Unsupported value: "Sometimes": supported values: "Merge", "Strict""#)
    ];
    pod_se_linux_change_policy_recursive: pod(json!({"seLinuxChangePolicy": "Recursive"})) => [];
    pod_se_linux_change_policy: pod(json!({"seLinuxChangePolicy": "MountOption"})) => [
        format!(r#"{P}.seLinuxChangePolicy: Unsupported value: "MountOption": supported values: "Recursive""#)
    ];
    // Seccomp and AppArmor profiles.
    pod_seccomp_localhost_without_profile: pod(json!({"seccompProfile": {"type": "Localhost"}})) => [
        format!("{P}.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost")
    ];
    pod_seccomp_localhost_valid: pod(json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/memcached.json"}})) => [];
    pod_seccomp_localhost_absolute: pod(json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/p.json"}})) => [
        format!(r#"{P}.seccompProfile.localhostProfile: Invalid value: "/etc/p.json": must be a relative path"#)
    ];
    pod_seccomp_localhost_backsteps: pod(json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "a/../b"}})) => [
        format!(r#"{P}.seccompProfile.localhostProfile: Invalid value: "a/../b": must not contain '..'"#)
    ];
    pod_seccomp_profile_on_runtime_default: pod(json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}})) => [
        format!(r#"{P}.seccompProfile.localhostProfile: Invalid value: {{"Type":"RuntimeDefault","LocalhostProfile":"p"}}: can only be set when seccomp type is Localhost"#)
    ];
    pod_app_armor_localhost_without_profile: pod(json!({"appArmorProfile": {"type": "Localhost"}})) => [
        format!("{P}.appArmorProfile.localhostProfile: Required value: must be set when AppArmor type is Localhost")
    ];
    pod_app_armor_padded: pod(json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": " p"}})) => [
        format!(r#"{P}.appArmorProfile.localhostProfile: Invalid value: " p": must not be padded with whitespace"#)
    ];
    pod_app_armor_unknown_type: pod(json!({"appArmorProfile": {"type": "Strict"}})) => [
        format!(r#"{P}.appArmorProfile.type: Unsupported value: "Strict": supported values: "Localhost", "RuntimeDefault", "Unconfined""#)
    ];
    // Windows options.
    pod_host_process_needs_host_network: pod(json!({"windowsOptions": {"hostProcess": true}})) => [
        format!("{P}.windowsOptions.hostProcess: Invalid value: true: hostNetwork must be true if pod contains any hostProcess containers")
    ];
    pod_host_process_false: pod(json!({"windowsOptions": {"hostProcess": false}})) => [];
    host_process_differs: json!({"security": {"podSecurityContext": {"windowsOptions": {"hostProcess": false}}, "containerSecurityContext": {"windowsOptions": {"hostProcess": true}}}}) => [
        format!("{C}.windowsOptions.hostProcess: Invalid value: true: pod hostProcess value must be identical if both are specified, was false"),
        format!("{C}.windowsOptions.hostProcess: Invalid value: true: hostNetwork must be true if pod contains any hostProcess containers"),
    ];
    pod_run_as_user_name_two_backslashes: pod(json!({"windowsOptions": {"runAsUserName": r"a\b\c"}})) => [
        format!(r#"{P}.windowsOptions.runAsUserName: Invalid value: "a\\b\\c": runAsUserName cannot contain more than one backslash"#)
    ];
    pod_run_as_user_name_valid: pod(json!({"windowsOptions": {"runAsUserName": r"NT AUTHORITY\NETWORK SERVICE", "gmsaCredentialSpecName": "gmsa-spec"}})) => [];
    pod_gmsa_name_not_a_subdomain: pod(json!({"windowsOptions": {"gmsaCredentialSpecName": "Spec"}})) => [
        format!(r#"{P}.windowsOptions.gmsaCredentialSpecName: Invalid value: "Spec": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#)
    ];

    // SecurityContext of the containers.
    container_privileged_without_escalation: container(json!({"privileged": true, "allowPrivilegeEscalation": false})) => [
        format!(r#"{C}: Invalid value: {{"Capabilities":null,"Privileged":true,"SELinuxOptions":null,"WindowsOptions":null,"RunAsUser":null,"RunAsGroup":null,"RunAsNonRoot":null,"ReadOnlyRootFilesystem":null,"AllowPrivilegeEscalation":false,"ProcMount":null,"SeccompProfile":null,"AppArmorProfile":null}}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"#)
    ];
    container_privileged_with_escalation: container(json!({"privileged": true, "allowPrivilegeEscalation": true})) => [];
    container_sys_admin_without_escalation: container(json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["CAP_SYS_ADMIN"]}})) => [
        format!(r#"{C}: Invalid value: {{"Capabilities":{{"Add":["CAP_SYS_ADMIN"],"Drop":null}},"Privileged":null,"SELinuxOptions":null,"WindowsOptions":null,"RunAsUser":null,"RunAsGroup":null,"RunAsNonRoot":null,"ReadOnlyRootFilesystem":null,"AllowPrivilegeEscalation":false,"ProcMount":null,"SeccompProfile":null,"AppArmorProfile":null}}: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"#)
    ];
    container_proc_mount_unmasked: container(json!({"procMount": "Unmasked"})) => [
        format!(r#"{C}.procMount: Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`"#)
    ];
    container_proc_mount_unknown: container(json!({"procMount": "Sometimes"})) => [
        format!(r#"{C}.procMount: Unsupported value: "Sometimes": supported values: "Default", "Unmasked""#)
    ];
    container_proc_mount_default: container(json!({"procMount": "Default"})) => [];
    container_run_as_group_negative: container(json!({"runAsGroup": -5})) => [format!("{C}.runAsGroup: Invalid value: -5: {ID_RANGE}")];
    container_run_as_user_too_large: container(json!({"runAsUser": 2147483648_i64})) => [format!("{C}.runAsUser: Invalid value: 2147483648: {ID_RANGE}")];
    container_seccomp_unknown_type: container(json!({"seccompProfile": {"type": "Strict"}})) => [
        format!(r#"{C}.seccompProfile.type: Unsupported value: "Strict": supported values: "Localhost", "RuntimeDefault", "Unconfined""#)
    ];
    container_seccomp_without_type: container(json!({"seccompProfile": {"type": ""}})) => [
        format!("{C}.seccompProfile.type: Required value: type is required when seccompProfile is set")
    ];

    // ResourceRequirements.
    claims_name_no_pod_claim: resources(json!({"claims": [{"name": "gpu"}]})) => [
        r#"spec.resources.claims[0]: Not found: "gpu": must be one of the names in pod.spec.resourceClaims which is empty"#
    ];
    claims_without_name: resources(json!({"claims": [{"name": ""}]})) => ["spec.resources.claims[0]: Required value"];
    extended_resource_in_requests_only: resources(json!({"requests": {"example.com/gpu": "1"}})) => [
        "spec.resources.limits: Required value: Limit must be set for non overcommitable resources"
    ];
    extended_resource_request_differs: resources(json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}})) => [
        r#"spec.resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2"#
    ];
    extended_resource_fraction: resources(json!({"limits": {"example.com/gpu": "500m"}})) => [
        r#"spec.resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer"#
    ];
    extended_resource_whole: resources(json!({"limits": {"example.com/gpu": "2"}, "requests": {"example.com/gpu": "2"}})) => [];
    hugepages_with_memory: resources(json!({"limits": {"hugepages-2Mi": "4Mi", "memory": "128Mi"}, "requests": {"hugepages-2Mi": "4Mi"}})) => [];
    hugepages_not_a_page_multiple: resources(json!({"limits": {"hugepages-2Mi": "3Mi", "memory": "128Mi"}})) => [
        r#"spec.resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi"#
    ];
    hugepages_without_cpu_or_memory: resources(json!({"limits": {"hugepages-2Mi": "2Mi"}})) => [
        "spec.resources: Forbidden: HugePages require cpu or memory"
    ];
    hugepages_request_without_limit: resources(json!({"requests": {"hugepages-1Gi": "1Gi", "cpu": "1"}})) => [
        "spec.resources.limits: Required value: Limit must be set for non overcommitable resources"
    ];

    // NetworkPolicy peers under strict CIDR validation.
    cidr_host_bits: sources(json!([{"ipBlock": {"cidr": "10.1.2.3/8"}}])) => [
        r#"spec.networkPolicy.allowedSources[0].ipBlock.cidr: Invalid value: "10.1.2.3/8": must not have bits set beyond the prefix length"#
    ];
    cidr_host_route: sources(json!([{"ipBlock": {"cidr": "10.1.2.3/32"}}, {"ipBlock": {"cidr": "::/0"}}, {"ipBlock": {"cidr": "0.0.0.0/0"}}])) => [];
    cidr_v6_host_bits: sources(json!([{"ipBlock": {"cidr": "2001:db8::1/64"}}])) => [
        r#"spec.networkPolicy.allowedSources[0].ipBlock.cidr: Invalid value: "2001:db8::1/64": must not have bits set beyond the prefix length"#
    ];
    cidr_leading_zeros: sources(json!([{"ipBlock": {"cidr": "010.0.0.0/8"}}, {"ipBlock": {"cidr": "10.0.0.0/08"}}])) => [
        r#"spec.networkPolicy.allowedSources[0].ipBlock.cidr: Invalid value: "010.0.0.0/8": must not have leading 0s in IP or prefix length"#,
        r#"spec.networkPolicy.allowedSources[1].ipBlock.cidr: Invalid value: "10.0.0.0/08": must not have leading 0s in IP or prefix length"#,
    ];
    cidr_v4_mapped: sources(json!([{"ipBlock": {"cidr": "::ffff:10.0.0.0/104"}}])) => [
        r#"spec.networkPolicy.allowedSources[0].ipBlock.cidr: Invalid value: "::ffff:10.0.0.0/104": must not have an IPv4-mapped IPv6 address"#
    ];
    except_host_bits: sources(json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.1/16"]}}])) => [
        r#"spec.networkPolicy.allowedSources[0].ipBlock.except[0]: Invalid value: "10.1.0.1/16": must not have bits set beyond the prefix length"#
    ];

    // The HorizontalPodAutoscaler's metrics and behavior.
    hpa_metric_without_source: autoscaling(json!({"metrics": [{"type": "Resource"}]})) => [
        "spec.autoscaling.metrics[0].resource: Required value: must populate information for the given metric source"
    ];
    hpa_metric_unknown_type: autoscaling(json!({"metrics": [{"type": "Cpu", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]})) => [
        r#"spec.autoscaling.metrics[0].type: Unsupported value: "Cpu": supported values: "ContainerResource", "External", "Object", "Pods", "Resource""#,
        r#"spec.autoscaling.metrics[0].type: Unsupported value: "Cpu": supported values: "ContainerResource", "External", "Object", "Pods", "Resource""#,
    ];
    hpa_utilization_zero: autoscaling(json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]})) => [
        "spec.autoscaling.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"
    ];
    hpa_utilization_one: autoscaling(json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 1}}}]})) => [];
    hpa_pods_metric_needs_average_value: autoscaling(json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "Value", "value": "0"}}}]})) => [
        r#"spec.autoscaling.metrics[0].pods.target.value: Invalid value: "0": must be positive"#,
        "spec.autoscaling.metrics[0].pods.target.averageValue: Required value: must specify a positive target averageValue",
    ];
    hpa_stabilization_window_bounds: autoscaling(json!({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 3600}, "scaleDown": {"stabilizationWindowSeconds": 3601}}})) => [
        "spec.autoscaling.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600"
    ];
    hpa_policies_empty: autoscaling(json!({"behavior": {"scaleUp": {"policies": []}}})) => [
        "spec.autoscaling.behavior.scaleUp.policies: Required value: must specify at least one Policy"
    ];
    hpa_policy_bounds: autoscaling(json!({"behavior": {"scaleDown": {"selectPolicy": "Any", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 1800}, {"type": "Nodes", "value": 0, "periodSeconds": 1801}]}}})) => [
        r#"spec.autoscaling.behavior.scaleDown.selectPolicy: Unsupported value: "Any": supported values: "Disabled", "Max", "Min""#,
        r#"spec.autoscaling.behavior.scaleDown.policies[1].type: Unsupported value: "Nodes": supported values: "Percent", "Pods""#,
        "spec.autoscaling.behavior.scaleDown.policies[1].value: Invalid value: 0: must be greater than zero",
        "spec.autoscaling.behavior.scaleDown.policies[1].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
    ];
}
