//! Where clients connect (`status.serverList`), and the optional ConfigMap
//! that publishes it where clients read their configuration.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use memcached_api::{Memcached, MemcachedSpec};

use memcached_api::render::containers::MEMCACHED_PORT;

use crate::objects::meta;

/// ConfigMap key with the list comma-separated (oslo.cache's `memcache_servers`).
pub const COMMA_SEPARATED_KEY: &str = "memcache_servers";
/// ConfigMap key with one `host:port` per line.
pub const LINES_KEY: &str = "servers";

/// The servers of `mc` with `replicas` desired pods: with `stable_names`
/// (StatefulSet) every pod's name in ordinal order, else the Service's name.
pub fn build(mc: &Memcached, stable_names: bool, replicas: i32) -> Vec<String> {
    let name = meta::name(mc);
    let namespace = mc.metadata.namespace.as_deref().unwrap_or_default();
    if stable_names {
        (0..replicas.max(0))
            .map(|i| pod_server(mc, &format!("{name}-{i}")))
            .collect()
    } else {
        vec![format!("{name}.{namespace}:{MEMCACHED_PORT}")]
    }
}

/// The server list's entry of `mc`'s StatefulSet pod `pod`.
pub fn pod_server(mc: &Memcached, pod: &str) -> String {
    let name = meta::name(mc);
    let namespace = mc.metadata.namespace.as_deref().unwrap_or_default();
    format!("{pod}.{name}.{namespace}.svc:{MEMCACHED_PORT}")
}

/// The ordinal of `mc`'s StatefulSet pod that `server` (an entry of its
/// server list, [`pod_server`]) names; `None` for another entry.
pub fn ordinal(mc: &Memcached, server: &str) -> Option<i32> {
    let name = meta::name(mc);
    let namespace = mc.metadata.namespace.as_deref().unwrap_or_default();
    let pod = server.strip_suffix(&format!(".{name}.{namespace}.svc:{MEMCACHED_PORT}"))?;
    let digits = pod.strip_prefix(&format!("{name}-"))?;
    let canonical =
        digits.bytes().all(|b| b.is_ascii_digit()) && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// The ConfigMap `spec.serverListConfigMap` names, holding `servers`; `None`
/// when the field is absent.
pub fn config_map(mc: &Memcached, spec: &MemcachedSpec, servers: &[String]) -> Option<ConfigMap> {
    let name = spec.server_list_config_map.clone()?;
    let mut metadata = meta::object_meta(mc);
    metadata.name = Some(name);
    let lines: String = servers.iter().map(|s| format!("{s}\n")).collect();
    Some(ConfigMap {
        metadata,
        data: Some(BTreeMap::from([
            (COMMA_SEPARATED_KEY.to_string(), servers.join(",")),
            (LINES_KEY.to_string(), lines),
        ])),
        ..Default::default()
    })
}
