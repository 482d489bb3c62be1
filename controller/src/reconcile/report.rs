//! The last step of a reconcile: the replica metrics, memcached's numbers
//! as last collected, the status written (computed by
//! [`crate::reconcile::status`]), and when to look again.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use memcached_api::{Defaulted, Memcached, MemcachedStatus};
use serde_json::json;

use crate::cluster::secrets::SecretData;
use crate::cluster::stored::Stored;
use crate::metrics::memcacheds::Instance;
use crate::reconcile::certificates;
use crate::reconcile::context::{APPLY_FAILED, Context, Error, Problem, key};
use crate::reconcile::events::warn;
use crate::reconcile::running::{pod_names, ready_addresses};
use crate::reconcile::status::{self, Observed};
use crate::stats::client::ClusterStats;
use crate::stats::setup::client_for;
use memcached_api::render::labels::MANAGER;

/// Requeue while not every replica is ready, or a pod presents an older
/// certificate than the TLS Secret's.
pub const REQUEUE_NOT_READY: Duration = Duration::from_secs(10);
/// Requeue while the controller steps a rollout: an image change applied in
/// place, a StatefulSet rollout waiting for a pod to warm (pods are not watched).
pub const REQUEUE_ROLLOUT: Duration = Duration::from_secs(2);
/// Requeue when ready, to refresh the live stats, or at rest (scaled to
/// zero), where nothing is to be polled.
pub const REQUEUE_READY: Duration = Duration::from_secs(60);

/// What converging a Memcached's objects found.
pub(super) struct Converged {
    /// Its status, but for the live numbers.
    pub(super) observed: Observed,
    /// A workload serves it: memcached's numbers are read.
    pub(super) serving: bool,
    /// A rollout is under way (in place, or paced): look again soon.
    pub(super) rolling: bool,
    /// An in-place change waits for a pod that cannot run its image.
    pub(super) stalled: bool,
}

/// Publish the replica metrics, read memcached's numbers, write the status,
/// and say when to look again; an apply the API server refused is the error.
pub(super) async fn report(
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
        let in_place = observed.in_place.as_ref();
        let asked = in_place.map(|p| &p.without_napi_ids);
        live_numbers(ctx, mc, spec, secrets, asked, &mut observed.problems).await
    } else {
        ClusterStats::default()
    };
    let refused = (observed.problems.iter())
        .find(|p| p.reason == APPLY_FAILED)
        .map(|p| p.message.clone());
    let api = Api::namespaced(ctx.client.clone(), &ns);
    let status = write_status(&api, &name, mc.status.as_ref(), &observed, &stats).await?;
    let pods = pod_names(&ctx.cache, mc);
    let older_certificates = certificates::announce(ctx, mc, &stats, &pods).await;
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
    } else if (pods_serving && !older_certificates) || status::at_rest(&observed) {
        REQUEUE_READY
    } else {
        REQUEUE_NOT_READY
    }))
}

/// The numbers memcached reports for `mc`'s serving pods, as last
/// collected in the background (until the first collection ends after a
/// restart, those in its status). Their `stats settings` are asked only
/// while a change goes on in place (their one reader), of the pods it found
/// free of NAPI ids (`in_place`) or running a release that cannot crash on
/// them ([`crate::stats::client::StatsClient::may_ask_settings`]). Empty
/// when TLS is on but its client cannot be set up: that is warned about and
/// added to `problems`.
async fn live_numbers(
    ctx: &Context,
    mc: &Memcached,
    spec: &Defaulted,
    secrets: &SecretData,
    in_place: Option<&BTreeSet<SocketAddr>>,
    problems: &mut Vec<Problem>,
) -> ClusterStats {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    match client_for(mc, spec, secrets) {
        Ok(mut client) => {
            certificates::warn_unloadable(ctx, mc, &client).await;
            match in_place {
                Some(free) => client.without_napi_ids = Arc::new(free.clone()),
                None => client.settings = &[],
            }
            let addresses = ready_addresses(&ctx.cache, mc);
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

/// Write the status computed from `observed` when it differs from `previous`;
/// the status. Patched as a [`Stored`]: the response of an unreadable
/// Memcached decodes too.
pub(super) async fn write_status(
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
