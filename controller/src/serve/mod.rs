//! The controller's HTTP servers: [`endpoints`] starts them on the addresses
//! the flags give ([`address`]), [`http`] serves the probes, `/readyz`
//! ([`readiness`]: synced, and the API server answering) and `/metrics` in
//! the format the scraper asks for ([`exposition`]), over TLS
//! ([`metrics_tls`]) to scrapers authenticated and authorized
//! ([`metrics_auth`]).
//!
//! May use: `cluster`, `metrics`.

pub mod address;
pub mod endpoints;
pub mod exposition;
pub mod http;
pub mod metrics_auth;
pub mod metrics_tls;
pub mod readiness;
