//! Kubewarden the way its users run it (`make bench-kubewarden`), on the
//! real node of `make e2e-node`: the time from `kubectl apply -f
//! deploy/policy.yaml` to `active`; admission latency as kube-apiserver
//! measures it, through the suite's policy-server process (the fast path of
//! the kwok suites) and then through the PolicyServer pod kubewarden-controller
//! runs, idle (200 server-side dry runs) and in a burst of 200 Memcacheds
//! created at once; and the audit scanner's run over them. Reported, never
//! asserted.

use std::time::{Duration, Instant};

use e2e_tests::harness::clients::webhook_latency::Histogram;
use e2e_tests::harness::environment::kubewarden_charts;
use e2e_tests::harness::scenarios::scenario::{ensure_namespace, memcached_list};
use e2e_tests::harness::{Env, wait_for};

const NAMESPACE: &str = "bench";
const MANY: usize = 200;

fn main() {
    e2e_tests::harness::enter_network_namespace();
    if let Err(e) = bench() {
        eprintln!("bench-kubewarden: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let workdir = std::env::temp_dir().join("memcached-bench-kubewarden");
    let Some(env) = Env::start_with(&workdir, true)? else {
        return Ok(());
    };
    ensure_namespace(&env, NAMESPACE)?;
    let webhook = env.protect.webhook_name();
    let idle = |prefix: &str| -> Result<Histogram, String> {
        let before = Histogram::read(&env.kubectl, &webhook)?;
        // Server-side dry runs pass admission like real creates and store nothing.
        let outcome = env.kubectl.run(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&memcached_list(NAMESPACE, prefix, MANY)),
        );
        if !outcome.success {
            return Err(outcome.stderr);
        }
        Ok(Histogram::read(&env.kubectl, &webhook)?.since(&before))
    };
    println!(
        "the suite's policy-server process, idle: {}",
        idle("process")?.summary()
    );

    env.unregister(&env.protect)?;
    let took = env.kubewarden_takes_over()?;
    println!(
        "Kubewarden {}: charts installed and the PolicyServer Ready in {:.1} s; \
         deploy/policy.yaml and deploy/policy-audit.yaml active {:.1} s after kubectl apply",
        kubewarden_charts::VERSION,
        took.installed.as_secs_f64(),
        took.active.as_secs_f64()
    );
    println!("the PolicyServer pod, idle: {}", idle("pod")?.summary());

    let before = Histogram::read(&env.kubectl, &webhook)?;
    let applied = Instant::now();
    env.kubectl
        .apply(&memcached_list(NAMESPACE, "many", MANY))?;
    let created = applied.elapsed();
    println!(
        "the PolicyServer pod, {MANY} Memcacheds in one kubectl apply (created in {:.1} s): {}",
        created.as_secs_f64(),
        Histogram::read(&env.kubectl, &webhook)?
            .since(&before)
            .summary()
    );

    let scanned = kubewarden_charts::audit(&env.kubectl, "audit-bench")?;
    let reports = wait_for(
        "a report on each Memcached",
        Duration::from_secs(60),
        || {
            let reports = kubewarden_charts::reports(&env.kubectl, NAMESPACE)?;
            if reports.len() >= MANY {
                Ok(reports)
            } else {
                Err(format!("{} reports", reports.len()))
            }
        },
    )?;
    let failing = reports
        .values()
        .filter(|results| results.iter().any(|r| r.result == "fail"))
        .count();
    println!(
        "audit scanner: {} Memcacheds scanned by both policies in {:.1} s (Job created to complete), {failing} failing",
        reports.len(),
        scanned.as_secs_f64()
    );
    Ok(())
}
