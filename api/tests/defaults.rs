use memcached_api::apply_defaults;
use memcached_api::field::Path;
use memcached_api::pod_security::completion::apply_defaults_at;
use memcached_api::pod_security::{self, Level};
use serde_json::{json, to_value};
use test_support::spec::{defaulted, spec};

#[test]
fn fills_an_empty_spec() {
    let s = defaulted(json!({}));
    assert_eq!(
        to_value(&s).unwrap(),
        json!({
            "replicas": 1,
            "workload": "Deployment",
            "image": "memcached:1.6",
            "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0},
            "security": {
                "podSecurityContext": {"runAsNonRoot": true, "runAsUser": 11211, "runAsGroup": 11211, "fsGroup": 11211,
                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containerSecurityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                    "capabilities": {"drop": ["ALL"]}}
            }
        })
    );
}

#[test]
fn keeps_every_value_the_user_set_including_zero_replicas() {
    let user = json!({
        "replicas": 0, "workload": "StatefulSet", "image": "memcached:1.6.28",
        "memcached": {"maxMemoryMB": 256, "maxConnections": 10, "threads": 1, "maxItemSize": "2m", "verbosity": 2},
        "highAvailability": {"antiAffinityPreset": "hard", "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 1, "terminationGracePeriodSeconds": 2}},
        "monitoring": {"enabled": false, "exporterImage": "x:1", "serviceMonitor": {"interval": "1m", "scrapeTimeout": "5s"}},
        "security": {"podSecurityContext": {"runAsUser": 5}, "containerSecurityContext": {"privileged": false}}
    });
    let s = defaulted(user.clone());
    assert_eq!(to_value(&s).unwrap(), user);
}

#[test]
fn is_idempotent() {
    for input in [
        json!({}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3}}),
        json!({"monitoring": {"serviceMonitor": {}}}),
    ] {
        let once = defaulted(input);
        let twice = apply_defaults(once.clone().into_inner());
        assert_eq!(once, twice);
    }
}

#[test]
fn leaves_replicas_absent_while_autoscaling_and_adds_cpu_metric_and_scale_down_window() {
    let s = defaulted(json!({"autoscaling": {"enabled": true, "maxReplicas": 5, "metrics": []}}));
    assert_eq!(s.replicas, None);
    assert_eq!(
        to_value(s.autoscaling.as_ref().unwrap()).unwrap(),
        json!({"enabled": true, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}})
    );
}

#[test]
fn leaves_disabled_autoscaling_alone_and_defaults_replicas() {
    let s = defaulted(json!({"autoscaling": {"enabled": false}}));
    assert_eq!(s.replicas, Some(1));
    assert_eq!(
        to_value(s.autoscaling.as_ref().unwrap()).unwrap(),
        json!({"enabled": false})
    );
}

#[test]
fn keeps_user_metrics_and_behavior() {
    let input = json!({"enabled": true, "maxReplicas": 2,
        "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}],
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}}});
    let s = defaulted(json!({"autoscaling": input.clone()}));
    assert_eq!(to_value(s.autoscaling.as_ref().unwrap()).unwrap(), input);
}

#[test]
fn defaults_monitoring_sections_only_when_present() {
    let s = defaulted(json!({"monitoring": {"enabled": false}}));
    assert_eq!(
        to_value(s.monitoring.as_ref().unwrap()).unwrap(),
        json!({"enabled": false, "exporterImage": "prom/memcached-exporter:v0.15.4"})
    );
    let s = defaulted(json!({"monitoring": {"enabled": true, "serviceMonitor": {}}}));
    assert_eq!(
        to_value(
            s.monitoring
                .as_ref()
                .unwrap()
                .service_monitor
                .as_ref()
                .unwrap()
        )
        .unwrap(),
        json!({"interval": "30s", "scrapeTimeout": "10s"})
    );
}

#[test]
fn defaults_high_availability_sections_only_when_present() {
    assert_eq!(defaulted(json!({})).high_availability, None);
    let s = defaulted(json!({"highAvailability": {}}));
    assert_eq!(
        to_value(s.high_availability.as_ref().unwrap()).unwrap(),
        json!({"antiAffinityPreset": "soft"})
    );
    let s = defaulted(json!({"highAvailability": {"gracefulShutdown": {"enabled": true}}}));
    assert_eq!(
        to_value(s.high_availability.as_ref().unwrap()).unwrap(),
        json!({"antiAffinityPreset": "soft", "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30}})
    );
}

#[test]
fn keeps_sasl_and_tls_and_only_adds_missing_contexts() {
    let s = defaulted(json!({"security": {"tls": {"enabled": true}, "podSecurityContext": {}}}));
    let security = to_value(s.security.as_ref().unwrap()).unwrap();
    assert_eq!(security["tls"], json!({"enabled": true}));
    assert_eq!(security["podSecurityContext"], json!({}));
    assert_eq!(
        security["containerSecurityContext"]["capabilities"],
        json!({"drop": ["ALL"]})
    );
}

#[test]
fn an_explicit_empty_image_is_not_replaced() {
    assert_eq!(defaulted(json!({"image": ""})).image.as_deref(), Some(""));
    assert_eq!(spec(json!({})).image, None);
}

/// `apply_defaults_at`: what each level adds to the contexts the user gave,
/// named by case. Every completed spec meets the level.
macro_rules! completed_at {
    ($($name:ident: $level:ident, $spec:tt => $added:expr;)*) => {$(
        #[test]
        fn $name() {
            let (completed, added) = apply_defaults_at(spec(json!($spec)), Level::$level);
            let added: Vec<String> = added.iter().map(ToString::to_string).collect();
            let expected: &[&str] = &$added;
            assert_eq!(added, expected);
            let path = Path::new("spec");
            assert!(pod_security::check(&completed, Level::$level, &path).is_empty());
            let (again, none) = apply_defaults_at(completed.clone().into_inner(), Level::$level);
            assert_eq!((again, none), (completed, vec![]), "idempotent");
        }
    )*};
}

completed_at! {
    restricted_adds_nothing_to_the_defaults: Restricted, {} => [];
    restricted_adds_nothing_to_the_defaults_with_the_exporter: Restricted, {"monitoring": {"enabled": true}} => [];
    restricted_completes_a_user_alone: Restricted, {"security": {"podSecurityContext": {"runAsUser": 1000}}} => [
        "spec.security.podSecurityContext.runAsNonRoot: true",
        "spec.security.podSecurityContext.seccompProfile.type: RuntimeDefault",
    ];
    restricted_gives_run_as_non_root_a_numeric_user: Restricted,
        {"security": {"podSecurityContext": {"fsGroup": 65534}, "containerSecurityContext": {"runAsNonRoot": true}}} => [
        "spec.security.containerSecurityContext.allowPrivilegeEscalation: false",
        "spec.security.containerSecurityContext.capabilities.drop: [ALL]",
        "spec.security.podSecurityContext.runAsUser: 11211",
        "spec.security.podSecurityContext.seccompProfile.type: RuntimeDefault",
    ];
    restricted_keeps_a_container_profile: Restricted, {"security": {"podSecurityContext": {"runAsUser": 5},
        "containerSecurityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "m.json"}}}} => [
        "spec.security.containerSecurityContext.allowPrivilegeEscalation: false",
        "spec.security.containerSecurityContext.capabilities.drop: [ALL]",
        "spec.security.podSecurityContext.runAsNonRoot: true",
    ];
    restricted_keeps_added_capabilities: Restricted,
        {"security": {"containerSecurityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}} => [
        "spec.security.containerSecurityContext.allowPrivilegeEscalation: false",
        "spec.security.containerSecurityContext.capabilities.drop: [ALL]",
    ];
    baseline_adds_nothing: Baseline, {"security": {"podSecurityContext": {"runAsUser": 1000},
        "containerSecurityContext": {}}} => [];
    privileged_adds_nothing: Privileged, {"security": {"podSecurityContext": {},
        "containerSecurityContext": {}}} => [];
}

#[test]
fn restricted_adds_no_field_the_seccomp_annotations_would_contradict() {
    for annotation in [
        "seccomp.security.alpha.kubernetes.io/pod",
        "container.seccomp.security.alpha.kubernetes.io/memcached",
    ] {
        let user = json!({"podAnnotations": {annotation: "unconfined"},
            "security": {"podSecurityContext": {"runAsUser": 1000}}});
        let (completed, added) = apply_defaults_at(spec(user), Level::Restricted);
        let pod = completed
            .security
            .as_ref()
            .unwrap()
            .pod_security_context
            .as_ref();
        assert_eq!(pod.unwrap().seccomp_profile, None, "{annotation}");
        assert_eq!(added.len(), 1, "{added:?}");
    }
}

#[test]
fn without_a_level_the_users_contexts_are_kept_as_given() {
    let user = json!({"security": {"podSecurityContext": {"runAsUser": 1000}, "containerSecurityContext": {}}});
    let plain = defaulted(user.clone());
    assert_eq!(to_value(&plain).unwrap()["security"], user["security"]);
    assert_eq!(apply_defaults_at(spec(user), Level::Privileged).0, plain);
}

/// The completion adds nothing the API server would refuse beside the
/// user's values: the spec validates alike before and after it.
#[test]
fn the_completion_never_makes_a_spec_invalid() {
    let contexts = [
        json!({"containerSecurityContext": {"privileged": true}}),
        json!({"containerSecurityContext": {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}}),
        json!({"containerSecurityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
        json!({"containerSecurityContext": {"windowsOptions": {"hostProcess": true}}}),
        json!({"podSecurityContext": {"windowsOptions": {"hostProcess": true, "runAsUserName": "ContainerUser"}}}),
        json!({"podSecurityContext": {"runAsUser": 0}, "containerSecurityContext": {"runAsUser": 0}}),
        json!({"podSecurityContext": {"runAsGroup": 0, "fsGroup": 0}}),
        json!({"containerSecurityContext": {"procMount": "Unmasked"}}),
        json!({"podSecurityContext": {"seLinuxOptions": {"type": "spc_t"}}, "containerSecurityContext": {}}),
    ];
    let annotations = [
        json!(null),
        json!({"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}),
        json!({"container.seccomp.security.alpha.kubernetes.io/exporter": "unconfined"}),
    ];
    let options = memcached_api::validation::Options::default();
    for security in &contexts {
        for annotations in &annotations {
            let user = json!({"monitoring": {"enabled": true}, "security": security, "podAnnotations": annotations});
            let plain = defaulted(user.clone());
            let (completed, _) = apply_defaults_at(spec(user), Level::Restricted);
            let render = |spec| -> Vec<String> {
                memcached_api::validate(spec, &options)
                    .iter()
                    .map(|e| e.to_string().replace(['{', '}'], ""))
                    .collect()
            };
            assert_eq!(
                render(&plain).len(),
                render(&completed).len(),
                "{security} {annotations}: {:?} / {:?}",
                render(&plain),
                render(&completed)
            );
        }
    }
}
