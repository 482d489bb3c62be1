//! Numbers on the real control plane (`make bench-e2e`, inside
//! `e2e-tests/netns.sh`): control-plane start, kubectl apply to Ready,
//! admission latency through Kubewarden's policy-server as the API server
//! measures it, and 200 Memcached objects created at once. Reported, never asserted.

use std::time::{Duration, Instant};

use e2e_tests::cluster::{Env, condition_status, wait_for};
use serde_json::{Value, json};

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
    let quiet = webhook_histogram(&kubectl.ok(&["get", "--raw", "/metrics"])?, &webhook);
    // Server-side dry runs pass admission like real creates and store nothing.
    let dry_run = kubectl.run(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&list(MANY, "dry").to_string()),
    );
    if !dry_run.success {
        return Err(dry_run.stderr);
    }
    let metrics = kubectl.ok(&["get", "--raw", "/metrics"])?;
    report_latency(
        "one at a time, idle cluster",
        &since(&webhook_histogram(&metrics, &webhook), &quiet),
    );
    report_served(served()?.split_off(served_before));

    let reconciles_before = env.operator()?.reconciles()?;
    let before_burst = webhook_histogram(&metrics, &webhook);
    let served_before = served()?.len();
    let applied = Instant::now();
    kubectl.apply(&list(MANY, "many").to_string())?;
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
    let metrics = kubectl.ok(&["get", "--raw", "/metrics"])?;
    report_latency(
        "during the 200-object burst (2 cores shared with the whole cluster)",
        &since(&webhook_histogram(&metrics, &webhook), &before_burst),
    );
    report_served(served()?.split_off(served_before));
    Ok(())
}

/// `count` minimal Memcached objects named `<prefix>-<i>`, as one List.
fn list(count: usize, prefix: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": (0..count).map(|i| memcached(&format!("{prefix}-{i}"))).collect::<Vec<_>>(),
    })
}

fn report_latency(phase: &str, histogram: &[(f64, f64)]) {
    let total = histogram.last().map_or(0.0, |(_, count)| *count);
    println!(
        "policy-server webhook latency seen by kube-apiserver, {phase} ({total} requests): p50 {}, p99 {}; {:.1}% within 5 ms",
        quantile(histogram, 0.50),
        quantile(histogram, 0.99),
        100.0 * bucket_count(histogram, 0.005) / total.max(1.0)
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

/// The observations of `now` that `before` had not seen.
fn since(now: &[(f64, f64)], before: &[(f64, f64)]) -> Vec<(f64, f64)> {
    now.iter()
        .map(|&(bound, count)| (bound, count - bucket_count(before, bound)))
        .collect()
}

fn memcached(name: &str) -> Value {
    json!({
        "apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {},
    })
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

/// Cumulative (upper bound, count) of
/// `apiserver_admission_webhook_admission_duration_seconds` for the webhook
/// named `webhook`, summed over operations and outcomes.
fn webhook_histogram(metrics: &str, webhook: &str) -> Vec<(f64, f64)> {
    let label = format!("name=\"{webhook}\"");
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in metrics.lines() {
        let Some(rest) =
            line.strip_prefix("apiserver_admission_webhook_admission_duration_seconds_bucket{")
        else {
            continue;
        };
        if !rest.contains(&label) {
            continue;
        }
        let Some((labels, count)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(le) = labels
            .split("le=\"")
            .nth(1)
            .and_then(|v| v.split('"').next())
        else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::INFINITY)
        };
        let count: f64 = count.trim().parse().unwrap_or(0.0);
        match buckets.iter_mut().find(|(b, _)| *b == bound) {
            Some((_, c)) => *c += count,
            None => buckets.push((bound, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

fn bucket_count(histogram: &[(f64, f64)], bound: f64) -> f64 {
    histogram
        .iter()
        .find(|(b, _)| *b == bound)
        .map_or(0.0, |(_, c)| *c)
}

/// The q-quantile, interpolated inside its bucket like Prometheus'
/// histogram_quantile, except in the first bucket, where all it can say is
/// "at most 5 ms" (the buckets are coarse: 5 ms, 25 ms, 100 ms...).
fn quantile(histogram: &[(f64, f64)], q: f64) -> String {
    let total = histogram.last().map_or(0.0, |(_, c)| *c);
    if total == 0.0 {
        return "n/a".into();
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(bound, count) in histogram {
        if count >= rank {
            if bound.is_infinite() {
                return format!("> {:.0} ms", lower * 1000.0);
            }
            if lower == 0.0 {
                return format!("<= {:.0} ms", bound * 1000.0);
            }
            let within = if count > below {
                (rank - below) / (count - below)
            } else {
                1.0
            };
            return format!("{:.2} ms", (lower + (bound - lower) * within) * 1000.0);
        }
        (lower, below) = (bound, count);
    }
    "n/a".into()
}
