//! What the workspace's tests and benches share (a dev-dependency only, never
//! published): the Memcached object they send, specs judged as the policy
//! judges them, and with the `controller` feature the in-memory API server the
//! reconcile tests run against, the real-memcached launcher and a raw HTTP
//! client for the controller's endpoints.

pub mod object;
pub mod spec;

#[cfg(feature = "controller")]
pub mod fake_api;
#[cfg(feature = "controller")]
pub mod http_client;
#[cfg(feature = "controller")]
pub mod real_memcached;
