//! The StatefulSet running the pods when `spec.workload` is `StatefulSet`:
//! pods `<name>-0` ... `<name>-N`, each with the stable DNS name
//! `<name>-<i>.<name>.<namespace>.svc` through the headless Service, for
//! clients that hash keys over a server list.

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use memcached_api::{Defaulted, Memcached};

use memcached_api::render::workload::{self, Template};

use crate::objects::meta;

/// The StatefulSet for `mc`, with its defaulted `spec`.
/// Pods start and stop in parallel (a cache has no start order); a rollout
/// replaces one pod at a time, highest ordinal first.
pub fn build(
    mc: &Memcached,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> StatefulSet {
    let Template { mut metadata, pod } = workload::build(mc.into(), spec, secret_hash, auth_key);
    metadata.owner_references = meta::owner(mc);
    StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            replicas: workload::replicas(spec),
            selector: meta::selector(mc),
            service_name: Some(meta::name(mc).into()),
            pod_management_policy: Some("Parallel".into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: None,
            }),
            template: pod,
            ..Default::default()
        }),
        ..Default::default()
    }
}
