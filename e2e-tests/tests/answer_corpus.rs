//! The policy's answers to a fixed corpus, written out byte for byte so that a
//! refactoring can be proven to change none of them: `CORPUS_OUT=<dir> cargo
//! test -p e2e-tests --test answer_corpus -- --ignored` before and after, then
//! `cmp` the files. `native.jsonl` holds the native build's answers;
//! `CORPUS_WASM=1` adds `wasm.jsonl`, the answers of the built policy.wasm
//! (`make policy.wasm`) through the waPC host.
//!
//! The corpus: `CORPUS_REQUESTS` (120,000) requests of the property suite's
//! generator, each judged at one of several settings and namespace labels in
//! turn, then every boundary spec of the differential suite created and
//! updated, then 40,000 merges of several boundary specs (created, and updated
//! from another merge), then every fixture with its own settings.

use std::io::Write;

use e2e_tests::Policy;
use e2e_tests::generate::{Rng, boundary_specs, request};
use memcached_api::admission::NamespaceEnforce;
use serde_json::{Value, json};

/// Requests made of merged boundary specs.
const MERGED: usize = 40_000;

const SETTINGS: [&str; 6] = [
    r#"{}"#,
    r#"{"mutate": false, "memoryOverhead": "16Mi"}"#,
    r#"{"podSecurityLevel": "baseline"}"#,
    r#"{"podSecurityLevel": "privileged"}"#,
    r#"{"memoryOverhead": "64Mi"}"#,
    r#"{"podSecurityLevel": "baseline", "mutate": false}"#,
];

/// The namespace labels a request is judged under, in turn.
fn label(i: usize) -> NamespaceEnforce {
    match i % 5 {
        0 | 1 => NamespaceEnforce::Label(None),
        2 => NamespaceEnforce::Label(Some("restricted".into())),
        3 => NamespaceEnforce::Label(Some("baseline".into())),
        _ => NamespaceEnforce::Unreadable("namespaces \"n\" is forbidden".into()),
    }
}

/// Every request of the corpus with its settings and namespace label.
fn corpus() -> Vec<(Value, Value, usize)> {
    let count: usize = std::env::var("CORPUS_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120_000);
    let settings =
        |i: usize| -> Value { serde_json::from_str(SETTINGS[i % SETTINGS.len()]).unwrap() };
    let mut rng = Rng::new(0x636f_7270_7573_0001);
    let mut all: Vec<(Value, Value, usize)> = (0..count)
        .map(|i| (request(&mut rng), settings(i / 5), i))
        .collect();
    let object = |spec: &Value| {
        json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "namespace": "n"}, "spec": spec})
    };
    let base = |operation: &str, spec: &Value, old: Value| {
        json!({"uid": "u", "operation": operation, "name": "c", "namespace": "n",
            "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
            "resource": {"group": "memcached.c5c3.io", "version": "v1beta1", "resource": "memcacheds"},
            "object": object(spec), "oldObject": old})
    };
    let specs = boundary_specs();
    for (i, (_, spec)) in specs.iter().enumerate() {
        for s in 0..SETTINGS.len() {
            all.push((base("CREATE", spec, Value::Null), settings(s), i + s));
        }
        let mut old = object(&specs[(i + 1) % specs.len()].1);
        old["status"] = json!({"replicas": 3, "readyReplicas": 3});
        all.push((base("UPDATE", spec, old), settings(i), i));
    }
    // Several boundary specs merged into one: mostly plausible objects with
    // many fields set, the old object of an update another such merge.
    let mut state = 0x6d65_7267_6564_0001_u64;
    let mut below = |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    // Half of the merges are of specs admitted alone, so most are admitted too.
    let every: Vec<&Value> = specs.iter().map(|(_, spec)| spec).collect();
    let admitted: Vec<&Value> = (every.iter().copied())
        .filter(|spec| {
            let create = base("CREATE", spec, Value::Null);
            let answer = memcached_policy::request::evaluate_with(
                &payload(&create, &json!({})),
                |_: &str| NamespaceEnforce::NotRead,
            );
            answer.accepted
        })
        .collect();
    let merged = |pool: &[&Value], below: &mut dyn FnMut(usize) -> usize| {
        let mut spec = json!({});
        for _ in 0..1 + below(4) {
            merge(&mut spec, pool[below(pool.len())]);
        }
        spec
    };
    for i in 0..MERGED {
        let pool = if (i / 2) % 2 == 0 { &every } else { &admitted };
        let spec = merged(pool, &mut below);
        let request = if i % 2 == 0 {
            base("CREATE", &spec, Value::Null)
        } else {
            let mut old = object(&merged(pool, &mut below));
            match below(4) {
                0 => {}
                1 => old["status"] = json!({"replicas": below(6)}),
                _ => old["status"] = json!({"replicas": below(6), "readyReplicas": below(6)}),
            }
            base("UPDATE", &spec, old)
        };
        all.push((request, settings(below(SETTINGS.len())), below(5)));
    }
    // What a user's JSON holds that the typed spec does not: nulls, unknown
    // fields in modelled objects and list items, empty sections and lists.
    for (i, spec) in edge_specs().iter().enumerate() {
        for s in 0..SETTINGS.len() {
            all.push((base("CREATE", spec, Value::Null), settings(s), i + s));
            let mut old = object(&specs[(i * 7 + s) % specs.len()].1);
            old["status"] = json!({"replicas": s});
            all.push((base("UPDATE", spec, old), settings(s), i + s));
        }
    }
    for fixture in e2e_tests::fixtures() {
        let request = fixture.review["request"].clone();
        all.push((request, fixture.expected.settings.clone(), 0));
    }
    all
}

/// Specs with nulls, unknown fields, empty objects and lists where defaulting
/// fills or merges.
fn edge_specs() -> Vec<Value> {
    let mut specs = vec![
        json!({"replicas": null, "image": null, "memcached": null, "security": null}),
        json!({"memcached": {"threads": null, "maxMemoryMB": 128, "x-unknown": 1}}),
        json!({"memcached": {}, "security": {}, "highAvailability": {}, "monitoring": {}}),
        json!({"security": {"podSecurityContext": {}, "containerSecurityContext": {"capabilities": {}}}}),
        json!({"security": {"podSecurityContext": null, "containerSecurityContext": {"capabilities": null, "extra": true}}}),
        json!({"security": {"containerSecurityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": []}}}}),
        json!({"security": {"containerSecurityContext": {"capabilities": {"drop": null}}, "podSecurityContext": {"runAsUser": null}}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": []}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": null, "behavior": null}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "behavior": {}}, "replicas": null}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}, "extra": 1}}]},
            "resources": {"requests": {"cpu": "100m"}}}),
        json!({"tolerations": [{"operator": "Exists", "unknown": 1, "value": null}], "image": null}),
        json!({"tolerations": [], "podLabels": {}, "nodeSelector": null, "imagePullSecrets": []}),
        json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": null}, "antiAffinityPreset": null}}),
        json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": "50%", "unknown": {}}}, "replicas": 2}),
        json!({"monitoring": {"enabled": true, "serviceMonitor": {}, "exporterImage": null}}),
        json!({"monitoring": {"enabled": false, "serviceMonitor": {"interval": null, "additionalLabels": {}}}}),
        json!({"warmRestart": {}, "networkPolicy": {"enabled": true, "allowedSources": []}, "service": {}}),
        json!({"warmRestart": {"enabled": null}, "memcached": {"extraArgs": []}}),
        json!({"resources": {"limits": {"memory": "1Gi"}, "requests": null, "claims": []}}),
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "a", "x": 1}},
            "tls": {"enabled": true, "certificateSecretRef": {"name": "t"}, "enableClientCert": null}}}),
        json!({"podAnnotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}, "security": {}}),
        // Sections of the wrong type, which serde would read field by field.
        json!({"memcached": [64]}),
        json!({"highAvailability": {"gracefulShutdown": [true], "podDisruptionBudget": "x"}}),
        json!({"highAvailability": null, "monitoring": {"serviceMonitor": 3}}),
        json!({"security": {"sasl": null, "tls": ["x"]}, "service": true}),
        json!({"networkPolicy": [], "autoscaling": {"enabled": true}}),
    ];
    // Each with an unknown top-level field and the replicas an autoscaler takes over.
    let more: Vec<Value> = specs
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s["unmodelled"] = json!({"kept": [1, null]});
            s
        })
        .collect();
    specs.extend(more);
    specs
}

/// `from`'s fields written over `into`'s, objects merged recursively.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                merge(into.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (into, from) => *into = from.clone(),
    }
}

fn payload(request: &Value, settings: &Value) -> Vec<u8> {
    json!({"request": request, "settings": settings})
        .to_string()
        .into_bytes()
}

#[test]
#[ignore = "writes the corpus' answers to CORPUS_OUT"]
fn write_the_answers_to_the_corpus() {
    let dir = std::path::PathBuf::from(std::env::var("CORPUS_OUT").expect("CORPUS_OUT=<dir>"));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = corpus();
    let mut native =
        std::io::BufWriter::new(std::fs::File::create(dir.join("native.jsonl")).unwrap());
    for (request, settings, i) in &corpus {
        let enforce = |_: &str| label(*i);
        let answer = memcached_policy::request::evaluate_with(&payload(request, settings), enforce);
        native
            .write_all(&serde_json::to_vec(&answer).unwrap())
            .unwrap();
        native.write_all(b"\n").unwrap();
    }
    native.flush().unwrap();
    if std::env::var_os("CORPUS_WASM").is_some() {
        let policy = Policy::load().unwrap();
        let mut wasm =
            std::io::BufWriter::new(std::fs::File::create(dir.join("wasm.jsonl")).unwrap());
        for (request, settings, _) in &corpus {
            let answer = policy.validate(request, settings).unwrap();
            wasm.write_all(answer.to_string().as_bytes()).unwrap();
            wasm.write_all(b"\n").unwrap();
        }
        wasm.flush().unwrap();
    }
    println!("{} answers written to {}", corpus.len(), dir.display());
}
