//! The NetworkPolicy, when enabled: ingress to memcached (and to the metrics
//! port when monitoring is on) only from the allowed sources.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::{Memcached, MemcachedSpec};

use crate::labels::{self, MEMCACHED_PORT, METRICS_PORT};

/// The NetworkPolicy for `mc`, or `None` when it is not enabled.
pub fn build(mc: &Memcached, spec: &MemcachedSpec) -> Option<NetworkPolicy> {
    let np = spec
        .network_policy
        .as_ref()
        .filter(|n| n.enabled == Some(true))?;
    let tcp = |port| NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let mut ports = vec![tcp(MEMCACHED_PORT)];
    if spec.monitoring_enabled() {
        ports.push(tcp(METRICS_PORT));
    }
    Some(NetworkPolicy {
        metadata: labels::object_meta(mc),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(labels::selector(mc)),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: np.allowed_sources.clone(),
                ports: Some(ports),
            }]),
            ..Default::default()
        }),
    })
}
