//! Validation of a defaulted spec: every violation, in one list.
//!
//! Order: the rules of the validation seeds (memory, PDB, graceful shutdown,
//! Secret references, autoscaling), then the CRD schema bounds, then the
//! checks that catch what memcached or the API server would refuse later.

mod bounds;
mod resources;
mod rules;
mod runtime;

use crate::field::ErrorList;
use crate::quantity::Quantity;
use crate::types::MemcachedSpec;

pub use rules::warnings;

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

/// Every violation of `spec`, which should already be defaulted.
pub fn validate(spec: &MemcachedSpec, options: &Options) -> ErrorList {
    let mut errors = ErrorList::new();
    rules::memory_limit(spec, options, &mut errors);
    rules::pod_disruption_budget(spec, &mut errors);
    rules::graceful_shutdown(spec, &mut errors);
    rules::secret_refs(spec, &mut errors);
    rules::autoscaling(spec, &mut errors);
    bounds::validate(spec, &mut errors);
    runtime::validate(spec, &mut errors);
    errors
}
