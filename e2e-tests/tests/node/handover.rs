//! Keys kept through the moves that replace pods, on the real node: a
//! StatefulSet whose clients' hashing is known (`spec.clientHashing`) hands
//! a leaving pod's keys, during its preStop delay, to the pods clients ask
//! while it is away, and lists its replacement again once it took them back.

use super::*;
use e2e_tests::harness::clients::hash_client::{Mode, Pod, read, ready_pods, store};
use e2e_tests::harness::scenarios::pods::rolled_out_with_memory;
use e2e_tests::harness::scenarios::scenario::patch;

/// Keys stored, as the sharding bench stores them.
const KEYS: u64 = 20_000;
/// The Memcached of the scenario.
const MEMCACHED: &str = "handover";

/// 20,000 keys in 3 pods (rendezvous, as pymemcache hashes), then each move
/// from a full cache: one pod deleted; another evicted as `kubectl drain`
/// does (the node cordoned until the evicted pod is gone, then uncordoned,
/// as after a reboot); `maxMemoryMB` 64 -> 128, which replaces every pod.
/// A client that follows `status.serverList` and resolves its names anew
/// each pass, as cluster DNS answers them, reads every key (storing none),
/// pass after pass, from the move until every pod is listed again, and
/// reads them all once more: at least 95 % after a replaced pod (about 67 %
/// without the handover), 90 % after the resize (0 % without: a new pod
/// starts empty). Not all: the LRU crawler does not list an item memcached
/// moves during its walk, and the resize copies each key out and back
/// (measured: 19,832 of 20,000 after a deleted pod in one run, 19,667 after
/// the resize in the full suite; 20,000 in the others). At a replaced pod
/// no pass reads less than 90 %: the headless Service publishes pods not
/// ready, so the leaving pod's name resolves until the list drops it
/// (measured: 19,671 and 20,000; 13,332 and 13,450 while its name stopped
/// resolving as it terminated). The resize's worst pass is only printed
/// (13,347: a third of the keys missed at one moment, not explained yet).
/// Each leaving pod was unlisted meanwhile, and `KeysCopiedFromLeavingPods`
/// Events say what each handed over.
pub(crate) fn keys_through_replaced_pods(env: &mut Env) -> Result<(), String> {
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["workload"] = json!("StatefulSet");
    spec["replicas"] = json!(3);
    spec["clientHashing"] = json!("rendezvous");
    spec["memcached"] = json!({"maxMemoryMB": 64});
    spec["resources"] = json!({"limits": {"memory": "256Mi"}});
    spec["highAvailability"] = json!({"gracefulShutdown": {
        "enabled": true, "preStopDelaySeconds": 15, "terminationGracePeriodSeconds": 40,
    }});
    env.kubectl.apply(&memcached(NAMESPACE, MEMCACHED, spec))?;
    let deleted = through(env, "pod 1 deleted", (1, 95, Some(90)), |env| {
        let pod = format!("{MEMCACHED}-1");
        let args = ["delete", "pod", &pod, "-n", NAMESPACE, "--wait=false"];
        let before = replaced_pod(env, &pod)?;
        env.kubectl.ok(&args)?;
        Ok(Box::new(move |env: &Env| replaced(env, &before)))
    });
    let evicted = through(env, "pod 2 evicted by a drain", (1, 95, Some(90)), |env| {
        let pod = format!("{MEMCACHED}-2");
        let before = replaced_pod(env, &pod)?;
        env.kubectl.ok(&["cordon", node::NAME])?;
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": NAMESPACE}});
        let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction");
        let args = ["create", "--raw", &path, "-f", "-"];
        let outcome = env.kubectl.run(&args, Some(&eviction.to_string()));
        check(
            outcome.success,
            format!("eviction: {}", outcome.stderr.trim()),
        )?;
        Ok(Box::new(move |env: &Env| {
            let pods = instance_objects(env, "pods", NAMESPACE, MEMCACHED)?;
            if !pods
                .iter()
                .any(|p| p["metadata"]["uid"] == before.uid.as_str())
            {
                env.kubectl.ok(&["uncordon", node::NAME])?;
            }
            replaced(env, &before)
        }))
    });
    let uncordoned = env.kubectl.ok(&["uncordon", node::NAME]);
    let resized = through(env, "maxMemoryMB 64 -> 128", (3, 90, None), |env| {
        let resize = json!({"spec": {"memcached": {"maxMemoryMB": 128}}});
        patch(env, NAMESPACE, MEMCACHED, resize)?;
        Ok(Box::new(|env: &Env| rolled_out_with(env, 128)))
    });
    for outcome in [deleted, evicted, uncordoned.map(drop), resized] {
        outcome?;
    }
    let args = [
        "delete",
        "memcached",
        MEMCACHED,
        "-n",
        NAMESPACE,
        "--wait=true",
    ];
    env.kubectl.ok(&args).map(drop)
}

/// Whether a move is over, asked once each pass (it may act: uncordon).
type Moved = Box<dyn Fn(&Env) -> Result<bool, String>>;

/// From 20,000 keys stored, the move `start` makes (`leaving` pods leave
/// in turn): read throughout until it is over and every pod is listed
/// again, then checked as [`keys_through_replaced_pods`] says (at least
/// `percent` % of the keys read after, at least `worst_percent` % in each
/// pass when given).
fn through(
    env: &Env,
    how: &str,
    (leaving, percent, worst_percent): (u64, u64, Option<u64>),
    start: impl FnOnce(&Env) -> Result<Moved, String>,
) -> Result<(), String> {
    wait_ready(env, NAMESPACE, MEMCACHED, 3)?;
    store(
        &Mode::StatefulSet.wait_client(env, NAMESPACE, MEMCACHED, 3)?,
        KEYS,
    )?;
    let handed_before = handed_over(env)?;
    let began = Instant::now();
    let moved = start(env)?;
    let (mut worst, mut passes, mut unlisted) = (KEYS, 0, false);
    let took = loop {
        let client = Mode::StatefulSet.client_of(env, NAMESPACE, MEMCACHED)?;
        worst = worst.min(read(&client, KEYS)?);
        passes += 1;
        unlisted |= client.servers.len() < 3;
        let over = moved(env)?;
        if unlisted && client.servers.len() == 3 && over {
            break began.elapsed();
        }
        if began.elapsed() > SETTLE * 2 {
            return Err(format!(
                "{how}: not over {}s later (a pod unlisted meanwhile: {unlisted}): {:?}",
                SETTLE.as_secs() * 2,
                client.servers
            ));
        }
    };
    let after = read(
        &Mode::StatefulSet.client_of(env, NAMESPACE, MEMCACHED)?,
        KEYS,
    )?;
    let handed = handed_over(env)? - handed_before;
    println!(
        "     {how}: every pod listed again {:.1}s later; worst of {passes} passes read {worst} of \
         {KEYS} keys, {after} after; {handed} KeysCopiedFromLeavingPods",
        took.as_secs_f64()
    );
    check(
        after * 100 >= KEYS * percent,
        format!("{how}: {after} of {KEYS} keys read after"),
    )?;
    check(
        worst_percent.is_none_or(|percent| worst * 100 >= KEYS * percent),
        format!("{how}: a pass read only {worst} of {KEYS} keys"),
    )?;
    check(
        handed >= leaving,
        format!("{how}: {handed} KeysCopiedFromLeavingPods, not {leaving}"),
    )
}

/// The ready pod `name`, about to be replaced.
fn replaced_pod(env: &Env, name: &str) -> Result<Pod, String> {
    (ready_pods(env, NAMESPACE, MEMCACHED)?.into_iter())
        .find(|p| p.name == name)
        .ok_or_else(|| format!("{name} is not ready"))
}

/// A pod of `before`'s name but another uid is ready.
fn replaced(env: &Env, before: &Pod) -> Result<bool, String> {
    let ready = ready_pods(env, NAMESPACE, MEMCACHED)?;
    Ok((ready.iter()).any(|p| p.name == before.name && p.uid != before.uid))
}

/// Every pod runs the template with `-m <megabytes>`, and is ready.
fn rolled_out_with(env: &Env, megabytes: u32) -> Result<bool, String> {
    let workload = env
        .kubectl
        .get(&["statefulset", MEMCACHED, "-n", NAMESPACE])?;
    Ok(rolled_out_with_memory(&workload, megabytes) && workload["status"]["readyReplicas"] == 3)
}

/// How many pods handed their keys over so far: the
/// `KeysCopiedFromLeavingPods` Events, each counted as often as it occurred
/// (a series, about the same pod).
fn handed_over(env: &Env) -> Result<u64, String> {
    let selector = "reason=KeysCopiedFromLeavingPods";
    let kind = "events.v1.events.k8s.io";
    let events = (env.kubectl).get(&[kind, "-n", NAMESPACE, "--field-selector", selector])?;
    Ok((events["items"].as_array().into_iter().flatten())
        .map(|e| e["series"]["count"].as_u64().unwrap_or(1))
        .sum())
}
