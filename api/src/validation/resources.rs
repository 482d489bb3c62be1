//! Quantities of resource requirements, checked as the API server checks a pod's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::names::is_qualified_name;
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};
use crate::quantity::Quantity;

/// Resource names a container may request without a domain prefix
/// (`IsStandardContainerResourceName`, besides `hugepages-*`).
const STANDARD_CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];
/// `IsStandardResourceName`'s other names (quota and object counts).
const OTHER_STANDARD_RESOURCES: [&str; 17] = [
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// The quantity, or `None` when it does not parse.
pub(super) fn parse_quantity(text: &str) -> Option<Quantity> {
    Quantity::parse(text).ok()
}

/// True when `requests.<resource>` is set.
pub(super) fn has_request(resources: Option<&ResourceRequirements>, resource: &str) -> bool {
    resources
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.contains_key(resource))
}

/// Every quantity parses and is not negative; no request exceeds its limit.
pub(super) fn validate(resources: &ResourceRequirements, path: &Path, errors: &mut ErrorList) {
    let requests = parse_all(resources.requests.as_ref(), &path.child("requests"), errors);
    let limits = parse_all(resources.limits.as_ref(), &path.child("limits"), errors);
    for (name, (request, request_text)) in &requests {
        if let Some((limit, limit_text)) = limits.get(name)
            && request > limit
        {
            errors.push(FieldError::invalid(
                path.child("requests").child(name),
                *request_text,
                format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
}

/// The API server's `validateContainerResourceName` for every key of
/// `requests` and `limits` (errors on `limits[name]`, as it reports them).
pub(super) fn validate_resource_names(resources: &ResourceRequirements, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (field, list) in [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ] {
        for name in list.iter().flat_map(BTreeMap::keys) {
            if errors.len() >= MAX_ERRORS_PER_LIST {
                break;
            }
            errors.extend(resource_name(name, &path.child(field).key(name)));
        }
    }
    errors
}

fn resource_name(name: &str, path: &Path) -> ErrorList {
    let qualified: ErrorList = is_qualified_name(name)
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), name, m))
        .collect();
    if !qualified.is_empty() {
        return qualified;
    }
    let invalid = |detail: &str| FieldError::invalid(path.clone(), name, detail);
    let mut errors = ErrorList::new();
    if !name.contains('/') {
        let container =
            STANDARD_CONTAINER_RESOURCES.contains(&name) || name.starts_with("hugepages-");
        if !container && !OTHER_STANDARD_RESOURCES.contains(&name) {
            errors.push(invalid(
                "must be a standard resource type or fully qualified",
            ));
        }
        if !container {
            errors.push(invalid("must be a standard resource for containers"));
        }
    } else if !name.contains("kubernetes.io/")
        && !is_qualified_name(&format!("requests.{name}")).is_empty()
    {
        // Native (kubernetes.io) names are the API server's own; any other
        // prefixed name is an extended resource.
        errors.push(invalid("doesn't follow extended resource name standard"));
    }
    errors
}

type Parsed<'a> = BTreeMap<&'a str, (Quantity, &'a str)>;

fn parse_all<'a>(
    list: Option<&'a BTreeMap<String, K8sQuantity>>,
    path: &Path,
    errors: &mut ErrorList,
) -> Parsed<'a> {
    let mut parsed = Parsed::new();
    for (name, text) in list.into_iter().flatten() {
        let path = path.child(name);
        match Quantity::parse(&text.0) {
            Err(e) => errors.push(FieldError::invalid(path, text.0.as_str(), e.to_string())),
            Ok(q) if q.is_negative() => errors.push(FieldError::invalid(
                path,
                text.0.as_str(),
                "must be greater than or equal to 0",
            )),
            Ok(q) => {
                parsed.insert(name.as_str(), (q, text.0.as_str()));
            }
        }
    }
    parsed
}
