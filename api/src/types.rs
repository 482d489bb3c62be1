//! The `Memcached` API (`memcached.c5c3.io`, v1alpha1 and v1beta1 share this schema).
//!
//! Every field is optional on the wire: absent and explicitly set must stay
//! distinguishable, because defaulting only ever fills what is absent.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec};
use k8s_openapi::api::core::v1::{
    LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

#[cfg(feature = "schema")]
use crate::validation::limits;

/// API group of the custom resource.
pub const GROUP: &str = "memcached.c5c3.io";
/// Kind of the custom resource.
pub const KIND: &str = "Memcached";
/// Served API versions; the last one is the storage version.
pub const VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// JSON paths (under `spec`) of the sections defined here rather than by
/// k8s-openapi. serde would read a JSON array into them as a tuple; an
/// admission request must get an error instead.
pub const SECTIONS: [&str; 12] = [
    "memcached",
    "highAvailability",
    "highAvailability.podDisruptionBudget",
    "highAvailability.gracefulShutdown",
    "autoscaling",
    "monitoring",
    "monitoring.serviceMonitor",
    "security",
    "security.sasl",
    "security.tls",
    "networkPolicy",
    "service",
];

/// Desired state of a Memcached cluster.
#[cfg_attr(feature = "kube", derive(kube::CustomResource))]
#[cfg_attr(
    feature = "kube",
    kube(
        group = "memcached.c5c3.io",
        version = "v1beta1",
        kind = "Memcached",
        plural = "memcacheds",
        shortname = "mc",
        namespaced,
        status = "MemcachedStatus",
        scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}"#,
        printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
        printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
        printcolumn = r#"{"name":"Hit Ratio","type":"string","jsonPath":".status.hitRatio"}"#,
        printcolumn = r#"{"name":"Connections","type":"integer","jsonPath":".status.currentConnections"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
    )
)]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of pods (0-64); must be absent while autoscaling is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 64)))]
    pub replicas: Option<i32>,
    /// Memcached container image.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_IMAGE_LENGTH)))]
    pub image: Option<String>,
    /// Requests and limits of the memcached container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Memcached runtime parameters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcached: Option<MemcachedConfig>,
    /// Anti-affinity, topology spread, disruption budget and graceful shutdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_availability: Option<HighAvailabilitySpec>,
    /// Horizontal pod autoscaling of the Deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// Prometheus exporter sidecar and ServiceMonitor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// Security contexts, SASL and TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security: Option<SecuritySpec>,
    /// NetworkPolicy generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
    /// Headless Service settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
    /// Extra labels on the pods (not the operator's `app.kubernetes.io/` ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = limits::MAX_LABELS)))]
    pub pod_labels: Option<BTreeMap<String, String>>,
    /// Extra annotations on the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = limits::MAX_ANNOTATIONS)))]
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// Node selector of the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = limits::MAX_LABELS)))]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_TOLERATIONS)))]
    pub tolerations: Option<Vec<Toleration>>,
    /// Pull secrets for the images.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_IMAGE_PULL_SECRETS)))]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

/// Memcached command-line parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedConfig {
    /// Cache size in megabytes (`-m`, 16-65536).
    #[serde(rename = "maxMemoryMB", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 16, max = 65536)))]
    pub max_memory_mb: Option<i32>,
    /// Maximum simultaneous connections (`-c`, 1-65536).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65536)))]
    pub max_connections: Option<i32>,
    /// Worker threads (`-t`, 1-128).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 128)))]
    pub threads: Option<i32>,
    /// Maximum item size (`-I`): a multiple of 512k such as `512k`, `1m` or `1536k`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+(k|m)$")))]
    pub max_item_size: Option<String>,
    /// 0 = quiet, 1 = `-v`, 2 = `-vv`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 2)))]
    pub verbosity: Option<i32>,
    /// Extra raw arguments, appended after the managed ones; flags the operator
    /// manages and flags that stop memcached from serving are refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = limits::MAX_EXTRA_ARGS), inner(length(max = limits::MAX_EXTRA_ARG_LENGTH)))
    )]
    pub extra_args: Option<Vec<String>>,
}

/// High-availability settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HighAvailabilitySpec {
    /// `soft` (preferred) or `hard` (required) pod anti-affinity.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["soft", "hard"])))]
    pub anti_affinity_preset: Option<String>,
    /// Passed through to the pod spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_TOPOLOGY_SPREAD_CONSTRAINTS)))]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// PodDisruptionBudget settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PdbSpec>,
    /// preStop delay and termination grace period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GracefulShutdownSpec>,
}

/// PodDisruptionBudget settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    /// Create the PodDisruptionBudget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Minimum available pods (integer or percentage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Maximum unavailable pods (integer or percentage).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// Graceful shutdown settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GracefulShutdownSpec {
    /// Add the preStop sleep and the grace period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds the preStop hook sleeps (1-300).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 300)))]
    pub pre_stop_delay_seconds: Option<i32>,
    /// Pod termination grace period (1-600), longer than the preStop delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 600)))]
    pub termination_grace_period_seconds: Option<i32>,
}

/// Horizontal pod autoscaling settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingSpec {
    /// Create a HorizontalPodAutoscaler; `spec.replicas` must then be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Lower bound of the replica count (>= 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub min_replicas: Option<i32>,
    /// Upper bound of the replica count (>= 1), required when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_replicas: Option<i32>,
    /// autoscaling/v2 metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_METRICS)))]
    pub metrics: Option<Vec<MetricSpec>>,
    /// autoscaling/v2 scaling behavior.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// Monitoring settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// Add the exporter sidecar (and a ServiceMonitor when its CRD exists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Exporter sidecar image.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_IMAGE_LENGTH)))]
    pub exporter_image: Option<String>,
    /// Requests and limits of the exporter sidecar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exporter_resources: Option<ResourceRequirements>,
    /// ServiceMonitor settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSpec>,
}

/// ServiceMonitor settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// Extra labels on the ServiceMonitor (e.g. `release: prometheus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = limits::MAX_LABELS)))]
    pub additional_labels: Option<BTreeMap<String, String>>,
    /// Prometheus scrape interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Prometheus scrape timeout, at most the interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}

/// Security settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecuritySpec {
    /// Pod-level security context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Container-level security context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    /// SASL authentication.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSpec>,
    /// TLS encryption.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// SASL authentication settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SaslSpec {
    /// Require clients to authenticate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Secret holding the credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<LocalObjectReference>,
}

/// TLS settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Serve TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Secret with `tls.crt`, `tls.key` and optionally `ca.crt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_secret_ref: Option<LocalObjectReference>,
    /// Require and verify client certificates against `ca.crt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_client_cert: Option<bool>,
}

/// NetworkPolicy settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Create the NetworkPolicy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Peers allowed to reach memcached; none (or an empty list) allows every
    /// source, which the policy warns about.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = limits::MAX_ALLOWED_SOURCES)))]
    pub allowed_sources: Option<Vec<NetworkPolicyPeer>>,
}

/// Headless Service settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Extra annotations on the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = limits::MAX_ANNOTATIONS)))]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Observed state, written by the controller.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Desired replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Ready replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Version reported by memcached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcached_version: Option<String>,
    /// Open connections summed over the ready pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_connections: Option<i64>,
    /// hits / (hits + misses) as `"0.00"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-1]\.\d{2}$")))]
    pub hit_ratio: Option<String>,
    /// Generation the status describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `["<name>.<namespace>:11211"]` while Ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_list: Option<Vec<String>>,
    /// Available, Progressing, Degraded and Ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl MemcachedSpec {
    /// True when `spec.autoscaling.enabled` is true.
    pub fn autoscaling_enabled(&self) -> bool {
        self.autoscaling
            .as_ref()
            .and_then(|a| a.enabled)
            .unwrap_or(false)
    }

    /// True when `spec.monitoring.enabled` is true.
    pub fn monitoring_enabled(&self) -> bool {
        self.monitoring
            .as_ref()
            .and_then(|m| m.enabled)
            .unwrap_or(false)
    }

    /// True when `spec.security.sasl.enabled` is true.
    pub fn sasl_enabled(&self) -> bool {
        self.security
            .as_ref()
            .and_then(|s| s.sasl.as_ref())
            .and_then(|s| s.enabled)
            .unwrap_or(false)
    }

    /// True when `spec.security.tls.enabled` is true.
    pub fn tls_enabled(&self) -> bool {
        self.security
            .as_ref()
            .and_then(|s| s.tls.as_ref())
            .and_then(|t| t.enabled)
            .unwrap_or(false)
    }

    /// The PodDisruptionBudget settings when it is enabled.
    pub fn enabled_pdb(&self) -> Option<&PdbSpec> {
        let pdb = self
            .high_availability
            .as_ref()?
            .pod_disruption_budget
            .as_ref()?;
        pdb.enabled.unwrap_or(false).then_some(pdb)
    }

    /// The graceful shutdown settings when they are enabled.
    pub fn enabled_graceful_shutdown(&self) -> Option<&GracefulShutdownSpec> {
        let gs = self
            .high_availability
            .as_ref()?
            .graceful_shutdown
            .as_ref()?;
        gs.enabled.unwrap_or(false).then_some(gs)
    }
}
