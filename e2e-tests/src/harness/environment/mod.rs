//! The test bed's programs, started and configured: the local registry and the signed
//! artifact, policy-server and what kubewarden-controller would give it, Kubewarden from its
//! charts, the real node, Prometheus, helm, the controller's processes.

pub mod helm;
pub mod kubewarden;
pub mod kubewarden_charts;
pub mod node;
pub mod operator;
pub mod pki;
pub mod policy_server;
pub mod process;
pub mod programs;
pub mod prometheus;
pub mod registry;
pub mod signing;
