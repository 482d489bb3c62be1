mod common;

use common::{defaulted, spec};
use memcached_api::apply_defaults;
use serde_json::{json, to_value};

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
