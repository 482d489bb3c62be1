//! `spec.monitoring`: the exporter sidecar and the ServiceMonitor.

use super::resources::validate_resources;
use crate::duration;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::image::validate_image;
use crate::kubernetes::metadata::validate_labels;
use crate::types::{MonitoringSpec, ServiceMonitorSpec};

/// The exporter's image and resources, and the ServiceMonitor's labels and
/// scrape timing.
pub fn validate_monitoring(monitoring: &MonitoringSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(image) = &monitoring.exporter_image {
        errors.extend(validate_image(image, &path.child("exporterImage")));
    }
    if let Some(resources) = &monitoring.exporter_resources {
        errors.extend(validate_resources(
            resources,
            None,
            &path.child("exporterResources"),
        ));
    }
    if let Some(sm) = &monitoring.service_monitor {
        errors.extend(validate_service_monitor(sm, &path.child("serviceMonitor")));
    }
    errors
}

/// Labels the API server accepts, valid Prometheus durations, and a timeout
/// no longer than the interval.
fn validate_service_monitor(sm: &ServiceMonitorSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut parse = |field: &str, value: Option<&str>| {
        let value = value?;
        let millis = duration::parse_millis(value);
        if millis.is_none() {
            errors.push(FieldError::invalid(
                path.child(field),
                value,
                "must be a Prometheus duration such as 30s, 1m30s or 500ms",
            ));
        }
        millis
    };
    let interval = parse("interval", sm.interval.as_deref());
    let timeout = parse("scrapeTimeout", sm.scrape_timeout.as_deref());
    if let (Some(interval), Some(timeout)) = (interval, timeout)
        && timeout > interval
    {
        let interval_text = sm.interval.as_deref().unwrap_or_default();
        errors.push(FieldError::invalid(
            path.child("scrapeTimeout"),
            sm.scrape_timeout.as_deref().unwrap_or_default(),
            format!("scrapeTimeout must not exceed interval ({interval_text})"),
        ));
    }
    let mut errors: ErrorList = errors.into_iter().map(|e| e.at(Stage::Runtime)).collect();
    if let Some(labels) = &sm.additional_labels {
        errors.extend(validate_labels(labels, &path.child("additionalLabels")));
    }
    errors
}
