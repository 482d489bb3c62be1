//! `spec.memcached`: the schema's bounds of memcached's parameters, and what
//! memcached itself would refuse of them (it exits, and the pod never serves).

use super::schema::within;
use crate::extra_args;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::types::{
    ITEM_SIZE_PATTERN, MAX_CONNECTIONS_BOUNDS, MAX_MEMORY_MB_BOUNDS, MemcachedConfig,
    THREADS_BOUNDS, VERBOSITY_BOUNDS,
};

/// memcached 1.6's default `slab_chunk_max` (half its 1m slab page): `-I`
/// must be a multiple of it (`-I 700k` exits with code 64; so do 1k and 511k).
pub const SLAB_CHUNK_MAX: u64 = 512 * 1024;
/// memcached refuses items larger than a gigabyte.
const MAX_ITEM_SIZE: u64 = 1024 * 1024 * 1024;

/// Every parameter within its bounds, and one memcached starts with.
pub fn validate_memcached_config(config: &MemcachedConfig, path: &Path) -> ErrorList {
    let bounded = [
        ("maxMemoryMB", config.max_memory_mb, &MAX_MEMORY_MB_BOUNDS),
        (
            "maxConnections",
            config.max_connections,
            &MAX_CONNECTIONS_BOUNDS,
        ),
        ("threads", config.threads, &THREADS_BOUNDS),
    ];
    let mut errors: ErrorList = bounded
        .into_iter()
        .filter_map(|(field, value, bounds)| Some(within(value?, bounds, path.child(field))))
        .flatten()
        .collect();
    if let Some(size) = config.max_item_size.as_deref().filter(|s| !is_item_size(s)) {
        let path = path.child("maxItemSize");
        let detail = format!("{path} in body should match '{ITEM_SIZE_PATTERN}'");
        errors.push(FieldError::invalid(path, size, detail).at(Stage::Schema));
    }
    if let Some(verbosity) = config.verbosity {
        errors.extend(within(
            verbosity,
            &VERBOSITY_BOUNDS,
            path.child("verbosity"),
        ));
    }
    errors.extend(item_size(config, path));
    let args = config.extra_args.as_deref().unwrap_or_default();
    let threads = config.threads.unwrap_or(crate::defaults::THREADS);
    let args = extra_args::validate(args, threads, &path.child("extraArgs"));
    errors.extend(args.into_iter().map(|e| e.at(Stage::Runtime)));
    errors
}

/// [`ITEM_SIZE_PATTERN`]: `^[0-9]+(k|m)$`.
fn is_item_size(s: &str) -> bool {
    s.strip_suffix(['k', 'm'])
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// memcached 1.6's own checks of `-I` with its default slab settings: a
/// multiple of slab_chunk_max (512k), at most 1024m, at most half of `-m`.
fn item_size(config: &MemcachedConfig, path: &Path) -> Option<FieldError> {
    let text = config
        .max_item_size
        .as_deref()
        .filter(|s| is_item_size(s))?;
    let (digits, unit) = text.split_at(text.len() - 1);
    let scale: u64 = if unit == "k" { 1024 } else { 1024 * 1024 };
    let bytes = digits
        .parse::<u64>()
        .map_or(u64::MAX, |n| n.saturating_mul(scale));
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
        return None;
    };
    Some(FieldError::invalid(path.child("maxItemSize"), text, detail).at(Stage::Runtime))
}
