//! Quantities of resource requirements, checked as the API server checks a pod's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use crate::field::{ErrorList, FieldError, Path};
use crate::quantity::Quantity;

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
