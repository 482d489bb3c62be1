//! What every reconcile shares: its [`Context`], its [`Error`] (retried
//! with backoff), the [`Problem`]s it reports as `Degraded` and their
//! reasons, and the [`key`] by which what is remembered of a Memcached is kept.

use std::sync::Arc;

use kube::runtime::events::Recorder;
use kube::{Client, Resource, ResourceExt};
use memcached_api::validation::Options;
use ring::hmac;

use crate::cluster::apply::LastApplied;
use crate::cluster::cache::Cache;
use crate::cluster::secrets::SecretCache;
use crate::handover::board::Handovers;
use crate::metrics::registry::Metrics;
use crate::objects::desired::Installation;
use crate::reconcile::streaks::Streaks;
use crate::rollout::pacing;
use crate::stats::live::LiveStats;

/// What every reconcile shares.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Event recorder (events.k8s.io).
    pub recorder: Recorder,
    /// Consecutive failures per object, for the error backoff.
    pub failures: Streaks,
    /// Consecutive reconciles that found an in-place change stalled: looked
    /// at less often the longer it stalls (a new spec reconciles at once).
    pub stalls: Streaks,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Validation options, agreeing with the policy's settings (`memoryOverhead`).
    pub validation: Options,
    /// Key of the pod-template Secret hash (see [`crate::cluster::hash_key`]).
    pub hash_key: hmac::Key,
    /// What the installation sets for every Memcached: who reaches the pods
    /// besides a NetworkPolicy's allowed sources, the ServiceMonitors' labels.
    pub installation: Installation,
    /// The managed objects and Secrets as the watches see them.
    pub cache: Cache,
    /// What was last applied to each managed object.
    pub applied: LastApplied,
    /// The data of the Secrets the pods mount.
    pub secret_data: SecretCache,
    /// The live stats, collected apart from reconciling.
    pub live_stats: Arc<LiveStats>,
    /// How long each paced StatefulSet rollout has waited for its pod.
    pub waits: pacing::Waits,
    /// The keys being handed over as StatefulSets scale.
    pub handovers: Handovers,
}

/// A reconcile failure; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed (conflict, server error, timeout...).
    #[error("kubernetes API: {0}")]
    Api(#[from] kube::Error),
    /// The object has no namespace or uid (not from the API server).
    #[error("Memcached has no {0}")]
    Incomplete(&'static str),
    /// The API server refused an apply; the status says which and why.
    #[error("apply refused: {0}")]
    Refused(String),
}

/// Why a reconcile could not do all it should (the `Degraded` reason and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `ApplyFailed`, `ResourceConflict`, `TLSClientUnavailable`.
    pub reason: &'static str,
    /// What happened, with the API server's message.
    pub message: String,
}

/// Degraded reason of a stored spec the policy would refuse.
pub const INVALID_SPEC: &str = "InvalidSpec";

/// Degraded reason when the auth Secret is not a file memcached can use.
pub const INVALID_AUTH_SECRET: &str = "InvalidAuthSecret";

/// Degraded reason when the API server refuses an apply.
pub const APPLY_FAILED: &str = "ApplyFailed";

/// Degraded reason when the API server refuses an in-place image change
/// (RBAC without ReplicaSets or pods, an admission webhook on pods).
pub const IN_PLACE_FORBIDDEN: &str = "InPlaceForbidden";

/// Degraded reason while a pod cannot run the image an in-place change gave it.
pub const IN_PLACE_STALLED: &str = "InPlaceStalled";
/// Degraded reason while a pod restarted in place does not run what it was given.
pub const IN_PLACE_MISMATCH: &str = "InPlaceMismatch";

/// Degraded reason while the newest pod of a Deployment rollout finds no node.
pub const ROLLOUT_UNSCHEDULABLE: &str = "RolloutUnschedulable";

/// Forget what was remembered of the Memcached objects of `namespace`
/// (`None`: all) whose key (`namespace/name`) `keep` rejects: what was
/// applied to their objects, their failure counts and their metrics.
pub fn retain(ctx: &Context, namespace: Option<&str>, keep: impl Fn(&str) -> bool) {
    ctx.applied.retain(&keep);
    ctx.live_stats.retain(&keep);
    ctx.waits.retain(&keep);
    ctx.handovers.retain(&keep);
    ctx.failures.retain(&keep);
    ctx.stalls.retain(&keep);
    ctx.metrics
        .retain(namespace, |i| keep(&format!("{}/{}", i.namespace, i.name)));
}

/// `namespace/name`: what is remembered of a Memcached is keyed by it.
pub fn key(mc: &impl Resource) -> String {
    format!("{}/{}", mc.namespace().unwrap_or_default(), mc.name_any())
}
