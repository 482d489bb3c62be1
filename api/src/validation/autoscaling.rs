//! `spec.autoscaling`: what an enabled autoscaler needs of the rest of the
//! spec, the schema's bounds, and `metrics` and `behavior` as the API server
//! validates them in the HorizontalPodAutoscaler the controller builds.

use std::collections::BTreeSet;

use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::core::v1::ResourceRequirements;

use super::schema::within;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::autoscaling::{validate_behavior, validate_metrics};
use crate::kubernetes::resources::has_request;
use crate::types::{AUTOSCALING_REPLICAS_BOUNDS, AutoscalingSpec, REPLICAS_WITH_AUTOSCALING};

/// What the autoscaler scales: the rest of the spec it depends on.
pub struct Scaled<'a> {
    /// `spec.replicas`.
    pub replicas: Option<i32>,
    /// `spec.resources`.
    pub resources: Option<&'a ResourceRequirements>,
    /// The exporter's `resources` when monitoring adds the sidecar.
    pub exporter: Option<Option<&'a ResourceRequirements>>,
    /// `spec`.
    pub spec_path: &'a Path,
}

/// An enabled autoscaler owns the replica count, scales to a maxReplicas of
/// at least minReplicas and finds a request on every container for each
/// utilization metric (REQ-005/006/007); the schema's bounds; the metrics and
/// behavior of an enabled one.
pub fn validate_autoscaling(
    autoscaling: &AutoscalingSpec,
    scaled: &Scaled<'_>,
    path: &Path,
) -> ErrorList {
    let enabled = autoscaling.enabled == Some(true);
    let mut errors = ErrorList::new();
    if enabled {
        errors.extend(scaling_rules(autoscaling, scaled, path));
    }
    for (field, value) in [
        ("minReplicas", autoscaling.min_replicas),
        ("maxReplicas", autoscaling.max_replicas),
    ] {
        if let Some(value) = value {
            errors.extend(within(
                value,
                &AUTOSCALING_REPLICAS_BOUNDS,
                path.child(field),
            ));
        }
    }
    if enabled {
        if let Some(metrics) = &autoscaling.metrics {
            errors.extend(validate_metrics(metrics, &path.child("metrics")));
        }
        if let Some(behavior) = &autoscaling.behavior {
            errors.extend(validate_behavior(behavior, &path.child("behavior")));
        }
    }
    errors
}

fn scaling_rules(autoscaling: &AutoscalingSpec, scaled: &Scaled<'_>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(replicas) = scaled.replicas {
        errors.push(FieldError::invalid(
            scaled.spec_path.child("replicas"),
            replicas,
            REPLICAS_WITH_AUTOSCALING,
        ));
    }
    if let (Some(min), Some(max)) = (autoscaling.min_replicas, autoscaling.max_replicas)
        && min > max
    {
        errors.push(FieldError::invalid(
            path.child("minReplicas"),
            min,
            format!("minReplicas ({min}) must not exceed maxReplicas ({max})"),
        ));
    }
    // The HPA computes utilization over every container of the pod.
    for resource in utilization_resources(autoscaling.metrics.as_deref().unwrap_or_default()) {
        let label = if resource == "cpu" { "CPU" } else { resource };
        if !has_request(scaled.resources, resource) {
            errors.push(FieldError::required(
                scaled.spec_path.child("resources").child("requests").child(resource),
                format!("resources.requests.{resource} is required when using {label} utilization metrics"),
            ));
        }
        if let Some(exporter) = scaled.exporter
            && !has_request(exporter, resource)
        {
            let requests = scaled
                .spec_path
                .child("monitoring")
                .child("exporterResources")
                .child("requests");
            errors.push(FieldError::required(
                requests.child(resource),
                format!(
                    "monitoring.exporterResources.requests.{resource} is required when using {label} utilization \
                     metrics with monitoring enabled: the HPA needs a request on every container"
                ),
            ));
        }
    }
    if autoscaling.max_replicas.is_none() {
        errors.push(FieldError::required(
            path.child("maxReplicas"),
            "maxReplicas is required when autoscaling is enabled",
        ));
    }
    errors.into_iter().map(|e| e.at(Stage::Rule)).collect()
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
