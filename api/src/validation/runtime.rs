//! What memcached, the API server or Prometheus would refuse only later, when
//! the controller creates the objects: caught at admission instead.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::bounds::is_item_size;
use super::resources;
use crate::duration;
use crate::extra_args;
use crate::field::{ErrorList, FieldError, Path};
use crate::types::{MemcachedConfig, MemcachedSpec, ServiceMonitorSpec};

/// memcached 1.6's default `slab_chunk_max` (half its 1m slab page): `-I`
/// must be a multiple of it (`-I 700k` exits with code 64; so do 1k and 511k).
pub const SLAB_CHUNK_MAX: u64 = 512 * 1024;
/// memcached refuses items larger than a gigabyte.
const MAX_ITEM_SIZE: u64 = 1024 * 1024 * 1024;

pub(super) fn validate(spec: &MemcachedSpec, errors: &mut ErrorList) {
    let spec_path = Path::new("spec");
    if let Some(r) = &spec.resources {
        resources::validate(r, &spec_path.child("resources"), errors);
    }
    if let Some(config) = &spec.memcached {
        item_size(config, &spec_path.child("memcached"), errors);
        let args = config.extra_args.as_deref().unwrap_or_default();
        errors.extend(extra_args::validate(
            args,
            config.threads.unwrap_or(crate::defaults::THREADS),
            &spec_path.child("memcached").child("extraArgs"),
        ));
    }
    if let Some(pdb) = spec.enabled_pdb() {
        let path = spec_path
            .child("highAvailability")
            .child("podDisruptionBudget");
        int_or_percent(
            pdb.min_available.as_ref(),
            path.child("minAvailable"),
            errors,
        );
        int_or_percent(
            pdb.max_unavailable.as_ref(),
            path.child("maxUnavailable"),
            errors,
        );
    }
    if let Some(monitoring) = &spec.monitoring {
        let path = spec_path.child("monitoring");
        if let Some(r) = &monitoring.exporter_resources {
            resources::validate(r, &path.child("exporterResources"), errors);
        }
        if let Some(sm) = &monitoring.service_monitor {
            scrape_timing(sm, &path.child("serviceMonitor"), errors);
        }
    }
}

/// memcached 1.6's own checks of `-I` with its default slab settings: a
/// multiple of slab_chunk_max (512k), at most 1024m, at most half of `-m`.
fn item_size(config: &MemcachedConfig, path: &Path, errors: &mut ErrorList) {
    let Some(text) = config.max_item_size.as_deref().filter(|s| is_item_size(s)) else {
        return;
    };
    let (digits, unit) = text.split_at(text.len() - 1);
    let scale: u64 = if unit == "k" { 1024 } else { 1024 * 1024 };
    let bytes = digits
        .parse::<u64>()
        .map_or(u64::MAX, |n| n.saturating_mul(scale));
    let path = path.child("maxItemSize");
    let half_memory = config
        .max_memory_mb
        .map(|mb| u64::try_from(mb).unwrap_or(0) * 1024 * 1024 / 2);
    let detail = if bytes == 0 || bytes % SLAB_CHUNK_MAX != 0 {
        "memcached 1.6 needs an item size that is a multiple of its slab_chunk_max (512k), \
         e.g. 512k, 1m, 1536k or 2m"
            .to_string()
    } else if bytes > MAX_ITEM_SIZE {
        "memcached refuses an item size above 1024m".to_string()
    } else if let Some(half) = half_memory.filter(|half| bytes > *half) {
        format!(
            "memcached refuses an item size above half of maxMemoryMB ({}k)",
            half / 1024
        )
    } else {
        return;
    };
    errors.push(FieldError::invalid(path, text, detail));
}

/// A non-negative integer or a percentage of 0-100, as for a PodDisruptionBudget.
fn int_or_percent(value: Option<&IntOrString>, path: Path, errors: &mut ErrorList) {
    match value {
        Some(IntOrString::Int(n)) if *n < 0 => {
            errors.push(FieldError::invalid(path, *n, "must be greater than or equal to 0"));
        }
        Some(IntOrString::String(s)) => match s.strip_suffix('%').filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
            None => errors.push(FieldError::invalid(
                path,
                s.as_str(),
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', \
                 regex used for validation is '[0-9]+%')",
            )),
            Some(digits) if digits.parse::<u64>().map_or(true, |p| p > 100) => {
                errors.push(FieldError::invalid(path, s.as_str(), "must not be greater than 100%"));
            }
            Some(_) => {}
        },
        _ => {}
    }
}

/// Valid Prometheus durations, and a timeout no longer than the interval.
fn scrape_timing(sm: &ServiceMonitorSpec, path: &Path, errors: &mut ErrorList) {
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
}
