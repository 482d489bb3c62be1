//! What the scenarios read of pods and memcached.

use super::*;

/// Name, uid, image and restart count of each pod, for messages.
pub(crate) fn summary(pods: &[Value]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            format!(
                "{} uid {} revision {} image {} restarts {} ready {}",
                p["metadata"]["name"],
                p["metadata"]["uid"],
                p["metadata"]["labels"]["controller-revision-hash"],
                p["spec"]["containers"][0]["image"],
                p["status"]["containerStatuses"][0]["restartCount"],
                p["status"]["containerStatuses"][0]["ready"]
            )
        })
        .collect()
}

/// Fails unless `after` are the pods of `before` (by uid, in any order): the
/// change restarted containers in place, it replaced no pod.
pub(crate) fn same_pods(before: &[Value], after: &[Value]) -> Result<(), String> {
    let uids = |pods: &[Value]| -> BTreeSet<String> {
        pods.iter()
            .map(|p| p["metadata"]["uid"].to_string())
            .collect()
    };
    check(
        uids(after) == uids(before),
        format!(
            "the same pods: {:?} then {:?}",
            summary(before),
            summary(after)
        ),
    )
}

/// How many of the keys `key-0` .. `key-<keys - 1>` the memcached of `pod`
/// serves, logged in as `op` with the first of `passwords` it accepts (none:
/// no authentication); tried twice, so that one lost connection is not taken
/// for missing keys. `None` when it does not answer.
pub(crate) fn keys_served(pod: &Value, passwords: &[&str], keys: usize) -> Option<usize> {
    let ip = pod_ip(pod).ok()?;
    let read = |password: Option<&str>| {
        let session = match password {
            Some(password) => Memcache::login(&ip, "op", password),
            None => Memcache::connect(&ip),
        };
        session.and_then(|mut m| m.held(keys)).ok()
    };
    (0..2).find_map(|_| match passwords {
        [] => read(None),
        _ => passwords.iter().find_map(|password| read(Some(password))),
    })
}

/// Container restarts across `pods`, every container counted.
pub(crate) fn container_restarts(pods: &[Value]) -> u64 {
    (pods.iter())
        .flat_map(|p| {
            p["status"]["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["restartCount"].as_u64())
        .sum()
}

/// Set `count` keys at `ip`:11211 (noreply, then one `mn` to wait for them).
pub(crate) fn fill(ip: &str, count: usize) -> Result<(), String> {
    Memcache::connect(ip)?.fill(count)
}

/// `busybox <args>` in the pod's memcached container (kubectl exec).
pub(crate) fn busybox(env: &Env, pod: &str, args: &[&str]) -> Outcome {
    let mut all = vec![
        "exec",
        "-n",
        NAMESPACE,
        pod,
        "-c",
        "memcached",
        "--",
        "busybox",
    ];
    all.extend_from_slice(args);
    env.kubectl.run(&all, None)
}

/// The Memcached's one pod.
pub(crate) fn the_pod(env: &Env) -> Result<Value, String> {
    pod_of(env, NAME)
}

/// The one pod of Memcached `name`.
pub(crate) fn pod_of(env: &Env, name: &str) -> Result<Value, String> {
    match pods_of(env, name)?.as_slice() {
        [pod] => Ok(pod.clone()),
        pods => Err(format!("expected one pod of {name}: {pods:?}")),
    }
}

/// The pods of Memcached `name`, by name.
pub(crate) fn pods_of(env: &Env, name: &str) -> Result<Vec<Value>, String> {
    instance_objects(env, "pods", NAMESPACE, name)
}

/// The pod's memcached container is ready.
pub(crate) fn ready(pod: &Value) -> bool {
    pod["status"]["containerStatuses"][0]["ready"] == true
}

pub(crate) fn pod_ip(pod: &Value) -> Result<String, String> {
    pod["status"]["podIP"]
        .as_str()
        .filter(|ip| ip.starts_with(node::POD_PREFIX))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "pod IP {} not in the real node's range",
                pod["status"]["podIP"]
            )
        })
}

/// memcached's `stats` at `ip`:11211, as name -> value.
pub(crate) fn stats(ip: &str) -> Result<BTreeMap<String, String>, String> {
    Memcache::connect(ip)?.stats("")
}
