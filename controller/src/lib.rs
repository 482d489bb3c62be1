//! The memcached-operator controller, in rooms by job. Each room is a
//! folder whose `mod.rs` says what it is for and which rooms it may use; the
//! order below is that dependency order, each room using only rooms above
//! it (`e2e-tests/tests/architecture.rs` fails on an import circle, between files or rooms).
//!
//! * [`objects`]: one pure builder per managed object, and what they share.
//! * [`cluster`]: the API server as this controller sees it: the watches'
//!   cache, server-side apply, the stored Memcached, Secrets, the Lease.
//! * [`stats`]: memcached's `stats`, read from the pods in the background.
//! * [`handover`]: keys copied where clients will look for them when pods
//!   join or leave.
//! * [`rollout`]: changes applied to running pods in place, and pacing.
//! * [`metrics`]: what the controller measures, and its registry.
//! * [`reconcile`]: one Memcached converged, step by step, and reported.
//! * [`serve`]: the HTTP servers: probes, readiness, `/metrics`.
//! * [`commands`]: the `crd` and `render` subcommands.
//! * [`run`]: the long-running controller, wiring every room together.

pub mod cluster;
pub mod commands;
pub mod handover;
pub mod metrics;
pub mod objects;
pub mod reconcile;
pub mod rollout;
pub mod run;
pub mod serve;
pub mod stats;
