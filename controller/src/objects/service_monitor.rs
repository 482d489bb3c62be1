//! The Prometheus Operator ServiceMonitor, when monitoring is enabled. Built
//! as a dynamic object: its CRD may not be installed.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use memcached_api::{Memcached, MemcachedSpec, defaults};
use serde_json::json;

use crate::objects::labels;

/// The ServiceMonitor API (monitoring.coreos.com/v1).
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

/// The ServiceMonitor for `mc`, or `None` when monitoring is off.
pub fn build(mc: &Memcached, spec: &MemcachedSpec) -> Option<DynamicObject> {
    let monitoring = spec
        .monitoring
        .as_ref()
        .filter(|_| spec.monitoring_enabled())?;
    let sm = monitoring.service_monitor.clone().unwrap_or_default();
    let mut metadata = labels::object_meta(mc);
    let labels = metadata.labels.get_or_insert_default();
    for (k, v) in sm.additional_labels.unwrap_or_default() {
        labels.entry(k).or_insert(v);
    }
    let mut object = DynamicObject::new(labels::name(mc), &api_resource());
    object.metadata = metadata;
    object.data = json!({"spec": {
        "selector": {"matchLabels": labels::selector_labels(mc)},
        "endpoints": [{
            "port": "metrics",
            "interval": sm.interval.unwrap_or_else(|| defaults::SCRAPE_INTERVAL.into()),
            "scrapeTimeout": sm.scrape_timeout.unwrap_or_else(|| defaults::SCRAPE_TIMEOUT.into()),
        }],
    }});
    Some(object)
}
