//! The pods a Memcached runs, as far as its checks need to know them: the
//! containers the controller puts in them.

use crate::types::MemcachedSpec;

/// The memcached container's name in the pod template.
pub const MEMCACHED_CONTAINER: &str = "memcached";
/// The exporter sidecar's name (with monitoring on).
pub const EXPORTER_CONTAINER: &str = "exporter";

/// The names of the containers of `spec`'s pods: memcached, and the exporter
/// with monitoring on.
pub fn containers(spec: &MemcachedSpec) -> &'static [&'static str] {
    if spec.monitoring_enabled() {
        &[MEMCACHED_CONTAINER, EXPORTER_CONTAINER]
    } else {
        &[MEMCACHED_CONTAINER]
    }
}
