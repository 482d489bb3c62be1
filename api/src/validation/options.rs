//! What validation is told besides the spec: the policy's settings and the
//! object's name.

use crate::quantity::Quantity;

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
