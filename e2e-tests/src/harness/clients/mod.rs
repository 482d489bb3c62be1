//! Talking to what runs: kubectl, plain HTTP, memcached's text protocol and OpenStack's hash
//! client, the API server's own counters, and waiting for and checking what they show.

pub mod api_requests;
pub mod checks;
pub mod hash_client;
pub mod http;
pub mod kubectl;
pub mod memcache;
pub mod webhook_latency;
