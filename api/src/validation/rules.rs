//! The rules of the validation seeds, with their paths and messages.

use std::collections::BTreeSet;

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::Options;
use super::resources::{has_request, parse_quantity};
use crate::defaults;
use crate::field::{ErrorList, FieldError, Path};
use crate::quantity::Quantity;
use crate::types::MemcachedSpec;

/// REQ-001: the memory limit holds the cache plus the overhead.
pub(super) fn memory_limit(spec: &MemcachedSpec, options: &Options, errors: &mut ErrorList) {
    let Some(limit_text) = spec
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
    else {
        return;
    };
    // An unparsable limit is reported by the quantity checks.
    let Some(limit) = parse_quantity(&limit_text.0) else {
        return;
    };
    let mb = max_memory_mb(spec);
    let required = Quantity::mebi(mb.into()).saturating_add(options.memory_overhead);
    if limit < required {
        errors.push(FieldError::invalid(
            Path::new("spec.resources.limits.memory"),
            limit_text.0.as_str(),
            format!(
                "memory limit must be at least {required} (maxMemoryMB={mb}Mi + {} overhead)",
                options.memory_overhead_text
            ),
        ));
    }
}

/// REQ-002/003: a PodDisruptionBudget that can be satisfied.
pub(super) fn pod_disruption_budget(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let Some(pdb) = spec.enabled_pdb() else {
        return;
    };
    let path = Path::new("spec.highAvailability.podDisruptionBudget");
    match (&pdb.min_available, &pdb.max_unavailable) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid(
            path.clone(),
            "",
            "minAvailable and maxUnavailable are mutually exclusive, specify only one",
        )),
        (None, None) => errors.push(FieldError::required(
            path.clone(),
            "one of minAvailable or maxUnavailable must be set when PDB is enabled",
        )),
        _ => {}
    }
    if let (Some(IntOrString::Int(min)), Some(replicas)) = (&pdb.min_available, spec.replicas)
        && *min >= replicas
    {
        errors.push(FieldError::invalid(
            path.child("minAvailable"),
            *min,
            format!("minAvailable ({min}) must be less than replicas ({replicas})"),
        ));
    }
}

/// REQ-006: the grace period outlasts the preStop sleep.
pub(super) fn graceful_shutdown(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let Some(gs) = spec.enabled_graceful_shutdown() else {
        return;
    };
    let delay = gs
        .pre_stop_delay_seconds
        .unwrap_or(defaults::PRE_STOP_DELAY_SECONDS);
    let grace = gs
        .termination_grace_period_seconds
        .unwrap_or(defaults::TERMINATION_GRACE_PERIOD_SECONDS);
    if grace <= delay {
        errors.push(FieldError::invalid(
            Path::new("spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds"),
            grace,
            format!(
                "terminationGracePeriodSeconds ({grace}) must exceed preStopDelaySeconds ({delay})"
            ),
        ));
    }
}

/// REQ-004/005: enabled SASL and TLS name their Secrets.
pub(super) fn secret_refs(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let Some(security) = &spec.security else {
        return;
    };
    let sasl_ref = security
        .sasl
        .as_ref()
        .and_then(|s| s.credentials_secret_ref.as_ref());
    if spec.sasl_enabled() && sasl_ref.is_none_or(|r| r.name.is_empty()) {
        errors.push(FieldError::required(
            Path::new("spec.security.sasl.credentialsSecretRef.name"),
            "credentialsSecretRef.name is required when SASL is enabled",
        ));
    }
    let tls_ref = security
        .tls
        .as_ref()
        .and_then(|t| t.certificate_secret_ref.as_ref());
    if spec.tls_enabled() && tls_ref.is_none_or(|r| r.name.is_empty()) {
        errors.push(FieldError::required(
            Path::new("spec.security.tls.certificateSecretRef.name"),
            "certificateSecretRef.name is required when TLS is enabled",
        ));
    }
}

/// REQ-005/006/007 of autoscaling, and a maxReplicas to scale to.
pub(super) fn autoscaling(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let Some(autoscaling) = spec
        .autoscaling
        .as_ref()
        .filter(|_| spec.autoscaling_enabled())
    else {
        return;
    };
    if let Some(replicas) = spec.replicas {
        errors.push(FieldError::invalid(
            Path::new("spec.replicas"),
            replicas,
            "spec.replicas and spec.autoscaling.enabled are mutually exclusive",
        ));
    }
    if let (Some(min), Some(max)) = (autoscaling.min_replicas, autoscaling.max_replicas)
        && min > max
    {
        errors.push(FieldError::invalid(
            Path::new("spec.autoscaling.minReplicas"),
            min,
            format!("minReplicas ({min}) must not exceed maxReplicas ({max})"),
        ));
    }
    // The HPA computes utilization over every container of the pod.
    for resource in utilization_resources(autoscaling.metrics.as_deref().unwrap_or_default()) {
        let label = if resource == "cpu" { "CPU" } else { resource };
        if !has_request(spec.resources.as_ref(), resource) {
            errors.push(FieldError::required(
                Path::new("spec.resources.requests").child(resource),
                format!("resources.requests.{resource} is required when using {label} utilization metrics"),
            ));
        }
        let exporter = spec
            .monitoring
            .as_ref()
            .and_then(|m| m.exporter_resources.as_ref());
        if spec.monitoring_enabled() && !has_request(exporter, resource) {
            errors.push(FieldError::required(
                Path::new("spec.monitoring.exporterResources.requests").child(resource),
                format!(
                    "monitoring.exporterResources.requests.{resource} is required when using {label} utilization \
                     metrics with monitoring enabled: the HPA needs a request on every container"
                ),
            ));
        }
    }
    if autoscaling.max_replicas.is_none() {
        errors.push(FieldError::required(
            Path::new("spec.autoscaling.maxReplicas"),
            "maxReplicas is required when autoscaling is enabled",
        ));
    }
}

/// Resource names targeted by `Utilization` Resource metrics, once each.
fn utilization_resources(metrics: &[MetricSpec]) -> BTreeSet<&str> {
    metrics
        .iter()
        .filter_map(|m| m.resource.as_ref())
        .filter(|r| r.target.type_ == "Utilization")
        .map(|r| r.name.as_str())
        .collect()
}

fn max_memory_mb(spec: &MemcachedSpec) -> i32 {
    spec.memcached
        .as_ref()
        .and_then(|c| c.max_memory_mb)
        .unwrap_or(defaults::MAX_MEMORY_MB)
}
