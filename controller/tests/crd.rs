//! The CRD: generated file in step, both versions, bounds and no defaults.

use memcached_controller::crd::{crd, crd_yaml};

#[test]
fn deploy_crd_yaml_is_the_generated_crd() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crd.yaml");
    let file = std::fs::read_to_string(path).unwrap();
    assert!(
        file == crd_yaml(),
        "deploy/crd.yaml is stale: run `make crd`"
    );
}

#[test]
fn serves_both_versions_with_one_schema_and_stores_v1beta1() {
    let crd = crd();
    let versions: Vec<(&str, bool, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage))
        .collect();
    assert_eq!(
        versions,
        [("v1alpha1", true, false), ("v1beta1", true, true)]
    );
    assert_eq!(crd.spec.versions[0].schema, crd.spec.versions[1].schema);
    for v in &crd.spec.versions {
        let sub = v.subresources.as_ref().unwrap();
        assert!(sub.status.is_some());
        assert_eq!(
            sub.scale.as_ref().unwrap().spec_replicas_path,
            ".spec.replicas"
        );
        let columns: Vec<&str> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            columns,
            ["Replicas", "Ready", "Hit Ratio", "Connections", "Age"]
        );
    }
}

#[test]
fn carries_bounds_but_no_defaults() {
    let yaml = crd_yaml();
    assert!(
        !yaml.contains("\n                default:"),
        "defaults belong to the policy"
    );
    let schema = serde_json::to_value(&crd().spec.versions[1].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(
        (
            spec["replicas"]["minimum"].as_f64(),
            spec["replicas"]["maximum"].as_f64()
        ),
        (Some(0.0), Some(64.0))
    );
    let config = &spec["memcached"]["properties"];
    assert_eq!(config["maxMemoryMB"]["maximum"].as_f64(), Some(65536.0));
    assert_eq!(config["threads"]["maximum"].as_f64(), Some(128.0));
    assert_eq!(config["maxItemSize"]["pattern"], "^[0-9]+(k|m)$");
    assert_eq!(
        spec["highAvailability"]["properties"]["antiAffinityPreset"]["enum"],
        serde_json::json!(["soft", "hard"])
    );
    let gs = &spec["highAvailability"]["properties"]["gracefulShutdown"]["properties"];
    assert_eq!(
        gs["terminationGracePeriodSeconds"]["maximum"].as_f64(),
        Some(600.0)
    );
    assert_eq!(
        spec["autoscaling"]["properties"]["maxReplicas"]["minimum"].as_f64(),
        Some(1.0)
    );
}
