//! How much of a sharded cache survives scaling, a pod restart and a rollout
//! (`make bench-e2e`, inside `e2e-tests/testbed/netns.sh`), with the client OpenStack
//! uses: pymemcache's `HashClient` (oslo.cache's `dogpile.cache.pymemcache`
//! backend; rendezvous hashing over the configured `host:port` strings), run
//! by `e2e-tests/testbed/sharding.py`.
//!
//! The same steps run against a Memcached in each mode: Deployment, the
//! client configured with the pod IPs (all a client can do to shard over a
//! Deployment), and StatefulSet, the client configured with `status.serverList`
//! (`<pod>.<service>.<namespace>.svc:11211`), names resolved as cluster DNS
//! would from the headless Service's EndpointSlices. 20,000 keys are stored
//! into 3 replicas; then (a) scale to 4, (b) delete one pod, (c) a rolling
//! config change. Every step starts from a full cache (the keys re-stored
//! with the client of the moment) and is measured with the client
//! reconfigured afterwards: the keys still served, whether its configuration
//! changed, and for (b) the time until the replacement pod is Ready and the
//! keys that would be served had it come up with a new address (kwok often
//! hands it the deleted pod's). Reported, never asserted. The same moves
//! with the clients' hashing known to the operator, whose keys are handed
//! over, are `make bench-moves`'s, on the real node (kwok runs no preStop
//! hook).

use std::time::{Duration, Instant};

use e2e_tests::harness::clients::hash_client::{
    ClientConfig, Mode, Pod, bench_env, count, ready_pods, sharding_with, store,
};
use e2e_tests::harness::scenarios::scenario::{SETTLE, memcached, patch, wait_ready};
use e2e_tests::harness::{Env, wait_for};
use serde_json::json;

const NAMESPACE: &str = "sharding";
const KEYS: u64 = 20_000;

/// One step's outcome.
struct Step {
    /// Keys still served by the reconfigured client.
    hits: u64,
    /// The reconfigured client has a different server list.
    changed: bool,
}

/// Every number of one mode.
struct Report {
    stored: u64,
    scale: Step,
    restart: Step,
    /// Deletion to the replacement pod Ready.
    restart_ready: Duration,
    /// The deleted pod, its replacement, and whether the replacement has the deleted one's address.
    replaced: (String, String, bool),
    /// Keys the client after (b) would still find had the replacement come
    /// up with an address no pod had before.
    restart_new_address: u64,
    rollout: Step,
}

fn main() {
    if let Err(e) = bench() {
        eprintln!("bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let Some(env) = bench_env("memcached-sharding-bench", false, NAMESPACE)? else {
        return Ok(());
    };
    let deployment = run(&env, Mode::Deployment)?;
    let statefulset = run(&env, Mode::StatefulSet)?;
    print_table(&deployment, &statefulset);
    Ok(())
}

fn run(env: &Env, mode: Mode) -> Result<Report, String> {
    let name = mode.instance();
    let spec = json!({
        "workload": mode.workload(),
        "replicas": 3,
        // 20,000 small items take about 2 MiB.
        "memcached": {"maxMemoryMB": 64},
    });
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 3)?;
    let mut client = mode.wait_client(env, NAMESPACE, mode.instance(), 3)?;
    let stored = store(&client, KEYS)?;

    // (a) 3 -> 4.
    patch(env, NAMESPACE, name, json!({"spec": {"replicas": 4}}))?;
    wait_ready(env, NAMESPACE, name, 4)?;
    let (scale, next) = measure(env, mode, &client, 4)?;
    client = next;
    store(&client, KEYS)?;

    // (b) One pod deleted; for a StatefulSet the replacement has the same name.
    let pods = ready_pods(env, NAMESPACE, name)?;
    let victim = pods
        .iter()
        .find(|p| matches!(mode, Mode::Deployment) || p.name == format!("{name}-1"))
        .ok_or_else(|| format!("no pod to delete among {pods:?}"))?
        .clone();
    let deleted = Instant::now();
    delete_pod(env, &victim.name)?;
    let replacement = wait_for("the replacement pod Ready", SETTLE, || {
        let now = ready_pods(env, NAMESPACE, name)?;
        now.iter()
            .find(|p| !pods.iter().any(|old| old.uid == p.uid))
            .filter(|_| now.len() == 4 && !now.iter().any(|p| p.uid == victim.uid))
            .cloned()
            .ok_or_else(|| format!("ready pods {now:?}"))
    })?;
    let restart_ready = deleted.elapsed();
    wait_ready(env, NAMESPACE, name, 4)?;
    let (restart, next) = measure(env, mode, &client, 4)?;
    client = next;
    let restart_new_address = count(
        &sharding_with("check", &with_new_address(&client, &replacement), KEYS)?,
        "hits",
    )?;
    store(&client, KEYS)?;

    // (c) A config change rolls every pod.
    patch(
        env,
        NAMESPACE,
        name,
        json!({"spec": {"memcached": {"verbosity": 1}}}),
    )?;
    wait_rolled_out(env, mode, name)?;
    wait_ready(env, NAMESPACE, name, 4)?;
    let (rollout, _) = measure(env, mode, &client, 4)?;

    delete(env, name)?;
    Ok(Report {
        stored,
        scale,
        restart,
        restart_ready,
        replaced: (victim.name, replacement.name, replacement.ip == victim.ip),
        restart_new_address,
        rollout,
    })
}

/// Delete pod `name`, not waiting for it to be gone.
fn delete_pod(env: &Env, name: &str) -> Result<(), String> {
    let args = ["delete", "pod", name, "-n", NAMESPACE, "--wait=false"];
    env.kubectl.ok(&args).map(drop)
}

/// Delete Memcached `name` and wait until its pods are gone.
fn delete(env: &Env, name: &str) -> Result<(), String> {
    let args = [
        "delete",
        "memcached",
        name,
        "-n",
        NAMESPACE,
        "--cascade=foreground",
    ];
    env.kubectl
        .ok(&[&args[..], &["--wait=true"]].concat())
        .map(drop)
}

/// The keys the client reconfigured after a step still finds, and that client.
fn measure(
    env: &Env,
    mode: Mode,
    before: &ClientConfig,
    replicas: usize,
) -> Result<(Step, ClientConfig), String> {
    let after = mode.wait_client(env, NAMESPACE, mode.instance(), replicas)?;
    let hits = count(&sharding_with("check", &after, KEYS)?, "hits")?;
    let changed = after.server_set() != before.server_set();
    Ok((Step { hits, changed }, after))
}

/// `client` as if `pod` had come up with an address no server had before
/// (kwok hands a freed pod IP to the next pod, so a replacement often gets
/// the deleted pod's; most clusters' IPAM does not): its `<ip>:11211` entry
/// becomes a name of its own resolving to that IP, which moves its keys on
/// the hash ring as a new address would, while the server stays reachable.
/// Configured by name (StatefulSet mode), the client does not change.
fn with_new_address(client: &ClientConfig, pod: &Pod) -> ClientConfig {
    let alias = format!("{}.new-address", pod.name);
    let mut moved = client.clone();
    for server in &mut moved.servers {
        if *server == format!("{}:11211", pod.ip) {
            *server = format!("{alias}:11211");
            moved.hosts.insert(alias.clone(), pod.ip.clone());
        }
    }
    moved
}

/// Wait until the workload runs the changed spec everywhere: its pod
/// template has `-v`, and `kubectl rollout status` reports it complete (the
/// rollout is paced: without traffic each new pod waits the warm timeout,
/// 2 minutes, before the next).
fn wait_rolled_out(env: &Env, mode: Mode, name: &str) -> Result<(), String> {
    let kind = mode.workload().to_lowercase();
    wait_for(&format!("{kind} {name} with -v"), SETTLE, || {
        let workload = env.kubectl.get(&[&kind, name, "-n", NAMESPACE])?;
        let args = &workload["spec"]["template"]["spec"]["containers"][0]["args"];
        if args.as_array().is_some_and(|a| a.contains(&json!("-v"))) {
            Ok(())
        } else {
            Err(format!("args {args}"))
        }
    })?;
    env.kubectl
        .ok(&[
            "rollout",
            "status",
            &format!("{kind}/{name}"),
            "-n",
            NAMESPACE,
            &format!("--timeout={}s", SETTLE.as_secs() * 4),
        ])
        .map(drop)
}

/// One table cell: a value of one mode's report.
type Cell = dyn Fn(&Report) -> String;

fn print_table(deployment: &Report, statefulset: &Report) {
    fn percent(hits: u64) -> String {
        format!("{:.1} %", 100.0 * hits as f64 / KEYS as f64)
    }
    fn yes_no(changed: bool) -> String {
        if changed { "yes" } else { "no" }.to_string()
    }
    fn same_or_new(same: bool) -> &'static str {
        if same { "same" } else { "new" }
    }
    let rows: [(&str, &Cell); 10] = [
        ("keys stored into 3 replicas", &|r| r.stored.to_string()),
        ("(a) scale 3 -> 4: keys still served", &|r| {
            percent(r.scale.hits)
        }),
        ("    client configuration changed", &|r| {
            yes_no(r.scale.changed)
        }),
        ("(b) delete one pod: keys still served", &|r| {
            percent(r.restart.hits)
        }),
        ("    client configuration changed", &|r| {
            yes_no(r.restart.changed)
        }),
        ("    deletion -> replacement Ready (0.2 s polls)", &|r| {
            format!("{:.1} s", r.restart_ready.as_secs_f64())
        }),
        ("    replacement pod", &|r| {
            let (old, new, same_ip) = &r.replaced;
            format!(
                "{} name, {} address",
                same_or_new(old == new),
                same_or_new(*same_ip)
            )
        }),
        ("    keys still served, had it got a new address", &|r| {
            percent(r.restart_new_address)
        }),
        ("(c) rolling config change: keys still served", &|r| {
            percent(r.rollout.hits)
        }),
        ("    client configuration changed", &|r| {
            yes_no(r.rollout.changed)
        }),
    ];
    println!(
        "pymemcache HashClient (oslo.cache's client, rendezvous hashing), {KEYS} keys, each step from a full cache"
    );
    let (blank, left, right) = (
        "",
        "Deployment (pod IPs)",
        "StatefulSet (status.serverList)",
    );
    println!("{blank:<48} {left:<24} {right}");
    for (label, value) in rows {
        println!(
            "{label:<48} {:<24} {}",
            value(deployment),
            value(statefulset)
        );
    }
    for r in [deployment, statefulset] {
        let (old, new, _) = &r.replaced;
        println!("(b) deleted {old}, replaced by {new}");
    }
}
