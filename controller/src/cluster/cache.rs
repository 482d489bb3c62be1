//! The cluster as this controller's watches see it. Reconcile reads the
//! objects it manages from here instead of asking the API server, so a
//! converged reconcile sends no request.
//!
//! Managed objects are watched by the managed-by label: an object of the
//! same name without it is not cached, and reconcile reads it from the API
//! server before it would create one. Each store keeps only what reconcile
//! reads, to stay small at thousands of objects: metadata with this
//! controller's own managedFields entries, the workloads' `spec.replicas`
//! and status (not their pod template), the EndpointSlices' endpoints, and
//! of Secrets their name and resourceVersion (the data is read by
//! [`crate::cluster::secrets`], only for the Secrets a Memcached mounts).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::{Future, ready};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use memcached_api::Memcached;
use serde::de::DeserializeOwned;

use crate::cluster::apply::compact_managed_fields;
use crate::cluster::stored::Stored;
use crate::objects::secret_stamp::{SECRET_VERSIONS_ANNOTATION, SecretStamp};
use crate::objects::service_monitor;
use crate::objects::workload::{IN_PLACE_ANNOTATION, Workload};
use memcached_api::render::labels::SECRET_HASH_ANNOTATION;
use memcached_api::render::stamp::{
    BASE_ANNOTATION, INTENT_ANNOTATION, INTENT_SPEC_ANNOTATION, TEMPLATE_ANNOTATION,
};

/// An object's metadata only.
pub type Meta<K> = PartialObjectMeta<K>;

/// How long a controller waits for its stores before it reconciles anyway
/// (reading from the API server what a store lacks).
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// The label every managed object carries.
const MANAGED: &str = "app.kubernetes.io/managed-by=memcached-operator";

/// Read side of the stores.
#[derive(Clone)]
pub struct Cache {
    pub deployments: Store<Deployment>,
    pub stateful_sets: Store<StatefulSet>,
    pub services: Store<Meta<Service>>,
    pub pdbs: Store<Meta<PodDisruptionBudget>>,
    pub hpas: Store<Meta<HorizontalPodAutoscaler>>,
    pub network_policies: Store<Meta<NetworkPolicy>>,
    pub config_maps: Store<Meta<ConfigMap>>,
    pub service_monitors: Store<Meta<DynamicObject>>,
    pub endpoint_slices: Store<EndpointSlice>,
    pub secrets: Store<Meta<Secret>>,
}

/// Write side of the stores, for [`watch`] (or a test that fills them).
pub struct Writers {
    pub deployments: Writer<Deployment>,
    pub stateful_sets: Writer<StatefulSet>,
    pub services: Writer<Meta<Service>>,
    pub pdbs: Writer<Meta<PodDisruptionBudget>>,
    pub hpas: Writer<Meta<HorizontalPodAutoscaler>>,
    pub network_policies: Writer<Meta<NetworkPolicy>>,
    pub config_maps: Writer<Meta<ConfigMap>>,
    pub service_monitors: Writer<Meta<DynamicObject>>,
    pub endpoint_slices: Writer<EndpointSlice>,
    pub secrets: Writer<Meta<Secret>>,
}

/// Empty stores and their writers.
pub fn new() -> (Cache, Writers) {
    let writers = Writers {
        deployments: Writer::default(),
        stateful_sets: Writer::default(),
        services: Writer::default(),
        pdbs: Writer::default(),
        hpas: Writer::default(),
        network_policies: Writer::default(),
        config_maps: Writer::default(),
        service_monitors: Writer::new(service_monitor::api_resource()),
        endpoint_slices: Writer::default(),
        secrets: Writer::default(),
    };
    let cache = Cache {
        deployments: writers.deployments.as_reader(),
        stateful_sets: writers.stateful_sets.as_reader(),
        services: writers.services.as_reader(),
        pdbs: writers.pdbs.as_reader(),
        hpas: writers.hpas.as_reader(),
        network_policies: writers.network_policies.as_reader(),
        config_maps: writers.config_maps.as_reader(),
        service_monitors: writers.service_monitors.as_reader(),
        endpoint_slices: writers.endpoint_slices.as_reader(),
        secrets: writers.secrets.as_reader(),
    };
    (cache, writers)
}

/// One object as a store has it.
pub struct Cached<K> {
    /// The object, when the store has it.
    pub object: Option<Arc<K>>,
    /// Whether the store has listed its objects: an object missing from a
    /// store that has not may well exist.
    pub listed: bool,
}

impl<K> Cached<K> {
    /// The object, or `None` when the store knows it is absent; `fetch`
    /// reads it from the API server when the store cannot tell, or when
    /// `wanted` (an object without the managed-by label is not cached).
    pub async fn or_fetch<F>(self, wanted: bool, fetch: F) -> Result<Option<K>, kube::Error>
    where
        K: Clone,
        F: Future<Output = Result<Option<K>, kube::Error>>,
    {
        match self.object {
            Some(object) => Ok(Some((*object).clone())),
            None if wanted || !self.listed => fetch.await,
            None => Ok(None),
        }
    }
}

/// An object known to exist (from a listing of the store).
impl<K> From<Arc<K>> for Cached<K> {
    fn from(object: Arc<K>) -> Self {
        Cached {
            object: Some(object),
            listed: true,
        }
    }
}

/// The object `name` of namespace `ns` in `store`. For reconciles only: it
/// polls the store's readiness, which must not happen while
/// [`Cache::synced`] waits.
pub fn get<K>(store: &Store<K>, ns: &str, name: &str) -> Cached<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    cached(store, ObjectRef::new(name).within(ns))
}

/// The ServiceMonitor `name` of namespace `ns`.
pub fn service_monitor(cache: &Cache, ns: &str, name: &str) -> Cached<Meta<DynamicObject>> {
    let key = ObjectRef::new_with(name, service_monitor::api_resource()).within(ns);
    cached(&cache.service_monitors, key)
}

fn cached<K>(store: &Store<K>, key: ObjectRef<K>) -> Cached<K>
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    // Polled once without waiting. The readiness channel keeps one waker,
    // which this poll replaces: only reconciles call this, and they start
    // after `Cache::synced`, the one waiter, is done.
    Cached {
        object: store.get(&key),
        listed: store.wait_until_ready().now_or_never().is_some(),
    }
}

impl Cache {
    /// Resolves once every store listed its objects, or after `timeout`
    /// (naming the stores still empty: missing RBAC, an API not served).
    /// ServiceMonitors are not waited for: without Prometheus Operator's CRD
    /// that list never succeeds.
    pub async fn synced(&self, timeout: Duration) {
        let waits = [
            ("deployments", listed(&self.deployments)),
            ("statefulsets", listed(&self.stateful_sets)),
            ("services", listed(&self.services)),
            ("poddisruptionbudgets", listed(&self.pdbs)),
            ("horizontalpodautoscalers", listed(&self.hpas)),
            ("networkpolicies", listed(&self.network_policies)),
            ("configmaps", listed(&self.config_maps)),
            ("endpointslices", listed(&self.endpoint_slices)),
            ("secrets", listed(&self.secrets)),
        ];
        let deadline = tokio::time::Instant::now() + timeout;
        for (kind, wait) in waits {
            if tokio::time::timeout_at(deadline, wait).await.is_err() {
                tracing::warn!(
                    kind,
                    "the watch has not listed its objects yet: reconciling anyway, reading what it lacks from the API server"
                );
            }
        }
    }
}

/// Resolves once `store` listed its objects (or its writer is gone).
fn listed<K>(store: &Store<K>) -> BoxFuture<'static, ()>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let store = store.clone();
    async move {
        let _ = store.wait_until_ready().await;
    }
    .boxed()
}

/// Fill the stores from watches of `namespace` (all when `None`), and send
/// the Memcached that controls a managed object whenever that object
/// changes or goes away; a changed Secret sends the Memcached objects
/// `mounting` names. Runs until dropped.
pub fn watch(
    client: &Client,
    namespace: Option<&str>,
    writers: Writers,
    owners: UnboundedSender<ObjectRef<Stored>>,
    mounting: impl Fn(&Meta<Secret>) -> Vec<ObjectRef<Stored>> + Send + 'static,
) -> impl Future<Output = ()> + Send {
    let monitors = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &service_monitor::api_resource()),
        None => {
            Api::<Meta<DynamicObject>>::all_with(client.clone(), &service_monitor::api_resource())
        }
    };
    let managed = watcher::Config::default().labels(MANAGED);
    let secrets = watcher(
        scoped::<Meta<Secret>>(client, namespace),
        watcher::Config::default(),
    );
    let streams = [
        owned(
            scoped(client, namespace),
            writers.deployments,
            keep_status,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.stateful_sets,
            keep_status,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.services,
            keep_own_meta,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.pdbs,
            keep_own_meta,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.hpas,
            keep_own_meta,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.network_policies,
            keep_own_meta,
            &owners,
            log_watch_error,
        ),
        owned(
            scoped(client, namespace),
            writers.config_maps,
            keep_own_meta,
            &owners,
            log_watch_error,
        ),
        owned(
            monitors,
            writers.service_monitors,
            keep_own_meta,
            &owners,
            log_optional_watch_error,
        ),
        // The EndpointSlice controller copies the Service's labels. A pod
        // turning ready or not is read at once, not at the next resync.
        reflect(
            watcher(scoped(client, namespace), managed).modify(keep_endpoints),
            writers.endpoint_slices,
            {
                let owners = owners.clone();
                move |slice| {
                    if let Some(served) = served_memcached(slice) {
                        let _ = owners.unbounded_send(served);
                    }
                }
            },
            log_watch_error,
        ),
        // Every Secret: the ones a Memcached mounts carry no label of ours.
        reflect(
            secrets.modify(keep_version),
            writers.secrets,
            move |secret| {
                for owner in mounting(secret) {
                    let _ = owners.unbounded_send(owner);
                }
            },
            log_watch_error,
        ),
    ];
    async move {
        futures::future::join_all(streams).await;
    }
}

/// An Api over one namespace, or over all.
pub fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    namespace.map_or_else(
        || Api::all(client.clone()),
        |ns| Api::namespaced(client.clone(), ns),
    )
}

/// Watch the managed objects `api` serves into `writer` (each stripped by
/// `keep`), and send the Memcached controlling each one that changes;
/// failures go to `log`.
fn owned<K>(
    api: Api<K>,
    writer: Writer<K>,
    keep: fn(&mut K),
    owners: &UnboundedSender<ObjectRef<Stored>>,
    log: fn(&watcher::Error),
) -> BoxFuture<'static, ()>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let owners = owners.clone();
    let events = watcher(api, watcher::Config::default().labels(MANAGED)).modify(keep);
    reflect(
        events,
        writer,
        move |object| {
            if let Some(owner) = controlling_memcached(object.meta()) {
                let _ = owners.unbounded_send(owner);
            }
        },
        log,
    )
}

/// Drive `events` into `writer`, calling `touched` with every object that
/// changed or went away and `log` with every failure.
fn reflect<K>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
    writer: Writer<K>,
    touched: impl Fn(&K) + Send + 'static,
    log: fn(&watcher::Error),
) -> BoxFuture<'static, ()>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    crate::cluster::backoff::backoff(events)
        .reflect(writer)
        .touched_objects()
        .for_each(move |object| {
            match object {
                Ok(object) => touched(&object),
                Err(error) => log(&error),
            }
            ready(())
        })
        .boxed()
}

/// What the log says when a watch resumed from a revision the API server no
/// longer serves (410 Gone, after a compaction or its restart): kube's
/// watcher lists again.
pub const WATCH_EXPIRED: &str = "watch expired (410 Gone): listing again";

/// What the log says when an optional API is not served (404): the
/// ServiceMonitor CRD comes with Prometheus Operator, often not installed.
pub const NOT_SERVED: &str = "API not served (its CRD is not installed): listing again later";

/// Log a failed watch (the watcher retries it with backoff): a warning,
/// but a routine relist (`410 Gone` after compaction) at info level. The
/// error alone is logged (the API server's message names the resource),
/// never the objects.
pub fn log_watch_error(error: &watcher::Error) {
    match error_code(error) {
        Some(410) => tracing::info!(%error, "{WATCH_EXPIRED}"),
        _ => tracing::warn!(%error, "watch failed; retrying"),
    }
}

/// [`log_watch_error`] for the watch of an optional API: while it is not
/// served (404, retried every 30 s for as long as its CRD is absent), at
/// debug level.
fn log_optional_watch_error(error: &watcher::Error) {
    match error_code(error) {
        Some(404) => tracing::debug!(%error, "{NOT_SERVED}"),
        _ => log_watch_error(error),
    }
}

/// The HTTP status code the API server answered a failed watch with.
fn error_code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::WatchError(status) => Some(status.code),
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

/// The Memcached with a controller reference on `object`.
/// The Memcached whose Service the EndpointSlice belongs to (the Service
/// has the Memcached's name).
fn served_memcached(slice: &EndpointSlice) -> Option<ObjectRef<Stored>> {
    let labels = slice.metadata.labels.as_ref()?;
    let service = labels.get("kubernetes.io/service-name")?;
    Some(ObjectRef::new(service).within(slice.metadata.namespace.as_deref().unwrap_or_default()))
}

fn controlling_memcached(object: &ObjectMeta) -> Option<ObjectRef<Stored>> {
    let owner = object
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))?;
    let group = <Memcached as Resource>::group(&());
    let same_group = owner
        .api_version
        .split_once('/')
        .is_some_and(|(g, _)| g == group);
    (same_group && owner.kind == <Memcached as Resource>::kind(&())).then(|| {
        ObjectRef::new(&owner.name).within(object.namespace.as_deref().unwrap_or_default())
    })
}

/// Keep only what reconcile reads of managedFields (see
/// [`compact_managed_fields`]), and no annotations.
fn keep_own_meta<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.annotations = None;
    compact_managed_fields(meta);
}

/// The workload annotations reconcile reads: [`SecretStamp`],
/// [`TemplateStamp`](memcached_api::render::stamp::TemplateStamp) and the image being
/// applied in place ([`crate::rollout::in_place`]).
const STAMPS: [&str; 7] = [
    SECRET_HASH_ANNOTATION,
    SECRET_VERSIONS_ANNOTATION,
    INTENT_ANNOTATION,
    TEMPLATE_ANNOTATION,
    BASE_ANNOTATION,
    INTENT_SPEC_ANNOTATION,
    IN_PLACE_ANNOTATION,
];

/// A workload without its pod template (reconcile reads its metadata,
/// `spec.replicas`, status and its stamps).
fn keep_status<K: Workload>(object: &mut K) {
    let stamps: BTreeMap<String, String> = object
        .meta()
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| STAMPS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    keep_own_meta(object);
    object.meta_mut().annotations = (!stamps.is_empty()).then_some(stamps);
    object.drop_template();
}

/// The [`SecretStamp`] of Memcached `ns/name`'s workload of `kind`
/// (`Deployment` or `StatefulSet`), as the cache holds it.
pub fn secret_stamp(cache: &Cache, kind: &str, ns: &str, name: &str) -> Option<SecretStamp> {
    let annotations = match kind {
        "StatefulSet" => get(&cache.stateful_sets, ns, name)
            .object?
            .metadata
            .annotations
            .clone(),
        _ => get(&cache.deployments, ns, name)
            .object?
            .metadata
            .annotations
            .clone(),
    };
    SecretStamp::from_annotations(&annotations?)
}

/// An EndpointSlice's endpoints, labels and controller: what tells whose
/// pods they are (`reconcile::running`: the Service that controls the
/// slice, each endpoint's Pod).
pub(crate) fn keep_endpoints(slice: &mut EndpointSlice) {
    slice.metadata.annotations = None;
    slice.metadata.managed_fields = None;
    let owners = slice.metadata.owner_references.take().into_iter().flatten();
    let controller = owners
        .filter(|r| r.controller == Some(true))
        .map(|r| OwnerReference {
            uid: r.uid,
            controller: r.controller,
            ..Default::default()
        });
    slice.metadata.owner_references = Some(controller.collect());
    slice.ports = None;
    for endpoint in &mut slice.endpoints {
        // The pod's kind, namespace and name: the metrics name pods.
        endpoint.target_ref = endpoint.target_ref.take().map(|r| ObjectReference {
            kind: r.kind,
            namespace: r.namespace,
            name: r.name,
            ..Default::default()
        });
        endpoint.hints = None;
        endpoint.node_name = None;
        endpoint.zone = None;
    }
}

/// A Secret's name, namespace and resourceVersion: nothing of its content
/// (an annotation such as kubectl's last-applied-configuration can hold it).
fn keep_version(secret: &mut Meta<Secret>) {
    let meta = &mut secret.metadata;
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        resource_version: meta.resource_version.take(),
        uid: meta.uid.take(),
        ..Default::default()
    };
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn status(code: u16) -> Box<Status> {
        Status::failure("", "").with_code(code).boxed()
    }

    /// What reconcile decides a change in place by survives the store: the
    /// whole template stamp of a workload as rendered.
    #[test]
    fn a_workload_keeps_its_template_stamp_in_the_store() {
        use memcached_api::render::stamp::TemplateStamp;
        let mc: Memcached = serde_json::from_value(serde_json::json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"warmRestart": {"enabled": true}}}))
        .unwrap();
        let spec = memcached_api::apply_defaults(mc.spec.clone());
        let mut deployment = crate::objects::deployment::build(&mc, &spec, Some("h"), "auth");
        let rendered = TemplateStamp::of(&deployment.metadata).unwrap();
        assert!(rendered.base.is_some() && rendered.spec.is_some());
        keep_status(&mut deployment);
        assert_eq!(TemplateStamp::of(&deployment.metadata), Some(rendered));
    }

    #[test]
    fn a_missing_crd_and_an_expired_watch_are_told_from_other_failures() {
        let not_served = watcher::Error::InitialListFailed(kube::Error::Api(status(404)));
        assert_eq!(error_code(&not_served), Some(404));
        assert_eq!(
            error_code(&watcher::Error::WatchError(status(410))),
            Some(410)
        );
        let forbidden = watcher::Error::WatchStartFailed(kube::Error::Api(status(403)));
        assert_eq!(error_code(&forbidden), Some(403));
        assert_eq!(error_code(&watcher::Error::NoResourceVersion), None);
    }

    #[test]
    fn an_endpoint_slice_reconciles_the_memcached_its_service_serves() {
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cache-x7k2p", "namespace": "ns",
                "labels": {"kubernetes.io/service-name": "cache"}},
            "addressType": "IPv4", "endpoints": []
        }))
        .unwrap();
        assert_eq!(
            served_memcached(&slice),
            Some(ObjectRef::new("cache").within("ns"))
        );
        assert_eq!(served_memcached(&EndpointSlice::default()), None);
    }
}
