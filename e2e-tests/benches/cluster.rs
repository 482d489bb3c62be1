//! Numbers on the real control plane (`make bench-e2e`, inside
//! `e2e-tests/testbed/netns.sh`): control-plane start, kubectl apply to Ready,
//! admission latency through Kubewarden's policy-server as the API server
//! measures it, and 200 Memcached objects created at once. Reported, never asserted.

use std::time::{Duration, Instant};

use e2e_tests::harness::clients::webhook_latency::Histogram;
use e2e_tests::harness::scenarios::scenario::memcached_list;
use e2e_tests::harness::{Env, condition_status, wait_for};
use serde_json::{Value, json};
use test_support::object;

const NAMESPACE: &str = "bench";
const MANY: usize = 200;

fn main() {
    if let Err(e) = bench() {
        eprintln!("bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let started = Instant::now();
    let Some(env) = Env::start(&std::env::temp_dir().join("memcached-bench"))? else {
        return Ok(());
    };
    println!(
        "control plane start: {:.2} s (with CRD, registry push/pull, policy-server, webhook, RBAC and controller: {:.2} s)",
        env.cluster.start_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let kubectl = &env.kubectl;
    kubectl.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            .to_string(),
    )?;

    let mut to_ready = Vec::new();
    for i in 0..5 {
        let name = format!("single-{i}");
        let applied = Instant::now();
        kubectl.apply(&memcached(&name).to_string())?;
        wait_for("Ready", Duration::from_secs(120), || {
            ready_count(&env, &format!("metadata.name={name}")).and_then(|n| {
                if n == 1 {
                    Ok(())
                } else {
                    Err("not yet".into())
                }
            })
        })?;
        to_ready.push(applied.elapsed());
    }
    to_ready.sort();
    println!(
        "kubectl apply -> Ready (1 replica), 5 runs: median {:.2} s, max {:.2} s",
        to_ready[2].as_secs_f64(),
        to_ready[4].as_secs_f64()
    );

    let webhook = env.protect.webhook_name();
    let served = || env.policy_server.request_latencies(&env.protect.id());
    let served_before = served()?.len();
    let quiet = Histogram::read(kubectl, &webhook)?;
    // Server-side dry runs pass admission like real creates and store nothing.
    let dry_run = kubectl.run(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&memcached_list(NAMESPACE, "dry", MANY)),
    );
    if !dry_run.success {
        return Err(dry_run.stderr);
    }
    let before_burst = Histogram::read(kubectl, &webhook)?;
    report_latency("one at a time, idle cluster", &before_burst.since(&quiet));
    report_served(served()?.split_off(served_before));

    let reconciles_before = env.operator()?.reconciles()?;
    let served_before = served()?.len();
    let applied = Instant::now();
    kubectl.apply(&memcached_list(NAMESPACE, "many", MANY))?;
    let created = applied.elapsed();
    wait_for("200 Memcached Ready", Duration::from_secs(600), || {
        let ready = ready_count(&env, "")?;
        if ready >= MANY + 5 {
            Ok(())
        } else {
            Err(format!("{ready} Ready"))
        }
    })?;
    let all_ready = applied.elapsed();
    let operator = env.operator()?;
    println!(
        "{MANY} Memcached in one kubectl apply: created in {:.1} s, all Ready after {:.1} s; controller RSS {:.1} MiB, {} reconciles",
        created.as_secs_f64(),
        all_ready.as_secs_f64(),
        operator.rss_kib().unwrap_or(0) as f64 / 1024.0,
        operator.reconciles()? - reconciles_before
    );
    report_latency(
        "during the 200-object burst (2 cores shared with the whole cluster)",
        &Histogram::read(kubectl, &webhook)?.since(&before_burst),
    );
    report_served(served()?.split_off(served_before));
    Ok(())
}

fn report_latency(phase: &str, histogram: &Histogram) {
    println!(
        "policy-server webhook latency seen by kube-apiserver, {phase} {}",
        histogram.summary()
    );
}

/// The same requests as policy-server's own request log timed them (TLS
/// read to answer; millisecond resolution).
fn report_served(mut served: Vec<Duration>) {
    if served.is_empty() {
        return;
    }
    served.sort();
    println!(
        "  the same requests inside policy-server (its request log, ms resolution): p50 {} ms, p99 {} ms",
        served[served.len() / 2].as_millis(),
        served[served.len() * 99 / 100].as_millis()
    );
}

fn memcached(name: &str) -> Value {
    object::memcached(json!({}))
        .name(name)
        .namespace(NAMESPACE)
        .json()
}

fn ready_count(env: &Env, field_selector: &str) -> Result<usize, String> {
    let mut args = vec!["memcached", "-n", NAMESPACE];
    if !field_selector.is_empty() {
        args.extend(["--field-selector", field_selector]);
    }
    let list = env.kubectl.get(&args)?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|mc| condition_status(mc, "Ready") == Some("True"))
        .count())
}
