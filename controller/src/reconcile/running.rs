//! What runs for a Memcached, as this controller sees it: its workload of
//! either kind (from the cache, or read while a watch has not listed), its
//! pods' endpoints, and what those pods last told the stats collection.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;
use memcached_api::Memcached;

use crate::cluster::apply::is_controlled_by;
use crate::cluster::cache::{self, Cache, scoped};
use crate::objects::workload::{Rollout, Workload};
use crate::reconcile::context::{Context, Error};
use crate::stats::client::{ClusterStats, PodStats};
use memcached_api::render::containers::MEMCACHED_PORT;

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
    last_stats(ctx, mc).pods
}

/// The last stats collected of `mc`'s pods (none before the first collection).
pub(super) fn last_stats(ctx: &Context, mc: &Memcached) -> ClusterStats {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    (ctx.live_stats.last(&ns, &name)).unwrap_or_default()
}

/// The pods behind `mc`'s headless Service, by memcached address.
pub(super) fn pod_names(cache: &Cache, mc: &Memcached) -> BTreeMap<SocketAddr, String> {
    (pod_endpoints(cache, mc).iter())
        .flat_map(|e| e.addresses.iter().map(move |a| (e, a)))
        .filter_map(|(e, a)| Some((memcached_address(a)?, e.target_ref.as_ref()?.name.clone()?)))
        .collect()
}

/// The EndpointSlices of `mc`'s headless Service: those the EndpointSlice
/// controller keeps for it, controlled by the Service (itself controlled
/// by `mc`). One only labelled with the Service's name is someone else's.
fn service_slices(cache: &Cache, mc: &Memcached) -> Vec<Arc<EndpointSlice>> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let service = cache::get(&cache.services, &ns, &name).object;
    let service = service.filter(|s| is_controlled_by(s.as_ref(), &mc.uid().unwrap_or_default()));
    let Some(service_uid) = service.and_then(|s| s.uid()) else {
        return Vec::new();
    };
    cache.endpoint_slices.state_filter(|s| {
        s.metadata.namespace.as_deref() == Some(ns.as_str())
            && s.labels().get("kubernetes.io/service-name") == Some(&name)
            && is_controlled_by(s, &service_uid)
    })
}

/// The endpoints of `mc`'s pods behind its Service: each names a Pod of its
/// namespace ([`workload_pod_name`]); the stats, and with them the
/// credentials, go to these only.
fn pod_endpoints(cache: &Cache, mc: &Memcached) -> Vec<Endpoint> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let ours = |e: &Endpoint| {
        e.target_ref.as_ref().is_some_and(|t| {
            t.kind.as_deref() == Some("Pod")
                && t.namespace.as_ref().is_none_or(|n| *n == ns)
                && t.name
                    .as_deref()
                    .is_some_and(|pod| workload_pod_name(&name, pod))
        })
    };
    (service_slices(cache, mc).iter())
        .flat_map(|s| s.endpoints.iter().filter(|e| ours(e)).cloned())
        .collect()
}

/// `pod` is named as the pods of the workload `name` are: `<name>-<ordinal>`
/// (a StatefulSet's), `<name>-<hash>-<suffix>` (a Deployment's, whose
/// generated names keep at most 58 characters before the 5 of the suffix).
fn workload_pod_name(name: &str, pod: &str) -> bool {
    let prefix = format!("{name}-");
    let prefix = prefix.get(..58).unwrap_or(&prefix);
    pod.len() > prefix.len() && pod.starts_with(prefix)
}

/// memcached's address at the endpoint address `ip`.
fn memcached_address(ip: &str) -> Option<SocketAddr> {
    Some(SocketAddr::new(
        ip.parse::<IpAddr>().ok()?,
        MEMCACHED_PORT as u16,
    ))
}

/// Ready pod addresses behind `mc`'s headless Service.
pub(super) fn ready_addresses(cache: &Cache, mc: &Memcached) -> Vec<SocketAddr> {
    let mut addresses: Vec<SocketAddr> = (ready_endpoints(cache, mc).into_iter())
        .map(|e| e.address)
        .collect();
    addresses.sort();
    addresses.dedup();
    addresses
}

/// A ready endpoint of one of a Memcached's pods.
pub(super) struct Ready {
    /// The pod's hostname (a StatefulSet pod's name).
    pub(super) hostname: Option<String>,
    /// The pod's name.
    pub(super) pod: Option<String>,
    /// Where its memcached answers.
    pub(super) address: SocketAddr,
    /// Its pod is ready (the `serving` condition): a terminating one still
    /// answers, in its preStop delay.
    pub(super) serving: bool,
}

/// The ready endpoints of `mc`'s pods behind its headless Service: their
/// pod ready (`serving`) and not terminating. Not the `ready` condition: a
/// Service that publishes pods not ready (handing keys over) has it on all.
pub(super) fn ready_endpoints(cache: &Cache, mc: &Memcached) -> Vec<Ready> {
    endpoints_where(cache, mc, |c| {
        c.serving.or(c.ready).unwrap_or(true) && c.terminating != Some(true)
    })
}

/// The endpoints of `mc`'s pods not ready (starting, or waiting for a
/// readiness gate) that do not terminate.
pub(super) fn starting_endpoints(cache: &Cache, mc: &Memcached) -> Vec<Ready> {
    endpoints_where(cache, mc, |c| {
        !c.serving.or(c.ready).unwrap_or(true) && c.terminating != Some(true)
    })
}

/// The endpoints of `mc`'s pods that terminate (deleted or evicted),
/// serving or not.
pub(super) fn leaving_endpoints(cache: &Cache, mc: &Memcached) -> Vec<Ready> {
    endpoints_where(cache, mc, |c| c.terminating == Some(true))
}

/// The endpoints of `mc`'s pods whose conditions `pass` (absent conditions
/// are the defaults: ready, serving, not terminating).
fn endpoints_where(
    cache: &Cache,
    mc: &Memcached,
    pass: impl Fn(&EndpointConditions) -> bool,
) -> Vec<Ready> {
    (pod_endpoints(cache, mc).into_iter())
        .filter_map(|e| {
            let conditions = e.conditions.unwrap_or_default();
            let pod = e.target_ref.and_then(|t| t.name);
            pass(&conditions).then_some((e.hostname, pod, e.addresses, conditions.serving))
        })
        .flat_map(|(hostname, pod, addresses, serving)| {
            (addresses.into_iter().filter_map(|a| memcached_address(&a))).map(move |address| {
                Ready {
                    hostname: hostname.clone(),
                    pod: pod.clone(),
                    address,
                    serving: serving == Some(true),
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;
    use serde_json::{Value, json};

    use super::*;

    fn owned_by(uid: &str) -> Value {
        json!([{"apiVersion": "v1", "kind": "Service", "name": "c", "uid": uid, "controller": true}])
    }

    /// An EndpointSlice of Service `c` (by its label), controlled by `owners`,
    /// with one ready endpoint per (pod reference, IP).
    fn slice(name: &str, owners: Value, endpoints: &[(Value, &str)]) -> EndpointSlice {
        let endpoints: Vec<Value> = (endpoints.iter())
            .map(|(target, ip)| json!({"addresses": [ip], "conditions": {"ready": true}, "targetRef": target}))
            .collect();
        serde_json::from_value(json!({"addressType": "IPv4",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners,
                "labels": {"kubernetes.io/service-name": "c"}},
            "endpoints": endpoints}))
        .unwrap()
    }

    fn pod(name: &str) -> Value {
        json!({"kind": "Pod", "namespace": "ns", "name": name, "uid": format!("uid-{name}")})
    }

    /// Credentials go only to this Memcached's pods: the endpoints of
    /// EndpointSlices its Service controls that name one of its pods.
    #[test]
    fn stats_go_only_to_endpoints_of_this_memcacheds_pods() {
        let (cache, mut writers) = cache::new();
        let mc: Memcached = serde_json::from_value(json!({"apiVersion": "memcached.c5c3.io/v1beta1",
            "kind": "Memcached", "metadata": {"name": "c", "namespace": "ns", "uid": "mc-uid"}, "spec": {}}))
        .unwrap();
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "c", "namespace": "ns", "uid": "svc-uid",
                "ownerReferences": [{"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                    "name": "c", "uid": "mc-uid", "controller": true}]}});
        writers
            .services
            .apply_watcher_event(&Event::Apply(serde_json::from_value(service).unwrap()));
        let mut other_namespace = pod("c-abc-22222");
        other_namespace["namespace"] = json!("other");
        let node = json!({"kind": "Node", "name": "c-node-1"});
        let ours = slice(
            "c-1",
            owned_by("svc-uid"),
            &[
                (pod("c-abc-11111"), "10.0.0.1"),
                (pod("c-0"), "10.0.0.2"),
                (pod("someone-else"), "10.0.0.3"),
                (other_namespace, "10.0.0.4"),
                (node, "10.0.0.5"),
                (pod("c-"), "10.0.0.6"),
            ],
        );
        let labelled_only = slice("c-2", json!([]), &[(pod("c-abc-33333"), "10.0.0.7")]);
        let foreign = slice("c-3", owned_by("other-uid"), &[(pod("c-1"), "10.0.0.8")]);
        // As the watch keeps them.
        for mut s in [ours, labelled_only, foreign] {
            cache::keep_endpoints(&mut s);
            writers
                .endpoint_slices
                .apply_watcher_event(&Event::Apply(s));
        }
        let address = |ip: &str| SocketAddr::new(ip.parse().unwrap(), MEMCACHED_PORT as u16);
        assert_eq!(
            ready_addresses(&cache, &mc),
            [address("10.0.0.1"), address("10.0.0.2")]
        );
        assert_eq!(
            pod_names(&cache, &mc).into_values().collect::<Vec<_>>(),
            ["c-abc-11111", "c-0"]
        );
    }

    /// A Deployment pod's generated name keeps at most 58 characters of
    /// `<name>-<hash>-`: a long name's pods are still its own.
    #[test]
    fn a_long_names_pods_are_named_as_its_workloads() {
        let name = "m".repeat(60);
        assert!(workload_pod_name(&name, &format!("{}x1y2z", &name[..58])));
        assert!(workload_pod_name("c", "c-7d9f8b6c5d-x1y2z"));
        assert!(workload_pod_name("c", "c-2"));
        assert!(!workload_pod_name("c", "cache-0"));
        assert!(!workload_pod_name("c", "c-"));
    }
}
