//! The `Memcached` custom resource: types, defaulting, validation and the
//! admission decision built on them. Pure: no I/O, no clock, no panics on input.

pub mod admission;
pub mod defaults;
pub mod duration;
pub mod extra_args;
pub mod field;
pub mod kubernetes;
pub mod memcached_options;

pub mod pod_security;
pub mod quantity;
pub mod render;
pub mod types;
pub mod validation;

pub use defaults::{Defaulted, apply_defaults};
pub use types::*;
pub use validation::validate;
