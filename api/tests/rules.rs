//! The rules of issue 9, one test per boundary case, through `validate_object`
//! on a defaulted spec (what admission runs).

use memcached_api::validation::{ObjectName, Options, validate_object, warnings};
use serde_json::{Value, json};
use test_support::spec::defaulted;

fn errors_named(name: &str, spec: Value) -> Vec<String> {
    let object = ObjectName {
        name,
        generate_name: "",
    };
    validate_object(object, &defaulted(spec), &Options::default())
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn errors(spec: Value) -> Vec<String> {
    errors_named("my-cache", spec)
}

const MULTIPLE: &str = "memcached 1.6 needs an item size that is a multiple of its slab_chunk_max (512k), e.g. 512k, 1m, 1536k or 2m";

/// maxItemSize with enough memory for every size (4096 MB, half is 2048m).
macro_rules! item_sizes {
    ($($name:ident: $size:expr => $detail:expr;)*) => {$(
        #[test]
        fn $name() {
            let got = errors(json!({"memcached": {"maxMemoryMB": 4096, "maxItemSize": $size},
                "resources": {"limits": {"memory": "5Gi"}}}));
            let expected: Option<&str> = $detail;
            match expected {
                None => assert!(got.is_empty(), "{got:?}"),
                Some(detail) => assert_eq!(
                    got,
                    [format!("spec.memcached.maxItemSize: Invalid value: {:?}: {detail}", $size)]
                ),
            }
        }
    )*};
}

item_sizes! {
    item_size_0k: "0k" => Some(MULTIPLE);
    item_size_1k: "1k" => Some(MULTIPLE);
    item_size_100k: "100k" => Some(MULTIPLE);
    item_size_511k: "511k" => Some(MULTIPLE);
    item_size_512k: "512k" => None;
    item_size_513k: "513k" => Some(MULTIPLE);
    item_size_700k: "700k" => Some(MULTIPLE);
    item_size_1m: "1m" => None;
    item_size_1024k: "1024k" => None;
    item_size_1536k: "1536k" => None;
    item_size_2m: "2m" => None;
    item_size_2047k: "2047k" => Some(MULTIPLE);
    item_size_1024m: "1024m" => None;
    item_size_1025m: "1025m" => Some("memcached refuses an item size above 1024m");
}

#[test]
fn item_size_half_of_the_default_memory() {
    assert!(errors(json!({"memcached": {"maxItemSize": "32m"}})).is_empty());
    assert_eq!(
        errors(json!({"memcached": {"maxItemSize": "33m"}})),
        [
            r#"spec.memcached.maxItemSize: Invalid value: "33m": memcached refuses an item size above half of maxMemoryMB (32768k)"#
        ]
    );
}

#[test]
fn name_that_is_no_service_name() {
    assert_eq!(
        errors_named("My.Cache", json!({})),
        [
            r#"metadata.name: Invalid value: "My.Cache": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#
        ]
    );
}

#[test]
fn name_of_64_characters() {
    assert_eq!(errors_named(&"a".repeat(64), json!({})).len(), 1);
    assert!(errors_named(&"a".repeat(63), json!({})).is_empty());
}

#[test]
fn pod_labels_may_not_set_the_selector_labels() {
    assert_eq!(
        errors(json!({"podLabels": {"app.kubernetes.io/instance": "other", "team": "a"}})),
        [
            "spec.podLabels[app.kubernetes.io/instance]: Forbidden: the operator sets this label on the pods (the Deployment's selector matches name, instance and managed-by; version comes from the image tag); remove it from podLabels"
        ]
    );
}

#[test]
fn label_and_annotation_maps_use_the_api_server_wording() {
    let got = errors(json!({
        "podLabels": {"team": "a b"},
        "podAnnotations": {"bad key": "x"},
        "nodeSelector": {"example.com/": "x"},
        "service": {"annotations": {"ok": "v".repeat(262_143)}},
        "monitoring": {"serviceMonitor": {"additionalLabels": {"release": "x".repeat(64)}}},
    }));
    let fields: Vec<&str> = got
        .iter()
        .map(|e| e.split(": ").next().unwrap_or_default())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.podLabels",
            "spec.podAnnotations",
            "spec.nodeSelector",
            "spec.nodeSelector",
            "spec.monitoring.serviceMonitor.additionalLabels",
            "spec.service.annotations",
        ],
        "{got:?}"
    );
    assert!(got[5].ends_with("Too long: may not be more than 262144 bytes"));
}

#[test]
fn image_references() {
    assert_eq!(
        errors(json!({"image": "memcached:1.6 alpine"})),
        [
            r#"spec.image: Invalid value: "memcached:1.6 alpine": must be a valid image reference: [registry[:port]/]repository[:tag][@digest], with a lower-case repository path, a tag of at most 128 characters from [A-Za-z0-9_.-] and a digest such as sha256:<64 hex digits>"#
        ]
    );
    assert!(
        errors(json!({"image": "registry.example.com:5000/cache/memcached:1.6.18"})).is_empty()
    );
    assert_eq!(
        errors(json!({"monitoring": {"exporterImage": "Prom/exporter"}})).len(),
        1
    );
}

#[test]
fn resource_names_of_containers() {
    assert_eq!(
        errors(
            json!({"resources": {"limits": {"gpu": "1", "example.com/widget": "1", "hugepages-2Mi": "2Mi", "memory": "128Mi"}}})
        ),
        [
            r#"spec.resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified"#,
            r#"spec.resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers"#,
        ]
    );
}

#[test]
fn a_too_long_list_is_refused_before_anything_else_is_walked() {
    let args: Vec<String> = (0..1001).map(|_| "-m".to_string()).collect();
    assert_eq!(
        errors_named(
            "Bad Name",
            json!({"memcached": {"extraArgs": args}, "replicas": 9999})
        ),
        ["spec.memcached.extraArgs: Too many: 1001: must have at most 100 items"]
    );
}

fn warned(spec: Value) -> Vec<String> {
    warnings(&defaulted(spec))
}

#[test]
fn warns_sasl_without_tls() {
    let w = warned(
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "s"}}}}),
    );
    assert_eq!(
        w,
        [
            "spec.security.sasl.enabled without spec.security.tls.enabled: the SASL credentials cross the pod network in clear text; enable TLS to protect them"
        ]
    );
    assert!(
        warned(json!({"security": {"sasl": {"enabled": true}, "tls": {"enabled": true}}}))
            .is_empty()
    );
}

#[test]
fn warns_network_policy_without_sources() {
    let expected = [
        "spec.networkPolicy.enabled without spec.networkPolicy.allowedSources: the NetworkPolicy allows every pod in every namespace to reach memcached; list allowedSources to restrict it",
    ];
    assert_eq!(
        warned(json!({"networkPolicy": {"enabled": true}})),
        expected
    );
    assert_eq!(
        warned(json!({"networkPolicy": {"enabled": true, "allowedSources": []}})),
        expected
    );
    assert!(
        warned(
            json!({"networkPolicy": {"enabled": true, "allowedSources": [{"podSelector": {}}]}})
        )
        .is_empty()
    );
    assert!(warned(json!({"networkPolicy": {"enabled": false}})).is_empty());
}

#[test]
fn warns_privileged_container() {
    assert_eq!(
        warned(
            json!({"security": {"containerSecurityContext": {"privileged": true, "allowPrivilegeEscalation": true,
            "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}, "runAsUser": 0}}})
        ),
        [
            "spec.security.containerSecurityContext grants privilege (privileged: true, capabilities.add: [NET_ADMIN, SYS_TIME], allowPrivilegeEscalation: true, runAsUser: 0): memcached needs none of it and runs as UID 11211 with every capability dropped by default"
        ]
    );
    assert_eq!(
        warned(json!({"security": {"podSecurityContext": {"runAsUser": 0}, "containerSecurityContext": {"readOnlyRootFilesystem": true}}})).len(),
        1
    );
    assert!(warned(json!({})).is_empty());
}

const HARD_SURGE: &str = "spec.highAvailability.antiAffinityPreset hard with spec.workload Deployment: a rollout \
    (a changed spec, a rotated Secret) first adds one pod, which needs a node none of this Memcached's pods runs on; \
    with as many replicas as schedulable nodes it stays Pending and the rollout never finishes. Use spec.workload \
    StatefulSet (it replaces a pod without adding one) or antiAffinityPreset soft, or keep a node spare";

/// Specs warned with `$warning` (true) or not at all (false), named by case.
macro_rules! warned_or_quiet {
    ($warning:expr; $($name:ident: $spec:tt => $warned:expr;)*) => {$(
        #[test]
        fn $name() {
            let expected: &[&str] = if $warned { &[$warning] } else { &[] };
            assert_eq!(warned(json!($spec)), expected);
        }
    )*};
}

// The `hard` preset where a rollout surges a pod.
warned_or_quiet! {HARD_SURGE;
    hard_in_deployment_mode_warns: {"highAvailability": {"antiAffinityPreset": "hard"}} => true;
    hard_in_explicit_deployment_mode_warns:
        {"workload": "Deployment", "replicas": 3, "highAvailability": {"antiAffinityPreset": "hard"}} => true;
    hard_in_statefulset_mode_is_quiet:
        {"workload": "StatefulSet", "highAvailability": {"antiAffinityPreset": "hard"}} => false;
    soft_is_quiet: {"highAvailability": {"antiAffinityPreset": "soft"}} => false;
    the_default_preset_is_quiet: {"highAvailability": {}} => false;
}

const NO_HANDOVER: &str = "spec.clientHashing without spec.highAvailability.gracefulShutdown.preStopDelaySeconds: \
    a pod deleted or evicted (a drain, an autoscaler's scale-down) stops at once, and its keys are lost instead of \
    handed over while it is away: a delay gives the copy time";

// Keys handed over without a preStop delay to copy a leaving pod's.
warned_or_quiet! {NO_HANDOVER;
    client_hashing_without_graceful_shutdown_warns:
        {"workload": "StatefulSet", "clientHashing": "rendezvous"} => true;
    client_hashing_with_a_zero_delay_warns:
        {"workload": "StatefulSet", "clientHashing": "ketama", "highAvailability": {"gracefulShutdown":
            {"enabled": true, "preStopDelaySeconds": 0, "terminationGracePeriodSeconds": 30}}} => true;
    client_hashing_with_a_delay_is_quiet:
        {"workload": "StatefulSet", "clientHashing": "rendezvous", "highAvailability": {"gracefulShutdown":
            {"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30}}} => false;
    no_client_hashing_is_quiet: {"workload": "StatefulSet"} => false;
    client_hashing_on_a_deployment_without_a_delay_warns: {"clientHashing": "rendezvous"} => true;
    client_hashing_on_a_deployment_with_a_delay_is_quiet:
        {"workload": "Deployment", "replicas": 3, "clientHashing": "ketama", "highAvailability": {"gracefulShutdown":
            {"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30}}} => false;
}
