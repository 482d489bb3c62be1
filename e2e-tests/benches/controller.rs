//! The controller's cost on a real control plane: API requests per converged
//! reconcile (from kube-apiserver's `apiserver_request_total`, before and
//! after a window of periodic reconciles) and the controller's RSS while it
//! holds 200 and 1,000 Memcached objects. Prints numbers, asserts nothing.
//!
//! The objects run zero replicas: the numbers are the controller's, not a
//! thousand memcached processes'.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::harness::{Env, Kubectl, clients::api_requests, scenarios::scenario, wait_for};
use serde_json::json;
use test_support::object::memcached;

const NAMESPACE: &str = "bench-controller";
/// Periodic reconciles in the window: every not-ready object requeues after 10 s.
const WINDOW: Duration = Duration::from_secs(35);
/// What the controller reads and writes.
const RESOURCES: &[&str] = &[
    "memcacheds",
    "deployments",
    "statefulsets",
    "configmaps",
    "services",
    "poddisruptionbudgets",
    "horizontalpodautoscalers",
    "networkpolicies",
    "servicemonitors",
    "secrets",
    "endpointslices",
    "events",
];

fn main() {
    let workdir = std::env::temp_dir().join("memcached-e2e-controller-bench");
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    if let Err(e) = measure(&env) {
        eprintln!("controller bench failed: {e}");
        std::process::exit(1);
    }
}

fn measure(env: &Env) -> Result<(), String> {
    env.kubectl.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            .to_string(),
    )?;
    for total in [200, 1000] {
        create(&env.kubectl, total)?;
        let started = Instant::now();
        wait_for(
            &format!("{total} Memcached objects with a status"),
            Duration::from_secs(600),
            || {
                let seen = with_status(&env.kubectl)?;
                if seen >= total {
                    Ok(())
                } else {
                    Err(format!("{seen} of {total}"))
                }
            },
        )?;
        println!(
            "{total} Memcached objects reconciled {:.1}s after the last apply",
            started.elapsed().as_secs_f64()
        );
        let operator = env.operator()?;
        // Converged: the creations' own writes are done.
        std::thread::sleep(Duration::from_secs(5));
        let requests = request_counts(&env.kubectl)?;
        let reconciles = operator.reconciles()?;
        std::thread::sleep(WINDOW);
        let after = request_counts(&env.kubectl)?;
        let reconciled = operator.reconciles()? - reconciles;
        let mut by_kind: BTreeMap<&str, f64> = BTreeMap::new();
        for (key, count) in &after {
            let delta = count - requests.get(key).copied().unwrap_or(0.0);
            if delta > 0.0 {
                *by_kind.entry(key.as_str()).or_default() += delta;
            }
        }
        let sum: f64 = by_kind.values().sum();
        println!(
            "{total} objects: {reconciled} converged reconciles in {}s, {sum:.0} API requests on the controller's resources: {:.1} per reconcile",
            WINDOW.as_secs(),
            sum / reconciled.max(1) as f64
        );
        for (kind, count) in by_kind {
            println!(
                "    {kind}: {:.2} per reconcile",
                count / reconciled.max(1) as f64
            );
        }
        match operator.rss_kib() {
            Some(kib) => println!(
                "controller RSS with {total} objects: {:.1} MiB",
                kib as f64 / 1024.0
            ),
            None => println!("controller RSS with {total} objects: unknown"),
        }
    }
    Ok(())
}

/// Create `cache-0` .. `cache-<total-1>` (zero replicas) with one kubectl apply.
fn create(kubectl: &Kubectl, total: usize) -> Result<(), String> {
    let items: Vec<_> = (0..total)
        .map(|i| {
            memcached(json!({"replicas": 0}))
                .name(&format!("cache-{i}"))
                .namespace(NAMESPACE)
                .json()
        })
        .collect();
    kubectl
        .apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
        .map(drop)
}

fn with_status(kubectl: &Kubectl) -> Result<usize, String> {
    let list = kubectl.get(&["memcached", "-n", NAMESPACE])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["status"]["observedGeneration"] == m["metadata"]["generation"])
        .count())
}

/// `apiserver_request_total` by `verb resource`, for the controller's resources.
fn request_counts(kubectl: &Kubectl) -> Result<BTreeMap<String, f64>, String> {
    let mut counts = BTreeMap::new();
    for c in api_requests::request_counts(kubectl)? {
        if !RESOURCES.contains(&c.resource.as_str()) || c.verb == "WATCH" {
            continue;
        }
        let key = if c.subresource.is_empty() {
            format!("{} {}", c.verb, c.resource)
        } else {
            format!("{} {}/{}", c.verb, c.resource, c.subresource)
        };
        *counts.entry(key).or_default() += c.count;
    }
    Ok(counts)
}
