//! Size bounds on the lists, maps and strings of the spec (declared beside
//! the types). The CRD schema carries the same numbers (`maxItems`, `maxProperties`, `maxLength`), so the
//! API server enforces them too; the policy checks them first and, when one is
//! exceeded, walks nothing else, so a request costs time linear in its size
//! and its answer stays short.

use std::collections::BTreeMap;

use crate::field::{ErrorList, FieldError, Path};
use crate::types::{
    MAX_ALLOWED_SOURCES, MAX_ANNOTATIONS, MAX_EXTRA_ARG_LENGTH, MAX_EXTRA_ARGS, MAX_IMAGE_LENGTH,
    MAX_IMAGE_PULL_SECRETS, MAX_LABELS, MAX_METRICS, MAX_TOLERATIONS,
    MAX_TOPOLOGY_SPREAD_CONSTRAINTS, MemcachedSpec,
};

/// Every exceeded bound of `spec`. Paths are built only for the errors: a
/// spec within its bounds (nearly all) costs a length check per field.
pub fn validate_sizes(spec: &MemcachedSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let at = |fields: &[&str]| fields.iter().fold(path.clone(), |p, f| p.child(f));
    let mut items = |fields: &[&str], len: Option<usize>, max: usize| {
        if let Some(len) = len.filter(|len| *len > max) {
            errors.push(FieldError::too_many(at(fields), len, max));
        }
    };
    let config = spec.memcached.as_ref();
    let extra_args = config.and_then(|c| c.extra_args.as_deref());
    items(
        &["memcached", "extraArgs"],
        extra_args.map(<[String]>::len),
        MAX_EXTRA_ARGS,
    );
    items(
        &["tolerations"],
        spec.tolerations.as_ref().map(Vec::len),
        MAX_TOLERATIONS,
    );
    items(
        &["networkPolicy", "allowedSources"],
        spec.network_policy
            .as_ref()
            .and_then(|n| n.allowed_sources.as_ref())
            .map(Vec::len),
        MAX_ALLOWED_SOURCES,
    );
    items(
        &["security", "networkPolicy", "allowedSources"],
        spec.security
            .as_ref()
            .and_then(|s| s.network_policy.as_ref())
            .and_then(|n| n.allowed_sources.as_ref())
            .map(Vec::len),
        MAX_ALLOWED_SOURCES,
    );
    items(
        &["highAvailability", "topologySpreadConstraints"],
        spec.high_availability
            .as_ref()
            .and_then(|h| h.topology_spread_constraints.as_ref())
            .map(Vec::len),
        MAX_TOPOLOGY_SPREAD_CONSTRAINTS,
    );
    items(
        &["imagePullSecrets"],
        spec.image_pull_secrets.as_ref().map(Vec::len),
        MAX_IMAGE_PULL_SECRETS,
    );
    items(
        &["autoscaling", "metrics"],
        spec.autoscaling
            .as_ref()
            .and_then(|a| a.metrics.as_ref())
            .map(Vec::len),
        MAX_METRICS,
    );
    type Bounded<'a> = (&'a [&'a str], Option<&'a BTreeMap<String, String>>, usize);
    let maps: [Bounded<'_>; 5] = [
        (&["podLabels"], spec.pod_labels.as_ref(), MAX_LABELS),
        (
            &["podAnnotations"],
            spec.pod_annotations.as_ref(),
            MAX_ANNOTATIONS,
        ),
        (&["nodeSelector"], spec.node_selector.as_ref(), MAX_LABELS),
        (
            &["service", "annotations"],
            spec.service.as_ref().and_then(|s| s.annotations.as_ref()),
            MAX_ANNOTATIONS,
        ),
        (
            &["monitoring", "serviceMonitor", "additionalLabels"],
            spec.monitoring
                .as_ref()
                .and_then(|m| m.service_monitor.as_ref())
                .and_then(|s| s.additional_labels.as_ref()),
            MAX_LABELS,
        ),
    ];
    for (fields, map, max) in maps {
        items(fields, map.map(BTreeMap::len), max);
    }
    let too_long = |field: &dyn Fn() -> Path, value: Option<&str>, max: usize| {
        value
            .filter(|v| v.len() > max)
            .map(|_| FieldError::too_long(field(), max))
    };
    errors.extend(too_long(
        &|| at(&["image"]),
        spec.image.as_deref(),
        MAX_IMAGE_LENGTH,
    ));
    errors.extend(too_long(
        &|| at(&["monitoring", "exporterImage"]),
        spec.monitoring
            .as_ref()
            .and_then(|m| m.exporter_image.as_deref()),
        MAX_IMAGE_LENGTH,
    ));
    if let Some(args) = extra_args.filter(|a| a.len() <= MAX_EXTRA_ARGS) {
        for (i, arg) in args.iter().enumerate() {
            errors.extend(too_long(
                &|| at(&["memcached", "extraArgs"]).index(i),
                Some(arg),
                MAX_EXTRA_ARG_LENGTH,
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sizes(spec: serde_json::Value) -> Vec<String> {
        let spec: MemcachedSpec = serde_json::from_value(spec).unwrap();
        validate_sizes(&spec, &Path::new("spec"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn labels(n: usize) -> serde_json::Value {
        (0..n).map(|i| (format!("k{i}"), json!("v"))).collect()
    }

    #[test]
    fn extra_args_at_the_bound() {
        assert!(sizes(json!({"memcached": {"extraArgs": vec!["-v"; 100]}})).is_empty());
    }

    #[test]
    fn extra_args_over_the_bound() {
        assert_eq!(
            sizes(json!({"memcached": {"extraArgs": vec!["-v"; 101]}})),
            ["spec.memcached.extraArgs: Too many: 101: must have at most 100 items"]
        );
    }

    #[test]
    fn extra_arg_too_long() {
        assert!(sizes(json!({"memcached": {"extraArgs": ["x".repeat(4096)]}})).is_empty());
        assert_eq!(
            sizes(json!({"memcached": {"extraArgs": ["-v", "x".repeat(4097)]}})),
            ["spec.memcached.extraArgs[1]: Too long: may not be more than 4096 bytes"]
        );
    }

    #[test]
    fn every_list_over_its_bound() {
        let one = |v: serde_json::Value, n: usize| vec![v; n];
        let got = sizes(json!({
            "tolerations": one(json!({"operator": "Exists"}), 101),
            "networkPolicy": {"allowedSources": one(json!({}), 101)},
            "highAvailability": {"topologySpreadConstraints": one(json!({"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}), 33)},
            "imagePullSecrets": one(json!({"name": "s"}), 33),
            "autoscaling": {"metrics": one(json!({"type": "Resource"}), 33)},
        }));
        assert_eq!(
            got,
            [
                "spec.tolerations: Too many: 101: must have at most 100 items",
                "spec.networkPolicy.allowedSources: Too many: 101: must have at most 100 items",
                "spec.highAvailability.topologySpreadConstraints: Too many: 33: must have at most 32 items",
                "spec.imagePullSecrets: Too many: 33: must have at most 32 items",
                "spec.autoscaling.metrics: Too many: 33: must have at most 32 items",
            ]
        );
    }

    #[test]
    fn every_map_over_its_bound() {
        let got = sizes(json!({
            "podLabels": labels(65), "podAnnotations": labels(129), "nodeSelector": labels(65),
            "service": {"annotations": labels(129)},
            "monitoring": {"serviceMonitor": {"additionalLabels": labels(65)}},
        }));
        assert_eq!(got.len(), 5, "{got:?}");
        assert_eq!(
            got[0],
            "spec.podLabels: Too many: 65: must have at most 64 items"
        );
        assert!(sizes(json!({"podLabels": labels(64), "podAnnotations": labels(128)})).is_empty());
    }

    #[test]
    fn images_too_long() {
        assert_eq!(
            sizes(
                json!({"image": "i".repeat(513), "monitoring": {"exporterImage": "e".repeat(513)}})
            ),
            [
                "spec.image: Too long: may not be more than 512 bytes",
                "spec.monitoring.exporterImage: Too long: may not be more than 512 bytes"
            ]
        );
        assert!(sizes(json!({"image": "i".repeat(512)})).is_empty());
    }
}
