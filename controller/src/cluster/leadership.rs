//! Leader election on a coordination.k8s.io Lease, by the rules of
//! client-go's `tools/leaderelection`:
//!
//! - A Lease held by another replica expires `leaseDurationSeconds` after
//!   this replica last saw its record change, on this process's monotonic
//!   clock. The timestamps in the record come from other clocks and are
//!   never compared with this one: a replica whose clock runs ahead does not
//!   take a Lease its holder keeps renewing.
//! - Every write carries the resourceVersion it read: a conflict means
//!   another replica wrote first; the record is read again, never
//!   overwritten.
//! - The leader renews every retry period and stops leading once no renewal
//!   succeeded for the renew deadline (shorter than the Lease): its work is
//!   aborted and awaited before any other replica can take the Lease.
//! - A release (on shutdown) changes only a record this replica still
//!   holds, at the resourceVersion of its own last write: a successor's
//!   Lease is never touched.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout_at};

use memcached_api::render::labels::MANAGER;

/// How long a Lease lasts after its holder's last renewal (client-go's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader keeps leading without a successful renewal.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Between two attempts to renew or to acquire.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// A standby waits up to this fraction of the retry period longer, so
/// replicas do not ask in lockstep (client-go's JitterFactor).
const JITTER: f64 = 1.2;

/// How long a release may take; then the Lease expires by itself.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Logged by a standby that found the Lease released and takes it.
pub const TAKING_RELEASED: &str = "the Lease was released: taking it";

/// The Lease as the API server stores it.
pub trait LeaseStore: Send + Sync {
    /// The Lease; `None` when it does not exist.
    fn get(&self) -> impl Future<Output = kube::Result<Option<Lease>>> + Send;
    /// Create the Lease with `spec`; an error when it exists.
    fn create(&self, spec: LeaseSpec) -> impl Future<Output = kube::Result<Lease>> + Send;
    /// Write the fields set in `spec` only if the Lease is still at
    /// `resource_version`: a Conflict error otherwise.
    fn update(
        &self,
        resource_version: &str,
        spec: LeaseSpec,
    ) -> impl Future<Output = kube::Result<Lease>> + Send;
}

/// One Lease on the API server.
pub struct LeaseApi {
    api: Api<Lease>,
    name: String,
}

impl LeaseApi {
    /// The Lease `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        LeaseApi {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

impl LeaseStore for LeaseApi {
    async fn get(&self) -> kube::Result<Option<Lease>> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, spec: LeaseSpec) -> kube::Result<Lease> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        self.api.create(&params, &lease).await
    }

    /// A merge patch carrying `metadata.resourceVersion`: the API server
    /// refuses it with 409 Conflict when the Lease changed since (the
    /// Lease RBAC grants patch, not update).
    async fn update(&self, resource_version: &str, spec: LeaseSpec) -> kube::Result<Lease> {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": resource_version},
            "spec": spec,
        });
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        self.api
            .patch(&self.name, &params, &Patch::Merge(&patch))
            .await
    }
}

/// Identity and timing of one replica.
#[derive(Clone, Debug)]
pub struct Config {
    /// This replica's `holderIdentity`.
    pub identity: String,
    /// Written as `leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// Shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// Shorter than `renew_deadline`.
    pub retry_period: Duration,
    /// Added to the wall clock for the times written into the Lease. No
    /// replica reads those times; tests skew a replica's clock with it.
    pub clock_offset: SignedDuration,
}

impl Config {
    /// client-go's timing for `identity`.
    pub fn new(identity: &str) -> Self {
        Config {
            identity: identity.to_string(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
            clock_offset: SignedDuration::ZERO,
        }
    }
}

/// How a term as leader ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The work finished (after a shutdown signal).
    Finished,
    /// Leadership was lost, and the work aborted: why.
    Lost(String),
}

/// What a release did.
#[derive(Debug)]
pub enum Release {
    /// The Lease now has no holder: a standby takes it at once.
    Released,
    /// The Lease is not (or no longer) this replica's: left as it is.
    NotHeld,
    /// The API server did not answer (why); the Lease expires by itself.
    Failed(String),
}

/// The record as this replica last read or wrote it.
#[derive(Clone, Debug)]
struct Observed {
    lease: Lease,
    /// When this replica first saw this record, on its own clock; for its
    /// own writes, when it sent them.
    since: Instant,
}

/// One replica's view of the Lease, and its moves.
pub struct Elector<S> {
    store: S,
    config: Config,
    observed: Option<Observed>,
}

impl<S: LeaseStore> Elector<S> {
    /// A replica that has not seen the Lease yet.
    pub fn new(store: S, config: Config) -> Self {
        Elector {
            store,
            config,
            observed: None,
        }
    }

    /// The holder of the record last seen (`None`: no holder, or not seen).
    pub fn holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .and_then(|o| o.lease.spec.as_ref()?.holder_identity.as_deref())
            .filter(|h| !h.is_empty())
    }

    /// The record last seen names this replica.
    pub fn is_leader(&self) -> bool {
        self.holder() == Some(self.config.identity.as_str())
    }

    /// When the record last seen expires, on this replica's clock.
    fn expires(&self) -> Option<Instant> {
        let observed = self.observed.as_ref()?;
        let seconds = observed.lease.spec.as_ref()?.lease_duration_seconds?;
        Some(observed.since + Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
    }

    fn valid_at(&self, now: Instant) -> bool {
        self.expires().is_some_and(|expires| expires > now)
    }

    /// Remember a record read now; the time it was first seen stays while
    /// it does not change.
    fn observe_read(&mut self, lease: Lease) {
        let since = match &self.observed {
            Some(o) if o.lease.spec == lease.spec => o.since,
            _ => Instant::now(),
        };
        self.observed = Some(Observed { lease, since });
    }

    fn observe_written(&mut self, lease: Lease, sent: Instant) {
        self.observed = Some(Observed { lease, since: sent });
    }

    /// The wall clock (with the configured offset), for the record.
    fn wall_clock(&self) -> MicroTime {
        let wall = Timestamp::now();
        MicroTime(wall.checked_add(self.config.clock_offset).unwrap_or(wall))
    }

    /// The record last seen and its resourceVersion (`None`: nothing seen,
    /// or no version to make a write conditional on).
    fn seen(&self) -> Option<(String, Option<&LeaseSpec>)> {
        let lease = &self.observed.as_ref()?.lease;
        Some((
            lease.metadata.resource_version.clone()?,
            lease.spec.as_ref(),
        ))
    }

    /// The record naming this replica, renewed now; acquired now unless it
    /// renews its own `previous` record.
    fn record(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = self.wall_clock();
        let renewing = self.is_leader();
        let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds(self.config.lease_duration)),
            acquire_time: match previous {
                Some(p) if renewing => p.acquire_time.clone(),
                _ => Some(now.clone()),
            },
            renew_time: Some(now),
            lease_transitions: Some(match previous {
                Some(_) if !renewing => transitions + 1,
                _ => transitions,
            }),
            ..LeaseSpec::default()
        }
    }

    /// client-go's `tryAcquireOrRenew`: true when this replica holds the
    /// Lease afterwards. The leader first renews from the record it wrote
    /// last; otherwise (or when that fails) the Lease is read, and taken
    /// only when it has no holder or this replica saw it unchanged for its
    /// whole duration.
    pub async fn try_acquire_or_renew(&mut self) -> kube::Result<bool> {
        let sent = Instant::now();
        if self.is_leader()
            && self.valid_at(sent)
            && let Some((version, previous)) = self.seen()
        {
            let spec = self.record(previous);
            match self.store.update(&version, spec).await {
                Ok(lease) => {
                    self.observe_written(lease, sent);
                    return Ok(true);
                }
                Err(error) => {
                    tracing::debug!(%error, "renewing the last record failed: reading the Lease")
                }
            }
        }
        let sent = Instant::now();
        let Some(current) = self.store.get().await? else {
            return match self.store.create(self.record(None)).await {
                Ok(lease) => {
                    self.observe_written(lease, sent);
                    Ok(true)
                }
                Err(Error::Api(status)) if status.is_already_exists() || status.is_conflict() => {
                    Ok(false)
                }
                Err(error) => Err(error),
            };
        };
        self.observe_read(current);
        let leader = self.is_leader();
        if !leader && self.holder().is_some() && self.valid_at(Instant::now()) {
            return Ok(false);
        }
        let Some((version, previous)) = self.seen() else {
            return Ok(false);
        };
        let spec = self.record(previous);
        if !leader {
            match self.holder() {
                None => tracing::info!("{TAKING_RELEASED}"),
                Some(holder) => tracing::info!(holder, "the Lease expired: taking it"),
            }
        }
        let sent = Instant::now();
        match self.store.update(&version, spec).await {
            Ok(lease) => {
                self.observe_written(lease, sent);
                Ok(true)
            }
            // Another replica wrote since the read: the next try reads again.
            Err(Error::Api(status)) if status.is_conflict() => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Try until this replica holds the Lease (true), or until `shutdown`
    /// (false). Tries every retry period (with jitter), when the Lease it
    /// saw expires, and at once when `changes` says the Lease changed (a
    /// release is taken without waiting).
    pub async fn acquire(
        &mut self,
        changes: &mut watch::Receiver<()>,
        shutdown: impl Future<Output = ()>,
    ) -> bool {
        tokio::pin!(shutdown);
        tracing::info!(identity = %self.config.identity, "waiting for leadership");
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "could not read or take the Lease"),
            }
            let now = Instant::now();
            let mut next = now + jittered(self.config.retry_period);
            if let Some(expires) = self.expires().filter(|e| *e > now) {
                next = next.min(expires);
            }
            tokio::select! {
                () = sleep_until(next) => {}
                Ok(()) = changes.changed() => {}
                () = &mut shutdown => return false,
            }
        }
    }

    /// Renew the Lease every retry period while `work` runs. Returns when
    /// all of `work` finished, or when leadership is lost (another replica
    /// holds the Lease, or no renewal succeeded for the renew deadline):
    /// then `work` is aborted and awaited first, well before the Lease
    /// can expire for any other replica.
    pub async fn lead(&mut self, work: &mut JoinSet<()>) -> Outcome {
        let mut renewed = self.renewed().unwrap_or_else(Instant::now);
        let reason = loop {
            let deadline = renewed + self.config.renew_deadline;
            let next = (Instant::now() + self.config.retry_period).min(deadline);
            tokio::select! {
                () = finished(work) => return Outcome::Finished,
                () = sleep_until(next) => {}
            }
            if Instant::now() >= deadline {
                break format!(
                    "no Lease renewal succeeded for {}s",
                    self.config.renew_deadline.as_secs()
                );
            }
            match timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => renewed = self.renewed().unwrap_or(renewed),
                Ok(Ok(false)) if !self.is_leader() => {
                    break format!("the Lease is held by {}", self.holder().unwrap_or("nobody"));
                }
                Ok(Ok(false)) => tracing::warn!("renewing the Lease conflicted: retrying"),
                Ok(Err(error)) => tracing::warn!(%error, "could not renew the Lease"),
                Err(_) => {}
            }
        };
        work.shutdown().await;
        Outcome::Lost(reason)
    }

    /// When this replica sent its last write of the record it holds.
    fn renewed(&self) -> Option<Instant> {
        self.is_leader()
            .then(|| self.observed.as_ref().map(|o| o.since))
            .flatten()
    }

    /// client-go's release: only when the record last seen is this
    /// replica's, written at its resourceVersion, with no holder and a
    /// duration of 1 s. A conflict means another replica took the Lease.
    pub async fn release(&mut self) -> Release {
        let Some((version, previous)) = self.seen().filter(|_| self.is_leader()) else {
            return Release::NotHeld;
        };
        let now = self.wall_clock();
        let spec = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: previous.and_then(|s| s.lease_transitions),
            ..LeaseSpec::default()
        };
        let sent = Instant::now();
        match tokio::time::timeout(RELEASE_TIMEOUT, self.store.update(&version, spec)).await {
            Ok(Ok(lease)) => {
                self.observe_written(lease, sent);
                Release::Released
            }
            Ok(Err(Error::Api(status))) if status.is_conflict() => Release::NotHeld,
            Ok(Err(error)) => Release::Failed(error.to_string()),
            Err(_) => Release::Failed(format!("no answer in {}s", RELEASE_TIMEOUT.as_secs())),
        }
    }
}

/// Resolves once every task of `work` ended.
pub async fn finished(work: &mut JoinSet<()>) {
    while work.join_next().await.is_some() {}
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
}

/// `period` plus up to `JITTER` times it, at random.
fn jittered(period: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    period + period.mul_f64(JITTER * (random % 1024) as f64 / 1024.0)
}
