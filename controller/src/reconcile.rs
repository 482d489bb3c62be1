//! The reconcile loop: the only module that talks to the API server and to
//! memcached. Level-triggered: everything is computed from the CR and the
//! cluster as they are now.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use memcached_api::admission::QUALIFIED_KIND;
use memcached_api::field::{FieldError, invalid_message};
use memcached_api::validation::{self, Options};
use memcached_api::{Defaulted, Memcached, MemcachedSpec, MemcachedStatus};
use ring::hmac;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio_rustls::rustls::pki_types::ServerName;

use crate::cluster::apply::{
    LastApplied, Outcome, Owner, ensure, ensure_held, hand_over_replicas, is_controlled_by,
};
use crate::cluster::cache::{self, Cache, Cached, Meta, scoped};
use crate::cluster::secrets::{self, Mounted, SecretCache, SecretData};
use crate::cluster::stored::{Stored, Unreadable};
use crate::events::{self, Target, warn};
use crate::metrics::memcacheds::Instance;
use crate::metrics::registry::Metrics;
use crate::objects::args::{self, AUTH_KEY, TLS_CA_KEY, TLS_CERT_KEY, TLS_KEY_KEY};
use crate::objects::desired::{Desired, Workload as DesiredWorkload};
use crate::objects::intent::TemplateStamp;
use crate::objects::labels::{MANAGER, MEMCACHED_PORT};
use crate::objects::network_policy::Access;
use crate::objects::pod_template::{AUTH_VOLUME, TLS_VOLUME, hard_anti_affinity, secret_mounts};
use crate::objects::secret_stamp::SecretStamp;
use crate::objects::workload::{Rollout, Workload, desired_replicas, initial_replicas};
use crate::objects::{server_list, service_monitor};
use crate::rollout::pod_change::Seen;
use crate::rollout::{generations, in_place, pacing, stateful_in_place};
use crate::stats::client::{ClusterStats, Credentials, PodStats, StatsClient, Tls};
use crate::stats::live::LiveStats;
use crate::stats::tls;
use crate::status::{self, Observed};
use crate::streaks::Streaks;

/// Requeue while not every replica is ready.
pub const REQUEUE_NOT_READY: Duration = Duration::from_secs(10);
/// Requeue while the controller steps a rollout: an image change applied in
/// place, a StatefulSet rollout waiting for a pod to warm (pods are not watched).
pub const REQUEUE_ROLLOUT: Duration = Duration::from_secs(2);
/// Requeue when ready, to refresh the live stats.
pub const REQUEUE_READY: Duration = Duration::from_secs(60);

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
    /// Who reaches the pods besides a NetworkPolicy's allowed sources.
    pub access: Access,
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

/// Converge one Memcached: judge its spec, read the Secrets it mounts,
/// converge its objects, then write what was found to its status.
#[tracing::instrument(skip_all, fields(namespace = mc.namespace().unwrap_or_default(), name = mc.name_any()))]
pub async fn reconcile(mc: Arc<Memcached>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Being deleted: the garbage collector removes the children; applying now would race it.
    if mc.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = mc.name_any();
    let object = validation::ObjectName {
        name: &name,
        generate_name: mc.metadata.generate_name.as_deref().unwrap_or_default(),
    };
    let checked = validation::check(object, carry_scale_over(&ctx, &mc), &ctx.validation);
    let spec = checked.spec;
    if !checked.errors.is_empty() {
        return refuse_invalid(&ctx, &mc, &spec, &checked.errors).await;
    }
    let secrets = read_secrets(&ctx, &mc, &spec).await?;
    let converged = converge_children(&ctx, &mc, &spec, &secrets).await?;
    report(&ctx, &mc, &spec, &secrets.data, converged).await
}

/// `mc`'s spec, with a replica count left unset while autoscaling is off
/// taken from its running workload: turning autoscaling off (admitted
/// without the policy, which sets the count the autoscaler left) keeps the
/// pods the autoscaler ran instead of dropping to the default of 1.
fn carry_scale_over(ctx: &Context, mc: &Memcached) -> MemcachedSpec {
    let mut spec = mc.spec.clone();
    if spec.replicas.is_none() && !spec.autoscaling_enabled() {
        let (_, running) = running_workload(ctx, mc.meta(), spec.stateful_set());
        spec.replicas = running.and_then(|r| r.replicas);
    }
    spec
}

/// What converging a Memcached's objects found.
struct Converged {
    /// Its status, but for the live numbers.
    observed: Observed,
    /// A workload serves it: memcached's numbers are read.
    serving: bool,
    /// A rollout is under way (in place, or paced): look again soon.
    rolling: bool,
    /// An in-place change waits for a pod that cannot run its image.
    stalled: bool,
}

/// Apply every object `spec` asks for and delete what it no longer does.
async fn converge_children(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretsSeen,
) -> Result<Converged, Error> {
    let ns = mc.namespace().ok_or(Error::Incomplete("namespace"))?;
    let uid = mc.uid().ok_or(Error::Incomplete("uid"))?;
    let name = mc.name_any();
    let hash = secrets.stamp.as_ref().map(|s| s.hash.as_str());
    let mut desired = Desired::new(mc, spec, hash, &ctx.access);
    if let Some(stamp) = secrets.stamp.clone() {
        desired.workload.stamp(stamp);
    }

    let mut applied = Applied::new(ctx, mc);
    // A missing or invalid Secret would break running pods on rollout
    // (every client login would fail): keep them until it is fixed.
    let hold = !secrets.missing.is_empty() || secrets.invalid_auth.is_some();
    let stable_names = spec.stateful_set();
    let (kind, other_kind) = if stable_names {
        ("StatefulSet", "Deployment")
    } else {
        ("Deployment", "StatefulSet")
    };
    let cache = &ctx.cache;
    let (mut in_place, mut warming) = (None, None);
    let Workloads { current, previous } = match desired.workload {
        DesiredWorkload::Deployment(mut d) => {
            if !hold && spec.warm_restart_enabled() {
                in_place = converge_in_place(&mut applied, spec, &uid, &mut d).await?;
            }
            if in_place.is_none() {
                warming = pace_deployment(ctx, mc, spec, &mut d, &mut applied.problems).await?;
            }
            let stores = (&cache.deployments, &cache.stateful_sets);
            converge_workload(&mut applied, spec, d, hold, stores).await?
        }
        DesiredWorkload::StatefulSet(mut s) => {
            if !hold && spec.warm_restart_enabled() {
                in_place = converge_stateful_in_place(&mut applied, spec, &uid, &mut s).await?;
            }
            if in_place.is_none() {
                warming = pace(ctx, mc, &mut s).await?;
            }
            let stores = (&cache.stateful_sets, &cache.deployments);
            converge_workload(&mut applied, spec, s, hold, stores).await?
        }
    };
    applied
        .converge_kind(&cache.services, Some(&desired.service))
        .await?;
    applied
        .converge_kind(&cache.pdbs, desired.pdb.as_ref())
        .await?;
    applied
        .converge_kind(&cache.hpas, desired.hpa.as_ref())
        .await?;
    applied
        .converge_kind(&cache.network_policies, desired.network_policy.as_ref())
        .await?;
    let live = cache::service_monitor(cache, &ns, &name);
    let monitor = service_monitor::api_resource();
    let monitors: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &monitor);
    applied
        .converge(
            &monitor,
            &monitors,
            &name,
            live,
            desired.service_monitor.as_ref(),
        )
        .await?;
    // While a switch runs, clients keep the previous kind's server list (the
    // new pods' names resolve only once they are ready), and the status
    // counts whichever workload has more pods ready.
    let (list_rollout, list_stable) = match &previous {
        Some(p) => (Some(p), !stable_names),
        None => (current.as_ref(), stable_names),
    };
    let servers = server_list::build(mc, list_stable, desired_replicas(spec, list_rollout));
    // No workload of this Memcached: the published list is left as it was.
    if current.is_some() {
        let config_map = server_list::config_map(mc, spec, &servers);
        converge_config_map(&mut applied, config_map).await?;
    }
    let Applied {
        mut problems,
        foreign,
        ..
    } = applied;
    problems.splice(0..0, secrets.invalid_auth.clone());

    let switching = previous.is_some();
    let (serving_kind, serving) = match previous {
        Some(p) if current.as_ref().is_none_or(|c| c.ready < p.ready) => (other_kind, Some(p)),
        _ => (kind, current),
    };
    inform_in_place(ctx, mc, in_place.as_ref()).await;
    let mut observed = observe(
        mc,
        spec,
        serving_kind,
        serving.as_ref(),
        secrets.missing.clone(),
    );
    if let Some(progress) = &in_place {
        observed.updated = progress.updated;
    }
    let rolling = in_place.is_some() || warming.is_some();
    let stalled = in_place.as_ref().is_some_and(|p| p.stalled.is_some());
    observed.in_place = in_place;
    observed.warming = warming;
    observed.server_list = servers;
    observed.stable_names = list_stable;
    observed.switching = switching;
    observed.foreign = foreign;
    observed.problems = problems;
    Ok(Converged {
        observed,
        serving: serving.is_some(),
        rolling,
        stalled,
    })
}

/// An Event on the Memcached naming the pod an in-place image change restarts.
async fn inform_in_place(ctx: &Context, mc: &Memcached, progress: Option<&in_place::Progress>) {
    let Some(progress) = progress.filter(|p| p.started) else {
        return;
    };
    let pod = progress.restarting.as_deref().unwrap_or_default();
    let note = format!(
        "pod {pod} restarts with {} in place: its cache is saved and restored",
        progress.change
    );
    let pods = ApiResource::erase::<Pod>(&());
    let target = Target {
        resource: &pods,
        name: pod,
    };
    events::inform(ctx, mc, "RestartingInPlace", note, &target).await;
}

/// Publish the replica metrics, read memcached's numbers, write the status,
/// and say when to look again; an apply the API server refused is the error.
async fn report(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
    converged: Converged,
) -> Result<Action, Error> {
    let Converged {
        mut observed,
        serving,
        rolling,
        stalled,
    } = converged;
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let pods_serving = status::serving(&observed);
    let instance = Instance {
        namespace: ns.clone(),
        name: name.clone(),
    };
    ctx.metrics
        .replicas(instance.clone(), observed.desired, observed.ready);
    let stats = if serving {
        live_numbers(ctx, mc, spec, secrets, &mut observed.problems).await
    } else {
        ClusterStats::default()
    };
    let refused = (observed.problems.iter())
        .find(|p| p.reason == APPLY_FAILED)
        .map(|p| p.message.clone());
    let api = Api::namespaced(ctx.client.clone(), &ns);
    let status = write_status(&api, &name, mc.status.as_ref(), &observed, &stats).await?;
    let pods = pod_names(&ctx.cache.endpoint_slices, &ns, &name);
    let conditions = status.conditions.unwrap_or_default();
    (ctx.metrics.memcacheds).show(instance, &conditions, &stats, &pods);
    if let Some(message) = refused {
        return Err(Error::Refused(message));
    }

    ctx.failures.end(&key(mc));
    if !stalled {
        ctx.stalls.end(&key(mc));
    }
    Ok(Action::requeue(if stalled {
        ctx.stalls.next(&key(mc), REQUEUE_ROLLOUT, REQUEUE_READY).1
    } else if rolling {
        REQUEUE_ROLLOUT
    } else if pods_serving {
        REQUEUE_READY
    } else {
        REQUEUE_NOT_READY
    }))
}

/// The numbers memcached reports for `mc`'s serving pods, as last
/// collected in the background (until the first collection ends after a
/// restart, those in its status). Empty when TLS is on but its client cannot
/// be set up: that is warned about and added to `problems`.
async fn live_numbers(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
    problems: &mut Vec<Problem>,
) -> ClusterStats {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    match tls::server_name(&name, &ns).and_then(|n| stats_client(spec, secrets, n)) {
        Ok(client) => {
            let addresses = ready_addresses(&ctx.cache.endpoint_slices, &ns, &name);
            ctx.live_stats
                .read(&ns, &name, client, addresses)
                .unwrap_or_else(|| ClusterStats::from_status(mc.status.as_ref()))
        }
        Err(e) => {
            let message =
                format!("live stats are not read: TLS is on but its client cannot be set up: {e}");
            warn(ctx, mc, "TLSClientUnavailable", message.clone(), None).await;
            problems.push(Problem {
                reason: "TLSClientUnavailable",
                message,
            });
            ClusterStats::default()
        }
    }
}

/// The Secrets a Memcached mounts, as read and judged.
struct SecretsSeen {
    /// Their data, by Secret name.
    data: SecretData,
    /// The names of those that do not exist (warned about).
    missing: Vec<String>,
    /// An auth Secret memcached would misread (warned about).
    invalid_auth: Option<Problem>,
    /// The pods' Secret hash and the versions it stands for; `None` when
    /// no Secret is mounted.
    stamp: Option<SecretStamp>,
}

/// Read the Secrets `spec` mounts, warn about missing and invalid ones, and
/// stamp their data: the running workload's hash is kept while the Secret
/// versions are the same, so a new hash key (the key Secret deleted,
/// another installation) restarts no pod.
async fn read_secrets(
    ctx: &Context,
    mc: &Memcached,
    spec: &MemcachedSpec,
) -> Result<SecretsSeen, Error> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let Mounted {
        data,
        missing,
        versions,
    } = secrets::read(
        &Api::namespaced(ctx.client.clone(), &ns),
        &ctx.cache.secrets,
        &ctx.secret_data,
        spec,
    )
    .await?;
    if !missing.is_empty() {
        let note = format!("Secret(s) not found: {}", missing.join(", "));
        warn(ctx, mc, "SecretNotFound", note, None).await;
    }
    let invalid_auth = secrets::auth_file_problem(spec, &data).map(|message| Problem {
        reason: INVALID_AUTH_SECRET,
        message,
    });
    if let Some(problem) = &invalid_auth {
        let message = format!("{}: running pods keep their Secret", problem.message);
        warn(ctx, mc, INVALID_AUTH_SECRET, message, None).await;
    }
    let stamp = (!data.is_empty()).then(|| {
        let live = running_workload(ctx, mc.meta(), spec.stateful_set()).0;
        let hash = match cache::secret_stamp(&ctx.cache, live, &ns, &name) {
            Some(stamp) if stamp.versions == versions => stamp.hash,
            _ => secrets::hash(&ctx.hash_key, &data),
        };
        SecretStamp { hash, versions }
    });
    Ok(SecretsSeen {
        data,
        missing,
        invalid_auth,
        stamp,
    })
}

/// Degraded reason of a stored spec the policy would refuse.
pub const INVALID_SPEC: &str = "InvalidSpec";

/// Converge one stored Memcached: a readable one with [`reconcile`], an
/// unreadable one is reported on itself.
pub async fn reconcile_stored(stored: Arc<Stored>, ctx: Arc<Context>) -> Result<Action, Error> {
    match stored.as_ref() {
        Stored::Readable(mc) => reconcile(mc.clone(), ctx).await,
        Stored::Unreadable(unreadable) => refuse_unreadable(&ctx, &stored, unreadable).await,
    }
}

/// A stored spec the policy would refuse (admitted without it, or while
/// policy-server was down under `failurePolicy: Ignore`): reported on the
/// Memcached with the policy's own message.
async fn refuse_invalid(
    ctx: &Context,
    mc: &Memcached,
    spec: &MemcachedSpec,
    errors: &[FieldError],
) -> Result<Action, Error> {
    let message = invalid_message(QUALIFIED_KIND, &mc.name_any(), errors);
    let refused = Refused {
        status: mc.status.as_ref(),
        stateful_set: spec.stateful_set(),
        message,
    };
    refuse(ctx, mc, refused).await
}

/// A stored spec the controller's types cannot hold (the CRD's schema is
/// looser, and the policy was not there to refuse it): reported on the
/// Memcached, naming the field.
#[tracing::instrument(skip_all, fields(namespace = stored.namespace().unwrap_or_default(), name = stored.name_any()))]
async fn refuse_unreadable(
    ctx: &Context,
    stored: &Stored,
    unreadable: &Unreadable,
) -> Result<Action, Error> {
    if stored.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let message = format!(
        "{QUALIFIED_KIND} \"{}\" cannot be read: {}",
        stored.name_any(),
        unreadable.error
    );
    let status = unreadable.status.as_ref();
    let refused = Refused {
        status,
        stateful_set: unreadable.stateful_set,
        message,
    };
    refuse(ctx, stored, refused).await
}

/// Why a stored Memcached is refused, and what it said of itself.
struct Refused<'a> {
    /// Its last status.
    status: Option<&'a MemcachedStatus>,
    /// Its spec names a StatefulSet (the kind reported when both run).
    stateful_set: bool,
    /// What is wrong, for the Degraded condition and the Warning Event.
    message: String,
}

/// Report a refused Memcached on itself: nothing is applied, deleted or
/// retracted for it. The running workload, if any, keeps serving the last
/// valid spec and is described as it is; the server list stays.
async fn refuse<R>(ctx: &Context, object: &R, refused: Refused<'_>) -> Result<Action, Error>
where
    R: Resource<DynamicType = ()>,
{
    let ns = object.namespace().ok_or(Error::Incomplete("namespace"))?;
    warn(ctx, object, INVALID_SPEC, refused.message.clone(), None).await;
    let (workload, rollout) = running_workload(ctx, object.meta(), refused.stateful_set);
    let observed = Observed {
        workload,
        desired: rollout.and_then(|r| r.replicas).unwrap_or(0),
        ready: rollout.map_or(0, |r| r.ready),
        updated: rollout.map_or(0, |r| r.updated),
        available: rollout.is_some_and(|r| r.available),
        invalid_spec: Some(refused.message),
        nothing_running: rollout.is_none(),
        generation: object.meta().generation,
        selector: crate::objects::labels::selector_string(object),
        server_list: refused
            .status
            .and_then(|s| s.server_list.clone())
            .unwrap_or_default(),
        image: refused.status.and_then(|s| s.image.clone()),
        stable_names: true,
        ..Default::default()
    };
    let api = Api::namespaced(ctx.client.clone(), &ns);
    let previous = refused.status;
    let status = write_status(
        &api,
        &object.name_any(),
        previous,
        &observed,
        &ClusterStats::default(),
    )
    .await?;
    let instance = Instance {
        namespace: ns.clone(),
        name: object.name_any(),
    };
    let conditions = status.conditions.unwrap_or_default();
    ctx.metrics
        .memcacheds
        .show_conditions(instance, &conditions);
    ctx.failures.end(&key(object));
    Ok(Action::await_change())
}

/// The workload of either kind the Memcached of `meta` controls, as the
/// cache sees it; a StatefulSet when both run and `stateful_set`.
fn running_workload(
    ctx: &Context,
    meta: &ObjectMeta,
    stateful_set: bool,
) -> (&'static str, Option<Rollout>) {
    let (ns, name, uid) = (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
    );
    let deployment = cache::get(&ctx.cache.deployments, ns, name)
        .object
        .and_then(|w| serving(w.as_ref(), uid));
    let stateful_set_rollout = cache::get(&ctx.cache.stateful_sets, ns, name)
        .object
        .and_then(|w| serving(w.as_ref(), uid));
    match (deployment, stateful_set_rollout) {
        (d, Some(s)) if d.is_none() || stateful_set => ("StatefulSet", Some(s)),
        (d, _) => ("Deployment", d),
    }
}

/// The rollout of `workload` when this Memcached (`uid`) controls it and it
/// is not being deleted: someone else's workload, or one on its way out,
/// serves nothing of this Memcached's.
fn serving<W: Workload>(workload: &W, uid: &str) -> Option<Rollout> {
    (is_controlled_by(workload, uid) && workload.meta().deletion_timestamp.is_none())
        .then(|| workload.rollout())
}

/// Degraded reason when the auth Secret is not a file memcached can use.
pub const INVALID_AUTH_SECRET: &str = "InvalidAuthSecret";

/// Degraded reason when the API server refuses an apply.
pub const APPLY_FAILED: &str = "ApplyFailed";

/// Outcomes of one reconcile's applies, reported as Events as they come;
/// refusals and conflicts are collected for the status.
struct Applied<'a> {
    ctx: &'a Context,
    mc: &'a Memcached,
    /// The Memcached's [`key`] and uid.
    key: String,
    uid: String,
    problems: Vec<Problem>,
    /// The workload or the Service belongs to someone else.
    foreign: bool,
}

impl<'a> Applied<'a> {
    fn new(ctx: &'a Context, mc: &'a Memcached) -> Self {
        Applied {
            ctx,
            mc,
            key: key(mc),
            uid: mc.uid().unwrap_or_default(),
            problems: Vec::new(),
            foreign: false,
        }
    }

    /// Record the outcome of an apply; a refusal (400, 403, 422) becomes a
    /// problem, any other error ends the reconcile (retried with backoff).
    async fn record<T>(
        &mut self,
        target: &Target<'_>,
        result: Result<(Outcome, T), kube::Error>,
    ) -> Result<Option<T>, Error> {
        let (kind, name) = (target.resource.kind.as_str(), target.name);
        match result {
            Ok((outcome, object)) => {
                if outcome == Outcome::Conflict {
                    self.foreign |= matches!(kind, "Deployment" | "StatefulSet" | "Service");
                    self.problems.push(Problem {
                        reason: "ResourceConflict",
                        message: format!(
                            "a {kind} named {name} exists and is not controlled by this Memcached: left alone"
                        ),
                    });
                }
                events::report(self.ctx, self.mc, target, outcome).await;
                Ok(Some(object))
            }
            Err(kube::Error::Api(e)) if matches!(e.code, 400 | 403 | 422) => {
                let message = format!("{kind}: {} ({})", e.message, e.reason);
                let (ctx, mc) = (self.ctx, self.mc);
                events::warn(ctx, mc, APPLY_FAILED, message.clone(), Some(target)).await;
                self.problems.push(Problem {
                    reason: APPLY_FAILED,
                    message,
                });
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn record_outcome(
        &mut self,
        target: &Target<'_>,
        result: Result<Outcome, kube::Error>,
    ) -> Result<(), Error> {
        self.record(target, result.map(|o| (o, ()))).await.map(drop)
    }

    /// Converge one optional object of kind `resource`: `live` is what the cache
    /// holds; an object the cache lacks is read from the API server when it
    /// is wanted (it may be someone else's, or newer than the watch).
    async fn converge<K>(
        &mut self,
        resource: &ApiResource,
        api: &Api<K>,
        name: &str,
        live: Cached<Meta<K>>,
        desired: Option<&K>,
    ) -> Result<(), Error>
    where
        K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    {
        let owner = self.owner();
        let result = async {
            let live = live
                .or_fetch(desired.is_some(), api.get_metadata_opt(name))
                .await?
                .map(|m| m.metadata);
            let applied = &self.ctx.applied;
            ensure(api, applied, &owner, name, desired, live.as_ref()).await
        }
        .await;
        match result {
            // No such API (a ServiceMonitor without Prometheus Operator's
            // CRD): the next reconcile tries again.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            result => {
                let target = Target { resource, name };
                self.record_outcome(&target, result.map(|(o, _)| o)).await
            }
        }
    }

    /// [`Applied::converge`] of this Memcached's object of kind `K`, as
    /// `store` holds it.
    async fn converge_kind<K>(
        &mut self,
        store: &Store<Meta<K>>,
        desired: Option<&K>,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let (ns, name) = (self.mc.namespace().unwrap_or_default(), self.mc.name_any());
        let live = cache::get(store, &ns, &name);
        let api = scoped(&self.ctx.client, Some(&ns));
        self.converge(&ApiResource::erase::<K>(&()), &api, &name, live, desired)
            .await
    }

    /// The Memcached as the objects' owner.
    fn owner(&self) -> Owner<'_> {
        Owner {
            key: &self.key,
            uid: &self.uid,
        }
    }

    /// A preparatory write (no Event of its own): only refusals are recorded.
    async fn check(
        &mut self,
        target: &Target<'_>,
        result: Result<(), kube::Error>,
    ) -> Result<(), Error> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => self
                .record(target, Err::<(Outcome, ()), _>(e))
                .await
                .map(drop),
        }
    }
}

/// The workloads of one Memcached after converging.
struct Workloads {
    /// The kind `spec.workload` names, when this Memcached controls it.
    current: Option<Rollout>,
    /// The other kind, still serving until `current` runs every replica ready.
    previous: Option<Rollout>,
}

/// Converge the workload `spec.workload` names (`New`, desired as `desired`)
/// and delete the other kind (`Old`) once the new one runs every replica
/// ready: the Service selects the pods of both meanwhile, so switching
/// kinds never leaves it without ready endpoints. `hold`: a Secret is
/// missing or invalid, so a running workload is left as it is.
async fn converge_workload<New: Workload, Old: Workload>(
    applied: &mut Applied<'_>,
    spec: &MemcachedSpec,
    mut desired: New,
    hold: bool,
    (new_store, old_store): (&Store<New>, &Store<Old>),
) -> Result<Workloads, Error> {
    let (client, mc) = (&applied.ctx.client, applied.mc);
    let (name, uid) = (mc.name_any(), applied.uid.clone());
    let ns = mc.namespace().unwrap_or_default();
    let news: Api<New> = scoped(client, Some(&ns));
    let olds: Api<Old> = scoped(client, Some(&ns));
    let resource = ApiResource::erase::<New>(&());
    let target = Target {
        resource: &resource,
        name: &name,
    };
    let live = cache::get(new_store, &ns, &name)
        .or_fetch(true, news.get_opt(&name))
        .await?;
    let old = cache::get(old_store, &ns, &name)
        .or_fetch(false, olds.get_opt(&name))
        .await?
        .filter(|o| is_controlled_by(o, &uid));
    let workload = if !hold || live.is_none() {
        if spec.autoscaling_enabled() {
            match (&live, &old) {
                (Some(live), _) if is_controlled_by(live, &uid) => {
                    let handover = hand_over_replicas(&news, live).await;
                    applied.check(&target, handover).await?;
                }
                // A new workload starts as large as the autoscaler made the old
                // one, or at its lower bound; the next reconcile hands the count
                // over to the autoscaler.
                (None, old) => {
                    let replicas = old.as_ref().and_then(|o| o.rollout().replicas);
                    desired.set_replicas(replicas.unwrap_or_else(|| initial_replicas(spec)));
                }
                _ => {}
            }
        }
        let meta = live.as_ref().map(|l| l.meta());
        let (last_applied, owner) = (&applied.ctx.applied, applied.owner());
        let result = match (held_template(&desired, live.as_ref(), &uid), meta) {
            (Some(running), Some(meta)) => {
                ensure_held(
                    &news,
                    last_applied,
                    &owner,
                    &name,
                    desired.clone(),
                    running,
                    meta,
                )
                .await
            }
            _ => ensure(&news, last_applied, &owner, &name, Some(&desired), meta).await,
        };
        // Unchanged or refused: the running workload still tells how many pods serve.
        let result = result.map(|(outcome, after)| (outcome, after.or_else(|| live.clone())));
        applied.record(&target, result).await?.unwrap_or(live)
    } else {
        live
    };
    // Someone else's workload: its readiness and pods are not this
    // Memcached's. One being deleted no longer counts either.
    let current = workload.and_then(|w| serving(&w, &uid));
    let replaced = current
        .as_ref()
        .is_some_and(|r| r.complete(desired_replicas(spec, Some(r))));
    let previous = match old {
        Some(old) if replaced && old.meta().deletion_timestamp.is_none() => {
            let deleted = ensure::<Old>(
                &olds,
                &applied.ctx.applied,
                &applied.owner(),
                &name,
                None,
                Some(old.meta()),
            )
            .await
            .map(|(outcome, _)| match outcome {
                Outcome::Deleted => Outcome::Replaced,
                other => other,
            });
            applied
                .record_outcome(
                    &Target {
                        resource: &ApiResource::erase::<Old>(&()),
                        name: &name,
                    },
                    deleted,
                )
                .await?;
            None
        }
        Some(old) if old.meta().deletion_timestamp.is_none() => Some(old.rollout()),
        _ => None,
    };
    Ok(Workloads { current, previous })
}

/// Degraded reason when the API server refuses an in-place image change
/// (RBAC without ReplicaSets or pods, an admission webhook on pods).
pub const IN_PLACE_FORBIDDEN: &str = "InPlaceForbidden";

/// [`in_place::converge`] of the Deployment `desired`; refused (403), the
/// change is reported and rolled out by the Deployment with new pods.
async fn converge_in_place(
    applied: &mut Applied<'_>,
    spec: &Defaulted,
    uid: &str,
    desired: &mut Deployment,
) -> Result<Option<in_place::Progress>, Error> {
    let (ctx, mc) = (applied.ctx, applied.mc);
    let live = live_workload(ctx, &ctx.cache.deployments, mc).await?;
    let selector = crate::objects::labels::selector_string(mc);
    let original = desired.clone();
    let (stats, settings) = (pod_stats(ctx, mc), args::confirmed_settings(spec));
    let key = key(mc);
    let seen = Seen {
        stats: &stats,
        settings: &settings,
        waits: (&ctx.waits, &key),
    };
    let converged =
        in_place::converge(&ctx.client, uid, &selector, live.as_ref(), desired, &seen).await;
    let failed = match converged {
        Ok(progress) => return Ok(stalled_in_place(applied, progress)),
        Err(failed) => failed,
    };
    let message = refusal(failed.error)?;
    // Refused: the Deployment is resumed either way. Before the ReplicaSet
    // had the image, it rolls the change out with new pods; after, it
    // replaces nothing and the pods follow once the refusal is lifted.
    let message = if failed.retemplated {
        desired.spec.get_or_insert_default().paused = None;
        format!(
            "the memcached image is not applied in place yet, the pods keep the old one: {message}"
        )
    } else {
        *desired = original;
        format!(
            "the memcached image cannot be changed in place, so new pods start cold: {message} \
             (deploy/rbac.yaml grants patch on replicasets and pods)"
        )
    };
    refuse_in_place(applied, message).await;
    Ok(None)
}

/// [`stateful_in_place::converge`] of the StatefulSet `desired`; refused
/// (403), the change is reported and rolled out with new pods, paced.
async fn converge_stateful_in_place(
    applied: &mut Applied<'_>,
    spec: &Defaulted,
    uid: &str,
    desired: &mut StatefulSet,
) -> Result<Option<in_place::Progress>, Error> {
    let (ctx, mc) = (applied.ctx, applied.mc);
    let live = live_workload(ctx, &ctx.cache.stateful_sets, mc).await?;
    let selector = crate::objects::labels::selector_string(mc);
    let original = desired.clone();
    let (stats, settings) = (pod_stats(ctx, mc), args::confirmed_settings(spec));
    let key = key(mc);
    let seen = Seen {
        stats: &stats,
        settings: &settings,
        waits: (&ctx.waits, &key),
    };
    let converged =
        stateful_in_place::converge(&ctx.client, uid, &selector, live.as_ref(), desired, &seen)
            .await;
    let failed = match converged {
        Ok(progress) => return Ok(stalled_in_place(applied, progress)),
        Err(failed) => failed,
    };
    let message = refusal(failed.error)?;
    // Unmarked, pacing rolls the change out: the pods not yet changed are
    // replaced one at a time, cold.
    *desired = original;
    let message = format!(
        "the memcached image cannot be changed in place, so new pods start cold: {message} \
         (deploy/rbac.yaml grants patch on pods)"
    );
    refuse_in_place(applied, message).await;
    Ok(None)
}

/// Degraded reason while a pod cannot run the image an in-place change gave it.
pub const IN_PLACE_STALLED: &str = "InPlaceStalled";
/// Degraded reason while a pod restarted in place does not run what it was given.
pub const IN_PLACE_MISMATCH: &str = "InPlaceMismatch";

/// `progress`, reported as [`IN_PLACE_STALLED`] when a pod cannot run its
/// change, as [`IN_PLACE_MISMATCH`] when memcached does not run it.
fn stalled_in_place(
    applied: &mut Applied<'_>,
    progress: Option<in_place::Progress>,
) -> Option<in_place::Progress> {
    let reported = progress.as_ref().and_then(|p| {
        let stalled = p.stalled_message().map(|m| (IN_PLACE_STALLED, m));
        stalled.or_else(|| p.mismatch_message().map(|m| (IN_PLACE_MISMATCH, m)))
    });
    if let Some((reason, message)) = reported {
        applied.problems.push(Problem { reason, message });
    }
    progress
}

/// What the last stats collected say of each of `mc`'s pods.
fn pod_stats(ctx: &Context, mc: &Memcached) -> BTreeMap<SocketAddr, PodStats> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    (ctx.live_stats.last(&ns, &name))
        .map(|s| s.pods)
        .unwrap_or_default()
}

/// The API server's message when it refused an in-place change (400, 403,
/// 422): reported, not retried. Any other error is the reconcile's, retried
/// with the change kept: a pod or ReplicaSet gone meanwhile (404), a
/// conflict (409).
fn refusal(error: kube::Error) -> Result<String, Error> {
    match error {
        kube::Error::Api(e) if matches!(e.code, 400 | 403 | 422) => Ok(e.message),
        error => Err(error.into()),
    }
}

/// An in-place change refused: a warning Event, and `Degraded` with
/// [`IN_PLACE_FORBIDDEN`].
async fn refuse_in_place(applied: &mut Applied<'_>, message: String) {
    warn(
        applied.ctx,
        applied.mc,
        IN_PLACE_FORBIDDEN,
        message.clone(),
        None,
    )
    .await;
    applied.problems.push(Problem {
        reason: IN_PLACE_FORBIDDEN,
        message,
    });
}

/// The stamp of `live`'s running pod template when it must be kept instead
/// of `desired`'s (see [`crate::objects::intent`]).
fn held_template<W: Workload>(desired: &W, live: Option<&W>, uid: &str) -> Option<TemplateStamp> {
    let live = live.filter(|l| is_controlled_by(*l, uid))?;
    let running = TemplateStamp::of(live)?;
    TemplateStamp::of(desired)?
        .held_by(&running)
        .then_some(running)
}

/// Apply the server-list ConfigMap (`None`: not wanted) and delete the ones
/// this Memcached owns under another name (the field was renamed or removed).
async fn converge_config_map(
    applied: &mut Applied<'_>,
    desired: Option<ConfigMap>,
) -> Result<(), Error> {
    let mc = applied.mc;
    let (ns, uid) = (mc.namespace().unwrap_or_default(), applied.uid.clone());
    let api: Api<ConfigMap> = scoped(&applied.ctx.client, Some(&ns));
    let store = &applied.ctx.cache.config_maps;
    let config_maps = ApiResource::erase::<ConfigMap>(&());
    let wanted = desired.as_ref().and_then(|c| c.metadata.name.clone());
    if let Some(name) = &wanted {
        let live = cache::get(store, &ns, name);
        applied
            .converge(&config_maps, &api, name, live, desired.as_ref())
            .await?;
    }
    let stale = store.state_filter(|c| {
        c.metadata.namespace.as_deref() == Some(&ns)
            && is_controlled_by(c, &uid)
            && c.metadata.name != wanted
    });
    for config_map in stale {
        let name = config_map.name_any();
        applied
            .converge::<ConfigMap>(&config_maps, &api, &name, config_map.into(), None)
            .await?;
    }
    Ok(())
}

/// The first retry of a failed reconcile; it doubles with each failure...
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);
/// ...up to this.
const MAX_FAILURE_BACKOFF: Duration = Duration::from_secs(160);

/// Requeue a failed reconcile with exponential backoff: 5 s doubling to 160 s.
pub fn error_policy(mc: Arc<Stored>, error: &Error, ctx: Arc<Context>) -> Action {
    let (failures, delay) =
        (ctx.failures).next(&key(mc.as_ref()), FAILURE_BACKOFF, MAX_FAILURE_BACKOFF);
    tracing::warn!(error = %error, failures, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// Forget what was remembered of the Memcached objects of `namespace`
/// (`None`: all) whose key (`namespace/name`) `keep` rejects: what was
/// applied to their objects, their failure counts and their metrics.
pub fn retain(ctx: &Context, namespace: Option<&str>, keep: impl Fn(&str) -> bool) {
    ctx.applied.retain(&keep);
    ctx.live_stats.retain(&keep);
    ctx.waits.retain(&keep);
    ctx.failures.retain(&keep);
    ctx.stalls.retain(&keep);
    ctx.metrics
        .retain(namespace, |i| keep(&format!("{}/{}", i.namespace, i.name)));
}

/// `namespace/name`: what is remembered of a Memcached is keyed by it.
pub fn key(mc: &impl Resource) -> String {
    format!("{}/{}", mc.namespace().unwrap_or_default(), mc.name_any())
}

fn observe(
    mc: &Memcached,
    spec: &MemcachedSpec,
    workload: &'static str,
    rollout: Option<&Rollout>,
    missing: Vec<String>,
) -> Observed {
    let seen = rollout.copied().unwrap_or_default();
    Observed {
        workload,
        desired: desired_replicas(spec, rollout),
        ready: seen.ready,
        updated: seen.updated,
        available: seen.available,
        missing_secrets: missing,
        generation: mc.metadata.generation,
        selector: crate::objects::labels::selector_string(mc),
        image: spec.image.clone(),
        ..Default::default()
    }
}

/// The pods behind the headless Service `service`, by memcached address.
fn pod_names(
    slices: &Store<EndpointSlice>,
    ns: &str,
    service: &str,
) -> BTreeMap<SocketAddr, String> {
    let slices = service_slices(slices, ns, service);
    (slices.iter())
        .flat_map(|s| &s.endpoints)
        .filter_map(|e| Some((e.target_ref.as_ref()?.name.clone()?, e.addresses.first()?)))
        .filter_map(|(pod, a)| Some((SocketAddr::new(a.parse().ok()?, MEMCACHED_PORT as u16), pod)))
        .collect()
}

/// The EndpointSlices of the headless Service `service`.
fn service_slices(
    slices: &Store<EndpointSlice>,
    ns: &str,
    service: &str,
) -> Vec<Arc<EndpointSlice>> {
    slices.state_filter(|s| {
        s.metadata.namespace.as_deref() == Some(ns)
            && s.labels()
                .get("kubernetes.io/service-name")
                .map(String::as_str)
                == Some(service)
    })
}

/// Ready pod addresses behind the headless Service `service`.
fn ready_addresses(slices: &Store<EndpointSlice>, ns: &str, service: &str) -> Vec<SocketAddr> {
    let mut addresses: Vec<SocketAddr> = ready_endpoints(slices, ns, service)
        .into_iter()
        .map(|(_, address)| address)
        .collect();
    addresses.sort();
    addresses.dedup();
    addresses
}

/// The ready endpoints behind the headless Service `service`: each pod's
/// hostname (a StatefulSet pod's name) and memcached address.
fn ready_endpoints(
    slices: &Store<EndpointSlice>,
    ns: &str,
    service: &str,
) -> Vec<(Option<String>, SocketAddr)> {
    let slices = service_slices(slices, ns, service);
    slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .flat_map(|e| e.addresses.iter().map(|a| (e.hostname.clone(), a)))
        .filter_map(|(host, a)| Some((host, a.parse::<IpAddr>().ok()?)))
        .map(|(host, ip)| (host, SocketAddr::new(ip, MEMCACHED_PORT as u16)))
        .collect()
}

/// `mc`'s workload of kind `W` as the cache holds it, or read from the API
/// server while its watch has not listed: absent from such a cache it may
/// exist, and a change in place or a paced rollout on it must not be lost.
async fn live_workload<W: Workload>(
    ctx: &Context,
    store: &Store<W>,
    mc: &Memcached,
) -> Result<Option<W>, Error> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let api: Api<W> = scoped(&ctx.client, Some(&ns));
    let live = cache::get(store, &ns, &name)
        .or_fetch(false, api.get_opt(&name))
        .await?;
    Ok(live.filter(|l| is_controlled_by(l, &mc.uid().unwrap_or_default())))
}

/// [`pacing::pace`] of `mc`'s StatefulSet `desired`, from the live
/// StatefulSet and the last stats collected.
async fn pace(
    ctx: &Context,
    mc: &Memcached,
    desired: &mut StatefulSet,
) -> Result<Option<pacing::Warming>, Error> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let live = live_workload(ctx, &ctx.cache.stateful_sets, mc).await?;
    let pods = || pacing::Pods {
        ready: ready_endpoints(&ctx.cache.endpoint_slices, &ns, &name)
            .into_iter()
            .filter_map(|(host, address)| Some((host?, address)))
            .collect(),
        stats: pod_stats(ctx, mc),
    };
    Ok(pacing::pace(
        &ctx.waits,
        &key(mc),
        &name,
        live.as_ref(),
        desired,
        pods,
    ))
}

/// Degraded reason while the newest pod of a Deployment rollout finds no node.
pub const ROLLOUT_UNSCHEDULABLE: &str = "RolloutUnschedulable";

/// [`pacing::pace_deployment`] of `mc`'s Deployment `desired`, from the
/// cache, the rollout's pods (listed only while one runs) and the last stats
/// collected; pods that cannot be listed pace nothing. A new pod the
/// scheduler finds no node for is added to `problems`: the rollout cannot
/// go on (a rotated Secret never reaches the pods) until it is placed.
async fn pace_deployment(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    desired: &mut Deployment,
    problems: &mut Vec<Problem>,
) -> Result<Option<pacing::Warming>, Error> {
    let live = live_workload(ctx, &ctx.cache.deployments, mc).await?;
    // A new template (the next change, or the fix of one that cannot run)
    // goes to the Deployment unpaused: it starts the next rollout.
    let live = live.filter(|l| pacing::deployment_rolling(l) && !pacing::retemplated(desired, l));
    let Some(live) = live else {
        ctx.waits.done(&key(mc));
        return Ok(None);
    };
    let selector = crate::objects::labels::selector_string(mc);
    let stats = pod_stats(ctx, mc);
    let generations = match generations::of(&ctx.client, &live, &selector, stats).await {
        Ok(generations) => generations,
        Err(error) => {
            // Held as it is: a failed list neither pauses nor resumes.
            desired.spec.get_or_insert_default().paused = live.spec.as_ref().and_then(|s| s.paused);
            tracing::warn!(%error, memcached = %key(mc), "cannot list the rollout's pods: the Deployment is held as it is");
            return Ok(None);
        }
    };
    if let Some(newest) = &generations.newest
        && let Some(why) = &newest.unschedulable
    {
        problems.push(unschedulable_problem(spec, &newest.pod, why));
    }
    Ok(pacing::pace_deployment(
        &ctx.waits,
        &key(mc),
        desired,
        generations,
    ))
}

/// The rollout is stuck on `pod`, which the scheduler cannot place (`why`).
fn unschedulable_problem(spec: &Defaulted, pod: &str, why: &str) -> Problem {
    let hint = if hard_anti_affinity(spec) {
        ": the hard anti-affinity preset lets no two of its pods share a node, and a Deployment \
         rollout adds a pod before it removes one, so it needs a node free of this Memcached's pods \
         (add a node, run fewer replicas than nodes, or choose workload StatefulSet, which replaces \
         pods without a surge)"
    } else {
        ""
    };
    Problem {
        reason: ROLLOUT_UNSCHEDULABLE,
        message: format!("the rollout waits for pod {pod}, which no node can take ({why}){hint}"),
    }
}

/// A stats client that speaks what the pods speak, with what the Secrets
/// hold; an error when TLS is on but cannot be set up (never plain text then).
pub fn stats_client(
    spec: &Defaulted,
    secrets: &SecretData,
    server_name: ServerName<'static>,
) -> Result<StatsClient, String> {
    let mounted = |volume: &str, key: &str| {
        secret_mounts(spec)
            .into_iter()
            .find(|(v, _, _)| *v == volume)
            .and_then(|(_, secret, _)| secrets.get(&secret)?.get(key).cloned())
    };
    let credentials = if spec.sasl_enabled() {
        mounted(AUTH_VOLUME, AUTH_KEY)
            .and_then(|f| Credentials::from_auth_file(&String::from_utf8_lossy(&f)))
    } else {
        None
    };
    let tls = if spec.tls_enabled() {
        let cert = mounted(TLS_VOLUME, TLS_CERT_KEY)
            .ok_or_else(|| format!("the TLS Secret has no {TLS_CERT_KEY:?}"))?;
        let key = mounted(TLS_VOLUME, TLS_KEY_KEY);
        let ca = mounted(TLS_VOLUME, TLS_CA_KEY);
        let identity = key
            .as_deref()
            .filter(|_| args::client_cert_required(spec))
            .map(|k| (cert.as_slice(), k));
        Some(Tls {
            config: Arc::new(tls::client_config(ca.as_deref(), &cert, identity)?),
            server_name,
        })
    } else {
        None
    };
    // What a pod runs is confirmed from its `stats settings` during a change
    // in place; memcached 1.6.18 crashes on that command when run with `-N`.
    let run_args = args::memcached_args(spec);
    let settings = if spec.warm_restart_enabled() && !args::napi_ids(&run_args) {
        args::CONFIRMED_SETTINGS
    } else {
        &[]
    };
    Ok(StatsClient {
        tls,
        credentials,
        settings,
    })
}

/// Write the status computed from `observed` when it differs from `previous`;
/// the status. Patched as a [`Stored`]: the response of an unreadable
/// Memcached decodes too.
async fn write_status(
    api: &Api<Stored>,
    name: &str,
    previous: Option<&MemcachedStatus>,
    observed: &Observed,
    stats: &ClusterStats,
) -> Result<MemcachedStatus, Error> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let new = status::compute(previous, observed, stats, &now);
    if previous == Some(&new) {
        return Ok(new);
    }
    let mut patch =
        json!({"apiVersion": Memcached::api_version(&()), "kind": "Memcached", "status": new});
    let params = PatchParams::apply(MANAGER).force();
    // A CRD older than this controller (Helm never upgrades `crds/`) refuses
    // the status fields it does not declare: the others are still written.
    loop {
        match api.patch_status(name, &params, &Patch::Apply(&patch)).await {
            Err(kube::Error::Api(e)) if e.code == 500 => {
                let removed = undeclared_status_field(&e.message)
                    .and_then(|field| patch["status"].as_object_mut()?.remove_entry(field));
                let Some((field, _)) = removed else {
                    return Err(kube::Error::Api(e).into());
                };
                tracing::warn!(
                    field,
                    "the installed CRD does not declare status.{field}: apply deploy/crd.yaml \
                     (helm upgrade never upgrades a chart's crds/)"
                );
            }
            result => return result.map(|_| new).map_err(Error::from),
        }
    }
}

/// `image` from the API server's `.status.image: field not declared in schema`.
fn undeclared_status_field(message: &str) -> Option<&str> {
    let (before, _) = message.split_once(": field not declared in schema")?;
    let (_, path) = before.rsplit_once(".status.")?;
    Some(path).filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::undeclared_status_field;

    #[test]
    fn the_undeclared_status_field_is_read_from_the_api_servers_message() {
        let message = "failed to create typed patch object (/; memcached.c5c3.io/v1beta1, \
                       Kind=Memcached): .status.image: field not declared in schema";
        assert_eq!(undeclared_status_field(message), Some("image"));
        let nested = "...: .status.conditions[type=\"Ready\"].foo: field not declared in schema";
        assert_eq!(undeclared_status_field(nested), None, "only whole fields");
        assert_eq!(
            undeclared_status_field("etcdserver: request timed out"),
            None
        );
    }
}
