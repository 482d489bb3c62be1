//! The mutation: the submitted object with exactly what defaulting filled.

use serde_json::{Map, Value};

use crate::memcached_options::SPEC_FIELDS;
use crate::types::{
    AutoscalingSpec, HighAvailabilitySpec, MemcachedSpec, MonitoringSpec, SecuritySpec,
};

/// The submitted object with exactly the changes defaulting made to its spec;
/// everything else (metadata, status, unmodelled fields) is kept as sent.
///
/// Defaulting only fills: an absent (or null) field, an empty list
/// (autoscaling's metrics), fields inside an object that is there. So the
/// fields of `after` that differ from `before` are encoded alone and merged
/// into the object's spec ([`fill`]); a field `after` no longer has (the
/// replicas an enabled autoscaler takes over) is removed.
pub(super) fn defaulted_object(
    object: Value,
    before: &MemcachedSpec,
    after: MemcachedSpec,
) -> Result<Value, String> {
    let (changed, removed) = changed_fields(before, after);
    let Ok(Value::Object(changed)) = serde_json::to_value(&changed) else {
        return Err("the defaulted spec cannot be encoded".to_string());
    };
    let Value::Object(mut object) = object else {
        return Err("the request's object is not a JSON object".to_string());
    };
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        *spec = Value::Object(Map::new());
    }
    if let Value::Object(spec) = spec {
        for key in removed {
            spec.remove(key);
        }
        fill(spec, changed);
    }
    Ok(Value::Object(object))
}

/// The top-level fields of `after` that differ from `before`'s (the others
/// `None`: they are not encoded at all), and the names of those `after` no
/// longer has. Within the sections defaulting fills, the fields equal to
/// `before`'s are left out too: defaulting filled nothing in them.
fn changed_fields(
    before: &MemcachedSpec,
    mut after: MemcachedSpec,
) -> (MemcachedSpec, Vec<&'static str>) {
    let mut removed = Vec::new();
    macro_rules! keep_changed {
        ($($field:ident: $name:literal),* $(,)?) => {
            // Exhaustive: a field added to the spec must be listed here.
            let MemcachedSpec { $($field: _),* } = &after;
            $(if before.$field == after.$field {
                after.$field = None;
            } else if after.$field.is_none() {
                removed.push($name);
            })*
        };
    }
    keep_changed!(
        replicas: "replicas",
        workload: "workload",
        server_list_config_map: "serverListConfigMap",
        client_hashing: "clientHashing",
        image: "image",
        resources: "resources",
        memcached: "memcached",
        high_availability: "highAvailability",
        warm_restart: "warmRestart",
        autoscaling: "autoscaling",
        monitoring: "monitoring",
        security: "security",
        network_policy: "networkPolicy",
        service: "service",
        pod_labels: "podLabels",
        pod_annotations: "podAnnotations",
        node_selector: "nodeSelector",
        tolerations: "tolerations",
        image_pull_secrets: "imagePullSecrets",
    );
    /// In a section present before and after, the fields equal before and
    /// after set to `None` (defaulting never removes one).
    macro_rules! within {
        ($section:ident: $ty:ident { $($field:ident),* $(,)? }) => {
            if let (Some(before), Some(after)) = (&before.$section, &mut after.$section) {
                // Exhaustive: a field added to the section must be listed here.
                let $ty { $($field: _),* } = after;
                $(if before.$field == after.$field {
                    after.$field = None;
                })*
            }
        };
    }
    if let (Some(before), Some(after)) = (&before.memcached, &mut after.memcached) {
        // One field per row of the option table, and extraArgs.
        for field in SPEC_FIELDS.iter().filter_map(|option| option.field) {
            field.unset_if_same(before, after);
        }
        if before.extra_args == after.extra_args {
            after.extra_args = None;
        }
    }
    within!(high_availability: HighAvailabilitySpec {
        anti_affinity_preset, topology_spread_constraints, pod_disruption_budget, graceful_shutdown
    });
    within!(autoscaling: AutoscalingSpec { enabled, min_replicas, max_replicas, metrics, behavior });
    within!(monitoring: MonitoringSpec { enabled, exporter_image, exporter_resources, service_monitor });
    within!(security: SecuritySpec {
        pod_security_context, container_security_context, sasl, tls, network_policy
    });
    (after, removed)
}

/// Write into `target` what defaulting filled in `filled` (the encoding of
/// fields that differ from what `target` holds): a field `target` lacks or
/// holds as null, and an empty list, take their filled value; an object is
/// filled field by field; anything else `target` holds is the user's, kept
/// as sent. The new values are moved from `filled`, not copied.
fn fill(target: &mut Map<String, Value>, filled: Map<String, Value>) {
    for (key, new) in filled {
        match (target.get_mut(&key), new) {
            (None | Some(Value::Null), new) => {
                target.insert(key, new);
            }
            (Some(Value::Object(target)), Value::Object(new)) => fill(target, new),
            (Some(Value::Array(list)), Value::Array(new)) if list.is_empty() => *list = new,
            _ => {}
        }
    }
}
