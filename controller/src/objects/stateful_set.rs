//! The StatefulSet running the pods when `spec.workload` is `StatefulSet`:
//! pods `<name>-0` ... `<name>-N`, each with the stable DNS name
//! `<name>-<i>.<name>.<namespace>.svc` through the headless Service, for
//! clients that hash keys over a server list.

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetUpdateStrategy};
use memcached_api::{Defaulted, Memcached};

use crate::objects::labels;
use crate::objects::pod_template::{self, Template};

/// The StatefulSet for `mc`, with its defaulted `spec`.
/// Pods start and stop in parallel (a cache has no start order); a rollout
/// replaces one pod at a time, highest ordinal first.
pub fn build(
    mc: &Memcached,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> StatefulSet {
    let Template { metadata, pod } = pod_template::build(mc, spec, secret_hash, auth_key);
    StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            replicas: pod_template::replicas(spec),
            selector: labels::selector(mc),
            service_name: Some(labels::name(mc).into()),
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
