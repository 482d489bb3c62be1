//! The headless Service clients use to find every memcached pod.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::{Memcached, MemcachedSpec};

use memcached_api::render::containers::{MEMCACHED_PORT, METRICS_PORT};
use memcached_api::render::labels::selector_labels;

use crate::objects::meta;

/// The headless Service for `mc`. When a StatefulSet's keys are handed over
/// ([`MemcachedSpec::hands_over_keys`]) it publishes pods that are not ready:
/// clients take their servers from `status.serverList`, which lists a pod
/// only once it is ready and holds its keys, and a leaving pod, terminating
/// and so never ready, serves its keys under its name until the list drops
/// it (cluster DNS answers only the ready endpoints of other Services).
pub fn build(mc: &Memcached, spec: &MemcachedSpec) -> Service {
    let port = |name: &str, number| ServicePort {
        name: Some(name.into()),
        port: number,
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..Default::default()
    };
    let mut ports = vec![port("memcached", MEMCACHED_PORT)];
    if spec.monitoring_enabled() {
        ports.push(port("metrics", METRICS_PORT));
    }
    let mut metadata = meta::object_meta(mc);
    metadata.annotations = spec.service.as_ref().and_then(|s| s.annotations.clone());
    Service {
        metadata,
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            ports: Some(ports),
            selector: Some(selector_labels(meta::name(mc))),
            publish_not_ready_addresses: (spec.stateful_set() && spec.hands_over_keys())
                .then_some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn not_ready_pods_are_published_only_while_keys_are_handed_over() {
        let cases = [
            (
                "a StatefulSet handing keys over",
                json!({"workload": "StatefulSet", "clientHashing": "rendezvous"}),
                Some(true),
            ),
            (
                "a StatefulSet without hashing",
                json!({"workload": "StatefulSet"}),
                None,
            ),
            (
                "a Deployment with hashing",
                json!({"clientHashing": "ketama"}),
                None,
            ),
        ];
        for (case, spec, published) in cases {
            let mc: Memcached = serde_json::from_value(json!({
                "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                "metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
                "spec": spec,
            }))
            .unwrap();
            let service = build(&mc, &mc.spec);
            assert_eq!(
                service.spec.unwrap().publish_not_ready_addresses,
                published,
                "{case}"
            );
        }
    }
}
