//! The objects of the scenarios: reading, waiting for and comparing them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::harness::environment::pki::Pki;
use crate::harness::scenarios::scenario::SETTLE;
use crate::harness::{Env, wait_for};

/// The Deployment `name` of `namespace`.
pub fn deployment(env: &Env, namespace: &str, name: &str) -> Result<Value, String> {
    env.kubectl.get(&["deployment", name, "-n", namespace])
}

/// Delete `namespace` without waiting for its objects to go.
pub fn delete_namespace(env: &Env, namespace: &str) -> Result<(), String> {
    env.kubectl
        .ok(&["delete", "namespace", namespace, "--wait=false"])
        .map(drop)
}

/// The Memcached `name` of `namespace`.
pub fn get(env: &Env, namespace: &str, name: &str) -> Result<Value, String> {
    env.kubectl.get(&["memcached", name, "-n", namespace])
}

/// Whether the object exists; an error when kubectl fails for another reason than NotFound.
pub fn exists(env: &Env, namespace: &str, kind: &str, name: &str) -> Result<bool, String> {
    let outcome = env
        .kubectl
        .run(&["get", kind, name, "-n", namespace, "-o", "name"], None);
    if outcome.success {
        Ok(true)
    } else if outcome.stderr.contains("NotFound") {
        Ok(false)
    } else {
        Err(outcome.stderr)
    }
}

/// Wait until the object exists (`present`) or is gone.
pub fn wait_exists(
    env: &Env,
    namespace: &str,
    kind: &str,
    name: &str,
    present: bool,
) -> Result<(), String> {
    let what = format!(
        "{kind} {namespace}/{name} {}",
        if present { "created" } else { "deleted" }
    );
    wait_for(&what, SETTLE, || {
        if exists(env, namespace, kind, name)? == present {
            Ok(())
        } else {
            Err(if present { "absent" } else { "present" }.to_string())
        }
    })
}

/// `object`'s controller owner reference is the Memcached `mc`.
pub fn owned_by(object: &Value, mc: &Value) -> bool {
    let owner = &object["metadata"]["ownerReferences"][0];
    owner["uid"] == mc["metadata"]["uid"]
        && owner["kind"] == "Memcached"
        && owner["controller"] == json!(true)
}

/// Wait until the disruption controller counts `pods` healthy pods of the
/// budget's workload, one of which must stay (`minAvailable: 1`): the budget
/// found the pods' controller and its scale.
pub fn wait_disruption_budget(
    env: &Env,
    namespace: &str,
    name: &str,
    pods: i64,
) -> Result<(), String> {
    wait_for(
        &format!("PodDisruptionBudget {namespace}/{name} covering {pods} pods"),
        SETTLE,
        || {
            let budget = env
                .kubectl
                .get(&["poddisruptionbudget", name, "-n", namespace])?;
            let status = &budget["status"];
            if status["expectedPods"] == pods
                && status["currentHealthy"] == pods
                && status["disruptionsAllowed"] == pods - 1
            {
                Ok(())
            } else {
                Err(format!("status {status}"))
            }
        },
    )
}

/// `status.serverList` in StatefulSet mode: one DNS name per ordinal.
pub fn ordinal_servers(namespace: &str, name: &str, replicas: usize) -> Vec<String> {
    (0..replicas)
        .map(|i| format!("{name}-{i}.{name}.{namespace}.svc:11211"))
        .collect()
}

/// Wait until `status.serverList` is `servers` and the ConfigMap `config_map`,
/// owned by the Memcached, holds exactly them in both forms (oslo.cache's
/// comma-separated `memcache_servers`, and one per line); the ConfigMap.
pub fn wait_server_list(
    env: &Env,
    namespace: &str,
    name: &str,
    config_map: &str,
    servers: &[String],
) -> Result<Value, String> {
    let data = json!({
        "memcache_servers": servers.join(","),
        "servers": servers.iter().map(|s| format!("{s}\n")).collect::<String>(),
    });
    let what = format!("serverList and ConfigMap {namespace}/{config_map} listing {servers:?}");
    wait_for(&what, SETTLE, || {
        let mc = get(env, namespace, name)?;
        if mc["status"]["serverList"] != json!(servers) {
            return Err(format!("status.serverList {}", mc["status"]["serverList"]));
        }
        let listed = env
            .kubectl
            .get(&["configmap", config_map, "-n", namespace])?;
        if listed["data"] != data {
            Err(format!("ConfigMap data {}", listed["data"]))
        } else if !owned_by(&listed, &mc) {
            Err(format!(
                "ConfigMap owners {}",
                listed["metadata"]["ownerReferences"]
            ))
        } else {
            Ok(listed)
        }
    })
}

/// resourceVersion of every object the operator owns or reads, by kind/namespace/name.
/// Namespaces being deleted (earlier scenarios clean up without waiting) are left out:
/// the namespace controller, not the operator, removes what is in them.
pub fn resource_versions(env: &Env) -> Result<BTreeMap<String, String>, String> {
    let namespaces = env.kubectl.get(&["namespaces"])?;
    let terminating: Vec<&str> = namespaces["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| {
            n["status"]["phase"] == "Terminating" || !n["metadata"]["deletionTimestamp"].is_null()
        })
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    let list = env.kubectl.get(&[
        "memcacheds,deployments,statefulsets,services,configmaps,poddisruptionbudgets,horizontalpodautoscalers,networkpolicies,servicemonitors.monitoring.coreos.com",
        "-A",
    ])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["namespace"] != "default" || o["kind"] != "Service")
        .filter(|o| !terminating.contains(&o["metadata"]["namespace"].as_str().unwrap_or("")))
        .map(|o| {
            (
                format!(
                    "{}/{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["metadata"]["namespace"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                ),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect())
}

/// The objects whose resourceVersion differs between two [`resource_versions`].
pub fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> String {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
        .collect();
    format!("objects written: {}", diffs.join(", "))
}

/// Install a ServiceMonitor CRD, as Prometheus Operator would.
pub fn install_service_monitor_crd(env: &Env) -> Result<(), String> {
    env.kubectl.apply(SERVICE_MONITOR_CRD)?;
    env.kubectl
        .wait_established("servicemonitors.monitoring.coreos.com")
}

/// A minimal ServiceMonitor CRD, as the Prometheus operator would install it.
pub const SERVICE_MONITOR_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
  "spec": {
    "group": "monitoring.coreos.com",
    "scope": "Namespaced",
    "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors", "singular": "servicemonitor"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
    }]
  }
}"#;

/// A Secret `namespace/name` holding memcached's auth file `lines` (`-Y`).
pub fn auth_secret(namespace: &str, name: &str, lines: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"auth": lines},
    })
    .to_string()
}

/// A `kubernetes.io/tls` Secret `namespace/name` holding `pki`'s leaf
/// (`tls.crt`, `tls.key`) and CA (`ca.crt`), as cert-manager writes one.
pub fn tls_secret(namespace: &str, name: &str, pki: &Pki) -> String {
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"tls.crt": pki.cert, "tls.key": pki.key, "ca.crt": pki.ca},
    })
    .to_string()
}
