//! Where clients connect: the server list of the pods that serve them
//! (`status.serverList`), and the ConfigMap publishing it when asked.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::discovery::ApiResource;
use memcached_api::Defaulted;

use crate::cluster::apply::is_controlled_by;
use crate::cluster::cache::{self, scoped};
use crate::objects::server_list;
use crate::objects::workload::desired_replicas;
use crate::reconcile::applied::Applied;
use crate::reconcile::context::Error;
use crate::reconcile::converge_workload::Workloads;
use crate::reconcile::hand_over_keys::Held;

/// Publish where clients connect: the server list of the workload that
/// serves them (see [`server_list::build`]; while keys are handed over,
/// `held`'s: the one clients use now, or the move's new list once done;
/// else without the pods `away`, whose keys were handed over), also in a
/// ConfigMap when `spec` asks for one; and whether it names every pod (a
/// StatefulSet's).
pub(super) async fn converge(
    applied: &mut Applied<'_>,
    spec: &Defaulted,
    workloads: &Workloads,
    held: Option<&Held>,
    away: &BTreeSet<String>,
) -> Result<(Vec<String>, bool), Error> {
    let mc = applied.mc;
    let stable_names = spec.stateful_set();
    let Workloads { current, previous } = workloads;
    // While a switch runs, clients keep the previous kind's server list (the
    // new pods' names resolve only once they are ready), and the status
    // counts whichever workload has more pods ready.
    let (list_rollout, list_stable) = match previous {
        Some(p) => (Some(p), !stable_names),
        None => (current.as_ref(), stable_names),
    };
    let servers = match held {
        Some(held) if previous.is_none() => held.listed.clone(),
        _ => {
            let servers = server_list::build(mc, list_stable, desired_replicas(spec, list_rollout));
            // Never an empty list: with every pod leaving, none took their keys.
            let staying: Vec<String> =
                (servers.iter().filter(|s| !away.contains(*s)).cloned()).collect();
            if staying.is_empty() { servers } else { staying }
        }
    };
    // No workload of this Memcached: the published list is left as it was.
    if current.is_some() {
        let config_map = server_list::config_map(mc, spec, &servers);
        converge_config_map(applied, config_map).await?;
    }
    Ok((servers, list_stable))
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
