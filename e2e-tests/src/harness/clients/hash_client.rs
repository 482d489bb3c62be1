//! The client OpenStack uses, driven from the benches: pymemcache's
//! `HashClient` (oslo.cache's `dogpile.cache.pymemcache` backend; rendezvous
//! hashing over the configured `host:port` strings), run by
//! `e2e-tests/testbed/sharding.py`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::harness::scenarios::scenario::{
    SETTLE, ensure_namespace, instance_objects, resolved_endpoints,
};
use crate::harness::{Env, condition_status, wait_for};
use crate::workspace_root;

/// What a `HashClient` is configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    /// `host:port`, in the order given to the client.
    pub servers: Vec<String>,
    /// What DNS answers for the names among them.
    pub hosts: BTreeMap<String, String>,
}

impl ClientConfig {
    /// Configured with the pods' IPs (all a client can do to shard over a Deployment).
    pub fn of_pods(pods: &[Pod]) -> Self {
        ClientConfig {
            servers: pods.iter().map(|p| format!("{}:11211", p.ip)).collect(),
            hosts: BTreeMap::new(),
        }
    }

    /// Configured with Memcached `name`'s `status.serverList` (StatefulSet:
    /// `<pod>.<service>.<namespace>.svc:11211`), the names resolved as
    /// cluster DNS answers them ([`resolved_endpoints`]): each endpoint's
    /// hostname and address in the headless Service's EndpointSlices.
    pub fn of_server_list(env: &Env, namespace: &str, name: &str) -> Result<Self, String> {
        let mc = env.kubectl.get(&["memcached", name, "-n", namespace])?;
        let hosts = resolved_endpoints(env, namespace, name)?
            .iter()
            .filter_map(|e| {
                Some((
                    format!("{}.{name}.{namespace}.svc", e["hostname"].as_str()?),
                    e["addresses"][0].as_str()?.to_string(),
                ))
            })
            .collect();
        Ok(ClientConfig {
            servers: mc["status"]["serverList"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            hosts,
        })
    }

    /// The servers as a set: rendezvous hashing ignores their order.
    pub fn server_set(&self) -> BTreeSet<&String> {
        self.servers.iter().collect()
    }
}

/// A Memcached's workload mode, and the Memcached the benches name after it.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// The default: pods with new names and addresses on every rollout.
    Deployment,
    /// Stable per-pod names.
    StatefulSet,
}

impl Mode {
    /// `spec.workload`, and the kind of the workload object.
    pub fn workload(self) -> &'static str {
        match self {
            Mode::Deployment => "Deployment",
            Mode::StatefulSet => "StatefulSet",
        }
    }

    /// The Memcached's name.
    pub fn instance(self) -> &'static str {
        match self {
            Mode::Deployment => "deployment",
            Mode::StatefulSet => "statefulset",
        }
    }

    /// The client as an application configures it for the Memcached in
    /// `namespace`: the ready pods' IPs (Deployment), `status.serverList`
    /// (StatefulSet).
    pub fn client(self, env: &Env, namespace: &str) -> Result<ClientConfig, String> {
        self.client_of(env, namespace, self.instance())
    }

    /// [`Mode::client_of`] once `replicas` servers can be reached: the
    /// ready pods' IPs (Deployment), or `status.serverList` with every name
    /// resolvable (StatefulSet).
    pub fn wait_client(
        self,
        env: &Env,
        namespace: &str,
        name: &str,
        replicas: usize,
    ) -> Result<ClientConfig, String> {
        let what = format!("{replicas} servers for the {} client", self.workload());
        wait_for(&what, SETTLE, || {
            let config = self.client_of(env, namespace, name)?;
            let unresolved: Vec<&String> = (config.servers.iter())
                .filter(|s| {
                    let host = s.rsplit_once(':').map_or(s.as_str(), |(h, _)| h);
                    matches!(self, Mode::StatefulSet) && !config.hosts.contains_key(host)
                })
                .collect();
            if config.servers.len() == replicas && unresolved.is_empty() {
                Ok(config)
            } else {
                Err(format!("{config:?}, no address for {unresolved:?}"))
            }
        })
    }

    /// [`Mode::client`] for the Memcached `name` of this mode.
    pub fn client_of(self, env: &Env, namespace: &str, name: &str) -> Result<ClientConfig, String> {
        match self {
            Mode::Deployment => Ok(ClientConfig::of_pods(&ready_pods(env, namespace, name)?)),
            Mode::StatefulSet => ClientConfig::of_server_list(env, namespace, name),
        }
    }
}

/// A ready pod.
#[derive(Clone, Debug)]
pub struct Pod {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// Its IP.
    pub ip: String,
}

/// Memcached `instance`'s Ready pods in `namespace` that are not being
/// deleted, by name.
pub fn ready_pods(env: &Env, namespace: &str, instance: &str) -> Result<Vec<Pod>, String> {
    let mut ready: Vec<Pod> = instance_objects(env, "pods", namespace, instance)?
        .iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null()
                && condition_status(p, "Ready") == Some("True")
        })
        .filter_map(|p| {
            Some(Pod {
                name: p["metadata"]["name"].as_str()?.to_string(),
                uid: p["metadata"]["uid"].as_str()?.to_string(),
                ip: p["status"]["podIP"].as_str()?.to_string(),
            })
        })
        .collect();
    ready.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ready)
}

/// Flush every server, then store `keys` keys: a full cache, or an error
/// (every step is measured from one).
pub fn store(client: &ClientConfig, keys: u64) -> Result<u64, String> {
    let stored = count(&sharding_with("store", client, keys)?, "stored")?;
    check_all(stored, keys, client).map(|()| stored)
}

/// An error unless all `keys` keys were `stored`.
fn check_all(stored: u64, keys: u64, client: &ClientConfig) -> Result<(), String> {
    if stored == keys {
        Ok(())
    } else {
        Err(format!(
            "only {stored} of {keys} keys stored into {:?}",
            client.servers
        ))
    }
}

/// `sharding.py <command>` for `client` and `keys` keys; an error when a
/// server did not answer (the measurement would count its keys as misses).
pub fn sharding_with(command: &str, client: &ClientConfig, keys: u64) -> Result<Value, String> {
    all_reachable(&[command], client, keys)
}

/// `sharding.py <args>` (a command and its flags) with values of `sizes.0`
/// to `sizes.1` bytes (`--value-sizes`), every server answering: the report
/// has `bytes` too, and `hit_bytes` when reading.
pub fn sharding_sized(
    args: &[&str],
    client: &ClientConfig,
    keys: u64,
    sizes: (u64, u64),
) -> Result<Value, String> {
    let sizes = format!("{}-{}", sizes.0, sizes.1);
    let args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--value-sizes", &sizes])
        .collect();
    all_reachable(&args, client, keys)
}

/// Write each key's value of `generation` over what the servers hold
/// (`sharding.py update`), as an application writes newer values: an
/// error unless every key was written.
pub fn update(client: &ClientConfig, keys: u64, generation: u32) -> Result<(), String> {
    let generation = generation.to_string();
    let args = ["update", "--generation", &generation];
    let written = count(&all_reachable(&args, client, keys)?, "stored")?;
    check_all(written, keys, client)
}

/// The keys `client` reads with their value of `generation` (`sharding.py
/// check --generation`).
pub fn current(client: &ClientConfig, keys: u64, generation: u32) -> Result<u64, String> {
    let generation = generation.to_string();
    let args = ["check", "--generation", &generation];
    count(&all_reachable(&args, client, keys)?, "hits")
}

/// `sharding.py <args>`; an error when a server did not answer.
fn all_reachable(args: &[&str], client: &ClientConfig, keys: u64) -> Result<Value, String> {
    let report = run(args, client, keys)?;
    match report["unreachable"].as_array() {
        Some(none) if none.is_empty() => Ok(report),
        _ => Err(format!(
            "sharding.py {}: servers unreachable: {}",
            args.join(" "),
            report["unreachable"]
        )),
    }
}

/// One read-through pass (`sharding.py serve`) over `keys` keys: the hits.
/// A server that does not answer (a pod not ready, a name that does not
/// resolve) is what the application sees at that moment: its keys miss.
pub fn serve(client: &ClientConfig, keys: u64) -> Result<u64, String> {
    count(&run(&["serve"], client, keys)?, "hits")
}

/// One pass reading `keys` keys where the client looks (`sharding.py
/// check`), storing nothing: the hits. A server that does not answer is
/// what the application sees at that moment: its keys miss.
pub fn read(client: &ClientConfig, keys: u64) -> Result<u64, String> {
    count(&run(&["check"], client, keys)?, "hits")
}

/// The keys the cache still holds (`sharding.py kept`): a server restarting
/// is waited for (up to 20 s), so only keys really lost count as misses.
pub fn kept(client: &ClientConfig, keys: u64) -> Result<u64, String> {
    count(&run(&["kept"], client, keys)?, "hits")
}

/// `sharding.py <args>` for `client` and `keys` keys: its report.
fn run(args: &[&str], client: &ClientConfig, keys: u64) -> Result<Value, String> {
    let hosts: Vec<String> = client
        .hosts
        .iter()
        .map(|(name, ip)| format!("{name}={ip}"))
        .collect();
    let (servers, hosts, keys) = (client.servers.join(","), hosts.join(","), keys.to_string());
    let options = ["--servers", &servers, "--hosts", &hosts, "--keys", &keys];
    serde_json::from_str(&sharding(&[args, &options].concat())?)
        .map_err(|e| format!("sharding.py {} printed no JSON: {e}", args.join(" ")))
}

/// Python and pymemcache are there to run `sharding.py`.
pub fn available() -> Result<(), String> {
    sharding(&["--help"]).map(drop)
}

/// The environment of a bench of hashing clients, in `workdir` under the
/// temporary directory (with a real node when `real_node`), `namespace`
/// made: pymemcache checked first, failing fast before the control plane
/// starts. `None` when this machine runs no control plane.
pub fn bench_env(workdir: &str, real_node: bool, namespace: &str) -> Result<Option<Env>, String> {
    available()?;
    let Some(env) = Env::start_with(&std::env::temp_dir().join(workdir), real_node)? else {
        return Ok(None);
    };
    ensure_namespace(&env, namespace)?;
    Ok(Some(env))
}

/// Run `e2e-tests/testbed/sharding.py` with `args`; its standard output.
fn sharding(args: &[&str]) -> Result<String, String> {
    let script = workspace_root().join("e2e-tests/testbed/sharding.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run python3 {}: {e}", script.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{} {}: {} (pymemcache comes with `make deps`)",
            script.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The number `field` of a `sharding.py` report.
pub fn count(report: &Value, field: &str) -> Result<u64, String> {
    report[field]
        .as_u64()
        .ok_or_else(|| format!("sharding.py printed no {field}: {report}"))
}
