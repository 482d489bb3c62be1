//! What one Memcached should have in the cluster, built purely from its
//! spec: one builder per managed object, and what they share. No API call
//! and no I/O here: `render` runs the same builders without a cluster.
//!
//! May use: nothing else in the crate.
//!
//! * [`desired`]: every object of one Memcached, from the builders below.
//! * The pods: [`deployment`] or [`stateful_set`], both around
//!   [`pod_template`], which takes memcached's command line from [`args`],
//!   its warm-restart supervisor from [`warm_start`], and the stamps that
//!   keep a running template while the user's intent is the same from
//!   [`intent`]. [`workload`]: what reconcile reads from either kind;
//!   [`secret_stamp`]: which Secret versions the pods' Secret hash stands for.
//! * The rest: [`service`], [`pdb`], [`hpa`], [`network_policy`],
//!   [`service_monitor`], and [`server_list`] (`status.serverList` and the
//!   ConfigMap publishing it).
//! * [`labels`]: names, labels and ownership every object shares.

pub mod args;
pub mod deployment;
pub mod desired;
pub mod hpa;
pub mod intent;
pub mod labels;
pub mod network_policy;
pub mod pdb;
pub mod pod_template;
pub mod secret_stamp;
pub mod server_list;
pub mod service;
pub mod service_monitor;
pub mod stateful_set;
pub mod warm_start;
pub mod workload;
