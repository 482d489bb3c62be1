//! The `Memcached` API (`memcached.c5c3.io`, v1alpha1 and v1beta1 share this schema).
//!
//! Every field is optional on the wire: absent and explicitly set must stay
//! distinguishable, because defaulting only ever fills what is absent.

use std::collections::BTreeMap;
use std::ops::{RangeFrom, RangeInclusive};

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec};
use k8s_openapi::api::core::v1::{
    LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

/// API group of the custom resource.
pub const GROUP: &str = "memcached.c5c3.io";
/// Kind of the custom resource.
pub const KIND: &str = "Memcached";
/// Served API versions; the last one is the storage version.
pub const VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// `spec.workload` value for a Deployment (the default).
pub const DEPLOYMENT: &str = "Deployment";
/// `spec.workload` value for a StatefulSet.
pub const STATEFUL_SET: &str = "StatefulSet";
/// Values `spec.workload` may take.
pub const WORKLOADS: [&str; 2] = [DEPLOYMENT, STATEFUL_SET];
/// `spec.clientHashing` for pymemcache's `HashClient` (oslo.cache): rendezvous hashing.
pub const RENDEZVOUS: &str = "rendezvous";
/// `spec.clientHashing` for libmemcached's weighted ketama (pylibmc `ketama_weighted`).
pub const KETAMA: &str = "ketama";
/// Values `spec.clientHashing` may take.
pub const CLIENT_HASHINGS: [&str; 2] = [RENDEZVOUS, KETAMA];
/// Values `spec.highAvailability.antiAffinityPreset` may take.
pub const ANTI_AFFINITY_PRESETS: [&str; 2] = ["soft", "hard"];
/// The pattern of `spec.memcached.maxItemSize`.
pub const ITEM_SIZE_PATTERN: &str = "^[0-9]+(k|m)$";

/// `spec.replicas`.
pub const REPLICAS_BOUNDS: RangeInclusive<i32> = 0..=64;
/// `spec.memcached.maxMemoryMB`.
pub const MAX_MEMORY_MB_BOUNDS: RangeInclusive<i32> = 16..=65536;
/// `spec.memcached.maxConnections`.
pub const MAX_CONNECTIONS_BOUNDS: RangeInclusive<i32> = 1..=65536;
/// `spec.memcached.threads`.
pub const THREADS_BOUNDS: RangeInclusive<i32> = 1..=128;
/// `spec.memcached.verbosity`.
pub const VERBOSITY_BOUNDS: RangeInclusive<i32> = 0..=2;
/// `spec.highAvailability.gracefulShutdown.preStopDelaySeconds`.
pub const PRE_STOP_DELAY_SECONDS_BOUNDS: RangeInclusive<i32> = 1..=300;
/// `spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds`.
pub const TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS: RangeInclusive<i32> = 1..=600;
/// `spec.autoscaling.minReplicas` and `maxReplicas`.
pub const AUTOSCALING_REPLICAS_BOUNDS: RangeFrom<i32> = 1..;

// Size bounds of the lists, maps and strings of the spec, far above what a
// real Memcached needs (see `validation::validate_sizes`).
/// `spec.memcached.extraArgs` items.
pub const MAX_EXTRA_ARGS: usize = 100;
/// Bytes of one `extraArgs` item.
pub const MAX_EXTRA_ARG_LENGTH: usize = 4096;
/// `spec.tolerations` items.
pub const MAX_TOLERATIONS: usize = 100;
/// `spec.networkPolicy.allowedSources` items.
pub const MAX_ALLOWED_SOURCES: usize = 100;
/// `spec.highAvailability.topologySpreadConstraints` items.
pub const MAX_TOPOLOGY_SPREAD_CONSTRAINTS: usize = 32;
/// `spec.imagePullSecrets` items.
pub const MAX_IMAGE_PULL_SECRETS: usize = 32;
/// `spec.autoscaling.metrics` items.
pub const MAX_METRICS: usize = 32;
/// Entries of a labels map (`podLabels`, `nodeSelector`, `additionalLabels`).
pub const MAX_LABELS: usize = 64;
/// Entries of an annotations map (`podAnnotations`, `service.annotations`).
pub const MAX_ANNOTATIONS: usize = 128;
/// Bytes of an image reference.
pub const MAX_IMAGE_LENGTH: usize = 512;

/// Keys of the SASL credentials Secret (`spec.security.sasl.credentialsSecretRef`)
/// memcached's `-Y` file is read from, the first present one: this
/// project's `auth`, the Go operator's `password-file`, the design
/// document's `memcached-sasl-db`.
pub const AUTH_SECRET_KEYS: [&str; 3] = ["auth", "password-file", "memcached-sasl-db"];

/// JSON paths (under `spec`) of the sections defined here rather than by
/// k8s-openapi. serde would read a JSON array into them as a tuple; an
/// admission request must get an error instead.
pub const SECTIONS: [&str; 13] = [
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
    "security.networkPolicy",
    "networkPolicy",
    "service",
];

/// The error of `replicas` beside enabled autoscaling, after the value.
macro_rules! replicas_with_autoscaling {
    () => {
        "spec.replicas and spec.autoscaling.enabled are mutually exclusive"
    };
}

/// `spec.replicas: Invalid value: 3: <this>`: `replicas` while autoscaling is enabled.
pub const REPLICAS_WITH_AUTOSCALING: &str = replicas_with_autoscaling!();

/// The CEL rule (`x-kubernetes-validations` of `spec`) by which the API
/// server itself refuses `replicas` beside enabled autoscaling, however the
/// Memcached is written: `kubectl scale` (the `scale` subresource, whose
/// Scale tells the policy nothing about autoscaling) included. It is
/// evaluated on the Memcached the update makes; the policy's mutation (which
/// drops a carried-over `replicas` when autoscaling is enabled) runs before.
pub const REPLICAS_WITH_AUTOSCALING_RULE: &str = "!has(self.replicas) || !has(self.autoscaling) || \
     !has(self.autoscaling.enabled) || !self.autoscaling.enabled";

/// Its message, the policy's own words: with the rule on `spec` and
/// `fieldPath: .replicas`, the API server writes `spec.replicas: Invalid
/// value: ` and this (an object's value is never shown). `format` on a
/// literal keeps the estimated cost bounded; `string(self.replicas) + ...`
/// has no bounded size and makes kube-apiserver refuse the CRD.
pub const REPLICAS_WITH_AUTOSCALING_MESSAGE_EXPRESSION: &str = concat!(
    "'%d: ",
    replicas_with_autoscaling!(),
    "'.format([self.replicas])"
);

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
        category = "memcached",
        category = "all",
        namespaced,
        doc = "A Memcached cluster: a Deployment (or a StatefulSet, for stable per-pod names) of memcached pods behind a headless Service, with optional exporter sidecar and ServiceMonitor, PodDisruptionBudget, HorizontalPodAutoscaler, NetworkPolicy, SASL and TLS. The controller fills status with the rollout state and live stats; the Kubewarden policy defaults and validates the spec.",
        status = "MemcachedStatus",
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.replicas",
            label_selector_path = ".status.selector"
        ),
        printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas","description":"Replicas the workload should run"}"#,
        printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.ready","description":"Ready replicas / desired replicas"}"#,
        printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.state","description":"The Ready condition's reason, or Degraded: <reason>"}"#,
        printcolumn = r#"{"name":"Hit Ratio","type":"string","jsonPath":".status.hitRatio","description":"get_hits / (get_hits + get_misses) over the ready pods"}"#,
        printcolumn = r#"{"name":"Rollout","type":"string","jsonPath":".status.rollout","description":"A rollout in progress: pods updated, and with warm restarts the pod restarting in place"}"#,
        printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
        printcolumn = r#"{"name":"Image","type":"string","jsonPath":".status.image","priority":1,"description":"Memcached image of the pods"}"#,
        printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.memcachedVersion","priority":1,"description":"Version memcached reports"}"#,
        printcolumn = r#"{"name":"Connections","type":"integer","jsonPath":".status.currentConnections","priority":1,"description":"Open client connections over the ready pods"}"#
    )
)]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("x-kubernetes-validations" = [{
        "rule": REPLICAS_WITH_AUTOSCALING_RULE,
        "messageExpression": REPLICAS_WITH_AUTOSCALING_MESSAGE_EXPRESSION,
        "message": REPLICAS_WITH_AUTOSCALING,
        "fieldPath": ".replicas",
    }]))
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached pods, 0-64; default 1. Must be absent while
    /// autoscaling is enabled (the HorizontalPodAutoscaler owns it then).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *REPLICAS_BOUNDS.start(), max = *REPLICAS_BOUNDS.end())))]
    pub replicas: Option<i32>,
    /// What runs the pods: `Deployment` (default: pods get new names and
    /// addresses on every rollout; clients use the Service name) or
    /// `StatefulSet` (pods `<name>-0` ... `<name>-N` with stable DNS names
    /// `<name>-<i>.<name>.<namespace>.svc`, for clients that hash keys over a
    /// server list; the name must then be at most 52 characters). Changing it
    /// moves traffic without an outage: the new workload is Ready before the
    /// old one is deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = WORKLOADS)))]
    pub workload: Option<String>,
    /// Name of a ConfigMap the controller keeps `status.serverList` in, for
    /// clients to read their configuration from: key `memcache_servers` holds
    /// the list comma-separated (oslo.cache's `memcache_servers`), key
    /// `servers` one `host:port` per line. Owned by the Memcached; a ConfigMap
    /// of that name owned by someone else is left alone; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253)))]
    pub server_list_config_map: Option<String>,
    /// How the clients place keys on the servers: `rendezvous` (pymemcache's
    /// `HashClient`, as oslo.cache uses it) or `ketama` (libmemcached's
    /// weighted ketama); default none (keys are not copied). Keys are then
    /// handed over as pods come and go, most recently used first, for at
    /// most 60 s. With a StatefulSet (clients hash over
    /// `status.serverList`): a new pod is listed once the keys clients will
    /// ask it for are copied to it, a leaving pod's keys are copied to the
    /// pods clients will ask before it is removed; a pod deleted or evicted
    /// (or removed by the autoscaler) hands its keys over during its preStop
    /// delay (`highAvailability.gracefulShutdown`) and its replacement takes
    /// them back before it is listed again. The headless Service then
    /// publishes pods that are not ready (`publishNotReadyAddresses`): a
    /// leaving pod's name resolves until the list drops it, while its keys
    /// move. With a Deployment (clients hash over the ready pods'
    /// addresses, `<ip>:11211`): its pods carry the readiness gate
    /// `memcached.c5c3.io/keys-taken`, which the controller sets once the
    /// keys clients will ask a new pod for are copied to it; a deleted or
    /// evicted pod hands its keys over during its preStop delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = CLIENT_HASHINGS)))]
    pub client_hashing: Option<String>,
    /// Memcached container image, non-empty; default `memcached:1.6`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_IMAGE_LENGTH)))]
    pub image: Option<String>,
    /// Requests and limits of the memcached container; default none. A memory
    /// limit must be at least maxMemoryMB plus the policy's overhead (32Mi by
    /// default), and each request at most its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Memcached runtime parameters; defaulted field by field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcached: Option<MemcachedConfig>,
    /// Anti-affinity, topology spread, disruption budget and graceful
    /// shutdown; default none (no affinity, no budget, no preStop hook).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_availability: Option<HighAvailabilitySpec>,
    /// Warm restarts: memcached keeps its cache in a memory-backed volume of
    /// the pod and saves it when its container stops, so a restarted
    /// container (a liveness failure, a new image or memcached setting
    /// applied in the running pod) starts with the cache it had. On for a
    /// Memcached created with the admission policy's defaulting; a new pod
    /// still starts cold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_restart: Option<WarmRestartSpec>,
    /// Horizontal pod autoscaling of the Deployment; default disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// Prometheus exporter sidecar and ServiceMonitor; default disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,
    /// Security contexts, SASL and TLS; default the `restricted` Pod Security
    /// contexts, SASL and TLS off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security: Option<SecuritySpec>,
    /// NetworkPolicy generation; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
    /// Headless Service settings; default no extra annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
    /// Extra labels on the pods; default none. Cannot override the selector
    /// labels (`app.kubernetes.io/name`, `instance`, `managed-by`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = MAX_LABELS)))]
    pub pod_labels: Option<BTreeMap<String, String>>,
    /// Extra annotations on the pods; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = MAX_ANNOTATIONS)))]
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// Node selector of the pods; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = MAX_LABELS)))]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the pods; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_TOLERATIONS)))]
    pub tolerations: Option<Vec<Toleration>>,
    /// Pull secrets for the memcached and exporter images; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_IMAGE_PULL_SECRETS)))]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

/// Memcached command-line parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemcachedConfig {
    /// Cache size in megabytes (`-m`), 16-65536; default 64. With warm
    /// restarts at least one per slab class (39 with the default geometry).
    #[serde(rename = "maxMemoryMB", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *MAX_MEMORY_MB_BOUNDS.start(), max = *MAX_MEMORY_MB_BOUNDS.end())))]
    pub max_memory_mb: Option<i32>,
    /// Maximum simultaneous connections (`-c`), 1-65536; default 1024.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *MAX_CONNECTIONS_BOUNDS.start(), max = *MAX_CONNECTIONS_BOUNDS.end())))]
    pub max_connections: Option<i32>,
    /// Worker threads (`-t`), 1-128; default 4.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *THREADS_BOUNDS.start(), max = *THREADS_BOUNDS.end())))]
    pub threads: Option<i32>,
    /// Maximum item size (`-I`): a multiple of 512k such as `512k`, `1m` or
    /// `1536k`, at most 1024m and at most half of maxMemoryMB; default `1m`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = ITEM_SIZE_PATTERN)))]
    pub max_item_size: Option<String>,
    /// Log verbosity, 0-2: 0 quiet, 1 `-v`, 2 `-vv`; default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *VERBOSITY_BOUNDS.start(), max = *VERBOSITY_BOUNDS.end())))]
    pub verbosity: Option<i32>,
    /// Extra raw arguments appended after the managed ones; default none.
    /// Flags the operator manages (`-m`, `-c`, `-t`, `-I`, ...) and flags that
    /// stop memcached from serving are refused, and so are options the
    /// memcached release of `image` lacks (the release its tag names, such as
    /// `1.6.18-alpine`; for a tag naming none, such as `1.6`, the newest 1.6
    /// the policy knows, with a warning for options older 1.6 releases lack).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = MAX_EXTRA_ARGS), inner(length(max = MAX_EXTRA_ARG_LENGTH)))
    )]
    pub extra_args: Option<Vec<String>>,
}

/// High-availability settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HighAvailabilitySpec {
    /// Pod anti-affinity across nodes: `soft` (preferred) or `hard`
    /// (required); default `soft` when highAvailability is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ANTI_AFFINITY_PRESETS)))]
    pub anti_affinity_preset: Option<String>,
    /// Passed through to the pod spec; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_TOPOLOGY_SPREAD_CONSTRAINTS)))]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// PodDisruptionBudget settings; default no budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PdbSpec>,
    /// preStop delay and termination grace period; default disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GracefulShutdownSpec>,
}

/// PodDisruptionBudget settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    /// Create the PodDisruptionBudget; default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Minimum available pods, an integer >= 0 below replicas or a percentage
    /// 0%-100%; no default: exactly one of minAvailable and maxUnavailable
    /// when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// Maximum unavailable pods, an integer >= 0 or a percentage 0%-100%; no
    /// default: exactly one of minAvailable and maxUnavailable when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// Graceful shutdown settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GracefulShutdownSpec {
    /// Add the preStop sleep and the grace period; default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Seconds the preStop hook sleeps, 1-300; default 10.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *PRE_STOP_DELAY_SECONDS_BOUNDS.start(), max = *PRE_STOP_DELAY_SECONDS_BOUNDS.end())))]
    pub pre_stop_delay_seconds: Option<i32>,
    /// Pod termination grace period in seconds, 1-600 and longer than the
    /// preStop delay; default 30.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = *TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS.start(), max = *TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS.end())))]
    pub termination_grace_period_seconds: Option<i32>,
}

/// Warm restart settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WarmRestartSpec {
    /// Run memcached with its memory file (`-e`) on a memory-backed
    /// `emptyDir` and save the cache when the container stops. Defaulted to
    /// true when the Memcached is created (false when maxMemoryMB is below the
    /// one MB per slab class the memory file preallocates: 39 with the
    /// default geometry), and kept as stored on an update that leaves it out
    /// (absent, as on a Memcached created before this default, means false).
    /// The image needs `sh`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Horizontal pod autoscaling settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingSpec {
    /// Create a HorizontalPodAutoscaler; default false. `spec.replicas` must
    /// then be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Lower bound of the replica count, >= 1 and <= maxReplicas; default 1 (the HPA's).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = AUTOSCALING_REPLICAS_BOUNDS.start)))]
    pub min_replicas: Option<i32>,
    /// Upper bound of the replica count, >= 1; no default, required when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = AUTOSCALING_REPLICAS_BOUNDS.start)))]
    pub max_replicas: Option<i32>,
    /// autoscaling/v2 metrics; default 80% average CPU utilization. Utilization
    /// metrics need the matching resource requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_METRICS)))]
    pub metrics: Option<Vec<MetricSpec>>,
    /// autoscaling/v2 scaling behavior; default a 300 s scale-down
    /// stabilization window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// Monitoring settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    /// Add the exporter sidecar (and a ServiceMonitor when its CRD exists);
    /// default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Exporter sidecar image, non-empty; default `prom/memcached-exporter:v0.15.4`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_IMAGE_LENGTH)))]
    pub exporter_image: Option<String>,
    /// Requests and limits of the exporter sidecar, each request at most its
    /// limit; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exporter_resources: Option<ResourceRequirements>,
    /// ServiceMonitor settings; default interval 30s, timeout 10s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSpec>,
}

/// ServiceMonitor settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// Extra labels on the ServiceMonitor, e.g. `release: kube-prometheus-stack`
    /// (the label kube-prometheus-stack's Prometheus selects ServiceMonitors by),
    /// added to the labels the controller's installation sets for every
    /// Memcached (the chart's `prometheusLabels`) and winning over them; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = MAX_LABELS)))]
    pub additional_labels: Option<BTreeMap<String, String>>,
    /// Prometheus scrape interval, a Prometheus duration; default `30s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Prometheus scrape timeout, a Prometheus duration at most the interval;
    /// default `10s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}

/// Security settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SecuritySpec {
    /// Pod-level security context; default `restricted`: non-root, UID/GID/fsGroup
    /// 11211, RuntimeDefault seccomp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Container-level security context; default `restricted`: no privilege
    /// escalation, read-only root filesystem, all capabilities dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    /// Client authentication; default off. Despite the name, not SASL: memcached's
    /// ASCII-protocol authentication (`-Y <file>`, memcached 1.5.15+), under which memcached
    /// serves only the text protocol. A client authenticates each connection by first sending
    /// `set <any key> 0 0 <bytes>` with `<user> <password>` as the value. Clients that speak
    /// binary-protocol SASL (libmemcached and pylibmc, spymemcached, Bitnami's `auth.*`
    /// settings) cannot connect. Clients with that text login built in are few (Java's folsom
    /// has one); pymemcache and gomemcache have no login option, so the application must send
    /// that `set` on every new connection itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSpec>,
    /// TLS encryption; default off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// The same setting as `spec.networkPolicy`, where the Go operator
    /// (C5C3/memcached-operator) has it: honoured when `spec.networkPolicy`
    /// is absent, and when both are set they must be equal (new manifests
    /// should use `spec.networkPolicy`); default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
}

/// Client authentication settings: memcached's ASCII-protocol authentication (`-Y`), not SASL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SaslSpec {
    /// Require clients to authenticate (memcached `-Y`, text protocol only); default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Secret holding the credentials: `user:password` lines, the last one
    /// newline-terminated, under the first present of the keys `auth`,
    /// `password-file` (the Go operator's) and `memcached-sasl-db`; no
    /// default, required when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<LocalObjectReference>,
}

/// TLS settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Serve TLS; default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Secret with `tls.crt`, `tls.key` and optionally `ca.crt`; no default,
    /// required when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate_secret_ref: Option<LocalObjectReference>,
    /// Require and verify client certificates against `ca.crt`; default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_client_cert: Option<bool>,
}

/// NetworkPolicy settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    /// Create the NetworkPolicy; default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Peers allowed to reach memcached's port 11211, besides the operator's own pods (which
    /// read `stats`); default absent, which allows every source on that port (the policy
    /// warns). They do not reach the exporter's port 9150: with monitoring on, only the
    /// namespaces of the controller's `--metrics-namespaces` (`monitoring` unless set) do.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_ALLOWED_SOURCES)))]
    pub allowed_sources: Option<Vec<NetworkPolicyPeer>>,
}

/// Headless Service settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Extra annotations on the Service; default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxProperties" = MAX_ANNOTATIONS)))]
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
    /// Ready over desired replicas, `"2/3"` (the Ready column of `kubectl get`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// The Ready condition's reason, or `Degraded: <reason>` when something
    /// other than pods still starting degrades the instance (the Status column).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Label selector of the pods as a string (the scale subresource's
    /// `labelSelectorPath`, for `kubectl scale` and HorizontalPodAutoscalers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The memcached image of the pods' template: the spec's, or the
    /// default when it names none (the Image column, also without the policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A rollout in progress (the Rollout column): `2/3 updated`, `1/3
    /// updated, <pod> warming` while a StatefulSet rollout waits for its new
    /// pod to warm, or for an image applied in place `in place 1/3, <pod>
    /// restarting warm`; absent when none runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
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
    /// Where clients connect. Deployment: `["<name>.<namespace>:11211"]`
    /// while Ready. StatefulSet: `<name>-<i>.<name>.<namespace>.svc:11211` for
    /// every desired ordinal, in ordinal order, whether or not the pod is
    /// ready, so clients are configured once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_list: Option<Vec<String>>,
    /// Available, Progressing, Degraded and Ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl MemcachedSpec {
    /// True when `spec.workload` is `StatefulSet`.
    pub fn stateful_set(&self) -> bool {
        self.workload.as_deref() == Some(STATEFUL_SET)
    }

    /// True when keys are handed over as pods come and go: the clients'
    /// hashing (`spec.clientHashing`) is known.
    pub fn hands_over_keys(&self) -> bool {
        self.client_hashing.is_some()
    }

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

    /// The NetworkPolicy settings in effect: `spec.networkPolicy`, else
    /// `spec.security.networkPolicy` (the Go operator's place of the same
    /// setting; validation refuses both set and different).
    pub fn effective_network_policy(&self) -> Option<&NetworkPolicySpec> {
        self.network_policy.as_ref().or_else(|| {
            self.security
                .as_ref()
                .and_then(|s| s.network_policy.as_ref())
        })
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

    /// True when `spec.warmRestart.enabled` is true.
    pub fn warm_restart_enabled(&self) -> bool {
        self.warm_restart
            .as_ref()
            .and_then(|w| w.enabled)
            .unwrap_or(false)
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
