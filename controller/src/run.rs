//! The long-running controller: watches, leader election, probes, metrics.
//!
//! Every replica lists the Memcached objects of every watched namespace and
//! is ready (`/readyz`) while all of them are synced and the API server
//! answers ([`crate::serve::readiness`]): a standby is ready to take over. Only the
//! holder of the Lease reconciles ([`crate::cluster::leadership`]); it releases the
//! Lease on SIGTERM, and stops reconciling before the Lease can expire when
//! renewals fail.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::client::ClientBuilder;
use kube::runtime::Predicate;
use kube::runtime::controller::{Config as ControllerConfig, Controller, Error as ControllerError};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Config, Resource};
use memcached_api::validation::Options;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cluster::backoff::backoff;
use crate::cluster::cache::{self, Writers, scoped};
use crate::cluster::leadership::{self, Elector, LeaseApi, Outcome, Release};
use crate::cluster::secrets;
use crate::cluster::stored::Stored;
use crate::handover::board::Handovers;
use crate::metrics::api_requests::CountRequests;
use crate::metrics::registry::Metrics;
use crate::objects::desired::Installation;
use crate::reconcile::context::{self, Context, Error};
use crate::reconcile::{error_policy, reconcile_stored};
use crate::serve::endpoints::HttpSettings;
use crate::stats::live::LiveStats;
use memcached_api::render::labels::MANAGER;

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
    /// Name of the hash-key Secret in the controller's namespace.
    pub hash_key_secret: String,
    /// This process's identity in the Lease.
    pub identity: String,
    /// Validation options (the policy's `memoryOverhead`).
    pub validation: Options,
    /// What the installation sets for every Memcached: who its NetworkPolicy
    /// admits besides its allowed sources, its ServiceMonitor's labels.
    pub installation: Installation,
}

/// Run until SIGTERM/SIGINT (or until leadership is lost).
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::default());
    let client = ClientBuilder::try_from(Config::infer().await?)?
        .with_layer(&CountRequests(metrics.api_requests()))
        .build();
    let ready = Arc::new(AtomicBool::new(false));
    crate::serve::endpoints::start(&settings.http, &client, ready.clone(), metrics.clone())?;
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
    crate::serve::readiness::track(&client, &namespaces, ready);
    // The ServiceAccount owns the Secret and the Lease: they go with the installation.
    let owner =
        crate::cluster::hash_key::service_account_owner(&client, &settings.lease_namespace).await;
    let hash_key = crate::cluster::hash_key::load_or_create(
        &client,
        &settings.lease_namespace,
        &settings.hash_key_secret,
        owner.as_ref(),
    )
    .await?;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some(settings.identity.clone()),
        },
    );
    // Started only once leading: a standby reconciles nothing.
    let start = {
        let (client, settings, shutdown) = (client.clone(), settings.clone(), shutdown.clone());
        move || {
            let mut work = JoinSet::new();
            for ns in namespaces {
                let (cache, writers) = cache::new();
                let (live_stats, stats_changed) = LiveStats::new();
                let (handovers, handed_over) = Handovers::new();
                let ctx = Arc::new(Context {
                    client: client.clone(),
                    recorder: recorder.clone(),
                    failures: Default::default(),
                    stalls: Default::default(),
                    metrics: metrics.clone(),
                    validation: settings.validation.clone(),
                    hash_key: hash_key.clone(),
                    installation: settings.installation.clone(),
                    cache,
                    applied: Default::default(),
                    secret_data: Default::default(),
                    live_stats,
                    waits: Default::default(),
                    handovers,
                });
                // A task each: one namespace's work never stalls another's.
                let shutdown = wait(shutdown.clone());
                let again = futures::stream::select(stats_changed, handed_over);
                work.spawn(controller(ns, ctx, writers, again, shutdown));
            }
            work
        }
    };
    if !settings.leader_election {
        leadership::finished(&mut start()).await;
        return Ok(());
    }
    lead(&client, &settings, shutdown, start, owner).await
}

/// Reconcile (`start` the work) only while holding the Lease; release it
/// once the work finished after SIGTERM, or after it was aborted when
/// leadership was lost (then exit with an error, so Kubernetes restarts
/// the replica as a standby). Once held, the Lease gets `owner` (the
/// controller's ServiceAccount) unless it has it.
async fn lead(
    client: &Client,
    settings: &Settings,
    shutdown: watch::Receiver<bool>,
    start: impl FnOnce() -> JoinSet<()>,
    owner: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> anyhow::Result<()> {
    let store = LeaseApi::new(
        client.clone(),
        &settings.lease_namespace,
        &settings.lease_name,
    );
    let mut elector = Elector::new(store, leadership::Config::new(&settings.identity));
    let mut changes = lease_changes(client.clone(), settings);
    if !elector.acquire(&mut changes, wait(shutdown)).await {
        tracing::info!("shutting down before leading");
        return Ok(());
    }
    if let Some(owner) = &owner {
        let api: Api<Lease> = Api::namespaced(client.clone(), &settings.lease_namespace);
        crate::cluster::hash_key::ensure_owned(&api, &settings.lease_name, owner).await;
    }
    tracing::info!(lease = %settings.lease_name, "leading");
    let outcome = elector.lead(&mut start()).await;
    match elector.release().await {
        Release::Released => tracing::info!("released the Lease"),
        Release::NotHeld => tracing::warn!("stopped leading; the Lease is another replica's"),
        Release::Failed(error) => {
            tracing::warn!(%error, "could not release the Lease; it expires by itself")
        }
    }
    match outcome {
        Outcome::Finished => Ok(()),
        Outcome::Lost(reason) => Err(anyhow::anyhow!(
            "lost leadership ({reason}): stopped reconciling; exiting so a new leader takes over"
        )),
    }
}

/// Ticks whenever the Lease changes (a standby tries to take a released
/// Lease at once rather than at its next retry).
fn lease_changes(client: Client, settings: &Settings) -> watch::Receiver<()> {
    let api: Api<Lease> = Api::namespaced(client, &settings.lease_namespace);
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", settings.lease_name));
    let (tx, rx) = watch::channel(());
    tokio::spawn(
        backoff(watcher(api, config))
            .touched_objects()
            .for_each(move |lease| {
                if lease.is_ok() {
                    tx.send_replace(());
                }
                std::future::ready(())
            }),
    );
    rx
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

/// Reconcile the Memcached objects of one namespace (or all) until
/// shutdown, once `ctx`'s cache (filled through `writers`) has synced; and
/// again each one `again` names (new stats, a handover's copy ended).
pub async fn controller(
    namespace: Option<String>,
    ctx: Arc<Context>,
    writers: Writers,
    again: impl Stream<Item = ObjectRef<Stored>> + Send + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let ns = namespace.clone();
    let ns = ns.as_deref();
    let client = ctx.client.clone();
    let (forget_ctx, forget_store) = (ctx.clone(), reader.clone());
    let forget_namespace = namespace.clone();
    // Status writes change neither generation nor annotations: they do not retrigger reconcile.
    // Decoded one by one: an unreadable Memcached is reported on itself.
    let memcacheds = backoff(watcher(
        scoped::<Stored>(&client, ns),
        watcher::Config::default(),
    ))
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
            .reconcile_on(futures::stream::select(changed, again))
            .graceful_shutdown_on(shutdown)
            .run(
                |mc, ctx: Arc<Context>| {
                    let metrics = ctx.metrics.clone();
                    async move {
                        let started = Instant::now();
                        let result: Result<_, Error> = reconcile_stored(mc, ctx).await;
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
                    let object = ObjectRef::<Stored>::new(&name).within(&ns);
                    if store.get(&object).is_none() {
                        let gone = format!("{ns}/{name}");
                        context::retain(&forget_ctx, Some(&ns), |key| key != gone);
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
fn drop_unread_metadata(mc: &mut Stored) {
    let metadata = mc.meta_mut();
    metadata.managed_fields = None;
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Forget what was remembered of a Memcached once it is gone (on its
/// deletion, and after a relist for those deleted meanwhile), and the data
/// of Secrets no Memcached mounts any more (also when a changed one stopped
/// mounting it: TLS keys do not linger in memory).
fn forget_gone(
    ctx: &Context,
    namespace: Option<&str>,
    store: &Store<Stored>,
    event: &watcher::Result<watcher::Event<Stored>>,
) {
    match event {
        Ok(watcher::Event::Delete(mc)) => {
            let gone = context::key(mc);
            context::retain(ctx, namespace, |key| key != gone);
        }
        Ok(watcher::Event::InitDone) => {
            let live: HashSet<String> = store
                .state()
                .iter()
                .map(|mc| context::key(mc.as_ref()))
                .collect();
            context::retain(ctx, namespace, |key| live.contains(key));
        }
        Ok(watcher::Event::Apply(_)) => {}
        _ => return,
    }
    ctx.secret_data.retain_mounted(store);
}
