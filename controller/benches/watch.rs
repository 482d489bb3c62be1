//! The controller's footprint while it watches 100 Memcached objects: the
//! real Controller and reconcile, against the in-memory API server of the
//! tests (itself counted in the RSS). Prints numbers, asserts nothing.

use std::time::{Duration, Instant};

use memcached_controller::run::controller;
use serde_json::json;
use test_support::fake_api::{NS, Shared, context_and_writers, path};
use test_support::object::memcached;

const OBJECTS: usize = 100;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let api = Shared::default();
        for i in 0..OBJECTS {
            let name = format!("cache-{i}");
            let cr = memcached(json!({"replicas": 2, "monitoring": {"enabled": i % 2 == 0}, "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}}))
                .name(&name)
                .namespace(NS)
                .uid(&format!("uid-{i}"))
                .generation(1)
                .json();
            api.lock().unwrap().objects.insert(path("memcached.c5c3.io/v1beta1", "memcacheds", &name), cr);
        }
        let before = rss_kib();
        let (ctx, writers) = context_and_writers(api.clone());
        let metrics = ctx.metrics.clone();
        let started = Instant::now();
        tokio::spawn(controller(None, ctx, writers, futures::stream::pending(), std::future::pending()));
        let statuses = || api.lock().unwrap().objects.values().filter(|o| o["kind"] == "Memcached" && !o["status"].is_null()).count();
        while statuses() < OBJECTS && started.elapsed() < Duration::from_secs(120) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let converged = started.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("{} of {OBJECTS} Memcached objects reconciled in {converged:.2?}; {} reconciles", statuses(), metrics.reconcile_count());
        println!("RSS: {:.1} MiB while watching {OBJECTS} objects (before the controller: {:.1} MiB; goal <= 30 MiB; mocked API server in-process)",
            rss_kib() as f64 / 1024.0, before as f64 / 1024.0);
    });
}
