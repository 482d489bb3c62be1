//! Validation of a defaulted object: every violation, in one list.
//!
//! Order: the size bounds first (when one is exceeded nothing else is walked,
//! so hostile input stays cheap); then `metadata.name`; the rules of the
//! validation seeds (memory, PDB, graceful shutdown, Secret references,
//! autoscaling); the CRD schema bounds; what memcached would refuse; and what
//! the API server would refuse in the objects the controller builds.

mod autoscaling;
mod bounds;
mod image;
pub mod limits;
mod metadata;
mod names;
mod network;
pub mod pod;
mod pod_annotations;
mod resources;
mod rules;
mod runtime;
mod scheduling;
mod security;
mod selector;
mod warnings;
mod workload;

use crate::field::{ErrorList, Path};
use crate::quantity::Quantity;
use crate::types::MemcachedSpec;

pub use runtime::SLAB_CHUNK_MAX;
pub use warnings::warnings;
pub use workload::{DEPLOYMENT, MAX_STATEFUL_SET_NAME, STATEFUL_SET, WORKLOADS};

/// Memory the container needs on top of the cache by default.
pub const DEFAULT_MEMORY_OVERHEAD: &str = "32Mi";

/// Tunables of validation (the policy's settings).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Memory reserved on top of maxMemoryMB in the container limit.
    pub memory_overhead: Quantity,
    /// The overhead as the user wrote it, for messages.
    pub memory_overhead_text: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_overhead: Quantity::mebi(32),
            memory_overhead_text: DEFAULT_MEMORY_OVERHEAD.to_string(),
        }
    }
}

/// The name fields of the object's metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjectName<'a> {
    /// `metadata.name` (empty when the API server generates it).
    pub name: &'a str,
    /// `metadata.generateName`.
    pub generate_name: &'a str,
}

/// Every violation of the object: its name, then its (defaulted) spec.
pub fn validate_object(
    object: ObjectName<'_>,
    spec: &MemcachedSpec,
    options: &Options,
) -> ErrorList {
    let sizes = limits::validate_sizes(spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return sizes;
    }
    let metadata = Path::new("metadata");
    let mut errors = metadata::validate_name(object.name, object.generate_name, &metadata);
    if errors.is_empty() {
        errors.extend(workload::validate_name(object, spec, &metadata));
    }
    errors.extend(validate_spec(spec, options));
    errors
}

/// Every violation of `spec`, which should already be defaulted.
pub fn validate(spec: &MemcachedSpec, options: &Options) -> ErrorList {
    let sizes = limits::validate_sizes(spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return sizes;
    }
    validate_spec(spec, options)
}

fn validate_spec(spec: &MemcachedSpec, options: &Options) -> ErrorList {
    let mut errors = ErrorList::new();
    rules::memory_limit(spec, options, &mut errors);
    rules::pod_disruption_budget(spec, &mut errors);
    rules::graceful_shutdown(spec, &mut errors);
    rules::secret_refs(spec, &mut errors);
    rules::autoscaling(spec, &mut errors);
    bounds::validate(spec, &mut errors);
    errors.extend(workload::validate(spec, &Path::new("spec")));
    runtime::validate(spec, &mut errors);
    errors.extend(pod::validate_objects(spec, &Path::new("spec")));
    errors
}
