//! What one Memcached should have in the cluster besides its pods, built
//! purely from its spec: one builder per managed object, and what they
//! share. The pods themselves are rendered by `memcached_api::render`,
//! which the policy calls too. No API call and no I/O here: `render` runs
//! the same builders without a cluster.
//!
//! May use: nothing else in the crate.
//!
//! * [`desired`]: every object of one Memcached, from the builders below.
//! * The workload: [`deployment`] or [`stateful_set`], both around the
//!   rendered pod template. [`workload`]: what reconcile reads from either
//!   kind; [`secret_stamp`]: which Secret versions the pods' Secret hash
//!   stands for.
//! * The rest: [`service`], [`pdb`], [`hpa`], [`network_policy`],
//!   [`service_monitor`], and [`server_list`] (`status.serverList` and the
//!   ConfigMap publishing it).
//! * [`meta`]: the name, labels and ownership every object shares.

pub mod deployment;
pub mod desired;
pub mod hpa;
pub mod meta;
pub mod network_policy;
pub mod pdb;
pub mod secret_stamp;
pub mod server_list;
pub mod service;
pub mod service_monitor;
pub mod stateful_set;
pub mod workload;
