//! The CRD: generated file in step, both versions, bounds and no defaults,
//! and what kubectl shows (columns, categories, descriptions, deprecation).

use memcached_api::SECTIONS;
use memcached_api::memcached_options::{SPEC_FIELDS, Schema, Setting};
use memcached_controller::commands::crd::{V1ALPHA1_DEPRECATION, crd, crd_yaml};
use serde_json::Value;

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
        let scale = sub.scale.as_ref().unwrap();
        assert_eq!(
            (
                scale.spec_replicas_path.as_str(),
                scale.status_replicas_path.as_str(),
                scale.label_selector_path.as_deref()
            ),
            (
                ".spec.replicas",
                ".status.replicas",
                Some(".status.selector")
            )
        );
        let columns: Vec<(&str, &str, i32)> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.json_path.as_str(),
                    c.priority.unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(
            columns,
            [
                ("Replicas", ".status.replicas", 0),
                ("Ready", ".status.ready", 0),
                ("Status", ".status.state", 0),
                ("Hit Ratio", ".status.hitRatio", 0),
                ("Rollout", ".status.rollout", 0),
                ("Age", ".metadata.creationTimestamp", 0),
                ("Image", ".status.image", 1),
                ("Version", ".status.memcachedVersion", 1),
                ("Connections", ".status.currentConnections", 1),
            ]
        );
    }
}

#[test]
fn v1alpha1_is_deprecated_in_favour_of_v1beta1() {
    let crd = crd();
    let (alpha, beta) = (&crd.spec.versions[0], &crd.spec.versions[1]);
    assert_eq!(alpha.deprecated, Some(true));
    assert!(V1ALPHA1_DEPRECATION.contains("memcached.c5c3.io/v1beta1"));
    assert_eq!(
        alpha.deprecation_warning.as_deref(),
        Some(V1ALPHA1_DEPRECATION)
    );
    assert_eq!(
        (beta.deprecated, beta.deprecation_warning.as_ref()),
        (None, None)
    );
}

#[test]
fn listed_in_its_category_and_all() {
    let names = crd().spec.names;
    assert_eq!(
        names.categories,
        Some(vec!["memcached".to_string(), "all".to_string()])
    );
    assert_eq!(names.short_names, Some(vec!["mc".to_string()]));
}

fn schema() -> Value {
    serde_json::to_value(&crd().spec.versions[1].schema).unwrap()["openAPIV3Schema"].clone()
}

#[test]
fn conditions_are_a_map_keyed_by_type() {
    let conditions = &schema()["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"])
    );
    assert!(
        conditions["items"]["required"]
            .as_array()
            .unwrap()
            .contains(&"type".into()),
        "a map key must be required"
    );
}

/// `kubectl explain memcached` and every field of the API's own sections:
/// a real description, each stating the field's default (or that it has none).
#[test]
fn every_field_explains_itself_and_its_default() {
    let root = schema();
    let description = root["description"].as_str().unwrap();
    assert!(
        description.starts_with("A Memcached cluster") && !description.contains("Auto-generated"),
        "{description}"
    );
    let spec = &root["properties"]["spec"];
    let mut sections = vec![("spec".to_string(), spec)];
    for path in SECTIONS {
        let mut node = spec;
        for part in path.split('.') {
            node = &node["properties"][part];
        }
        sections.push((format!("spec.{path}"), node));
    }
    let mut missing = Vec::new();
    for (path, section) in sections {
        for (name, field) in section["properties"].as_object().unwrap() {
            let text = field["description"].as_str().unwrap_or_default();
            if !text.contains("default") {
                missing.push(format!("{path}.{name}: {text:?}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fields without their default:\n{}",
        missing.join("\n")
    );
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

/// The bounds of each field of `spec.memcached` in the schema are its row's,
/// and its description (the doc comment of `api/src/types.rs`) states the
/// row's default in the project's form (`...; default 4.`) and its range
/// (`1-128`): a row and its field saying different things fail here, named,
/// and so does a row under another name than its field's. (A field without
/// a row fails `memcached_options`' unit tests.)
#[test]
fn every_memcached_field_states_its_rows_default_and_bounds() {
    let memcached = &schema()["properties"]["spec"]["properties"]["memcached"]["properties"];
    let mut wrong = Vec::new();
    for field in SPEC_FIELDS.iter().filter_map(|option| option.field) {
        let property = &memcached[field.name];
        if property.is_null() {
            wrong.push(format!(
                "{}: a row, but no such field in the schema",
                field.path()
            ));
            continue;
        }
        let description = (property["description"].as_str().unwrap_or_default())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let path = field.path();
        let default = match field.default {
            Setting::Int(n) => format!("; default {n}."),
            Setting::Text(s) => format!("; default `{s}`."),
        };
        if !description.contains(&default) {
            wrong.push(format!(
                "{path}: its row's default is {}, its description does not say {default:?}: {description:?}",
                field.default
            ));
        }
        match field.schema {
            Schema::Range(bounds) => {
                let (low, high) = (*bounds.start(), *bounds.end());
                let schema = (property["minimum"].as_f64(), property["maximum"].as_f64());
                if schema != (Some(low.into()), Some(high.into())) {
                    wrong.push(format!(
                        "{path}: its row's bounds are {low}-{high}, the schema's {schema:?}"
                    ));
                }
                if !description.contains(&format!(" {low}-{high}")) {
                    wrong.push(format!(
                        "{path}: its row's bounds are {low}-{high}, its description does not say \"{low}-{high}\": {description:?}"
                    ));
                }
            }
            Schema::Pattern(pattern, _) => {
                if property["pattern"] != pattern {
                    wrong.push(format!(
                        "{path}: its row's pattern is {pattern}, the schema's {}",
                        property["pattern"]
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `spec.security.networkPolicy`, where the Go operator (C5C3/memcached-operator)
/// has the NetworkPolicy settings, has the shape and bounds of
/// `spec.networkPolicy`, in both versions: the API server keeps every field
/// of it.
#[test]
fn the_go_operators_network_policy_place_has_the_same_schema() {
    for version in &crd().spec.versions {
        let schema = serde_json::to_value(&version.schema).unwrap();
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        let own = &spec["networkPolicy"];
        let go = &spec["security"]["properties"]["networkPolicy"];
        assert_eq!(go["properties"], own["properties"], "{}", version.name);
        assert_eq!(
            go["properties"]["allowedSources"]["maxItems"].as_u64(),
            Some(100)
        );
    }
}
