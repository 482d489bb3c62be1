//! The subcommands besides `run` ([`crate::run`]): `crd` prints the
//! CustomResourceDefinition ([`crd`]), `render` every object the controller
//! would apply for a CR, without a cluster ([`render`], refusing what the API
//! server would not keep: [`unknown_fields`]); both print YAML in one style
//! ([`yaml`]).
//!
//! May use: `objects`.

pub mod crd;
pub mod render;
pub mod unknown_fields;
pub mod yaml;
