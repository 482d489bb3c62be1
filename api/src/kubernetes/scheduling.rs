//! Tolerations and topology spread constraints, as the API server's core
//! validation checks them in the Deployment's pod template.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Toleration, TopologySpreadConstraint};

use super::metadata::validate_label_name;
use super::names::is_valid_label_value;
use super::selector::validate_label_selector;
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const TOLERATION_OPERATORS: [&str; 2] = ["Equal", "Exists"];
const WHEN_UNSATISFIABLE: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];
const NODE_INCLUSION_POLICIES: [&str; 2] = ["Honor", "Ignore"];

/// `ValidateTolerations`.
pub fn validate_tolerations(tolerations: &[Toleration], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, t) in tolerations.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let path = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let operator = t.operator.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        if !key.is_empty() {
            errors.extend(validate_label_name(key, &path.child("key")));
        }
        if key.is_empty() && operator != "Exists" {
            errors.push(FieldError::invalid(
                path.child("operator"),
                operator,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errors.push(FieldError::invalid(
                path.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match operator {
            "Equal" | "" => {
                let messages = is_valid_label_value(value);
                if !messages.is_empty() {
                    errors.push(FieldError::invalid(
                        path.child("operator"),
                        value,
                        messages.join(";"),
                    ));
                }
            }
            // The API server shows the whole toleration here; the value is what is wrong.
            "Exists" if !value.is_empty() => errors.push(FieldError::invalid(
                path.child("operator"),
                value,
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => errors.push(FieldError::not_supported(
                path.child("operator"),
                other,
                &TOLERATION_OPERATORS,
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errors.push(FieldError::not_supported(
                path.child("effect"),
                effect,
                &TAINT_EFFECTS,
            ));
        }
    }
    errors
}

/// `validateTopologySpreadConstraints`.
pub fn validate_topology_spread(
    constraints: &[TopologySpreadConstraint],
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    // How many constraints from here on have each {topologyKey, whenUnsatisfiable}.
    let mut remaining: HashMap<(&str, &str), usize> = HashMap::with_capacity(constraints.len());
    for c in constraints {
        *remaining
            .entry((&c.topology_key, &c.when_unsatisfiable))
            .or_default() += 1;
    }
    for (i, c) in constraints.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let path = path.index(i);
        if c.max_skew <= 0 {
            errors.push(FieldError::invalid(
                path.child("maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        if c.topology_key.is_empty() {
            errors.push(FieldError::required(
                path.child("topologyKey"),
                "can not be empty",
            ));
        } else {
            errors.extend(validate_label_name(
                &c.topology_key,
                &path.child("topologyKey"),
            ));
        }
        if !WHEN_UNSATISFIABLE.contains(&c.when_unsatisfiable.as_str()) {
            errors.push(FieldError::not_supported(
                path.child("whenUnsatisfiable"),
                &c.when_unsatisfiable,
                &WHEN_UNSATISFIABLE,
            ));
        }
        // Like the API server: reported on a constraint that a later one repeats.
        let pair = (c.topology_key.as_str(), c.when_unsatisfiable.as_str());
        if let Some(left) = remaining.get_mut(&pair) {
            *left -= 1;
            if *left > 0 {
                errors.push(FieldError::duplicate(
                    path.child("{topologyKey, whenUnsatisfiable}"),
                    format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable).as_str(),
                ));
            }
        }
        if let Some(min) = c.min_domains {
            let path = path.child("minDomains");
            if min <= 0 {
                errors.push(FieldError::invalid(
                    path.clone(),
                    min,
                    "must be greater than zero",
                ));
            }
            if c.when_unsatisfiable != "DoNotSchedule" {
                errors.push(FieldError::invalid(
                    path,
                    min,
                    format!(
                        "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {}",
                        c.when_unsatisfiable
                    ),
                ));
            }
        }
        for (field, policy) in [
            ("nodeAffinityPolicy", &c.node_affinity_policy),
            ("nodeTaintsPolicy", &c.node_taints_policy),
        ] {
            if let Some(policy) = policy
                .as_deref()
                .filter(|p| !NODE_INCLUSION_POLICIES.contains(p))
            {
                errors.push(FieldError::not_supported(
                    path.child(field),
                    policy,
                    &NODE_INCLUSION_POLICIES,
                ));
            }
        }
        let keys = c.match_label_keys.as_deref().unwrap_or_default();
        if !keys.is_empty() && c.label_selector.is_none() {
            errors.push(FieldError::forbidden(
                path.child("matchLabelKeys"),
                "must not be specified when labelSelector is not set",
            ));
        }
        for (k, key) in keys.iter().enumerate().take(MAX_ERRORS_PER_LIST) {
            errors.extend(validate_label_name(
                key,
                &path.child("matchLabelKeys").index(k),
            ));
        }
        if let Some(selector) = &c.label_selector {
            errors.extend(validate_label_selector(
                selector,
                &path.child("labelSelector"),
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tolerations(list: serde_json::Value) -> Vec<String> {
        let list: Vec<Toleration> = serde_json::from_value(list).unwrap();
        validate_tolerations(&list, &Path::new("spec.tolerations"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn spread(list: serde_json::Value) -> Vec<String> {
        let list: Vec<TopologySpreadConstraint> = serde_json::from_value(list).unwrap();
        validate_topology_spread(
            &list,
            &Path::new("spec.highAvailability.topologySpreadConstraints"),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn toleration_valid_forms() {
        assert!(tolerations(json!([
            {"operator": "Exists"},
            {"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            {"key": "k", "value": "v"}
        ]))
        .is_empty());
    }

    #[test]
    fn toleration_unknown_operator() {
        assert_eq!(
            tolerations(json!([{"key": "k", "operator": "In"}])),
            [
                r#"spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists""#
            ]
        );
    }

    #[test]
    fn toleration_unknown_effect() {
        assert_eq!(
            tolerations(json!([{"key": "k", "operator": "Exists", "effect": "NoScheduled"}])),
            [
                r#"spec.tolerations[0].effect: Unsupported value: "NoScheduled": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#
            ]
        );
    }

    #[test]
    fn toleration_empty_key_needs_exists() {
        assert_eq!(
            tolerations(json!([{"operator": "Equal"}])),
            [
                r#"spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all keys""#
            ]
        );
    }

    #[test]
    fn toleration_seconds_need_no_execute() {
        assert_eq!(
            tolerations(
                json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}])
            ),
            [
                r#"spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when `tolerationSeconds` is set"#
            ]
        );
    }

    #[test]
    fn toleration_exists_with_value() {
        assert_eq!(
            tolerations(json!([{"key": "k", "operator": "Exists", "value": "v"}])),
            [
                r#"spec.tolerations[0].operator: Invalid value: "v": value must be empty when `operator` is 'Exists'"#
            ]
        );
    }

    #[test]
    fn toleration_bad_value_and_key() {
        let got = tolerations(json!([{"key": "bad key", "value": "x y"}]));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].starts_with(r#"spec.tolerations[0].key: Invalid value: "bad key""#));
        assert!(got[1].starts_with(
            r#"spec.tolerations[0].operator: Invalid value: "x y": a valid label must be"#
        ));
    }

    #[test]
    fn spread_valid() {
        assert!(spread(json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
            "labelSelector": {"matchLabels": {"app": "m"}}, "matchLabelKeys": ["pod-template-hash"], "nodeAffinityPolicy": "Honor"}])).is_empty());
    }

    #[test]
    fn spread_when_unsatisfiable_unknown() {
        assert_eq!(
            spread(json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}])),
            [
                r#"spec.highAvailability.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Never": supported values: "DoNotSchedule", "ScheduleAnyway""#
            ]
        );
    }

    #[test]
    fn spread_max_skew_zero_and_empty_key() {
        assert_eq!(
            spread(
                json!([{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "ScheduleAnyway"}])
            ),
            [
                "spec.highAvailability.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
                "spec.highAvailability.topologySpreadConstraints[0].topologyKey: Required value: can not be empty"
            ]
        );
    }

    #[test]
    fn spread_duplicate_pair() {
        let c = json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"});
        assert_eq!(
            spread(json!([c, c])),
            [
                r#"spec.highAvailability.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: "{zone, DoNotSchedule}""#
            ]
        );
    }

    #[test]
    fn spread_min_domains_needs_do_not_schedule() {
        assert_eq!(
            spread(
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}])
            ),
            [
                "spec.highAvailability.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
            ]
        );
    }

    #[test]
    fn spread_match_label_keys_need_a_selector() {
        assert_eq!(
            spread(
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["a"]}])
            ),
            [
                "spec.highAvailability.topologySpreadConstraints[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            ]
        );
    }
}
