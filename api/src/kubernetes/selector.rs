//! `ValidateLabelSelector` of apimachinery, with its messages.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::metadata::{validate_label_name, validate_labels};
use super::names::is_valid_label_value;
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};

/// Every error of a label selector.
pub fn validate_label_selector(selector: &LabelSelector, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(labels) = &selector.match_labels {
        errors.extend(validate_labels(labels, &path.child("matchLabels")));
    }
    for (i, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        errors.extend(validate_requirement(
            requirement,
            &path.child("matchExpressions").index(i),
        ));
    }
    errors
}

/// `ValidateLabelSelectorRequirement`.
fn validate_requirement(requirement: &LabelSelectorRequirement, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
            path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
            path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        other => errors.push(FieldError::invalid(
            path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errors.extend(validate_label_name(&requirement.key, &path.child("key")));
    for (i, value) in values.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        for m in is_valid_label_value(value) {
            errors.push(FieldError::invalid(
                path.child("values").index(i),
                value.as_str(),
                m,
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(selector: serde_json::Value) -> Vec<String> {
        let selector: LabelSelector = serde_json::from_value(selector).unwrap();
        validate_label_selector(&selector, &Path::new("s"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn in_without_values() {
        assert_eq!(
            check(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            [
                "s.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
            ]
        );
    }

    #[test]
    fn exists_with_values() {
        assert_eq!(
            check(
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})
            ),
            [
                "s.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            ]
        );
    }

    #[test]
    fn unknown_operator() {
        assert_eq!(
            check(json!({"matchExpressions": [{"key": "a", "operator": "Equals"}]})),
            [
                r#"s.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator"#
            ]
        );
    }

    #[test]
    fn bad_key_and_value() {
        let got = check(
            json!({"matchLabels": {"a": "b c"}, "matchExpressions": [{"key": "-a", "operator": "In", "values": ["ok", "no way"]}]}),
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].starts_with(r#"s.matchLabels: Invalid value: "b c""#));
        assert!(got[1].starts_with(r#"s.matchExpressions[0].key: Invalid value: "-a""#));
        assert!(got[2].starts_with(r#"s.matchExpressions[0].values[1]: Invalid value: "no way""#));
    }

    #[test]
    fn stops_walking_after_a_hundred_errors() {
        let values = vec!["bad value"; 1000];
        let got =
            check(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": values}]}));
        assert_eq!(got.len(), crate::field::MAX_ERRORS_PER_LIST);
    }

    #[test]
    fn valid_selector() {
        assert!(check(json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})).is_empty());
    }
}
