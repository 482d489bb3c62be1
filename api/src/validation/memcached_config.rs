//! `spec.memcached`: the schema's bounds of memcached's parameters (from
//! [`crate::memcached_options`]), and what memcached itself would refuse of
//! them (it exits, and the pod never serves), with warm restarts or without.

use super::schema::within;
use crate::extra_args;
use crate::extra_args::memory_file::ShortOfMemory;
use crate::extra_args::release::Judge;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::memcached_options::{
    MAX_ITEM_SIZE_BYTES, SLAB_CHUNK_MAX, SPEC_FIELDS, Schema, Setting, THREADS, is_item_size,
};
use crate::types::MemcachedConfig;

/// Every parameter within its bounds, and one memcached starts with, with
/// its memory file when `warm` (warm restarts are on), in the release
/// `judge` reads from the image.
pub fn validate_memcached_config(
    config: &MemcachedConfig,
    warm: bool,
    judge: &Judge<'_>,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    for field in SPEC_FIELDS.iter().filter_map(|o| o.field.as_ref()) {
        match (field.get(config), field.schema) {
            (Some(Setting::Int(value)), Schema::Range(bounds)) => {
                errors.extend(within(value, bounds, path.child(field.name)));
            }
            (Some(Setting::Text(value)), Schema::Pattern(pattern, matches)) if !matches(value) => {
                let path = path.child(field.name);
                let detail = format!("{path} in body should match '{pattern}'");
                errors.push(FieldError::invalid(path, value, detail).at(Stage::Schema));
            }
            _ => {}
        }
    }
    errors.extend(item_size(config, path));
    let args = config.extra_args.as_deref().unwrap_or_default();
    let threads = match THREADS.field.map(|f| f.value(config)) {
        Some(Setting::Int(threads)) => threads,
        _ => 0,
    };
    let args = extra_args::validate(args, threads, judge, &path.child("extraArgs"));
    errors.extend(args.into_iter().map(|e| e.at(Stage::Runtime)));
    // memcached exits on any of those before it preallocates.
    if warm && errors.is_empty() {
        errors.extend(warm_restart_memory(config, path));
    } else if errors.is_empty() && large_pages(args_of(config)) {
        errors.extend(large_pages_memory(config, path));
    }
    errors
}

/// `spec.memcached.extraArgs`, none when absent.
fn args_of(config: &MemcachedConfig) -> &[String] {
    config.extra_args.as_deref().unwrap_or_default()
}

/// `args` ask for large pages (`-L`, `--enable-largepages`, in any spelling
/// getopt gives memcached): memcached then preallocates its slab pages as
/// with its memory file, or exits where the kernel has no huge pages.
fn large_pages(args: &[String]) -> bool {
    extra_args::getopt::parse(args)
        .0
        .iter()
        .any(|o| o.short == 'L')
}

/// With `-L` memcached preallocates a page per slab class, and exits when
/// `maxMemoryMB` cannot hold them ([`ShortOfMemory`]), warm restarts or not.
fn large_pages_memory(config: &MemcachedConfig, path: &Path) -> Option<FieldError> {
    let short = ShortOfMemory::of(config)?;
    let detail = format!(
        "extraArgs -L preallocates one 1 MB page per slab class: memcached needs at least {} for \
         this geometry and exits with \"Error while preallocating slab memory!\"; raise \
         maxMemoryMB to {} or leave -L out",
        short.minimum_mb, short.minimum_mb
    );
    let path = path.child("maxMemoryMB");
    Some(FieldError::invalid(path, short.max_memory_mb, detail).at(Stage::Runtime))
}

/// With its memory file memcached preallocates a page per slab class, and
/// exits when `maxMemoryMB` cannot hold them ([`ShortOfMemory`]).
fn warm_restart_memory(config: &MemcachedConfig, path: &Path) -> Option<FieldError> {
    let short = ShortOfMemory::of(config)?;
    let detail = format!(
        "{}; raise maxMemoryMB to {} or set spec.warmRestart.enabled: false",
        short.reason(),
        short.minimum_mb
    );
    let path = path.child("maxMemoryMB");
    Some(FieldError::invalid(path, short.max_memory_mb, detail).at(Stage::Runtime))
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
    } else if bytes > MAX_ITEM_SIZE_BYTES {
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
