//! What memcached itself says: its `stats`, read from every ready pod
//! ([`client`]; over TLS with [`tls`], logged in with [`credentials`]; as a
//! Memcached's spec and Secrets call for: [`setup`]), collected in the background apart from reconciling
//! ([`live`]), so a reconcile never waits for a pod. A [`session`] carries
//! other commands (the key copies of `handover`); [`wire`] is what both
//! send and read.
//!
//! May use: `objects`, `cluster`.

pub mod client;
pub mod credentials;
pub mod live;
pub mod session;
pub mod setup;
pub mod tls;
pub mod wire;
