//! Specs from JSON, defaulted and judged as the policy judges them.

use memcached_api::validation::Options;
use memcached_api::{Defaulted, MemcachedSpec, apply_defaults, validate};
use serde_json::Value;

/// A spec from JSON.
pub fn spec(json: Value) -> MemcachedSpec {
    serde_json::from_value(json).expect("test spec decodes")
}

/// A spec from JSON, defaulted.
pub fn defaulted(json: Value) -> Defaulted {
    apply_defaults(spec(json))
}

/// The rendered errors of the defaulted spec.
pub fn errors(json: Value) -> Vec<String> {
    validate(&defaulted(json), &Options::default())
        .iter()
        .map(ToString::to_string)
        .collect()
}
