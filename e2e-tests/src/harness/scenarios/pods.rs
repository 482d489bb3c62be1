//! The pods of a Memcached and the endpoints that serve them.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::harness::clients::memcache::memcached_version;
use crate::harness::scenarios::scenario::{SETTLE, instance_objects, ready_endpoints, ready_in};
use crate::harness::{Env, condition_status, wait_for};

/// The uids of the pods of Memcached `name`, sorted.
pub fn pod_uids(env: &Env, ns: &str, name: &str) -> Result<Vec<String>, String> {
    let selector = format!("app.kubernetes.io/instance={name}");
    let pods = env.kubectl.get(&["pods", "-n", ns, "-l", &selector])?;
    let mut uids: Vec<String> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    uids.sort();
    Ok(uids)
}

/// The running (not terminating) pods of the Memcached `instance`.
pub fn memcached_pods(env: &Env, namespace: &str, instance: &str) -> Result<Vec<Value>, String> {
    Ok(instance_objects(env, "pods", namespace, instance)?
        .into_iter()
        .filter(|p| {
            p["metadata"]["deletionTimestamp"].is_null() && p["status"]["phase"] == "Running"
        })
        .collect())
}

/// One string field (a JSON pointer) of every running pod of `instance`.
fn pod_field(
    env: &Env,
    namespace: &str,
    instance: &str,
    pointer: &str,
) -> Result<Vec<String>, String> {
    Ok(memcached_pods(env, namespace, instance)?
        .iter()
        .filter_map(|p| p.pointer(pointer)?.as_str().map(str::to_string))
        .collect())
}

/// The addresses of the running pods of `instance`.
pub fn pod_ips(env: &Env, namespace: &str, instance: &str) -> Result<Vec<String>, String> {
    pod_field(env, namespace, instance, "/status/podIP")
}

/// The names of the running pods of `instance`.
pub fn pod_names(env: &Env, namespace: &str, instance: &str) -> Result<Vec<String>, String> {
    pod_field(env, namespace, instance, "/metadata/name")
}

/// The addresses behind the Service's EndpointSlices, as the controller sees them.
pub fn served_by(env: &Env, namespace: &str, service: &str) -> Result<Vec<String>, String> {
    let mut addresses: Vec<String> = ready_endpoints(env, namespace, service)?
        .iter()
        .filter_map(|e| e["addresses"][0].as_str().map(str::to_string))
        .collect();
    addresses.sort();
    Ok(addresses)
}

/// The pods behind the Service's EndpointSlices, by name.
pub fn served_pods(env: &Env, namespace: &str, service: &str) -> Result<Vec<String>, String> {
    Ok(pod_names_of(&ready_endpoints(env, namespace, service)?))
}

/// The sorted pod names endpoints point at.
pub fn pod_names_of(endpoints: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = endpoints
        .iter()
        .filter_map(|e| e["targetRef"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Wait until the running pods of `instance` are exactly `<instance>-0` ...
/// `<instance>-<replicas-1>`, each Ready and behind the Service's
/// EndpointSlices under its own hostname and address (what cluster DNS
/// answers for `<pod>.<instance>.<namespace>.svc`); then each must answer
/// memcached's `version` on its address.
pub fn wait_ordinal_pods(
    env: &Env,
    namespace: &str,
    instance: &str,
    replicas: usize,
) -> Result<(), String> {
    let expected: Vec<String> = (0..replicas).map(|i| format!("{instance}-{i}")).collect();
    let pods = wait_for(
        &format!("pods {expected:?}, Ready and named in the EndpointSlices"),
        SETTLE,
        || {
            let mut pods: Vec<(String, String, bool)> = memcached_pods(env, namespace, instance)?
                .iter()
                .map(|p| {
                    (
                        p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                        p["status"]["podIP"].as_str().unwrap_or("").to_string(),
                        condition_status(p, "Ready") == Some("True"),
                    )
                })
                .collect();
            pods.sort();
            let mut endpoints: Vec<(String, String, bool)> =
                ready_endpoints(env, namespace, instance)?
                    .iter()
                    .map(|e| {
                        (
                            e["hostname"].as_str().unwrap_or("").to_string(),
                            e["addresses"][0].as_str().unwrap_or("").to_string(),
                            true,
                        )
                    })
                    .collect();
            endpoints.sort();
            let names: Vec<&String> = pods.iter().map(|p| &p.0).collect();
            if names == expected.iter().collect::<Vec<_>>() && pods == endpoints {
                Ok(pods)
            } else {
                Err(format!(
                    "pods (name, IP, Ready) {pods:?}, ready endpoints (hostname, address) {endpoints:?}"
                ))
            }
        },
    )?;
    for (pod, ip, _) in pods {
        memcached_version(&ip).map_err(|e| format!("pod {pod} at {ip}: {e}"))?;
    }
    Ok(())
}

/// A Service's ready endpoints (pod names) after every change of its
/// EndpointSlices, as `kubectl get endpointslices --watch` reports them: a
/// transient state polling could miss is seen too.
pub struct EndpointWatch {
    kubectl: Child,
    states: Arc<Mutex<Vec<Vec<String>>>>,
    what: String,
}

impl EndpointWatch {
    /// Start `kubectl get endpointslices --watch` on the Service.
    pub fn start(env: &Env, namespace: &str, service: &str) -> Result<Self, String> {
        let mut kubectl = Command::new(&env.binaries.kubectl)
            .arg("--kubeconfig")
            .arg(&env.cluster.kubeconfig)
            .args(["get", "endpointslices", "-n", namespace, "-l"])
            .arg(format!("kubernetes.io/service-name={service}"))
            .args(["--watch", "--output-watch-events", "-o", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("kubectl get endpointslices --watch: {e}"))?;
        let stdout = kubectl
            .stdout
            .take()
            .ok_or("kubectl's stdout is not piped")?;
        let states = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&states);
        std::thread::spawn(move || {
            let mut slices = BTreeMap::new();
            for event in serde_json::Deserializer::from_reader(BufReader::new(stdout))
                .into_iter::<Value>()
                .map_while(Result::ok)
            {
                let slice = &event["object"];
                let key = slice["metadata"]["name"].as_str().unwrap_or("").to_string();
                if event["type"] == "DELETED" {
                    slices.remove(&key);
                } else {
                    slices.insert(key, slice.clone());
                }
                let ready = pod_names_of(&ready_in(slices.values()));
                if let Ok(mut states) = sink.lock() {
                    states.push(ready);
                }
            }
        });
        Ok(EndpointWatch {
            kubectl,
            states,
            what: format!("EndpointSlices of {namespace}/{service}"),
        })
    }

    /// Wait until the watch reports `state`; the index of that report.
    pub fn wait_for(&self, state: &[String]) -> Result<usize, String> {
        wait_for(
            &format!("the watch on the {} to report {state:?}", self.what),
            SETTLE,
            || {
                let states = self.states.lock().map_err(|e| e.to_string())?;
                states
                    .iter()
                    .rposition(|s| s == state)
                    .ok_or_else(|| format!("reported {states:?}"))
            },
        )
    }

    /// Wait until the watch reports `last` after report `from`, stop it, and
    /// return the reports from `from` to there.
    pub fn stop_at(mut self, from: usize, last: &[String]) -> Result<Vec<Vec<String>>, String> {
        let end = self.wait_for(last)?;
        let _ = self.kubectl.kill();
        let _ = self.kubectl.wait();
        let states = self.states.lock().map_err(|e| e.to_string())?;
        if end < from {
            return Err(format!(
                "the watch on the {} reported {last:?} only before the change: {states:?}",
                self.what
            ));
        }
        Ok(states[from..=end].to_vec())
    }
}

impl Drop for EndpointWatch {
    fn drop(&mut self) {
        let _ = self.kubectl.kill();
        let _ = self.kubectl.wait();
    }
}

/// A pod object's name (empty without one).
pub fn pod_name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

/// The StatefulSet `workload` has rolled out a template that runs
/// `-m <megabytes>` (in its args, or in the supervisor's with warm
/// restarts) to every pod.
pub fn rolled_out_with_memory(workload: &Value, megabytes: u32) -> bool {
    let template = workload["spec"]["template"].to_string();
    let status = &workload["status"];
    (template.contains(&format!("\"-m\",\"{megabytes}\""))
        || template.contains(&format!("-m\\n{megabytes}")))
        && status["updateRevision"] == status["currentRevision"]
        && status["updatedReplicas"] == status["replicas"]
}
