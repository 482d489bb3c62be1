//! What the controller measures for `/metrics`: the [`registry`] with its
//! own numbers (reconciles, replicas), each Memcached's conditions and what
//! its pods last told the stats collection ([`memcacheds`]), the standard
//! `process_*` metrics ([`process`]), and the requests the controller sends
//! the API server ([`api_requests`], a layer of its client).
//!
//! May use: `stats`.

pub mod api_requests;
pub mod memcacheds;
pub mod process;
pub mod registry;
