//! A user of the Go operator (C5C3/memcached-operator) moves over without
//! editing a manifest: its own objects (`../shared/go-operator`: its samples
//! and the first objects of its e2e scenarios) are admitted here with every
//! field kept, but those it refuses itself; and `spec.security.networkPolicy`,
//! where it has the NetworkPolicy settings, is the same setting as
//! `spec.networkPolicy`.

use std::path::{Path, PathBuf};

use memcached_api::admission::{Decision, Request, Settings, review};
use serde_json::{Value, json};
use test_support::object::memcached;
use test_support::spec::{defaulted, errors, spec};

/// The Go operator's objects: `../shared/go-operator` from the workspace root.
fn go_operator_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/go-operator");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: {} is absent: the Go operator's objects are not checked",
            dir.display()
        );
        None
    }
}

/// Every Memcached of its samples and of its e2e scenarios' `00-*.yaml`,
/// with the file (relative to `dir`) it is in.
fn go_memcacheds(dir: &Path) -> Vec<(String, Value)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir.join("samples")).unwrap() {
        files.push(entry.unwrap().path());
    }
    for scenario in std::fs::read_dir(dir.join("e2e")).unwrap() {
        for entry in std::fs::read_dir(scenario.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name.starts_with("00-") && name.ends_with(".yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let name = file.strip_prefix(dir).unwrap().display().to_string();
        objects.extend(
            docs.into_iter()
                .filter(|d| d["kind"] == "Memcached")
                .map(|d| (name.clone(), d)),
        );
    }
    assert!(
        objects.len() >= 30,
        "{} Memcacheds found in {}",
        objects.len(),
        dir.display()
    );
    objects
}

/// Every leaf of `value` (scalars, empty lists and maps) with its path.
fn leaves(value: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, format!("{path}.{k}"), out);
            }
        }
        Value::Array(list) if !list.is_empty() => {
            for (i, v) in list.iter().enumerate() {
                leaves(v, format!("{path}[{i}]"), out);
            }
        }
        _ => out.push((path, value.clone())),
    }
}

/// What the policy answers to `object` as a CREATE.
fn create(object: &Value) -> Decision {
    let version = object["apiVersion"].as_str().unwrap();
    let request = Request {
        operation: "CREATE".into(),
        group: "memcached.c5c3.io".into(),
        version: version.split_once('/').unwrap().1.into(),
        kind: "Memcached".into(),
        name: object["metadata"]["name"].as_str().unwrap().into(),
        namespace: object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .into(),
        object: object.clone(),
        ..Request::default()
    };
    review(request, &Settings::default())
}

/// The Go operator refuses these itself (its `webhook-rejection` scenario).
fn refused_by_the_go_operator(file: &str) -> bool {
    file.starts_with("e2e/webhook-rejection/")
}

#[test]
fn every_go_operator_object_is_admitted_with_every_field_kept() {
    let Some(dir) = go_operator_dir() else {
        return;
    };
    let mut refused = Vec::new();
    for (file, object) in go_memcacheds(&dir) {
        let admitted = match create(&object) {
            Decision::Accept { .. } => object.clone(),
            Decision::Mutate { object, .. } => object,
            Decision::Reject { message, .. } => {
                assert!(
                    refused_by_the_go_operator(&file),
                    "{file} is refused: {message}"
                );
                refused.push(file);
                continue;
            }
        };
        assert!(
            !refused_by_the_go_operator(&file),
            "{file} is admitted, the Go operator refuses it"
        );
        let (mut before, mut after) = (Vec::new(), Vec::new());
        leaves(&object, String::new(), &mut before);
        leaves(&admitted, String::new(), &mut after);
        for (path, value) in before {
            assert!(
                after.contains(&(path.clone(), value.clone())),
                "{file}: {path} ({value}) is lost or changed by the policy"
            );
        }
    }
    assert_eq!(
        refused,
        ["e2e/webhook-rejection/00-invalid-memory-limit.yaml"]
    );
}

#[test]
fn the_go_operators_refusal_is_refused_for_the_same_reason() {
    let Some(dir) = go_operator_dir() else {
        return;
    };
    let (_, object) = go_memcacheds(&dir)
        .into_iter()
        .find(|(file, _)| refused_by_the_go_operator(file))
        .unwrap();
    let Decision::Reject { message, .. } = create(&object) else {
        panic!("admitted")
    };
    assert!(
        message.contains(r#"spec.resources.limits.memory: Invalid value: "32Mi": memory limit must be at least 96Mi"#),
        "{message}"
    );
}

#[test]
fn the_go_operators_network_policies_are_in_effect() {
    let Some(dir) = go_operator_dir() else {
        return;
    };
    let with_policy: Vec<String> = go_memcacheds(&dir)
        .into_iter()
        .filter(|(_, object)| {
            spec(object["spec"].clone())
                .effective_network_policy()
                .is_some_and(|n| n.enabled == Some(true))
        })
        .map(|(file, _)| file)
        .collect();
    assert_eq!(
        with_policy,
        [
            "e2e/network-policy/00-memcached.yaml",
            "e2e/owner-references/00-memcached.yaml",
            "samples/memcached_v1alpha1_production.yaml",
            "samples/memcached_v1beta1_production.yaml",
        ]
    );
}

const MOVED: &str = "spec.security.networkPolicy is where the Go operator (C5C3/memcached-operator) has the NetworkPolicy settings: it is honoured as spec.networkPolicy, this API's place for them (see docs/migration.md)";
const CONFLICT: &str = "spec.security.networkPolicy: Forbidden: differs from spec.networkPolicy: both set the NetworkPolicy (spec.security.networkPolicy is where the Go operator has it); set only one of them, or both to the same value";

/// A network policy with one source.
fn restricted(app: &str) -> Value {
    json!({"enabled": true, "allowedSources": [{"podSelector": {"matchLabels": {"app": app}}}]})
}

/// The named cases of the two places: the errors of a spec with
/// `spec.networkPolicy` (`own`) and `spec.security.networkPolicy` (`go`),
/// and the enabled policy in effect (its one source's app).
macro_rules! network_policy_places {
    ($($name:ident: $own:expr, $go:expr => $errors:expr, $effective:expr;)*) => {$(
        #[test]
        fn $name() {
            let mut spec = json!({});
            let (own, go): (Option<Value>, Option<Value>) = ($own, $go);
            if let Some(own) = own {
                spec["networkPolicy"] = own;
            }
            if let Some(go) = go {
                spec["security"] = json!({"networkPolicy": go});
            }
            let expected: &[&str] = &$errors;
            assert_eq!(errors(spec.clone()), expected);
            let defaulted = defaulted(spec);
            let app = defaulted
                .effective_network_policy()
                .filter(|n| n.enabled == Some(true))
                .and_then(|n| n.allowed_sources.as_ref()?[0].pod_selector.clone())
                .and_then(|s| s.match_labels?.get("app").cloned());
            let effective: Option<&str> = $effective;
            assert_eq!(app.as_deref(), effective);
        }
    )*};
}

network_policy_places! {
    only_spec_network_policy: Some(restricted("a")), None => [], Some("a");
    only_security_network_policy: None, Some(restricted("a")) => [], Some("a");
    both_places_equal: Some(restricted("a")), Some(restricted("a")) => [], Some("a");
    both_places_different: Some(restricted("a")), Some(restricted("b")) => [CONFLICT], Some("a");
    both_places_one_disabled: Some(json!({"enabled": false})), Some(restricted("b")) => [CONFLICT], None;
    neither_place: None, None => [], None;
    security_network_policy_peers_are_validated_where_they_are:
        None, Some(json!({"enabled": true, "allowedSources": [{}]})) =>
        ["spec.security.networkPolicy.allowedSources[0]: Required value: must specify a peer"], None;
    equal_places_are_validated_once:
        Some(json!({"enabled": true, "allowedSources": [{}]})),
        Some(json!({"enabled": true, "allowedSources": [{}]})) =>
        ["spec.networkPolicy.allowedSources[0]: Required value: must specify a peer"], None;
    different_places_are_each_validated:
        Some(json!({"enabled": true, "allowedSources": [{}]})),
        Some(json!({"allowedSources": [{}]})) =>
        [CONFLICT,
         "spec.networkPolicy.allowedSources[0]: Required value: must specify a peer",
         "spec.security.networkPolicy.allowedSources[0]: Required value: must specify a peer"], None;
}

fn cr(spec: Value) -> Value {
    memcached(spec)
        .version("v1alpha1")
        .namespace("default")
        .json()
}

#[test]
fn admission_keeps_security_network_policy_where_it_is_and_says_so() {
    let Decision::Mutate { object, warnings } =
        create(&cr(json!({"security": {"networkPolicy": restricted("a")}})))
    else {
        panic!("expected a mutation")
    };
    assert_eq!(object["spec"]["security"]["networkPolicy"], restricted("a"));
    assert_eq!(object["spec"].get("networkPolicy"), None);
    assert_eq!(warnings, [MOVED]);
}

#[test]
fn admission_names_where_an_open_network_policy_is() {
    let Decision::Mutate { warnings, .. } = create(&cr(
        json!({"security": {"networkPolicy": {"enabled": true}}}),
    )) else {
        panic!("expected a mutation")
    };
    assert_eq!(
        warnings,
        [
            MOVED,
            "spec.security.networkPolicy.enabled without spec.security.networkPolicy.allowedSources: the NetworkPolicy allows every pod in every namespace to reach memcached; list allowedSources to restrict it",
        ]
    );
}

#[test]
fn admission_refuses_the_two_places_different() {
    let spec =
        json!({"networkPolicy": restricted("a"), "security": {"networkPolicy": restricted("b")}});
    let Decision::Reject { message, code, .. } = create(&cr(spec)) else {
        panic!("admitted")
    };
    assert_eq!(code, 400);
    assert_eq!(
        message,
        format!(r#"Memcached.memcached.c5c3.io "my-cache" is invalid: {CONFLICT}"#)
    );
}

#[test]
fn admission_refuses_security_network_policy_that_is_not_an_object() {
    let Decision::Reject { message, .. } =
        create(&cr(json!({"security": {"networkPolicy": [true]}})))
    else {
        panic!("admitted")
    };
    assert_eq!(
        message,
        "object cannot be decoded: spec.security.networkPolicy: invalid type: array, expected an object"
    );
}

#[test]
fn security_network_policy_sources_are_bounded() {
    let sources = vec![json!({"podSelector": {}}); 101];
    assert_eq!(
        errors(
            json!({"security": {"networkPolicy": {"enabled": true, "allowedSources": sources}}})
        ),
        ["spec.security.networkPolicy.allowedSources: Too many: 101: must have at most 100 items"]
    );
}
