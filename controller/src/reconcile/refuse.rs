//! Refusing a stored Memcached: a spec the policy would refuse (admitted
//! without it), or one the controller's types cannot hold. Nothing is
//! applied, deleted or retracted; the refusal is reported on the Memcached
//! (a Warning Event, `Degraded`), and what runs is described as it is.

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use memcached_api::admission::QUALIFIED_KIND;
use memcached_api::field::{FieldError, invalid_message};
use memcached_api::{Memcached, MemcachedSpec, MemcachedStatus};

use crate::cluster::stored::{Stored, Unreadable};
use crate::metrics::memcacheds::Instance;
use crate::reconcile::context::{Context, Error, INVALID_SPEC, key};
use crate::reconcile::events::warn;
use crate::reconcile::report::write_status;
use crate::reconcile::running::running_workload;
use crate::reconcile::status::Observed;
use crate::stats::client::ClusterStats;

/// A stored spec the policy would refuse (admitted without it, or while
/// policy-server was down under `failurePolicy: Ignore`): reported on the
/// Memcached with the policy's own message.
pub(super) async fn refuse_invalid(
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
pub(super) async fn refuse_unreadable(
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
        selector: crate::objects::meta::selector_string(object),
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
