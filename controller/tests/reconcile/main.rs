//! Reconcile against an in-memory API server (tower-test): the real
//! reconcile code, its real HTTP requests, a fake store behind them.

mod converge;
mod in_place;
mod refusals;
mod secrets;
mod status;
mod workloads;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use memcached_api::render::containers::MEMCACHED_PORT;
use memcached_controller::stats::wire::READ_TIMEOUT;

use kube::runtime::controller::Action;
use memcached_api::Memcached;
use memcached_controller::cluster::stored::Stored;
use memcached_controller::reconcile::context::Error;
use memcached_controller::reconcile::report::{REQUEUE_NOT_READY, REQUEUE_ROLLOUT};
use memcached_controller::reconcile::{reconcile, reconcile_stored};
use serde_json::{Value, json};
use test_support::fake_api::{self, NS, Shared, context, path};
use test_support::object::memcached;

fn cr_path() -> String {
    path("memcached.c5c3.io/v1beta1", "memcacheds", "c")
}

/// Store the CR with `spec` as the API server would: the generation moves
/// when the spec changes, the status stays. Returns it as a watch delivers it.
fn store_cr(api: &Shared, spec: Value) -> Arc<Memcached> {
    Arc::new(serde_json::from_value(store_object(api, spec)).unwrap())
}

/// [`store_cr`] as the controller's watch decodes it, readable or not.
fn store_stored(api: &Shared, spec: Value) -> Arc<Stored> {
    Arc::new(serde_json::from_value(store_object(api, spec)).unwrap())
}

fn store_object(api: &Shared, spec: Value) -> Value {
    let mut api = api.lock().unwrap();
    let old = api.objects.get(&cr_path()).cloned().unwrap_or(Value::Null);
    let generation =
        old["metadata"]["generation"].as_i64().unwrap_or(0) + i64::from(old["spec"] != spec);
    let mut object = memcached(spec)
        .name("c")
        .namespace(NS)
        .uid("uid-1")
        .generation(generation)
        .json();
    if !old["status"].is_null() {
        object["status"] = old["status"].clone();
    }
    api.objects.insert(cr_path(), object.clone());
    object
}

/// Apply `spec` and reconcile it; returns the CR with the status it wrote.
async fn converge(api: &Shared, spec: Value) -> Arc<Memcached> {
    reconcile(store_cr(api, spec.clone()), context(api.clone()))
        .await
        .unwrap();
    store_cr(api, spec)
}

fn writes(api: &Shared) -> Vec<String> {
    std::mem::take(&mut api.lock().unwrap().writes)
}

/// Nothing but the Memcached (its status) differs between the two snapshots.
fn assert_only_the_memcached_changed(
    before: &BTreeMap<String, Value>,
    after: &BTreeMap<String, Value>,
) {
    for (path, object) in before {
        if !path.contains("/memcacheds/") {
            assert_eq!(after.get(path), Some(object), "{path} changed");
        }
    }
    assert_eq!(
        after.len(),
        before.len(),
        "an object was created or deleted"
    );
}

/// Exactly one Event with `reason` was recorded since the last call: a Warning saying `note`.
fn assert_one_warning(api: &Shared, reason: &str, note: &str) {
    let warnings: Vec<Value> = events(api)
        .into_iter()
        .filter(|e| e["reason"] == reason)
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0]["type"] == "Warning" && warnings[0]["note"] == note,
        "{warnings:?}"
    );
}

fn condition(api: &Shared, type_: &str) -> Value {
    api.lock().unwrap().objects[&cr_path()]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap()
        .clone()
}

/// Every Event the controller recorded since the last call.
fn events(api: &Shared) -> Vec<Value> {
    std::mem::take(&mut api.lock().unwrap().events)
}

fn requests(api: &Shared) -> Vec<String> {
    std::mem::take(&mut api.lock().unwrap().requests)
}

fn insert(api: &Shared, path: String, object: Value) {
    api.lock().unwrap().objects.insert(path, object);
}

/// Every feature that creates an object or reads a Secret, converged.
fn full_spec() -> Value {
    json!({"replicas": 2, "serverListConfigMap": "servers",
        "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}}},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}},
        "networkPolicy": {"enabled": true},
        "monitoring": {"enabled": true, "serviceMonitor": {"enabled": true}}})
}

fn auth_secret(version: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "auth", "namespace": NS, "resourceVersion": version},
        "data": {"auth": "dTpwCg=="}})
}
