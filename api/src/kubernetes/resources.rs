//! `ResourceRequirements` of a container as the API server checks a pod's
//! (`validateResourceRequirements` of `k8s.io/kubernetes/pkg/apis/core/validation`).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{ResourceClaim, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::names::{is_dns1123_label, is_qualified_name};
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};
use crate::quantity::Quantity;

/// Prefix of the huge page resources (`hugepages-<page size>`).
pub const HUGEPAGES_PREFIX: &str = "hugepages-";
/// The namespace of Kubernetes' own resource names.
const NATIVE_NAMESPACE: &str = "kubernetes.io/";

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
pub fn parse_quantity(text: &str) -> Option<Quantity> {
    Quantity::parse(text).ok()
}

/// True when `requests.<resource>` is set.
pub fn has_request(resources: Option<&ResourceRequirements>, resource: &str) -> bool {
    resources
        .and_then(|r| r.requests.as_ref())
        .is_some_and(|r| r.contains_key(resource))
}

/// Every quantity parses and is not negative; no request exceeds its limit.
pub fn validate_quantities(resources: &ResourceRequirements, path: &Path) -> ErrorList {
    let (requests, mut errors) = parse_all(resources.requests.as_ref(), &path.child("requests"));
    let (limits, limit_errors) = parse_all(resources.limits.as_ref(), &path.child("limits"));
    errors.extend(limit_errors);
    for (name, (request, request_text)) in &requests {
        if let Some((limit, limit_text)) = limits.get(name)
            && is_overcommit_allowed(name)
            && request > limit
        {
            errors.push(FieldError::invalid(
                path.child("requests").child(name),
                *request_text,
                format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
    errors
}

/// The API server's `validateContainerResourceName` for every key of
/// `requests` and `limits` (errors on `limits[name]`, as it reports them).
fn validate_resource_names(resources: &ResourceRequirements, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (field, list) in [
        ("limits", &resources.limits),
        ("requests", &resources.requests),
    ] {
        for name in list.iter().flat_map(BTreeMap::keys) {
            if errors.len() >= MAX_ERRORS_PER_LIST {
                break;
            }
            errors.extend(validate_container_resource_name(
                name,
                &path.child(field).key(name),
            ));
        }
    }
    errors
}

/// The rules of `validateResourceRequirements` beyond names and signs: integer
/// extended resources, whole huge pages, requests of non-overcommitable
/// resources equal to their limits, huge pages only beside cpu or memory, and
/// claims naming the pod's `resourceClaims`, of which the pod has none.
pub fn validate_resource_requirements(resources: &ResourceRequirements, path: &Path) -> ErrorList {
    let mut errors = validate_resource_names(resources, path);
    let limits_path = path.child("limits");
    let requests_path = path.child("requests");
    let limits = resources.limits.as_ref();
    let mut compute = false;
    let mut huge_pages = false;
    for (list, list_path) in [
        (limits, &limits_path),
        (resources.requests.as_ref(), &requests_path),
    ] {
        for (name, text) in list.into_iter().flatten() {
            if errors.len() >= MAX_ERRORS_PER_LIST {
                return errors;
            }
            compute |= name == "cpu" || name == "memory";
            huge_pages |= name.starts_with(HUGEPAGES_PREFIX);
            let Some(quantity) = parse_quantity(&text.0).filter(|q| !q.is_negative()) else {
                continue; // reported by the quantity checks
            };
            errors.extend(quantity_value(
                name,
                quantity,
                &text.0,
                &list_path.key(name),
            ));
        }
    }
    for (name, text) in resources.requests.iter().flatten() {
        if is_overcommit_allowed(name) {
            continue;
        }
        match limits.and_then(|l| l.get(name)) {
            None => errors.push(FieldError::required(
                limits_path.clone(),
                "Limit must be set for non overcommitable resources",
            )),
            Some(limit) => {
                let (request, limit_value) = (parse_quantity(&text.0), parse_quantity(&limit.0));
                if request.is_some() && limit_value.is_some() && request != limit_value {
                    errors.push(FieldError::invalid(
                        requests_path.clone(),
                        text.0.as_str(),
                        format!("must be equal to {name} limit of {}", limit.0),
                    ));
                }
            }
        }
    }
    if huge_pages && !compute {
        errors.push(FieldError::forbidden(
            path.clone(),
            "HugePages require cpu or memory",
        ));
    }
    errors.extend(validate_claims(
        resources.claims.as_deref().unwrap_or_default(),
        &path.child("claims"),
    ));
    errors
}

/// `ValidateResourceQuantityValue` and the huge page size rule for one entry.
fn quantity_value(name: &str, quantity: Quantity, text: &str, path: &Path) -> Option<FieldError> {
    if is_extended_resource(name) && quantity.milli_value() % 1000 != 0 {
        return Some(FieldError::invalid(
            path.clone(),
            text,
            "must be an integer",
        ));
    }
    let page = name.strip_prefix(HUGEPAGES_PREFIX)?;
    let divisible = parse_quantity(page)
        .filter(|p| p.is_positive() && p.milli_value() % 1000 == 0)
        .is_some_and(|p| quantity.value() % p.value() == 0);
    (!divisible).then(|| {
        FieldError::invalid(
            path.clone(),
            text,
            format!("{text} is not positive integer multiple of {name}"),
        )
    })
}

/// `validateResourceClaimNames` against a pod without `resourceClaims`.
fn validate_claims(claims: &[ResourceClaim], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut names: HashSet<String> = HashSet::new();
    for (i, claim) in claims.iter().enumerate() {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        let path = path.index(i);
        let name = claim.name.as_str();
        if name.is_empty() {
            errors.push(FieldError::required(path, ""));
            continue;
        }
        let request = claim.request.as_deref().unwrap_or_default();
        if names.contains(name) {
            errors.push(FieldError::duplicate(path.clone(), name));
        } else {
            let mut key = name.to_string();
            if !request.is_empty() {
                let field = path.child("request");
                errors.extend(
                    is_dns1123_label(request)
                        .into_iter()
                        .map(|m| FieldError::invalid(field.clone(), request, m)),
                );
                key = format!("{name}/{request}");
            }
            if names.contains(&key) {
                errors.push(FieldError::duplicate(path.clone(), key.as_str()));
            } else if request.is_empty() {
                let prefix = format!("{name}/");
                for _ in names.iter().filter(|k| k.starts_with(&prefix)) {
                    errors.push(FieldError::duplicate(path.clone(), name));
                }
            }
            names.insert(key);
        }
        errors.push(FieldError::not_found(
            path,
            name,
            "must be one of the names in pod.spec.resourceClaims which is empty",
        ));
    }
    errors
}

/// `IsNativeResource`: unprefixed, or in the `kubernetes.io/` namespace.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains(NATIVE_NAMESPACE)
}

/// `IsOvercommitAllowed`: native and not huge pages.
fn is_overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with(HUGEPAGES_PREFIX)
}

/// `IsExtendedResourceName`.
fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

/// `validateContainerResourceName`.
pub fn validate_container_resource_name(name: &str, path: &Path) -> ErrorList {
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
    } else if !is_native_resource(name) && !is_extended_resource(name) {
        // Native (kubernetes.io) names are the API server's own; any other
        // prefixed name is an extended resource.
        errors.push(invalid("doesn't follow extended resource name standard"));
    }
    errors
}

type Parsed<'a> = BTreeMap<&'a str, (Quantity, &'a str)>;

/// The quantities of `list` that parse and are not negative, and an error
/// for each other one.
fn parse_all<'a>(
    list: Option<&'a BTreeMap<String, K8sQuantity>>,
    path: &Path,
) -> (Parsed<'a>, ErrorList) {
    let mut parsed = Parsed::new();
    let mut errors = ErrorList::new();
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
    (parsed, errors)
}
