//! What runs for a Memcached, as this controller sees it: its workload of
//! either kind (from the cache, or read while a watch has not listed), its
//! pods' endpoints, and what those pods last told the stats collection.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;
use memcached_api::Memcached;

use crate::cluster::apply::is_controlled_by;
use crate::cluster::cache::{self, scoped};
use crate::objects::labels::MEMCACHED_PORT;
use crate::objects::workload::{Rollout, Workload};
use crate::reconcile::context::{Context, Error};
use crate::stats::client::PodStats;

/// The workload of either kind the Memcached of `meta` controls, as the
/// cache sees it; a StatefulSet when both run and `stateful_set`.
pub(super) fn running_workload(
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
pub(super) fn serving<W: Workload>(workload: &W, uid: &str) -> Option<Rollout> {
    (is_controlled_by(workload, uid) && workload.meta().deletion_timestamp.is_none())
        .then(|| workload.rollout())
}

/// `mc`'s workload of kind `W` as the cache holds it, or read from the API
/// server while its watch has not listed: absent from such a cache it may
/// exist, and a change in place or a paced rollout on it must not be lost.
pub(super) async fn live_workload<W: Workload>(
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

/// What the last stats collected say of each of `mc`'s pods.
pub(super) fn pod_stats(ctx: &Context, mc: &Memcached) -> BTreeMap<SocketAddr, PodStats> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    (ctx.live_stats.last(&ns, &name))
        .map(|s| s.pods)
        .unwrap_or_default()
}

/// The pods behind the headless Service `service`, by memcached address.
pub(super) fn pod_names(
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
pub(super) fn ready_addresses(
    slices: &Store<EndpointSlice>,
    ns: &str,
    service: &str,
) -> Vec<SocketAddr> {
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
pub(super) fn ready_endpoints(
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
