//! A cache of 1 GiB scaled 3 -> 4 with its keys handed over (`make
//! bench-big-cache`, inside `e2e-tests/testbed/netns.sh`): a StatefulSet
//! whose clients hash with pymemcache (`clientHashing: rendezvous`), filled
//! by `e2e-tests/testbed/sharding.py` with values of 1 KiB to 100 KiB
//! (log-uniform, each fixed by its key). One line: the store, the new pod
//! Ready and listed in `status.serverList` after the patch, the
//! `KeysCopiedToNewPods` Event, and the keys and bytes served after.
//! Reported, never asserted.

use std::time::{Duration, Instant};

use e2e_tests::harness::clients::hash_client::{
    Mode, bench_env, count, ready_pods, sharding_sized,
};
use e2e_tests::harness::scenarios::scenario::{SETTLE, event_notes, memcached, patch, wait_ready};
use e2e_tests::harness::{Env, wait_for};
use serde_json::json;

const NAMESPACE: &str = "big-cache";
const NAME: &str = "big";
/// About 1 GiB of values of [`SIZES`].
const KEYS: u64 = 49_200;
/// Value sizes, bytes.
const SIZES: (u64, u64) = (1024, 102_400);

fn main() {
    if let Err(e) = bench() {
        eprintln!("bench failed: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let Some(env) = bench_env("memcached-big-cache-bench", false, NAMESPACE)? else {
        return Ok(());
    };
    let spec = json!({
        "workload": "StatefulSet",
        "replicas": 3,
        "clientHashing": "rendezvous",
        "memcached": {"maxMemoryMB": 1024},
        "resources": {"limits": {"memory": "1088Mi"}},
    });
    env.kubectl.apply(&memcached(NAMESPACE, NAME, spec))?;
    wait_ready(&env, NAMESPACE, NAME, 3)?;
    let client = Mode::StatefulSet.wait_client(&env, NAMESPACE, NAME, 3)?;
    let began = Instant::now();
    let stored = sharding_sized(&["store"], &client, KEYS, SIZES)?;
    let store_time = began.elapsed();

    let patched = Instant::now();
    patch(&env, NAMESPACE, NAME, json!({"spec": {"replicas": 4}}))?;
    let (ready, listed) = new_pod_times(&env, patched)?;
    wait_ready(&env, NAMESPACE, NAME, 4)?;
    let note = copy_note(&env)?;
    let after = Mode::StatefulSet.wait_client(&env, NAMESPACE, NAME, 4)?;
    let served = sharding_sized(&["check"], &after, KEYS, SIZES)?;
    println!(
        "1 GiB scale 3->4: stored {} keys ({} bytes) in {:.1} s; new pod Ready {:.1} s after the patch, \
         listed in status.serverList {:.1} s after the patch; copy: {note}; keys served after: {} of {KEYS} \
         (bytes {} of {})",
        count(&stored, "stored")?,
        count(&stored, "bytes")?,
        store_time.as_secs_f64(),
        ready.as_secs_f64(),
        listed.as_secs_f64(),
        count(&served, "hits")?,
        count(&served, "hit_bytes")?,
        count(&served, "bytes")?,
    );
    Ok(())
}

/// Since `patched`: pod `<NAME>-3` Ready, and `status.serverList` with 4
/// servers (polled every 0.2 s).
fn new_pod_times(env: &Env, patched: Instant) -> Result<(Duration, Duration), String> {
    let new_pod = format!("{NAME}-3");
    let (mut ready, mut listed) = (None, None);
    while ready.is_none() || listed.is_none() {
        if patched.elapsed() > SETTLE {
            return Err(format!(
                "{new_pod} not Ready and listed in {}s",
                SETTLE.as_secs()
            ));
        }
        if ready.is_none()
            && ready_pods(env, NAMESPACE, NAME)?
                .iter()
                .any(|p| p.name == new_pod)
        {
            ready = Some(patched.elapsed());
        }
        if listed.is_none() {
            let mc = env.kubectl.get(&["memcached", NAME, "-n", NAMESPACE])?;
            if mc["status"]["serverList"].as_array().map(Vec::len) == Some(4) {
                listed = Some(patched.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((ready.unwrap_or_default(), listed.unwrap_or_default()))
}

/// The note of the `KeysCopiedToNewPods` Event.
fn copy_note(env: &Env) -> Result<String, String> {
    wait_for("the KeysCopiedToNewPods Event", SETTLE, || {
        (event_notes(env, NAMESPACE, "KeysCopiedToNewPods")?
            .into_iter()
            .next())
        .ok_or_else(|| "none yet".to_string())
    })
}
