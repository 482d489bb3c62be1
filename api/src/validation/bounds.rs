//! The bounds the CRD schema carries, worded as the API server words them,
//! so `kwctl run` catches them without an API server.

use super::workload::WORKLOADS;
use crate::field::{BadValue, ErrorList, FieldError, Path};
use crate::types::MemcachedSpec;

/// Values `spec.highAvailability.antiAffinityPreset` may take.
pub const ANTI_AFFINITY_PRESETS: [&str; 2] = ["soft", "hard"];

pub(super) fn validate(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let spec_path = Path::new("spec");
    range(
        errors,
        spec_path.child("replicas"),
        spec.replicas,
        Some(0),
        Some(64),
    );
    one_of(
        errors,
        spec_path.child("workload"),
        spec.workload.as_deref(),
        &WORKLOADS,
    );

    if let Some(config) = &spec.memcached {
        let path = spec_path.child("memcached");
        range(
            errors,
            path.child("maxMemoryMB"),
            config.max_memory_mb,
            Some(16),
            Some(65536),
        );
        range(
            errors,
            path.child("maxConnections"),
            config.max_connections,
            Some(1),
            Some(65536),
        );
        range(
            errors,
            path.child("threads"),
            config.threads,
            Some(1),
            Some(128),
        );
        if let Some(size) = config.max_item_size.as_deref().filter(|s| !is_item_size(s)) {
            let path = path.child("maxItemSize");
            let detail = format!("{path} in body should match '^[0-9]+(k|m)$'");
            errors.push(FieldError::invalid(path, size, detail));
        }
        range(
            errors,
            path.child("verbosity"),
            config.verbosity,
            Some(0),
            Some(2),
        );
    }

    if let Some(ha) = &spec.high_availability {
        let path = spec_path.child("highAvailability");
        one_of(
            errors,
            path.child("antiAffinityPreset"),
            ha.anti_affinity_preset.as_deref(),
            &ANTI_AFFINITY_PRESETS,
        );
        if let Some(gs) = &ha.graceful_shutdown {
            let path = path.child("gracefulShutdown");
            range(
                errors,
                path.child("preStopDelaySeconds"),
                gs.pre_stop_delay_seconds,
                Some(1),
                Some(300),
            );
            let grace = gs.termination_grace_period_seconds;
            range(
                errors,
                path.child("terminationGracePeriodSeconds"),
                grace,
                Some(1),
                Some(600),
            );
        }
    }

    if let Some(autoscaling) = &spec.autoscaling {
        let path = spec_path.child("autoscaling");
        range(
            errors,
            path.child("minReplicas"),
            autoscaling.min_replicas,
            Some(1),
            None,
        );
        range(
            errors,
            path.child("maxReplicas"),
            autoscaling.max_replicas,
            Some(1),
            None,
        );
    }
}

/// `^[0-9]+(k|m)$`
pub fn is_item_size(s: &str) -> bool {
    s.strip_suffix(['k', 'm'])
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// An enum of the schema: `value`, when set, is one of `supported`.
fn one_of(errors: &mut ErrorList, path: Path, value: Option<&str>, supported: &[&str]) {
    if let Some(value) = value.filter(|v| !supported.contains(v)) {
        errors.push(FieldError::not_supported(path, value, supported));
    }
}

fn range(
    errors: &mut ErrorList,
    path: Path,
    value: Option<i32>,
    min: Option<i32>,
    max: Option<i32>,
) {
    let Some(value) = value else { return };
    let detail = if min.is_some_and(|min| value < min) {
        format!(
            "{path} in body should be greater than or equal to {}",
            min.unwrap_or_default()
        )
    } else if max.is_some_and(|max| value > max) {
        format!(
            "{path} in body should be less than or equal to {}",
            max.unwrap_or_default()
        )
    } else {
        return;
    };
    errors.push(FieldError::invalid(path, BadValue::from(value), detail));
}
