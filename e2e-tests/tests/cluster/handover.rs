//! Keys kept through scaling: a StatefulSet whose clients hash with
//! pymemcache (`spec.clientHashing: rendezvous`) hands keys over before the
//! server list changes.

use super::*;
use e2e_tests::harness::clients::hash_client::{
    ClientConfig, Mode, count, current, sharding_with, store, update,
};
use e2e_tests::harness::scenarios::scenario::event_notes;

/// Keys stored, as the sharding bench stores them.
const KEYS: u64 = 20_000;

/// `kubectl patch` of the replicas warns of the keys that move and how they
/// are carried (the policy, through the suite's policy-server). 3 -> 4: the
/// new pod is listed in `status.serverList` (and the ConfigMap)
/// only once the keys clients will ask it for are copied to it; then the
/// client of the new list writes newer values of every key (the moved keys'
/// old values, retired on the pods they left, stay there). 4 -> 3: the
/// leaving pod runs until its keys are copied to the pods clients will ask,
/// over those retired values. After each, pymemcache's `HashClient`
/// configured from the new list reads at least 99 % of 20,000 keys with
/// their latest values (75 % without the handover, `make bench-e2e`; about
/// 75 % after 4 -> 3 if the old values stayed as they were), and an Event
/// says what was copied and how long after the copy the list changed
/// (printed).
pub(crate) fn keys_through_scaling(env: &mut Env) -> Result<(), String> {
    let (ns, name, config_map) = ("handover", "keys", "keys-servers");
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(
        ns,
        name,
        json!({
            "workload": "StatefulSet",
            "replicas": 3,
            "clientHashing": "rendezvous",
            "serverListConfigMap": config_map,
            "memcached": {"maxMemoryMB": 64},
        }),
    ))?;
    wait_ready(env, ns, name, 3)?;
    wait_server_list(env, ns, name, config_map, &ordinal_servers(ns, name, 3))?;
    let three = Mode::StatefulSet.wait_client(env, ns, name, 3)?;
    store(&three, KEYS)?;

    let warnings = [
        "the new pods are added to status.serverList once these keys are copied to them",
        "the leaving pods run until their keys are copied to the pods that keep them",
    ];
    for ((generation, replicas, step), how) in [(0, 4, "3 -> 4"), (1, 3, "4 -> 3")]
        .into_iter()
        .zip(warnings)
    {
        // The policy says what the change does to the keys.
        let merge = json!({"spec": {"replicas": replicas}}).to_string();
        let args = [
            "patch",
            "memcached",
            name,
            "-n",
            ns,
            "--type=merge",
            "-p",
            &merge,
        ];
        let patched = env.kubectl.run(&args, None);
        let said = format!(
            "Warning: spec.replicas {step}: clients that hash keys over status.serverList will ask \
             another pod for about 25 % of them; {how}"
        );
        check(
            patched.success && patched.stderr.contains(&said),
            format!(
                "kubectl patch {step} said {:?}, not {said:?}",
                patched.stderr
            ),
        )?;
        wait_server_list(
            env,
            ns,
            name,
            config_map,
            &ordinal_servers(ns, name, replicas),
        )?;
        let client = served_after(env, (ns, name), replicas, step, generation)?;
        update(&client, KEYS, generation + 1)?;
    }
    for (reason, note) in [
        ("KeysCopiedToNewPods", "3 -> 4 servers"),
        ("KeysCopiedFromLeavingPods", "4 -> 3 servers"),
    ] {
        let notes = event_notes(env, ns, reason)?;
        let Some(said) = notes.iter().find(|n| n.starts_with(note)) else {
            return Err(format!("{reason} events: {notes:?}"));
        };
        println!("    {reason}: {said}");
    }
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", ns, "--wait=true"])
        .map(drop)
}

/// An autoscaled StatefulSet scaled up as the HorizontalPodAutoscaler does
/// (the StatefulSet's replicas set directly): the new pod joins
/// `status.serverList` once filled, and the client of the new list serves
/// at least 99 % of 20,000 keys.
pub(crate) fn keys_through_autoscaling(env: &mut Env) -> Result<(), String> {
    let (ns, name) = ("handover", "autoscaled");
    ensure_namespace(env, ns)?;
    env.kubectl.apply(&memcached(
        ns,
        name,
        json!({
            "workload": "StatefulSet",
            "autoscaling": {"enabled": true, "minReplicas": 3, "maxReplicas": 5},
            "resources": {"requests": {"cpu": "100m", "memory": "96Mi"}, "limits": {"memory": "128Mi"}},
            "clientHashing": "rendezvous",
            "memcached": {"maxMemoryMB": 64},
        }),
    ))?;
    wait_ready(env, ns, name, 3)?;
    let three = Mode::StatefulSet.wait_client(env, ns, name, 3)?;
    store(&three, KEYS)?;
    env.kubectl
        .ok(&["scale", "statefulset", name, "-n", ns, "--replicas=4"])?;
    wait_ready(env, ns, name, 4)?;
    let four = Mode::StatefulSet.wait_client(env, ns, name, 4)?;
    let hits = count(&sharding_with("check", &four, KEYS)?, "hits")?;
    println!("    autoscaled 3 -> 4: {hits} of {KEYS} keys served from the new server list");
    check(
        hits * 100 >= KEYS * 99,
        format!("autoscaled 3 -> 4: {hits} of {KEYS} keys served, expected at least 99 %"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", ns, "--wait=true"])
        .map(drop)
}

/// Once Memcached `name` is Ready with `replicas` and its list names them,
/// the client of that list (returned) reads at least 99 % of the keys with
/// their values of `generation`.
fn served_after(
    env: &Env,
    (ns, name): (&str, &str),
    replicas: usize,
    step: &str,
    generation: u32,
) -> Result<ClientConfig, String> {
    wait_ready(env, ns, name, replicas as i64)?;
    let client = Mode::StatefulSet.wait_client(env, ns, name, replicas)?;
    let hits = current(&client, KEYS, generation)?;
    println!("    {step}: {hits} of {KEYS} keys served from the new server list");
    check(
        hits * 100 >= KEYS * 99,
        format!("{step}: {hits} of {KEYS} keys served, expected at least 99 %"),
    )?;
    Ok(client)
}
