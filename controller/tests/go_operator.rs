//! The Go operator's (C5C3/memcached-operator) own objects, read from
//! `../shared/go-operator` (its samples, the first objects of its e2e
//! scenarios): the CRD keeps every field of each (the API server prunes
//! what its schema lacks, silently for clients that do not ask for strict
//! validation), and the controller builds from them what that operator
//! does: a NetworkPolicy where one is enabled, in either place, and the
//! auth file from the Secret key that operator reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memcached_api::Memcached;
use memcached_api::validation::{self, ObjectName, Options};
use memcached_controller::cluster::secrets::{SecretData, auth_file_problem, mounted_auth_key};
use memcached_controller::commands::crd::crd;
use memcached_controller::objects::desired::{Desired, Workload};
use serde_json::Value;

/// `../shared/go-operator` from the workspace root, when it is there.
fn go_operator() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/go-operator");
    let found = dir.is_dir();
    if !found {
        eprintln!(
            "SKIPPED: no {}: the Go operator's objects are not checked",
            dir.display()
        );
    }
    found.then_some(dir)
}

/// Every document of the samples and of the e2e scenarios' `00-*.yaml`,
/// with its file relative to `dir`.
fn documents(dir: &Path) -> Vec<(String, Value)> {
    let samples = std::fs::read_dir(dir.join("samples")).unwrap();
    let mut files: Vec<PathBuf> = samples.map(|e| e.unwrap().path()).collect();
    for scenario in std::fs::read_dir(dir.join("e2e")).unwrap() {
        let scenario = scenario.unwrap().path();
        files.extend(
            std::fs::read_dir(scenario)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("00-")),
        );
    }
    files.sort();
    files
        .into_iter()
        .flat_map(|file| {
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&std::fs::read_to_string(&file).unwrap()).unwrap();
            let name = file.strip_prefix(dir).unwrap().display().to_string();
            docs.into_iter().map(move |d| (name.clone(), d))
        })
        .collect()
}

/// The paths under `value` that `schema` (a CRD's structural schema) has
/// no place for: what the API server would prune.
fn pruned(value: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let child = format!("{path}.{key}");
                match (schema.get("properties"), schema.get("additionalProperties")) {
                    (Some(props), _) if props.get(key).is_some() => {
                        pruned(v, &props[key], &child, out);
                    }
                    (None, Some(additional)) => pruned(v, additional, &child, out),
                    _ => out.push(child),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pruned(v, &schema["items"], &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_crd_keeps_every_field_of_the_go_operators_objects() {
    let Some(dir) = go_operator() else {
        return;
    };
    let crd = serde_json::to_value(crd()).unwrap();
    let schemas: BTreeMap<String, Value> = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let name = v["name"].as_str().unwrap().to_string();
            (name, v["schema"]["openAPIV3Schema"].clone())
        })
        .collect();
    let mut checked = 0;
    for (file, object) in documents(&dir) {
        if object["kind"] != "Memcached" {
            continue;
        }
        let version = object["apiVersion"]
            .as_str()
            .unwrap()
            .split('/')
            .nth(1)
            .unwrap();
        let mut lost = Vec::new();
        pruned(
            &object["spec"],
            &schemas[version]["properties"]["spec"],
            "spec",
            &mut lost,
        );
        assert!(
            lost.is_empty(),
            "{file}: the API server would prune {lost:?}"
        );
        checked += 1;
    }
    assert!(checked >= 30, "{checked} Memcacheds checked");
}

/// The data of a Secret document (`stringData` as the API server stores it).
fn secret_data(secret: &Value) -> BTreeMap<String, Vec<u8>> {
    let strings = secret["stringData"].as_object().unwrap();
    strings
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().as_bytes().to_vec()))
        .collect()
}

#[test]
fn the_go_operators_objects_get_their_network_policy_and_auth_file() {
    let Some(dir) = go_operator() else {
        return;
    };
    let documents = documents(&dir);
    let secrets: SecretData = documents
        .iter()
        .filter(|(_, d)| d["kind"] == "Secret")
        .map(|(_, d)| {
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                secret_data(d),
            )
        })
        .collect();
    let (mut network_policies, mut auth) = (Vec::new(), Vec::new());
    for (file, object) in documents {
        if object["kind"] != "Memcached" || file.starts_with("e2e/webhook-rejection/") {
            continue;
        }
        let mut mc: Memcached = serde_json::from_value(object).unwrap();
        mc.metadata
            .namespace
            .get_or_insert_with(|| "default".into());
        let name = mc.metadata.name.clone().unwrap();
        let object_name = ObjectName {
            name: &name,
            generate_name: "",
        };
        let checked = validation::check(object_name, mc.spec.clone(), &Options::default());
        assert!(checked.errors.is_empty(), "{file}: {:?}", checked.errors);
        let spec = checked.spec;
        let auth_key = mounted_auth_key(&spec, &secrets);
        let desired = Desired::new(&mc, &spec, None, auth_key, &Default::default());
        if let Some(np) = &desired.network_policy {
            network_policies.push(file.clone());
            let spec = np.spec.as_ref().unwrap();
            assert_eq!(
                spec.policy_types.as_deref(),
                Some(&["Ingress".to_string()][..])
            );
            // The production samples' sources (under spec.security.networkPolicy) are its peers.
            let text = serde_json::to_string(np).unwrap();
            assert_eq!(
                text.contains(r#""app":"api-server""#),
                file.contains("production"),
                "{file}"
            );
        }
        if !spec.sasl_enabled() {
            continue;
        }
        let Workload::Deployment(d) = &desired.workload else {
            panic!("{file}: a StatefulSet")
        };
        let pod = d.spec.as_ref().unwrap().template.spec.clone().unwrap();
        let volume = pod
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "auth")
            .unwrap();
        let items = volume.secret.unwrap().items.unwrap_or_default();
        let mapped: Vec<(String, String)> = items.into_iter().map(|i| (i.key, i.path)).collect();
        auth.push((file, mapped, auth_file_problem(&spec, &secrets)));
    }
    assert_eq!(
        network_policies,
        [
            "e2e/network-policy/00-memcached.yaml",
            "e2e/owner-references/00-memcached.yaml",
            "samples/memcached_v1alpha1_production.yaml",
            "samples/memcached_v1beta1_production.yaml",
        ]
    );
    // The e2e Secret's `password-file` is mounted as memcached's `-Y` file;
    // it lacks the final newline memcached 1.6 needs to read its one line, which the
    // controller reports (InvalidAuthSecret) instead of rolling out pods no
    // client can log in to. The production samples' Secret is not among
    // the objects.
    let problem = r#"Secret test-sasl-credentials key "password-file" must end with a newline: memcached up to 1.6.31 drops the last character of an unterminated last line"#;
    let password_file = vec![("password-file".to_string(), "auth".to_string())];
    assert_eq!(
        auth,
        [
            (
                "e2e/sasl-authentication/00-memcached.yaml".to_string(),
                password_file,
                Some(problem.to_string())
            ),
            (
                "samples/memcached_v1alpha1_production.yaml".to_string(),
                vec![],
                None
            ),
            (
                "samples/memcached_v1beta1_production.yaml".to_string(),
                vec![],
                None
            ),
        ]
    );
}
