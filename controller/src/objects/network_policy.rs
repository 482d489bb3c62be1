//! The NetworkPolicy, when enabled: memcached's port from the allowed
//! sources and from the operator's own pods (it reads `stats`), the
//! exporter's metrics port only from the Prometheus namespaces.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::{Memcached, MemcachedSpec};

use memcached_api::render::containers::{MEMCACHED_PORT, METRICS_PORT};
use memcached_api::render::labels::NAME_LABEL;

use crate::objects::meta;

/// Who besides the CR's `allowedSources` may connect.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The operator's namespace.
    pub operator_namespace: String,
    /// Labels of the operator's pods.
    pub operator_labels: BTreeMap<String, String>,
    /// Namespaces that scrape the metrics port.
    pub metrics_namespaces: Vec<String>,
}

impl Default for Access {
    /// As `deploy/controller.yaml` installs it, scraped from `monitoring`.
    fn default() -> Self {
        Access {
            operator_namespace: "memcached-operator-system".into(),
            operator_labels: [(NAME_LABEL.to_string(), "memcached-operator".to_string())].into(),
            metrics_namespaces: vec!["monitoring".into()],
        }
    }
}

/// Pods of `namespace` (all of them when `labels` is empty).
fn peer(namespace: &str, labels: &BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(
                [(
                    "kubernetes.io/metadata.name".to_string(),
                    namespace.to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        }),
        pod_selector: (!labels.is_empty()).then(|| LabelSelector {
            match_labels: Some(labels.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The NetworkPolicy for `mc`, or `None` when it is not enabled.
pub fn build(mc: &Memcached, spec: &MemcachedSpec, access: &Access) -> Option<NetworkPolicy> {
    // `spec.networkPolicy`, else the Go operator's `spec.security.networkPolicy`.
    let np = spec
        .effective_network_policy()
        .filter(|n| n.enabled == Some(true))?;
    let tcp = |port| {
        Some(vec![NetworkPolicyPort {
            port: Some(IntOrString::Int(port)),
            protocol: Some("TCP".into()),
            ..Default::default()
        }])
    };
    let operator = peer(&access.operator_namespace, &access.operator_labels);
    // No allowedSources (absent or empty, as the policy's warning says):
    // every source may connect; a list: those and the operator.
    let clients = np
        .allowed_sources
        .clone()
        .filter(|sources| !sources.is_empty())
        .map(|mut sources| {
            sources.push(operator);
            sources
        });
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: clients,
        ports: tcp(MEMCACHED_PORT),
    }];
    if spec.monitoring_enabled() {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(
                access
                    .metrics_namespaces
                    .iter()
                    .map(|ns| peer(ns, &BTreeMap::new()))
                    .collect(),
            ),
            ports: tcp(METRICS_PORT),
        });
    }
    Some(NetworkPolicy {
        metadata: meta::object_meta(mc),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(meta::selector(mc)),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(ingress),
            ..Default::default()
        }),
    })
}
