//! The PodDisruptionBudget, when enabled.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use memcached_api::{Memcached, MemcachedSpec};

use crate::objects::meta;

/// The PodDisruptionBudget for `mc`, or `None` when it is not enabled.
pub fn build(mc: &Memcached, spec: &MemcachedSpec) -> Option<PodDisruptionBudget> {
    let pdb = spec.enabled_pdb()?;
    Some(PodDisruptionBudget {
        metadata: meta::object_meta(mc),
        spec: Some(PodDisruptionBudgetSpec {
            min_available: pdb.min_available.clone(),
            max_unavailable: pdb.max_unavailable.clone(),
            selector: Some(meta::selector(mc)),
            ..Default::default()
        }),
        ..Default::default()
    })
}
