//! The memcached-operator controller: builders (pure, one per managed
//! object), the stats client, and the reconcile loop (all I/O lives there).

pub mod address;
pub mod apply;
pub mod args;
pub mod cache;
pub mod crd;
pub mod deployment;
pub mod desired;
pub mod endpoints;
pub mod exposition;
pub mod hash_key;
pub mod hpa;
pub mod http;
pub mod labels;
pub mod metrics;
pub mod metrics_auth;
pub mod metrics_tls;
pub mod network_policy;
pub mod pdb;
pub mod pod_template;
pub mod process;
pub mod reconcile;
pub mod render;
pub mod run;
pub mod secrets;
pub mod server_list;
pub mod service;
pub mod service_monitor;
pub mod stateful_set;
pub mod stats;
pub mod status;
pub mod tls;
pub mod workload;
