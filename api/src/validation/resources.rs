//! `ResourceRequirements` of a container: the memory memcached needs, and
//! what the API server checks of a pod's (listed with what would fail later:
//! quantities that do not parse, are negative or request more than their limit).

use k8s_openapi::api::core::v1::ResourceRequirements;

use super::options::Options;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::resources::{
    parse_quantity, validate_quantities, validate_resource_requirements,
};
use crate::quantity::Quantity;

/// The memory limit the memcached container needs: its cache plus the overhead.
pub struct MemoryFloor<'a> {
    /// `spec.memcached.maxMemoryMB`.
    pub max_memory_mb: i32,
    /// The overhead.
    pub options: &'a Options,
}

/// A container's requests and limits: a memory limit of at least `floor`
/// (REQ-001), quantities that parse, are not negative and request at most
/// their limit, and what the API server requires of them in a pod.
pub fn validate_resources(
    resources: &ResourceRequirements,
    floor: Option<&MemoryFloor<'_>>,
    path: &Path,
) -> ErrorList {
    let mut errors: ErrorList = floor
        .and_then(|floor| memory_limit(resources, floor, path))
        .into_iter()
        .collect();
    let quantities = validate_quantities(resources, path);
    errors.extend(quantities.into_iter().map(|e| e.at(Stage::Runtime)));
    errors.extend(validate_resource_requirements(resources, path));
    errors
}

fn memory_limit(
    resources: &ResourceRequirements,
    floor: &MemoryFloor<'_>,
    path: &Path,
) -> Option<FieldError> {
    let limit_text = resources.limits.as_ref()?.get("memory")?;
    // An unparsable limit is reported by the quantity checks.
    let limit = parse_quantity(&limit_text.0)?;
    let (mb, options) = (floor.max_memory_mb, floor.options);
    let required = Quantity::mebi(mb.into()).saturating_add(options.memory_overhead);
    (limit < required).then(|| {
        FieldError::invalid(
            path.child("limits").child("memory"),
            limit_text.0.as_str(),
            format!(
                "memory limit must be at least {required} (maxMemoryMB={mb}Mi + {} overhead)",
                options.memory_overhead_text
            ),
        )
        .at(Stage::Rule)
    })
}
