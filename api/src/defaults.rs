//! Defaulting: fills what is absent, never changes what the user set. The
//! defaults of memcached's parameters are [`crate::memcached_options`]'.

use std::ops::Deref;

use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscalerBehavior, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext,
};

use serde::Serialize;

use crate::memcached_options::SPEC_FIELDS;
use crate::types::{MemcachedConfig, MemcachedSpec};

/// Memcached image when none is given.
pub const IMAGE: &str = "memcached:1.6";
/// Exporter sidecar image when none is given.
pub const EXPORTER_IMAGE: &str = "prom/memcached-exporter:v0.15.4";
/// Replicas when neither replicas nor autoscaling is given.
pub const REPLICAS: i32 = 1;
/// Anti-affinity preset default.
pub const ANTI_AFFINITY_PRESET: &str = "soft";
/// preStop sleep default.
pub const PRE_STOP_DELAY_SECONDS: i32 = 10;
/// Termination grace period default.
pub const TERMINATION_GRACE_PERIOD_SECONDS: i32 = 30;
/// ServiceMonitor scrape interval default.
pub const SCRAPE_INTERVAL: &str = "30s";
/// ServiceMonitor scrape timeout default.
pub const SCRAPE_TIMEOUT: &str = "10s";
/// HPA target CPU utilization default (percent).
pub const CPU_UTILIZATION: i32 = 80;
/// HPA scale-down stabilization window default.
pub const SCALE_DOWN_STABILIZATION_SECONDS: i32 = 300;
/// UID and GID memcached runs as.
pub const MEMCACHED_UID: i64 = 11211;

/// A spec with every default filled in. Only [`apply_defaults`] makes one,
/// so what takes it (validation, the controller's builders) cannot miss or
/// repeat defaulting.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Defaulted(MemcachedSpec);

impl Deref for Defaulted {
    type Target = MemcachedSpec;

    fn deref(&self) -> &MemcachedSpec {
        &self.0
    }
}

/// The values [`apply_defaults`] always sets, read without defaulting again.
impl Defaulted {
    /// The spec itself.
    pub fn into_inner(self) -> MemcachedSpec {
        self.0
    }

    /// A defaulted spec changed only by adding values defaulting leaves
    /// open (the completion for a Pod Security level).
    pub(crate) fn completed(spec: MemcachedSpec) -> Defaulted {
        Defaulted(spec)
    }

    /// `spec.image`.
    pub fn image(&self) -> &str {
        self.image.as_deref().unwrap_or_default()
    }

    fn config(&self) -> Option<&MemcachedConfig> {
        self.memcached.as_ref()
    }

    /// `spec.memcached.maxMemoryMB`.
    pub fn max_memory_mb(&self) -> i32 {
        self.config()
            .and_then(|c| c.max_memory_mb)
            .unwrap_or_default()
    }

    /// `spec.memcached.maxConnections`.
    pub fn max_connections(&self) -> i32 {
        self.config()
            .and_then(|c| c.max_connections)
            .unwrap_or_default()
    }

    /// `spec.memcached.threads`.
    pub fn threads(&self) -> i32 {
        self.config().and_then(|c| c.threads).unwrap_or_default()
    }

    /// `spec.memcached.maxItemSize`.
    pub fn max_item_size(&self) -> &str {
        self.config()
            .and_then(|c| c.max_item_size.as_deref())
            .unwrap_or_default()
    }

    /// `spec.memcached.verbosity`.
    pub fn verbosity(&self) -> i32 {
        self.config().and_then(|c| c.verbosity).unwrap_or_default()
    }

    /// `spec.monitoring.exporterImage` (empty without `spec.monitoring`).
    pub fn exporter_image(&self) -> &str {
        let monitoring = self.monitoring.as_ref();
        monitoring
            .and_then(|m| m.exporter_image.as_deref())
            .unwrap_or_default()
    }

    /// The preStop sleep and the grace period, when graceful shutdown is enabled.
    pub fn graceful_shutdown_seconds(&self) -> Option<(i32, i32)> {
        let gs = self.enabled_graceful_shutdown()?;
        Some((
            gs.pre_stop_delay_seconds.unwrap_or_default(),
            gs.termination_grace_period_seconds.unwrap_or_default(),
        ))
    }
}

/// Fill every absent field that has a default. Pure and idempotent. The
/// security contexts are defaulted whole when absent; completing the ones the
/// user gave for a Pod Security level is [`apply_defaults_at`]'s.
pub fn apply_defaults(mut spec: MemcachedSpec) -> Defaulted {
    fill(&mut spec);
    Defaulted(spec)
}

fn fill(spec: &mut MemcachedSpec) {
    if spec.replicas.is_none() && !spec.autoscaling_enabled() {
        spec.replicas = Some(REPLICAS);
    }
    spec.workload
        .get_or_insert_with(|| crate::types::DEPLOYMENT.to_string());
    spec.image.get_or_insert_with(|| IMAGE.to_string());

    let config = spec.memcached.get_or_insert_default();
    for field in SPEC_FIELDS.iter().filter_map(|o| o.field.as_ref()) {
        field.fill(config);
    }

    if let Some(monitoring) = &mut spec.monitoring {
        monitoring
            .exporter_image
            .get_or_insert_with(|| EXPORTER_IMAGE.to_string());
        if let Some(sm) = &mut monitoring.service_monitor {
            sm.interval
                .get_or_insert_with(|| SCRAPE_INTERVAL.to_string());
            sm.scrape_timeout
                .get_or_insert_with(|| SCRAPE_TIMEOUT.to_string());
        }
    }

    if let Some(ha) = &mut spec.high_availability {
        ha.anti_affinity_preset
            .get_or_insert_with(|| ANTI_AFFINITY_PRESET.to_string());
        if let Some(gs) = &mut ha.graceful_shutdown {
            gs.pre_stop_delay_seconds
                .get_or_insert(PRE_STOP_DELAY_SECONDS);
            gs.termination_grace_period_seconds
                .get_or_insert(TERMINATION_GRACE_PERIOD_SECONDS);
        }
    }

    if let Some(autoscaling) = spec
        .autoscaling
        .as_mut()
        .filter(|a| a.enabled == Some(true))
    {
        if autoscaling.metrics.as_ref().is_none_or(Vec::is_empty) {
            autoscaling.metrics = Some(vec![cpu_utilization_metric()]);
        }
        autoscaling
            .behavior
            .get_or_insert_with(|| HorizontalPodAutoscalerBehavior {
                scale_down: Some(HPAScalingRules {
                    stabilization_window_seconds: Some(SCALE_DOWN_STABILIZATION_SECONDS),
                    ..Default::default()
                }),
                ..Default::default()
            });
    }

    let security = spec.security.get_or_insert_default();
    security
        .pod_security_context
        .get_or_insert_with(restricted_pod_security_context);
    security
        .container_security_context
        .get_or_insert_with(restricted_container_security_context);
}

fn cpu_utilization_metric() -> MetricSpec {
    MetricSpec {
        type_: "Resource".to_string(),
        resource: Some(ResourceMetricSource {
            name: "cpu".to_string(),
            target: MetricTarget {
                type_: "Utilization".to_string(),
                average_utilization: Some(CPU_UTILIZATION),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// Pod security context that passes the `restricted` Pod Security profile.
pub fn restricted_pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(MEMCACHED_UID),
        run_as_group: Some(MEMCACHED_UID),
        fs_group: Some(MEMCACHED_UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Container security context that passes the `restricted` Pod Security profile.
pub fn restricted_container_security_context() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
