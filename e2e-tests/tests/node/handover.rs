//! Keys kept through a pod's replacement on the real node: a StatefulSet
//! whose clients' hashing is known (`spec.clientHashing`) hands a deleted or
//! evicted pod's keys, during its preStop delay, to the pods clients ask
//! while it is away, and lists its replacement again once it took them back.

use super::*;
use e2e_tests::harness::clients::hash_client::{Mode, read, ready_pods, store};

/// Keys stored, as the sharding bench stores them.
const KEYS: u64 = 20_000;
/// The Memcached of the scenario.
const MEMCACHED: &str = "handover";

/// 20,000 keys in 3 pods (rendezvous, as pymemcache hashes). One pod
/// deleted, then another evicted as `kubectl drain` does (the node cordoned
/// until the evicted pod is gone, then uncordoned, as after a reboot). A
/// client that follows `status.serverList` and resolves its names anew
/// each pass reads every key (storing none), pass after pass, from each
/// move until the replacement is listed again, and reads them all once
/// more: at least 99 % (about 67 % without the handover: the replacement
/// starts empty). Its worst pass is printed: the leaving pod's name stops
/// resolving as it terminates (cluster DNS answers ready endpoints only),
/// and until its copy ends and the list drops it, its keys miss. The
/// leaving pod is unlisted meanwhile, and an Event says what it handed over.
pub(crate) fn keys_through_a_replaced_pod(env: &mut Env) -> Result<(), String> {
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["workload"] = json!("StatefulSet");
    spec["replicas"] = json!(3);
    spec["clientHashing"] = json!("rendezvous");
    spec["highAvailability"] = json!({"gracefulShutdown": {
        "enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30,
    }});
    env.kubectl.apply(&memcached(NAMESPACE, MEMCACHED, spec))?;
    let deleted = through(env, "deleted", 1, |env, pod| {
        let args = ["delete", "pod", pod, "-n", NAMESPACE, "--wait=false"];
        env.kubectl.ok(&args).map(drop)
    });
    let evicted = through(env, "evicted by a drain", 2, |env, pod| {
        env.kubectl.ok(&["cordon", node::NAME])?;
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": NAMESPACE}});
        let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction");
        let outcome = (env.kubectl).run(
            &["create", "--raw", &path, "-f", "-"],
            Some(&eviction.to_string()),
        );
        check(
            outcome.success,
            format!("eviction of {pod}: {}", outcome.stderr.trim()),
        )
    });
    let uncordoned = env.kubectl.ok(&["uncordon", node::NAME]);
    deleted?;
    evicted?;
    uncordoned?;
    env.kubectl
        .ok(&[
            "delete",
            "memcached",
            MEMCACHED,
            "-n",
            NAMESPACE,
            "--wait=true",
        ])
        .map(drop)
}

/// From 20,000 keys stored, pod `ordinal` moved by `start`: read throughout
/// until its replacement is listed again (the node uncordoned once the pod
/// is gone), then checked as [`keys_through_a_replaced_pod`] says.
fn through(
    env: &Env,
    how: &str,
    ordinal: usize,
    start: impl FnOnce(&Env, &str) -> Result<(), String>,
) -> Result<(), String> {
    wait_ready(env, NAMESPACE, MEMCACHED, 3)?;
    store(
        &Mode::StatefulSet.wait_client(env, NAMESPACE, MEMCACHED, 3)?,
        KEYS,
    )?;
    let victim = format!("{MEMCACHED}-{ordinal}");
    let before = (ready_pods(env, NAMESPACE, MEMCACHED)?.into_iter())
        .find(|p| p.name == victim)
        .ok_or_else(|| format!("{victim} is not ready"))?;
    let began = Instant::now();
    start(env, &victim)?;
    let listed = |servers: &[String]| servers.iter().any(|s| s.starts_with(&format!("{victim}.")));
    let (mut worst, mut passes, mut unlisted) = (KEYS, 0, false);
    let relisted = loop {
        let client = Mode::StatefulSet.client_of(env, NAMESPACE, MEMCACHED)?;
        worst = worst.min(read(&client, KEYS)?);
        passes += 1;
        unlisted |= !listed(&client.servers);
        let pods = instance_objects(env, "pods", NAMESPACE, MEMCACHED)?;
        let old_gone = !pods
            .iter()
            .any(|p| p["metadata"]["uid"] == before.uid.as_str());
        if old_gone {
            env.kubectl.ok(&["uncordon", node::NAME])?;
        }
        let replaced = (ready_pods(env, NAMESPACE, MEMCACHED)?.iter())
            .any(|p| p.name == victim && p.uid != before.uid);
        if unlisted && replaced && listed(&client.servers) && client.servers.len() == 3 {
            break began.elapsed();
        }
        if began.elapsed() > SETTLE * 2 {
            return Err(format!(
                "{victim} {how}: not listed again {}s later (unlisted meanwhile: {unlisted}): {:?}",
                SETTLE.as_secs() * 2,
                client.servers
            ));
        }
    };
    let after = read(
        &Mode::StatefulSet.client_of(env, NAMESPACE, MEMCACHED)?,
        KEYS,
    )?;
    let selector = "reason=KeysCopiedFromLeavingPods";
    let events = env
        .kubectl
        .get(&["events", "-n", NAMESPACE, "--field-selector", selector])?;
    let handed: Vec<&str> = (events["items"].as_array().into_iter().flatten())
        .filter_map(|e| e["message"].as_str())
        .filter(|n| n.starts_with("3 -> 2 servers"))
        .collect();
    println!(
        "     {victim} {how}: listed again {:.1}s later; worst of {passes} passes served {worst} of \
         {KEYS} keys, {after} read back after; {handed:?}",
        relisted.as_secs_f64()
    );
    check(
        after * 100 >= KEYS * 99,
        format!("{victim} {how}: {after} of {KEYS} keys read after"),
    )?;
    check(
        !handed.is_empty(),
        format!("{victim} {how}: no KeysCopiedFromLeavingPods Event"),
    )
}
