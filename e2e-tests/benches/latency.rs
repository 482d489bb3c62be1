//! Evaluation latency of the policy: policy.wasm through the waPC host on
//! wasmtime versus the same logic called natively. Prints p50/p99 per CR and
//! the wasm/native ratio; asserts nothing (`make bench`).

use std::time::{Duration, Instant};

use e2e_tests::{Policy, fixtures, policy_path};
use serde_json::json;

const WARMUP: usize = 200;
const ITERATIONS: usize = 5_000;

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

fn measure(mut call: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..WARMUP {
        call();
    }
    let samples = (0..ITERATIONS)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    percentiles(samples)
}

fn main() {
    let size = std::fs::metadata(policy_path())
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "policy.wasm: {size} bytes ({:.1} KiB, limit 1024 KiB)",
        size as f64 / 1024.0
    );
    let started = Instant::now();
    let policy = Policy::load().expect("policy.wasm loads");
    println!(
        "module load (compile + instantiate): {:?}",
        started.elapsed()
    );

    let all = fixtures();
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "CR", "wasm p50", "wasm p99", "native p50", "native p99", "ratio"
    );
    for name in [
        "seed-minimal-cr-after-defaulting-v1beta1",
        "seed-valid-cr-with-all-features-v1beta1",
        "seed-multiple-violations-v1beta1",
    ] {
        let fixture = all
            .iter()
            .find(|f| f.name == name)
            .expect("bench fixture exists");
        let payload = json!({"request": fixture.review["request"], "settings": {}}).to_string();
        let (wasm_p50, wasm_p99) = measure(|| {
            policy
                .call_raw("validate", payload.as_bytes())
                .expect("validate answers");
        });
        let (native_p50, native_p99) = measure(|| {
            std::hint::black_box(
                memcached_policy::validate(payload.as_bytes()).expect("validate answers"),
            );
        });
        let ratio = wasm_p50.as_secs_f64() / native_p50.as_secs_f64();
        println!(
            "{name:<44} {wasm_p50:>10.1?} {wasm_p99:>10.1?} {native_p50:>10.1?} {native_p99:>10.1?} {ratio:>6.2}x"
        );
    }
}
