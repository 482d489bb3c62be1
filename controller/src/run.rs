//! The long-running controller: watches, leader election, probes, metrics.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::Predicate;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use memcached_api::Memcached;

use crate::deployment::secret_mounts;
use crate::labels::MANAGER;
use crate::metrics::Metrics;
use crate::reconcile::{Context, Error, error_policy, reconcile};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `/metrics` (and probes) address.
    pub metrics_address: SocketAddr,
    /// `/healthz` and `/readyz` address.
    pub health_address: SocketAddr,
    /// Namespaces to watch; empty: all.
    pub watch_namespaces: Vec<String>,
    /// Hold a Lease before reconciling.
    pub leader_election: bool,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This process's identity in the Lease.
    pub identity: String,
}

/// Run until SIGTERM/SIGINT (or until leadership is lost).
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    tokio::spawn(crate::http::serve(
        settings.health_address,
        ready.clone(),
        metrics.clone(),
    ));
    if settings.metrics_address != settings.health_address {
        tokio::spawn(crate::http::serve(
            settings.metrics_address,
            ready.clone(),
            metrics.clone(),
        ));
    }

    let mut leadership = None;
    if settings.leader_election {
        let manager =
            kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &settings.lease_name)
                .with_namespace(&settings.lease_namespace)
                .with_identity(&settings.identity)
                .with_duration(15)
                .with_grace(5)
                .build()
                .await?;
        let (mut channel, task) = manager.watch().await;
        tracing::info!(lease = %settings.lease_name, identity = %settings.identity, "waiting for leadership");
        while !*channel.borrow_and_update() {
            channel.changed().await?;
        }
        tracing::info!("leading");
        leadership = Some((channel, task));
    }

    let reporter = Reporter {
        controller: MANAGER.into(),
        instance: Some(settings.identity.clone()),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        failures: Default::default(),
        metrics: metrics.clone(),
    });
    let namespaces = if settings.watch_namespaces.is_empty() {
        vec![None]
    } else {
        settings
            .watch_namespaces
            .iter()
            .cloned()
            .map(Some)
            .collect()
    };
    let controllers = futures::future::join_all(namespaces.into_iter().map(|ns| {
        controller(
            client.clone(),
            ns,
            ctx.clone(),
            metrics.clone(),
            ready.clone(),
        )
    }));
    match leadership {
        None => {
            controllers.await;
        }
        Some((mut channel, _task)) => {
            tokio::select! {
                _ = controllers => {}
                _ = async { while channel.changed().await.is_ok() && *channel.borrow() {} } => {
                    anyhow::bail!("lost leadership: exiting so a new leader takes over");
                }
            }
        }
    }
    Ok(())
}

/// Reconcile the Memcached objects of one namespace (or all) until shutdown.
pub async fn controller(
    client: Client,
    namespace: Option<String>,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
) {
    let (reader, writer) = reflector::store();
    // Status writes change neither generation nor annotations: they do not retrigger reconcile.
    let ns = namespace.as_deref();
    let memcacheds = watcher(scoped::<Memcached>(&client, ns), watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::annotations),
            Default::default(),
        );
    let owned =
        watcher::Config::default().labels("app.kubernetes.io/managed-by=memcached-operator");
    // Metadata only: a changed Secret rolls the pods that mount it at once
    // (without it the next periodic reconcile would), and no Secret data is cached.
    let secrets = watcher(
        scoped::<PartialObjectMeta<Secret>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    let mounting = reader.clone();
    let store = reader.clone();
    tokio::spawn({
        let (store, ready) = (store.clone(), ready.clone());
        async move {
            if store.wait_until_ready().await.is_ok() {
                ready.store(true, Ordering::Relaxed);
            }
        }
    });
    Controller::for_stream(memcacheds, reader)
        .with_config(ControllerConfig::default().concurrency(8))
        .owns(scoped::<Deployment>(&client, ns), owned.clone())
        .owns(scoped::<Service>(&client, ns), owned)
        .watches_stream(secrets, move |secret| {
            memcacheds_mounting(&mounting, &secret)
        })
        .shutdown_on_signal()
        .run(
            |mc, ctx: Arc<Context>| {
                let metrics = metrics.clone();
                async move {
                    let started = Instant::now();
                    let result: Result<_, Error> = reconcile(mc, ctx).await;
                    metrics.reconciled(started.elapsed(), result.is_err());
                    result
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|_| {
            let live = store.state();
            metrics.retain(|i| {
                live.iter().any(|mc| {
                    mc.name_any() == i.name
                        && mc.namespace().as_deref() == Some(i.namespace.as_str())
                })
            });
            std::future::ready(())
        })
        .await;
}

/// The Memcached objects whose pods mount `secret`.
fn memcacheds_mounting(
    store: &Store<Memcached>,
    secret: &PartialObjectMeta<Secret>,
) -> Vec<ObjectRef<Memcached>> {
    let name = secret.name_any();
    store
        .state()
        .into_iter()
        .filter(|mc| mc.namespace() == secret.namespace())
        // Defaulting never enables TLS or authentication nor names a Secret:
        // the stored spec mounts what the effective one does.
        .filter(|mc| {
            secret_mounts(&mc.spec)
                .iter()
                .any(|(_, mounted, _)| *mounted == name)
        })
        .map(|mc| ObjectRef::from_obj(&*mc))
        .collect()
}

/// An Api over one namespace, or over all.
fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    namespace.map_or_else(
        || Api::all(client.clone()),
        |ns| Api::namespaced(client.clone(), ns),
    )
}
