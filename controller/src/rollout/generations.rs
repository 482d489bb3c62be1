//! What Deployment pacing reads of a rollout ([`crate::rollout::pacing`]): the
//! Deployment's ReplicaSets and their pods, listed only while a rollout
//! runs. The newest ReplicaSet is the one with the highest
//! `deployment.kubernetes.io/revision`, as `kubectl rollout` reads it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::cluster::apply::is_controlled_by;
use crate::rollout::in_place::{failing, owned_replica_sets, still_running, unschedulable};
use crate::rollout::pacing::{Generations, Newest};
use crate::rollout::pod_change::ready;
use crate::stats::client::PodStats;
use memcached_api::render::containers::MEMCACHED_PORT;

/// The annotation a Deployment numbers its ReplicaSets with.
const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// The pods of `live`'s rollout that `selector` selects, by generation, with
/// the `stats` each address last reported.
pub async fn of(
    client: &Client,
    live: &Deployment,
    selector: &str,
    stats: BTreeMap<SocketAddr, PodStats>,
) -> Result<Generations, kube::Error> {
    let ns = live.namespace().unwrap_or_default();
    let sets = owned_replica_sets(&Api::namespaced(client.clone(), &ns), selector, live).await?;
    let Some(newest) = sets.iter().max_by_key(|s| revision(s)) else {
        return Ok(Generations::default());
    };
    let newest_uid = newest.uid().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let listed = pods.list(&ListParams::default().labels(selector)).await?;
    let running: Vec<Pod> = (listed.items.into_iter()).filter(still_running).collect();
    let (new, old): (Vec<&Pod>, Vec<&Pod>) = (running.iter())
        .filter(|p| {
            sets.iter()
                .any(|s| is_controlled_by(*p, &s.uid().unwrap_or_default()))
        })
        .partition(|p| is_controlled_by(*p, &newest_uid));
    let newest = new
        .iter()
        .max_by_key(|p| p.creation_timestamp())
        .map(|p| Newest {
            pod: p.name_any(),
            address: address(p).filter(|_| ready(p)),
            failing: failing(p).is_some(),
            unschedulable: unschedulable(p),
        });
    Ok(Generations {
        newest,
        old: old
            .iter()
            .filter(|p| ready(p))
            .filter_map(|p| address(p))
            .collect(),
        stats,
    })
}

/// The ReplicaSet's revision (0 without one).
fn revision(set: &ReplicaSet) -> u64 {
    set.annotations()
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// Where the stats of the pod's memcached are read.
fn address(pod: &Pod) -> Option<SocketAddr> {
    let ip: IpAddr = pod.status.as_ref()?.pod_ip.as_ref()?.parse().ok()?;
    Some(SocketAddr::new(ip, MEMCACHED_PORT as u16))
}
