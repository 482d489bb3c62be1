//! The steps several end-to-end suites share (running them: [`crate::harness::scenarios::runner`]).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

pub use crate::harness::clients::checks::check;
use crate::harness::clients::checks::{condition, wait_for};
use crate::harness::{Env, OPERATOR_NAMESPACE};

/// How long objects get to converge: a bound on a wait that ends as soon as
/// they do, generous for a loaded 2-core machine (90 s was once too short
/// there), so it costs nothing where they converge fast.
pub const SETTLE: Duration = Duration::from_secs(180);

/// Start the environment in `workdir`: `None` when the suite must skip
/// (Kubewarden's engines absent and no `../shared/bin`); exits on failure.
pub fn start(workdir: &Path) -> Option<Env> {
    match Env::start(workdir) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("cannot start the end-to-end environment: {e}");
            std::process::exit(1);
        }
    }
}

/// A v1beta1 Memcached manifest, with warm restarts off unless `spec` sets
/// them: the policy turns them on for a new Memcached, and most scenarios
/// are about pods without them (cold rollouts, pacing, the pod template). The
/// scenarios of warm restarts set them; the one of the default uses
/// [`memcached_as_written`].
pub fn memcached(namespace: &str, name: &str, mut spec: Value) -> String {
    if let Some(spec) = spec.as_object_mut() {
        spec.entry("warmRestart")
            .or_insert_with(|| json!({"enabled": false}));
    }
    memcached_as_written(namespace, name, spec)
}

/// A v1beta1 Memcached manifest with `spec` as given.
pub fn memcached_as_written(namespace: &str, name: &str, spec: Value) -> String {
    json!({
        "apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
    .to_string()
}

/// `count` minimal v1beta1 Memcacheds `<prefix>-<i>` in `namespace`, as
/// one List: what one `kubectl apply` creates at once.
pub fn memcached_list(namespace: &str, prefix: &str, count: usize) -> String {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": (0..count)
            .map(|i| json!({
                "apiVersion": "memcached.c5c3.io/v1beta1",
                "kind": "Memcached",
                "metadata": {"name": format!("{prefix}-{i}"), "namespace": namespace},
                "spec": {},
            }))
            .collect::<Vec<_>>(),
    })
    .to_string()
}

/// Merge-patch a Memcached.
pub fn patch(env: &Env, namespace: &str, name: &str, merge: Value) -> Result<(), String> {
    env.kubectl
        .ok(&[
            "patch",
            "memcached",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            &merge.to_string(),
        ])
        .map(drop)
}

/// The objects of `kind` (`pods`, `replicasets`) labelled as Memcached
/// `instance`'s in `namespace`, by name.
pub fn instance_objects(
    env: &Env,
    kind: &str,
    namespace: &str,
    instance: &str,
) -> Result<Vec<Value>, String> {
    let list = env.kubectl.get(&[
        kind,
        "-n",
        namespace,
        "-l",
        &format!("app.kubernetes.io/instance={instance}"),
    ])?;
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(|o| o["metadata"]["name"].to_string());
    Ok(items)
}

/// The ready endpoints in the Service's EndpointSlices.
pub fn ready_endpoints(env: &Env, namespace: &str, service: &str) -> Result<Vec<Value>, String> {
    Ok(ready_in(&endpoint_slices(env, namespace, service)?))
}

/// The endpoints in the Service's EndpointSlices that cluster DNS answers:
/// those with the `ready` condition (CoreDNS's kubernetes plugin skips the
/// others), which a Service publishing pods not ready sets on all.
pub fn resolved_endpoints(env: &Env, namespace: &str, service: &str) -> Result<Vec<Value>, String> {
    Ok(endpoints_in(&endpoint_slices(env, namespace, service)?)
        .filter(|e| e["conditions"]["ready"] != json!(false))
        .collect())
}

/// The Service's EndpointSlices.
fn endpoint_slices(env: &Env, namespace: &str, service: &str) -> Result<Vec<Value>, String> {
    let slices = env.kubectl.get(&[
        "endpointslices",
        "-n",
        namespace,
        "-l",
        &format!("kubernetes.io/service-name={service}"),
    ])?;
    Ok(slices["items"].as_array().cloned().unwrap_or_default())
}

/// The ready endpoints of these EndpointSlices: their pod ready
/// (`serving`) and not terminating (a Service that publishes pods not ready
/// has `ready` on all).
pub fn ready_in<'a>(slices: impl IntoIterator<Item = &'a Value>) -> Vec<Value> {
    let ready = |e: &Value| {
        let conditions = &e["conditions"];
        let serving = conditions.get("serving").unwrap_or(&conditions["ready"]);
        *serving == json!(true) && conditions["terminating"] != json!(true)
    };
    endpoints_in(slices).filter(ready).collect()
}

/// Every endpoint of these EndpointSlices.
fn endpoints_in<'a>(slices: impl IntoIterator<Item = &'a Value>) -> impl Iterator<Item = Value> {
    (slices.into_iter()).flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
}

/// Create `namespace` unless it exists.
pub fn ensure_namespace(env: &Env, namespace: &str) -> Result<(), String> {
    env.kubectl
        .apply(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
                .to_string(),
        )
        .map(drop)
}

/// The notes (`message`) of the Events of `reason` in `namespace`.
pub fn event_notes(env: &Env, namespace: &str, reason: &str) -> Result<Vec<String>, String> {
    let selector = format!("reason={reason}");
    let events = env
        .kubectl
        .get(&["events", "-n", namespace, "--field-selector", &selector])?;
    Ok((events["items"].as_array().into_iter().flatten())
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect())
}

/// Annotate a Memcached so it is reconciled again (nothing else changes).
pub fn touch(env: &Env, namespace: &str, name: &str) -> Result<(), String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    env.kubectl
        .ok(&[
            "annotate",
            "memcached",
            name,
            "-n",
            namespace,
            "--overwrite",
            &format!("e2e.c5c3.io/touched={now}"),
        ])
        .map(drop)
}

/// Wait until a Memcached is Ready with `replicas` ready and its generation observed.
pub fn wait_ready(env: &Env, namespace: &str, name: &str, replicas: i64) -> Result<Value, String> {
    wait_for(
        &format!("{namespace}/{name} Ready with {replicas} replicas"),
        SETTLE,
        || {
            let mc = env.kubectl.get(&["memcached", name, "-n", namespace])?;
            let status = &mc["status"];
            let ready = condition(&mc, "Ready").is_some_and(|c| c["status"] == "True")
                && status["readyReplicas"] == replicas
                && status["observedGeneration"] == mc["metadata"]["generation"];
            if ready {
                Ok(mc.clone())
            } else {
                Err(status.to_string())
            }
        },
    )
}

/// Who holds the suite's controller's leader-election Lease.
pub fn lease_holder(env: &Env) -> Result<String, String> {
    lease_holder_in(env, OPERATOR_NAMESPACE)
}

/// Who holds the `memcached-operator` Lease in `namespace`.
pub fn lease_holder_in(env: &Env, namespace: &str) -> Result<String, String> {
    let lease = env
        .kubectl
        .get(&["lease", "memcached-operator", "-n", namespace])?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "the Lease has no holder".to_string())
}
