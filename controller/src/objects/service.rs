//! The headless Service clients use to find every memcached pod.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::{Memcached, MemcachedSpec};

use memcached_api::render::containers::{MEMCACHED_PORT, METRICS_PORT};
use memcached_api::render::labels::selector_labels;

use crate::objects::meta;

/// The headless Service for `mc`.
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
            ..Default::default()
        }),
        ..Default::default()
    }
}
