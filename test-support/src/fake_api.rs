//! An in-memory Kubernetes API server behind a tower-test mock: enough of
//! GET, LIST, WATCH (held open, no events), server-side apply PATCH and
//! DELETE for the controller's real requests. Used by the reconcile tests and
//! the watch bench.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedReceiver;
use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use memcached_controller::cluster::cache::{self, Writers};
use memcached_controller::cluster::stored::Stored;
use memcached_controller::handover::board::Handovers;
use memcached_controller::reconcile::context::Context;
use memcached_controller::stats::live::LiveStats;
use serde_json::{Value, json};

/// Namespace of every object.
pub const NS: &str = "default";

/// Objects by API path, and every write the controller sent.
#[derive(Default)]
pub struct FakeApi {
    /// Objects by path.
    pub objects: BTreeMap<String, Value>,
    /// `METHOD path` of every write that changed something (a server-side
    /// apply that changes nothing keeps the resourceVersion, as the real
    /// API server does).
    pub writes: Vec<String>,
    /// Paths whose server-side apply is refused: (HTTP code, reason, message).
    pub refuse: BTreeMap<String, (u16, &'static str, String)>,
    /// Every Event the controller recorded.
    pub events: Vec<Value>,
    /// `METHOD path` of every request but watches and Events.
    pub requests: Vec<String>,
}

/// The fake, shared with the mock's serving task.
pub type Shared = Arc<Mutex<FakeApi>>;

/// The API path of a namespaced object.
pub fn path(group_version: &str, resource: &str, name: &str) -> String {
    let prefix = if group_version == "v1" {
        "/api/v1".to_string()
    } else {
        format!("/apis/{group_version}")
    };
    format!("{prefix}/namespaces/{NS}/{resource}/{name}")
}

fn not_found() -> (StatusCode, Value) {
    (
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

fn handle(
    api: &Shared,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
) -> (StatusCode, Value) {
    let mut api = api.lock().unwrap();
    if path.contains("/events.k8s.io/") {
        let event: Value = serde_json::from_slice(body).unwrap_or_default();
        api.events.push(event.clone());
        return (StatusCode::OK, event);
    }
    api.requests.push(format!("{method} {path}"));
    if *method == Method::GET && is_collection(path) {
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let resource = path.rsplit('/').next().unwrap_or_default();
        let items: Vec<Value> = api
            .objects
            .iter()
            .filter(|(k, _)| path_in_collection(k, &prefix, resource))
            .map(|(_, v)| v.clone())
            .collect();
        return (
            StatusCode::OK,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
        );
    }
    match *method {
        Method::GET => api
            .objects
            .get(path)
            .cloned()
            .map_or_else(not_found, |o| (StatusCode::OK, o)),
        Method::PATCH if !query.contains("force=true") => {
            assert!(query.contains("fieldManager=memcached-operator"), "{query}");
            if let Some(refused) = api.refuse.get(path) {
                return refusal(refused);
            }
            let patch: Value = serde_json::from_slice(body).unwrap();
            let Some(stored) = api.objects.get_mut(path) else {
                return not_found();
            };
            strategic_merge(stored, &patch);
            let stored = stored.clone();
            api.writes.push(format!("PATCH {path}"));
            (StatusCode::OK, stored)
        }
        Method::PATCH => {
            assert!(
                query.contains("fieldManager=memcached-operator"),
                "server-side apply: {query}"
            );
            if let Some(refused) = api.refuse.get(path) {
                return refusal(refused);
            }
            let mut object: Value = serde_json::from_slice(body).unwrap();
            let key = path.trim_end_matches("/status").to_string();
            let stored = api.objects.get(&key).cloned();
            let version = stored
                .as_ref()
                .and_then(|s| {
                    s["metadata"]["resourceVersion"]
                        .as_str()?
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0);
            if path.ends_with("/status") {
                let mut stored = stored.unwrap_or_default();
                stored["status"] = object["status"].take();
                api.writes.push(format!("PATCH {path}"));
                api.objects.insert(key, stored.clone());
                return (StatusCode::OK, stored);
            }
            // The applied fields replace the stored ones; uid and status stay.
            // So does a stored `spec.replicas` the apply leaves out: the
            // controller leaves them out only once another manager (the
            // HPA, through the handover) owns them.
            if let Some(replicas) = stored
                .as_ref()
                .map(|s| s["spec"]["replicas"].clone())
                .filter(|r| !r.is_null() && object["spec"]["replicas"].is_null())
                .filter(|_| object["spec"].is_object())
            {
                object["spec"]["replicas"] = replicas;
            }
            if let Some(uid) = stored
                .as_ref()
                .map(|s| s["metadata"]["uid"].clone())
                .filter(|u| !u.is_null())
            {
                object["metadata"]["uid"] = uid;
            }
            if let Some(status) = stored
                .as_ref()
                .map(|s| s["status"].clone())
                .filter(|s| !s.is_null())
            {
                object["status"] = status;
            }
            object["metadata"]["resourceVersion"] = json!(version.to_string());
            if stored.as_ref() == Some(&object) {
                return (StatusCode::OK, object);
            }
            api.writes.push(format!("PATCH {path}"));
            object["metadata"]["resourceVersion"] = json!((version + 1).to_string());
            api.objects.insert(key, object.clone());
            (StatusCode::OK, object)
        }
        Method::DELETE => {
            // DeleteOptions.preconditions.uid, as the API server checks it.
            let options: Value = serde_json::from_slice(body).unwrap_or_default();
            let expected = &options["preconditions"]["uid"];
            let stored = api.objects.get(path).map(|o| o["metadata"]["uid"].clone());
            if !expected.is_null() && stored.as_ref().is_some_and(|uid| uid != expected) {
                return (
                    StatusCode::CONFLICT,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "Precondition failed: UID in precondition"}),
                );
            }
            api.writes.push(format!("DELETE {path}"));
            api.objects.remove(path).map_or_else(not_found, |_| {
                (
                    StatusCode::OK,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
                )
            })
        }
        _ => panic!("unexpected {method} {path}"),
    }
}

/// The API server's answer refusing a write.
fn refusal((code, reason, message): &(u16, &'static str, String)) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(*code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": message}),
    )
}

/// A strategic merge patch as the controller sends them: objects merge,
/// lists of named objects merge by name, anything else is replaced.
fn strategic_merge(stored: &mut Value, patch: &Value) {
    match (stored, patch) {
        (Value::Object(stored), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    stored.remove(key); // null deletes, as in any merge patch
                } else {
                    let empty = if value.is_object() {
                        json!({})
                    } else {
                        Value::Null
                    };
                    strategic_merge(stored.entry(key.clone()).or_insert(empty), value);
                }
            }
        }
        (Value::Array(stored), Value::Array(patch))
            if patch.iter().all(|p| p["name"].is_string()) =>
        {
            for item in patch {
                match stored.iter_mut().find(|s| s["name"] == item["name"]) {
                    Some(existing) => strategic_merge(existing, item),
                    None => stored.push(item.clone()),
                }
            }
        }
        (stored, patch) => *stored = patch.clone(),
    }
}

/// A collection (list) path: `.../<resource>` rather than `.../<resource>/<name>`.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // api/v1/<res>, api/v1/namespaces/<ns>/<res>, apis/<g>/<v>/<res>, apis/<g>/<v>/namespaces/<ns>/<res>
    let base = if segments.first() == Some(&"api") {
        2
    } else {
        3
    };
    segments.len() == base + 1 || (segments.len() == base + 3 && segments[base] == "namespaces")
}

/// True when the object path `key` is in the collection `prefix` (or the same resource in any namespace).
fn path_in_collection(key: &str, prefix: &str, resource: &str) -> bool {
    key.starts_with(prefix)
        || (!prefix.contains("/namespaces/")
            && key.contains(&format!("/{resource}/"))
            && key.rsplit('/').nth(1) == Some(resource))
}

/// A client whose requests `api` answers; watches stay open with no events.
pub fn client(api: Shared) -> Client {
    let (service, mut handle_) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        let mut open_watches = Vec::new();
        while let Some((request, send)) = handle_.next_request().await {
            let (parts, body) = request.into_parts();
            let query = parts.uri.query().unwrap_or("").to_string();
            if query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1")
            {
                open_watches.push(send);
                continue;
            }
            let body = body.collect_bytes().await.unwrap();
            let (status, value) = handle(&api, &parts.method, parts.uri.path(), &query, &body);
            let response = Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&value).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    Client::new(service, NS)
}

/// A reconcile context whose client talks to `api`, its cache filled with
/// `api`'s objects as a synced watch would see them.
pub fn context(api: Shared) -> Arc<Context> {
    let (ctx, mut writers) = context_and_writers(api.clone());
    sync(&mut writers, &api);
    ctx
}

/// A reconcile context whose client talks to `api`, with an empty cache
/// and the writers that fill it ([`sync`]).
pub fn context_and_writers(api: Shared) -> (Arc<Context>, Writers) {
    let (ctx, writers, _) = context_parts(api);
    (ctx, writers)
}

/// [`context_and_writers`], and the Memcached objects the live stats ask to
/// reconcile again.
pub fn context_parts(api: Shared) -> (Arc<Context>, Writers, UnboundedReceiver<ObjectRef<Stored>>) {
    context_with_key(api, b"test key")
}

/// [`context_parts`] of a controller whose Secret hash key is `hash_key`.
pub fn context_with_key(
    api: Shared,
    hash_key: &[u8],
) -> (Arc<Context>, Writers, UnboundedReceiver<ObjectRef<Stored>>) {
    let (service, mut handle_) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((request, send)) = handle_.next_request().await {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap();
            let (status, value) = handle(
                &api,
                &parts.method,
                parts.uri.path(),
                parts.uri.query().unwrap_or(""),
                &body,
            );
            let response = Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&value).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    let client = Client::new(service, NS);
    let reporter = Reporter {
        controller: "memcached-operator".into(),
        instance: None,
    };
    let (cache, writers) = cache::new();
    let (live_stats, stats_changed) = LiveStats::new();
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        failures: Default::default(),
        stalls: Default::default(),
        metrics: Default::default(),
        validation: Default::default(),
        hash_key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, hash_key),
        installation: Default::default(),
        cache,
        applied: Default::default(),
        secret_data: Default::default(),
        live_stats,
        waits: Default::default(),
        // Its copies' ends reconcile nothing: the tests reconcile by hand.
        handovers: Handovers::new().0,
    });
    (ctx, writers, stats_changed)
}

/// Relist every store from `api`'s objects: the managed kinds by the
/// managed-by label, as the controller's watches select them, and every
/// Secret.
pub fn sync(writers: &mut Writers, api: &Shared) {
    let objects: Vec<Value> = api.lock().unwrap().objects.values().cloned().collect();
    let managed = |o: &&Value| {
        o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "memcached-operator"
    };
    let of = |kind: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .filter(|o| kind == "Secret" || managed(o))
            .cloned()
            .collect()
    };
    relist(&mut writers.deployments, of("Deployment"));
    relist(&mut writers.stateful_sets, of("StatefulSet"));
    relist(&mut writers.services, of("Service"));
    relist(&mut writers.pdbs, of("PodDisruptionBudget"));
    relist(&mut writers.hpas, of("HorizontalPodAutoscaler"));
    relist(&mut writers.network_policies, of("NetworkPolicy"));
    relist(&mut writers.config_maps, of("ConfigMap"));
    relist(&mut writers.service_monitors, of("ServiceMonitor"));
    relist(&mut writers.endpoint_slices, of("EndpointSlice"));
    relist(&mut writers.secrets, of("Secret"));
}

fn relist<K>(writer: &mut Writer<K>, objects: Vec<Value>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    writer.apply_watcher_event(&Event::Init);
    for object in objects {
        let object: K = serde_json::from_value(object).unwrap();
        writer.apply_watcher_event(&Event::InitApply(object));
    }
    writer.apply_watcher_event(&Event::InitDone);
}
