//! The Prometheus Operator ServiceMonitor, when monitoring is enabled. Built
//! as a dynamic object: its CRD may not be installed.

use std::collections::BTreeMap;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use memcached_api::{Memcached, MemcachedSpec, defaults};
use serde_json::json;

use memcached_api::render::labels::selector_labels;

use crate::objects::meta;

/// The ServiceMonitor API (monitoring.coreos.com/v1).
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

/// The ServiceMonitor for `mc`, or `None` when monitoring is off. Its labels:
/// the ones every managed object has, then `defaults` (the installation's,
/// for every Memcached), then the Memcached's `additionalLabels`, winning
/// over `defaults` but not over the managed ones (its selector needs them).
pub fn build(
    mc: &Memcached,
    spec: &MemcachedSpec,
    defaults: &BTreeMap<String, String>,
) -> Option<DynamicObject> {
    let monitoring = spec
        .monitoring
        .as_ref()
        .filter(|_| spec.monitoring_enabled())?;
    let sm = monitoring.service_monitor.clone().unwrap_or_default();
    let mut metadata = meta::object_meta(mc);
    let mut extra = defaults.clone();
    extra.extend(sm.additional_labels.unwrap_or_default());
    let labels = metadata.labels.get_or_insert_default();
    for (k, v) in extra {
        labels.entry(k).or_insert(v);
    }
    let mut object = DynamicObject::new(meta::name(mc), &api_resource());
    object.metadata = metadata;
    object.data = json!({"spec": {
        "selector": {"matchLabels": selector_labels(meta::name(mc))},
        "endpoints": [{
            "port": "metrics",
            "interval": sm.interval.unwrap_or_else(|| defaults::SCRAPE_INTERVAL.into()),
            "scrapeTimeout": sm.scrape_timeout.unwrap_or_else(|| defaults::SCRAPE_TIMEOUT.into()),
        }],
    }});
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn memcached(monitoring: Value) -> Memcached {
        serde_json::from_value(json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u-1"},
            "spec": {"monitoring": monitoring},
        }))
        .unwrap()
    }

    fn labels(mc: &Memcached, defaults: &[(&str, &str)]) -> BTreeMap<String, String> {
        let defaults = defaults
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        build(mc, &mc.spec, &defaults)
            .expect("monitoring is on")
            .metadata
            .labels
            .unwrap()
    }

    #[test]
    fn the_installation_labels_every_service_monitor_and_a_memcached_adds_its_own_on_top() {
        let managed = selector_labels(meta::name(&memcached(json!({"enabled": true}))));
        let defaults = [("release", "kube-prometheus-stack"), ("team", "ops")];

        // A Memcached that names no label: the installation's.
        let plain = labels(&memcached(json!({"enabled": true})), &defaults);
        assert_eq!(plain["release"], "kube-prometheus-stack");
        assert_eq!(plain["team"], "ops");
        assert_eq!(plain.len(), managed.len() + 2, "{plain:?}");

        // Its own labels are added, and win over the installation's.
        let own = labels(
            &memcached(
                json!({"enabled": true, "serviceMonitor": {"additionalLabels": {
                    "release": "other-prometheus", "tier": "cache",
                }}}),
            ),
            &defaults,
        );
        assert_eq!(own["release"], "other-prometheus");
        assert_eq!(own["team"], "ops");
        assert_eq!(own["tier"], "cache");

        // Neither replaces a label the controller manages by.
        let (key, value) = managed.iter().next().unwrap();
        let clash = labels(
            &memcached(
                json!({"enabled": true, "serviceMonitor": {"additionalLabels": {
                    key.as_str(): "other",
                }}}),
            ),
            &[(key, "other")],
        );
        assert_eq!(&clash[key], value);

        // No installation labels: as before.
        let none = labels(&memcached(json!({"enabled": true})), &[]);
        assert_eq!(none, managed);

        // No ServiceMonitor without monitoring, whatever the installation sets.
        let off = memcached(json!({"enabled": false}));
        let defaults = defaults
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(build(&off, &off.spec, &defaults).is_none());
    }
}
