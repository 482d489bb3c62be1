//! The fields the controller copies into the Deployment's pod template and
//! its other objects, checked as the API server checks those objects.

use super::autoscaling::{validate_behavior, validate_metrics};
use super::image::validate_image;
use super::metadata::{validate_annotations, validate_labels};
use super::network::validate_peers;
use super::pod_annotations::{PodShape, validate_pod_annotations};
use super::resources::validate_resource_requirements;
use super::scheduling::{validate_tolerations, validate_topology_spread};
use super::security::validate_security_contexts;
use crate::field::{ErrorList, FieldError, Path};
use crate::types::MemcachedSpec;

/// Pod labels the operator sets itself: the Deployment's selector (name,
/// instance, managed-by) and the version it reads from the image tag.
pub const OPERATOR_LABELS: [&str; 4] = [
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
];

/// The memcached container's name in the pod template.
pub const MEMCACHED_CONTAINER: &str = "memcached";
/// The exporter sidecar's name (with monitoring on).
pub const EXPORTER_CONTAINER: &str = "exporter";

/// Everything of `spec` that lands in the pod template, the Service, the
/// ServiceMonitor, the NetworkPolicy and the HorizontalPodAutoscaler.
pub fn validate_objects(spec: &MemcachedSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(labels) = &spec.pod_labels {
        let labels_path = path.child("podLabels");
        errors.extend(validate_labels(labels, &labels_path));
        for key in OPERATOR_LABELS.iter().filter(|k| labels.contains_key(**k)) {
            errors.push(FieldError::forbidden(
                labels_path.key(key),
                "the operator sets this label on the pods (the Deployment's selector matches name, instance \
                 and managed-by; version comes from the image tag); remove it from podLabels",
            ));
        }
    }
    if let Some(annotations) = &spec.pod_annotations {
        let annotations_path = path.child("podAnnotations");
        errors.extend(validate_annotations(annotations, &annotations_path));
        let security = spec.security.as_ref();
        let containers: &[&str] = if spec.monitoring_enabled() {
            &[MEMCACHED_CONTAINER, EXPORTER_CONTAINER]
        } else {
            &[MEMCACHED_CONTAINER]
        };
        let shape = PodShape {
            pod: security.and_then(|s| s.pod_security_context.as_ref()),
            container: security.and_then(|s| s.container_security_context.as_ref()),
            containers,
            pod_path: path.child("security").child("podSecurityContext"),
            container_path: path.child("security").child("containerSecurityContext"),
        };
        errors.extend(validate_pod_annotations(
            annotations,
            &shape,
            &annotations_path,
        ));
    }
    if let Some(selector) = &spec.node_selector {
        errors.extend(validate_labels(selector, &path.child("nodeSelector")));
    }
    if let Some(tolerations) = &spec.tolerations {
        errors.extend(validate_tolerations(
            tolerations,
            &path.child("tolerations"),
        ));
    }
    if let Some(constraints) = spec
        .high_availability
        .as_ref()
        .and_then(|h| h.topology_spread_constraints.as_deref())
    {
        errors.extend(validate_topology_spread(
            constraints,
            &path
                .child("highAvailability")
                .child("topologySpreadConstraints"),
        ));
    }
    if let Some(image) = &spec.image {
        errors.extend(validate_image(image, &path.child("image")));
    }
    if let Some(resources) = &spec.resources {
        errors.extend(validate_resource_requirements(
            resources,
            &path.child("resources"),
        ));
    }
    if let Some(monitoring) = &spec.monitoring {
        let path = path.child("monitoring");
        if let Some(image) = &monitoring.exporter_image {
            errors.extend(validate_image(image, &path.child("exporterImage")));
        }
        if let Some(resources) = &monitoring.exporter_resources {
            errors.extend(validate_resource_requirements(
                resources,
                &path.child("exporterResources"),
            ));
        }
        if let Some(labels) = monitoring
            .service_monitor
            .as_ref()
            .and_then(|s| s.additional_labels.as_ref())
        {
            errors.extend(validate_labels(
                labels,
                &path.child("serviceMonitor").child("additionalLabels"),
            ));
        }
    }
    if let Some(security) = &spec.security {
        errors.extend(validate_security_contexts(
            security.pod_security_context.as_ref(),
            security.container_security_context.as_ref(),
            &path.child("security"),
        ));
    }
    if let Some(autoscaling) = spec
        .autoscaling
        .as_ref()
        .filter(|_| spec.autoscaling_enabled())
    {
        let path = path.child("autoscaling");
        if let Some(metrics) = &autoscaling.metrics {
            errors.extend(validate_metrics(metrics, &path.child("metrics")));
        }
        if let Some(behavior) = &autoscaling.behavior {
            errors.extend(validate_behavior(behavior, &path.child("behavior")));
        }
    }
    if let Some(annotations) = spec.service.as_ref().and_then(|s| s.annotations.as_ref()) {
        errors.extend(validate_annotations(
            annotations,
            &path.child("service").child("annotations"),
        ));
    }
    if let Some(peers) = spec
        .network_policy
        .as_ref()
        .and_then(|n| n.allowed_sources.as_deref())
    {
        errors.extend(validate_peers(
            peers,
            &path.child("networkPolicy").child("allowedSources"),
        ));
    }
    errors
}
