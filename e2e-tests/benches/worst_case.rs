//! The most expensive requests we can build under the API server's 3 MiB
//! request-body limit, through policy.wasm on the waPC host, beside the
//! full-featured CR of the seeds. Prints the median time of each and its ratio
//! to the full-featured CR's; asserts nothing (`make bench`).

use std::time::{Duration, Instant};

use e2e_tests::{Policy, fixtures};
use serde_json::{Value, json};

/// The API server refuses request bodies above 3 MiB.
const BODY_LIMIT: usize = 3 * 1024 * 1024;

fn median(policy: &Policy, payload: &[u8], iterations: usize) -> Duration {
    for _ in 0..iterations.min(5) {
        policy
            .call_raw("validate", payload)
            .expect("validate answers");
    }
    let mut samples: Vec<Duration> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(
                policy
                    .call_raw("validate", payload)
                    .expect("validate answers"),
            );
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[samples.len() / 2]
}

/// The request of the full-featured seed with `spec` merged over its spec.
fn with_spec(base: &Value, spec: Value) -> Value {
    let mut request = base.clone();
    let target = request["object"]["spec"].as_object_mut().expect("spec");
    for (k, v) in spec.as_object().expect("object").clone() {
        target.insert(k, v);
    }
    request
}

/// Grow the value `fill` returns for `n` until the payload nears the body limit.
fn fill_to_limit(base: &Value, mut spec: impl FnMut(usize) -> Value) -> Value {
    let (mut low, mut high) = (1usize, 1usize << 22);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if payload(&with_spec(base, spec(mid))).len() <= BODY_LIMIT {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    with_spec(base, spec(low))
}

fn payload(request: &Value) -> Vec<u8> {
    json!({"request": request, "settings": {}})
        .to_string()
        .into_bytes()
}

fn labels(n: usize, value: &str) -> Value {
    (0..n)
        .map(|i| {
            (
                format!("example.com/{}{i:03}", "k".repeat(50)),
                json!(value),
            )
        })
        .collect()
}

/// Every bounded list and map at its bound with valid, walkable items; the
/// unbounded lists inside them (selector values) take the rest of the body.
fn everything_at_its_bounds(values: usize) -> Value {
    let selector = json!({"matchLabels": labels(8, "web"), "matchExpressions": [
        {"key": "tier", "operator": "In", "values": vec!["v".repeat(60); values]}]});
    json!({
        "memcached": {"extraArgs": vec![format!("-o{}", "modern,".repeat(584)); 100]},
        "podLabels": labels(64, &"v".repeat(63)),
        "podAnnotations": labels(128, &"a".repeat(1900)),
        "nodeSelector": labels(64, &"v".repeat(63)),
        "tolerations": vec![json!({"key": "example.com/dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"}); 100],
        "highAvailability": {"antiAffinityPreset": "hard", "topologySpreadConstraints": (0..32).map(|i| json!({
            "maxSkew": 1, "topologyKey": format!("zone{i}"), "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector, "matchLabelKeys": ["pod-template-hash"]})).collect::<Vec<_>>(),
            "podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}},
        "networkPolicy": {"enabled": true, "allowedSources": vec![json!({"podSelector": selector, "namespaceSelector": selector}); 100]},
        "service": {"annotations": labels(128, &"a".repeat(1900))},
        "imagePullSecrets": vec![json!({"name": "pull"}); 32],
    })
}

/// Every item an error: 100 extraArgs of bundled managed flags, bad labels,
/// tolerations and peers; the error list is as long as it gets.
fn every_item_an_error(values: usize) -> Value {
    let bad = |n: usize| -> Value {
        (0..n)
            .map(|i| (format!("bad key {i}"), json!("bad value")))
            .collect()
    };
    json!({
        "memcached": {"extraArgs": vec!["-vdm64"; 100], "maxItemSize": "700k"},
        "podLabels": bad(64), "podAnnotations": bad(128), "nodeSelector": bad(64),
        "tolerations": vec![json!({"key": "bad key", "operator": "In", "value": "x y", "effect": "Never"}); 100],
        "networkPolicy": {"enabled": true, "allowedSources": vec![json!({"podSelector": {"matchExpressions": [
            {"key": "bad key", "operator": "In", "values": vec!["bad value"; values]}]}}); 100]},
    })
}

fn main() {
    let policy = Policy::load().expect("policy.wasm loads");
    let all = fixtures();
    let full = &all
        .iter()
        .find(|f| f.name == "seed-valid-cr-with-all-features-v1beta1")
        .expect("the full-featured fixture exists")
        .review["request"];
    let baseline = median(&policy, &payload(full), 2000);
    println!(
        "{:<52} {:>10} {:>12} {:>8}",
        "request", "bytes", "wasm p50", "ratio"
    );
    println!(
        "{:<52} {:>10} {:>12.1?} {:>7.1}x",
        "full-featured CR (seed)",
        payload(full).len(),
        baseline,
        1.0
    );
    let cases: [(&str, Value); 5] = [
        (
            "every list and map at its bound, valid",
            fill_to_limit(full, |n| everything_at_its_bounds(n / 3200)),
        ),
        (
            "every item an error",
            fill_to_limit(full, |n| every_item_an_error(n / 1300)),
        ),
        (
            "extraArgs of 3 MiB (refused: Too many)",
            fill_to_limit(
                full,
                |n| json!({"memcached": {"extraArgs": vec!["-vdm64"; n]}}),
            ),
        ),
        (
            "tolerations of 3 MiB (refused: Too many)",
            fill_to_limit(
                full,
                |n| json!({"tolerations": vec![json!({"operator": "Exists"}); n / 20 + 1]}),
            ),
        ),
        (
            "3 MiB unmodelled field (decoding only)",
            fill_to_limit(full, |n| json!({"unmodelled": "x".repeat(n)})),
        ),
    ];
    let mut worst = (String::new(), Duration::ZERO);
    for (name, request) in cases {
        let body = payload(&request);
        let time = median(&policy, &body, 15);
        let ratio = time.as_secs_f64() / baseline.as_secs_f64();
        println!("{name:<52} {:>10} {time:>12.1?} {ratio:>7.1}x", body.len());
        if time > worst.1 {
            worst = (name.to_string(), time);
        }
    }
    println!(
        "worst: {} at {:.1?}, {:.1}x the full-featured CR (goal: <= 10x)",
        worst.0,
        worst.1,
        worst.1.as_secs_f64() / baseline.as_secs_f64()
    );
}
