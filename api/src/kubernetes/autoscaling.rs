//! A HorizontalPodAutoscaler's `metrics` and `behavior` as the API server
//! validates them (`validateMetrics` and `validateBehavior` of
//! `k8s.io/kubernetes/pkg/apis/autoscaling/validation`), with its messages.

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules,
    HorizontalPodAutoscalerBehavior, MetricIdentifier, MetricSpec, MetricTarget,
};

use super::names::is_dns1123_label;
use super::resources::validate_container_resource_name;
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};
use crate::quantity::Quantity;

/// `MaxPeriodSeconds` of a scaling policy.
pub const MAX_PERIOD_SECONDS: i32 = 1800;
/// `MaxStabilizationWindowSeconds`.
pub const MAX_STABILIZATION_WINDOW_SECONDS: i32 = 3600;
/// Metric source types, sorted as the API server lists them.
pub const METRIC_SOURCE_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
/// `selectPolicy` values.
pub const SELECT_POLICIES: [&str; 3] = ["Disabled", "Max", "Min"];
/// Scaling policy types.
pub const SCALING_POLICY_TYPES: [&str; 2] = ["Percent", "Pods"];

const POPULATE: &str = "must populate information for the given metric source";

/// `validateMetrics` (minReplicas is at least 1 here, so scale to zero never applies).
pub fn validate_metrics(metrics: &[MetricSpec], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, metric) in metrics.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        errors.extend(validate_metric_spec(metric, &path.index(i)));
    }
    errors
}

/// `validateMetricSpec`.
fn validate_metric_spec(metric: &MetricSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let kind = metric.type_.as_str();
    let type_path = path.child("type");
    if kind.is_empty() {
        errors.push(FieldError::required(
            type_path.clone(),
            "must specify a metric source type",
        ));
    }
    if !METRIC_SOURCE_TYPES.contains(&kind) {
        errors.push(FieldError::not_supported(
            type_path.clone(),
            kind,
            &METRIC_SOURCE_TYPES,
        ));
    }
    // (field name, present) in the API server's order; only the first present one is validated.
    let present = [
        ("object", metric.object.is_some()),
        ("external", metric.external.is_some()),
        ("pods", metric.pods.is_some()),
        ("resource", metric.resource.is_some()),
        ("containerResource", metric.container_resource.is_some()),
    ];
    match present.iter().find(|(_, set)| *set).map(|(name, _)| *name) {
        Some("object") => {
            if let Some(source) = &metric.object {
                let path = path.child("object");
                errors.extend(validate_object_reference(
                    &source.described_object,
                    &path.child("describedObject"),
                ));
                errors.extend(validate_identified_target(
                    &source.metric,
                    &source.target,
                    &path,
                ));
                if source.target.value.is_none() && source.target.average_value.is_none() {
                    errors.push(FieldError::required(
                        path.child("target").child("averageValue"),
                        "must set either a target value or averageValue",
                    ));
                }
            }
        }
        Some("external") => {
            if let Some(source) = &metric.external {
                let path = path.child("external");
                errors.extend(validate_identified_target(
                    &source.metric,
                    &source.target,
                    &path,
                ));
                let target = &source.target;
                if target.value.is_none() && target.average_value.is_none() {
                    errors.push(FieldError::required(
                        path.child("target").child("averageValue"),
                        "must set either a target value for metric or a per-pod target",
                    ));
                }
                if target.value.is_some() && target.average_value.is_some() {
                    errors.push(FieldError::forbidden(
                        path.child("target").child("value"),
                        "may not set both a target value for metric and a per-pod target",
                    ));
                }
            }
        }
        Some("pods") => {
            if let Some(source) = &metric.pods {
                let path = path.child("pods");
                errors.extend(validate_identified_target(
                    &source.metric,
                    &source.target,
                    &path,
                ));
                if source.target.average_value.is_none() {
                    errors.push(FieldError::required(
                        path.child("target").child("averageValue"),
                        "must specify a positive target averageValue",
                    ));
                }
            }
        }
        Some("resource") => {
            if let Some(source) = &metric.resource {
                let path = path.child("resource");
                if source.name.is_empty() {
                    errors.push(FieldError::required(
                        path.child("name"),
                        "must specify a resource name",
                    ));
                }
                errors.extend(validate_utilization_target(
                    &source.target,
                    &path.child("target"),
                ));
            }
        }
        Some(_) => {
            if let Some(source) = &metric.container_resource {
                let path = path.child("containerResource");
                if source.name.is_empty() {
                    errors.push(FieldError::required(
                        path.child("name"),
                        "must specify a resource name",
                    ));
                } else {
                    errors.extend(validate_container_resource_name(
                        &source.name,
                        &path.child("name"),
                    ));
                }
                if source.container.is_empty() {
                    errors.push(FieldError::required(
                        path.child("container"),
                        "must specify a container",
                    ));
                } else {
                    let field = path.child("container");
                    errors.extend(
                        is_dns1123_label(&source.container).into_iter().map(|m| {
                            FieldError::invalid(field.clone(), source.container.as_str(), m)
                        }),
                    );
                }
                errors.extend(validate_utilization_target(
                    &source.target,
                    &path.child("target"),
                ));
            }
        }
        None => {}
    }
    let expected = match kind {
        "Object" => Some("object"),
        "Pods" => Some("pods"),
        "Resource" => Some("resource"),
        "External" => Some("external"),
        "ContainerResource" => Some("containerResource"),
        _ => None,
    };
    match expected {
        Some(name) if !present.iter().any(|(n, set)| *n == name && *set) => {
            errors.push(FieldError::required(path.child(name), POPULATE));
        }
        Some(_) => {}
        None => errors.push(FieldError::not_supported(
            type_path,
            kind,
            &METRIC_SOURCE_TYPES,
        )),
    }
    if present.iter().filter(|(_, set)| *set).count() != 1 {
        for (name, _) in present
            .iter()
            .filter(|(name, set)| *set && Some(*name) != expected)
        {
            errors.push(FieldError::forbidden(
                path.child(name),
                "must populate the given metric source only",
            ));
        }
    }
    errors
}

/// The target of a Resource or ContainerResource metric: a utilization or a raw value.
fn validate_utilization_target(target: &MetricTarget, path: &Path) -> ErrorList {
    let mut errors = validate_metric_target(target, path);
    match (target.average_utilization, &target.average_value) {
        (None, None) => errors.push(FieldError::required(
            path.child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::forbidden(
            path.child("averageValue"),
            "may not set both a target raw value and a target utilization",
        )),
        _ => {}
    }
    errors
}

/// `validateMetricTarget`.
fn validate_metric_target(target: &MetricTarget, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let kind = target.type_.as_str();
    if kind.is_empty() {
        errors.push(FieldError::required(
            path.child("type"),
            "must specify a metric target type",
        ));
    }
    if !matches!(kind, "Utilization" | "Value" | "AverageValue") {
        errors.push(FieldError::invalid(
            path.child("type"),
            kind,
            "must be either Utilization, Value, or AverageValue",
        ));
    }
    for (name, value) in [
        ("value", &target.value),
        ("averageValue", &target.average_value),
    ] {
        if let Some(q) = value
            && Quantity::parse(&q.0).is_ok_and(|v| !v.is_positive())
        {
            errors.push(FieldError::invalid(
                path.child(name),
                q.0.as_str(),
                "must be positive",
            ));
        }
    }
    if let Some(u) = target.average_utilization.filter(|u| *u < 1) {
        errors.push(FieldError::invalid(
            path.child("averageUtilization"),
            u,
            "must be greater than 0",
        ));
    }
    errors
}

/// `validateMetricIdentifier` of `metric`, then `validateMetricTarget` of `target`.
fn validate_identified_target(
    id: &MetricIdentifier,
    target: &MetricTarget,
    path: &Path,
) -> ErrorList {
    let mut errors = path_segment(
        &id.name,
        &path.child("metric").child("name"),
        "must specify a metric name",
    );
    errors.extend(validate_metric_target(target, &path.child("target")));
    errors
}

/// `ValidateCrossVersionObjectReference` of an Object metric (empty API group allowed).
fn validate_object_reference(reference: &CrossVersionObjectReference, path: &Path) -> ErrorList {
    let mut errors = path_segment(&reference.kind, &path.child("kind"), "");
    errors.extend(path_segment(&reference.name, &path.child("name"), ""));
    if let Some(version) = reference
        .api_version
        .as_deref()
        .filter(|v| v.matches('/').count() > 1 && *v != "/")
    {
        errors.push(FieldError::invalid(
            path.child("apiVersion"),
            version,
            format!("unexpected GroupVersion string: {version}"),
        ));
    }
    errors
}

/// Required, then `IsPathSegmentName`.
fn path_segment(value: &str, path: &Path, required: &str) -> ErrorList {
    if value.is_empty() {
        return vec![FieldError::required(path.clone(), required)];
    }
    let messages: Vec<String> = if value == "." || value == ".." {
        vec![format!("may not be '{value}'")]
    } else {
        ["/", "%"]
            .iter()
            .filter(|c| value.contains(**c))
            .map(|c| format!("may not contain '{c}'"))
            .collect()
    };
    messages
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), value, m))
        .collect()
}

/// `validateBehavior` after the API server's defaulting (absent policies are filled in).
pub fn validate_behavior(behavior: &HorizontalPodAutoscalerBehavior, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (name, rules) in [
        ("scaleUp", &behavior.scale_up),
        ("scaleDown", &behavior.scale_down),
    ] {
        if let Some(rules) = rules {
            errors.extend(validate_scaling_rules(rules, &path.child(name)));
        }
    }
    errors
}

/// `validateScalingRules`.
fn validate_scaling_rules(rules: &HPAScalingRules, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(window) = rules.stabilization_window_seconds {
        let field = path.child("stabilizationWindowSeconds");
        if window < 0 {
            errors.push(FieldError::invalid(
                field,
                window,
                "must be greater than or equal to zero",
            ));
        } else if window > MAX_STABILIZATION_WINDOW_SECONDS {
            errors.push(FieldError::invalid(
                field,
                window,
                format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}"),
            ));
        }
    }
    if let Some(select) = rules
        .select_policy
        .as_deref()
        .filter(|s| !SELECT_POLICIES.contains(s))
    {
        errors.push(FieldError::not_supported(
            path.child("selectPolicy"),
            select,
            &SELECT_POLICIES,
        ));
    }
    let policies_path = path.child("policies");
    // Absent policies are defaulted; an empty list is kept, and refused.
    if rules.policies.as_ref().is_some_and(Vec::is_empty) {
        errors.push(FieldError::required(
            policies_path.clone(),
            "must specify at least one Policy",
        ));
    }
    for (i, policy) in rules.policies.iter().flatten().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        errors.extend(validate_scaling_policy(policy, &policies_path.index(i)));
    }
    if let Some(tolerance) = &rules.tolerance
        && Quantity::parse(&tolerance.0).is_ok_and(Quantity::is_negative)
    {
        errors.push(FieldError::invalid(
            path.child("tolerance"),
            tolerance.0.as_str(),
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// `validateScalingPolicy`.
fn validate_scaling_policy(policy: &HPAScalingPolicy, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if !SCALING_POLICY_TYPES.contains(&policy.type_.as_str()) {
        errors.push(FieldError::not_supported(
            path.child("type"),
            &policy.type_,
            &SCALING_POLICY_TYPES,
        ));
    }
    if policy.value <= 0 {
        errors.push(FieldError::invalid(
            path.child("value"),
            policy.value,
            "must be greater than zero",
        ));
    }
    let period = policy.period_seconds;
    if period <= 0 {
        errors.push(FieldError::invalid(
            path.child("periodSeconds"),
            period,
            "must be greater than zero",
        ));
    }
    if period > MAX_PERIOD_SECONDS {
        errors.push(FieldError::invalid(
            path.child("periodSeconds"),
            period,
            format!("must be less than or equal to {MAX_PERIOD_SECONDS}"),
        ));
    }
    errors
}
