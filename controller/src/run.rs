//! The long-running controller: watches, leader election, probes, metrics.
//!
//! Every replica lists the Memcached objects of every watched namespace and
//! is ready (`/readyz`) once all of them synced: a standby is ready to take
//! over. Only the holder of the Lease reconciles; it releases the Lease on
//! SIGTERM, and stops before the Lease can expire when renewals fail.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::Predicate;
use kube::runtime::controller::{Config as ControllerConfig, Controller, Error as ControllerError};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use memcached_api::Memcached;
use memcached_api::validation::Options;
use tokio::sync::watch;

use crate::cache::{self, Writers, scoped};
use crate::endpoints::HttpSettings;
use crate::labels::MANAGER;
use crate::metrics::Metrics;
use crate::network_policy::Access;
use crate::reconcile::{self, Context, Error, error_policy, reconcile};
use crate::secrets;

/// Lease duration; renewed `LEASE_GRACE` seconds before it ends.
const LEASE_SECONDS: u64 = 15;
const LEASE_GRACE: u64 = 5;
/// Stop reconciling this long before the last seen renewal expires.
const LEASE_SAFETY: Duration = Duration::from_secs(2);

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The HTTP endpoints: probes and `/metrics`.
    pub http: HttpSettings,
    /// Namespaces to watch; empty: all.
    pub watch_namespaces: Vec<String>,
    /// Hold a Lease before reconciling.
    pub leader_election: bool,
    /// The controller's namespace: its Lease and its hash-key Secret.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This process's identity in the Lease.
    pub identity: String,
    /// Validation options (the policy's `memoryOverhead`).
    pub validation: Options,
    /// Who a Memcached NetworkPolicy admits besides its allowed sources.
    pub access: Access,
}

/// Run until SIGTERM/SIGINT (or until leadership is lost).
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let metrics = Arc::new(Metrics::default());
    let ready = Arc::new(AtomicBool::new(false));
    crate::endpoints::start(&settings.http, &client, ready.clone(), metrics.clone())?;
    let shutdown = shutdown_signal();
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
    track_readiness(&client, &namespaces, ready);
    let hash_key = crate::hash_key::load_or_create(&client, &settings.lease_namespace).await?;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some(settings.identity.clone()),
        },
    );
    // Started only when awaited: a standby reconciles nothing.
    let controllers = {
        let (shutdown, client, settings) = (shutdown.clone(), client.clone(), settings.clone());
        async move {
            let tasks = namespaces.into_iter().map(|ns| {
                let (cache, writers) = cache::new();
                let ctx = Arc::new(Context {
                    client: client.clone(),
                    recorder: recorder.clone(),
                    failures: Default::default(),
                    metrics: metrics.clone(),
                    validation: settings.validation.clone(),
                    hash_key: hash_key.clone(),
                    access: settings.access.clone(),
                    cache,
                    applied: Default::default(),
                    secret_data: Default::default(),
                });
                // A task each: one namespace's work never stalls another's.
                tokio::spawn(controller(ns, ctx, writers, wait(shutdown.clone())))
            });
            futures::future::join_all(tasks).await;
        }
    };
    if !settings.leader_election {
        controllers.await;
        return Ok(());
    }

    let lease = watch_lease(client.clone(), &settings);
    let Some((mut leading, lease_task)) =
        acquire(&client, &settings, lease.clone(), shutdown.clone()).await?
    else {
        tracing::info!("shutting down before leading");
        return Ok(());
    };
    tracing::info!("leading");
    let outcome = tokio::select! {
        _ = controllers => Ok(()),
        _ = leading.wait_for(|l| !*l) => Err(anyhow::anyhow!("lost leadership: exiting so a new leader takes over")),
        reason = lease_expiring(lease, settings.identity.clone()) => Err(anyhow::anyhow!("{reason}: stopped reconciling before the Lease can expire")),
    };
    // Dropping the channel makes the lease manager release the Lease.
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), lease_task).await {
        Ok(Ok(Ok(_))) => tracing::info!("released the Lease"),
        other => tracing::warn!(?other, "could not release the Lease; it expires by itself"),
    }
    outcome
}

/// The lease manager's channel (true while leading) and its task.
type Leadership = (
    watch::Receiver<bool>,
    tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
);

/// Wait until this replica holds the Lease (`None`: shut down first). A
/// waiting lease manager sleeps until the holder's Lease would expire; when
/// the holder releases it (SIGTERM), a new manager takes it at once.
async fn acquire(
    client: &Client,
    settings: &Settings,
    mut lease: watch::Receiver<Option<LeaseView>>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<Option<Leadership>> {
    loop {
        let manager =
            kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &settings.lease_name)
                .with_namespace(&settings.lease_namespace)
                .with_identity(&settings.identity)
                .with_duration(LEASE_SECONDS)
                .with_grace(LEASE_GRACE)
                .build()
                .await?;
        let (mut leading, task) = manager.watch().await;
        tracing::info!(lease = %settings.lease_name, identity = %settings.identity, "waiting for leadership");
        lease.borrow_and_update();
        let acquired = tokio::select! {
            r = leading.wait_for(|l| *l) => Some(r.is_ok()),
            _ = released(&mut lease) => None,
            _ = wait(shutdown.clone()) => return Ok(None),
        };
        match acquired {
            Some(true) => return Ok(Some((leading, task))),
            Some(false) => anyhow::bail!("the lease manager stopped"),
            None => {
                tracing::info!("the Lease was released: taking it");
                task.abort();
            }
        }
    }
}

/// The Lease as this replica last saw it.
#[derive(Clone, Debug)]
struct LeaseView {
    holder: Option<String>,
    /// When the last renewal runs out, on this process's clock.
    until: Option<Instant>,
}

/// Watch the Lease (one object) in the background.
fn watch_lease(client: Client, settings: &Settings) -> watch::Receiver<Option<LeaseView>> {
    let api: Api<Lease> = Api::namespaced(client, &settings.lease_namespace);
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", settings.lease_name));
    let (tx, rx) = watch::channel(None);
    tokio::spawn(
        watcher(api, config)
            .default_backoff()
            .applied_objects()
            .for_each(move |lease| {
                if let Ok(lease) = lease {
                    let spec = lease.spec.unwrap_or_default();
                    let until = spec.renew_time.zip(spec.lease_duration_seconds).map(
                        |(renewed, seconds)| {
                            let ends = renewed.0.as_millisecond() + i64::from(seconds) * 1000;
                            let left = (ends - Timestamp::now().as_millisecond()).max(0);
                            Instant::now() + Duration::from_millis(left as u64)
                        },
                    );
                    let holder = spec.holder_identity.filter(|h| !h.is_empty());
                    let _ = tx.send(Some(LeaseView { holder, until }));
                }
                std::future::ready(())
            }),
    );
    rx
}

/// Resolves when the Lease changes to having no holder.
async fn released(lease: &mut watch::Receiver<Option<LeaseView>>) {
    loop {
        if lease.changed().await.is_err() {
            return std::future::pending().await;
        }
        if lease
            .borrow_and_update()
            .as_ref()
            .is_some_and(|v| v.holder.is_none())
        {
            return;
        }
    }
}

/// Resolves shortly before the Lease this replica holds runs out when no
/// renewal was seen (the API server unreachable, renewals failing).
async fn lease_expiring(lease: watch::Receiver<Option<LeaseView>>, identity: String) -> String {
    // Just acquired: the Lease runs at least this long.
    let acquired = Instant::now() + Duration::from_secs(LEASE_SECONDS);
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let renewed = lease
            .borrow()
            .as_ref()
            .filter(|v| v.holder.as_deref() == Some(identity.as_str()))
            .and_then(|v| v.until);
        let ends = renewed.map_or(acquired, |r| r.max(acquired));
        if Instant::now() + LEASE_SAFETY >= ends {
            return "no Lease renewal seen".to_string();
        }
    }
}

/// A channel that turns true on SIGTERM or SIGINT.
fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("shutdown signal received");
        let _ = tx.send(true);
    });
    rx
}

async fn wait(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// `/readyz` turns true once the Memcached list of every watched namespace
/// synced (metadata only). `Store::wait_until_ready` is not used: in
/// kube-runtime 5 it wakes only the last of several waiters.
fn track_readiness(client: &Client, namespaces: &[Option<String>], ready: Arc<AtomicBool>) {
    let synced = Arc::new(AtomicUsize::new(0));
    let total = namespaces.len();
    for ns in namespaces {
        let api = scoped::<PartialObjectMeta<Memcached>>(client, ns.as_deref());
        let (synced, ready, ns) = (synced.clone(), ready.clone(), ns.clone());
        tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut counted = false;
            while let Some(event) = events.next().await {
                if matches!(event, Ok(watcher::Event::InitDone)) && !counted {
                    counted = true;
                    tracing::info!(
                        namespace = ns.as_deref().unwrap_or("*"),
                        "Memcached list synced"
                    );
                    if synced.fetch_add(1, Ordering::SeqCst) + 1 == total {
                        ready.store(true, Ordering::SeqCst);
                    }
                }
            }
        });
    }
}

/// Reconcile the Memcached objects of one namespace (or all) until
/// shutdown, once `ctx`'s cache (filled through `writers`) has synced.
pub async fn controller(
    namespace: Option<String>,
    ctx: Arc<Context>,
    writers: Writers,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let ns = namespace.clone();
    let ns = ns.as_deref();
    let client = ctx.client.clone();
    let (forget_ctx, forget_store) = (ctx.clone(), reader.clone());
    let forget_namespace = namespace.clone();
    // Status writes change neither generation nor annotations: they do not retrigger reconcile.
    let memcacheds = watcher(scoped::<Memcached>(&client, ns), watcher::Config::default())
        .default_backoff()
        .modify(drop_unread_metadata)
        .reflect(writer)
        .inspect(move |event| {
            forget_gone(
                &forget_ctx,
                forget_namespace.as_deref(),
                &forget_store,
                event,
            )
        })
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::annotations),
            Default::default(),
        );
    let (owners, changed) = futures::channel::mpsc::unbounded();
    let (memcached_store, secrets_ctx) = (reader.clone(), ctx.clone());
    // A changed Secret rolls the pods that mount it at once (without it the
    // next periodic reconcile would); a deleted one's data is dropped.
    let watches = cache::watch(&client, ns, writers, owners, move |secret| {
        let versions = &secrets_ctx.cache.secrets;
        secrets_ctx.secret_data.forget_if_deleted(versions, secret);
        secrets::mounting(&memcached_store, secret)
    });
    let cache = ctx.cache.clone();
    let (store, forget_ctx) = (reader.clone(), ctx.clone());
    let reconciling = async move {
        cache.synced(cache::SYNC_TIMEOUT).await;
        Controller::for_stream(memcacheds, reader)
            .with_config(ControllerConfig::default().concurrency(8))
            .reconcile_on(changed)
            .graceful_shutdown_on(shutdown)
            .run(
                |mc, ctx: Arc<Context>| {
                    let metrics = ctx.metrics.clone();
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
            .for_each(|result| {
                // Deleted while it was being reconciled: what the reconcile
                // remembered after the deletion was handled goes too.
                let reconciled = match &result {
                    Ok((object, _)) => Some((object.namespace.clone(), object.name.clone())),
                    Err(ControllerError::ReconcilerFailed(_, object)) => {
                        Some((object.namespace.clone(), object.name.clone()))
                    }
                    _ => None,
                };
                if let Some((Some(ns), name)) = reconciled {
                    let object = ObjectRef::<Memcached>::new(&name).within(&ns);
                    if store.get(&object).is_none() {
                        let gone = format!("{ns}/{name}");
                        reconcile::retain(&forget_ctx, Some(&ns), |key| key != gone);
                    }
                }
                std::future::ready(())
            })
            .await;
    };
    tokio::select! {
        _ = watches => {}
        _ = reconciling => {}
    }
}

/// Drop what reconcile never reads and can be large: managedFields, and
/// the copy of the whole object `kubectl apply` keeps in an annotation.
fn drop_unread_metadata(mc: &mut Memcached) {
    mc.metadata.managed_fields = None;
    if let Some(annotations) = &mut mc.metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Forget what was remembered of a Memcached once it is gone (on its
/// deletion, and after a relist for those deleted meanwhile), and the data
/// of Secrets no Memcached mounts any more.
fn forget_gone(
    ctx: &Context,
    namespace: Option<&str>,
    store: &Store<Memcached>,
    event: &watcher::Result<watcher::Event<Memcached>>,
) {
    match event {
        Ok(watcher::Event::Delete(mc)) => {
            let gone = reconcile::key(mc);
            reconcile::retain(ctx, namespace, |key| key != gone);
        }
        Ok(watcher::Event::InitDone) => {
            let live: HashSet<String> = store.state().iter().map(|mc| reconcile::key(mc)).collect();
            reconcile::retain(ctx, namespace, |key| live.contains(key));
        }
        _ => return,
    }
    ctx.secret_data.retain_mounted(store);
}
