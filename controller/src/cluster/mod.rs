//! The API server as this controller sees it, below any one reconcile: the
//! watches' cache of the managed objects ([`cache`], each watch with the
//! [`backoff`] of [`backoff::backoff`]), server-side apply that deletes only
//! what a Memcached owns ([`apply`]), the Memcached as stored, readable or
//! not ([`stored`]), the Secrets the pods mount ([`secrets`]) and the key
//! of their hash ([`hash_key`]), the Lease of leader election
//! ([`leadership`]), and the readiness gate of pods whose keys are handed
//! over ([`gate`]).
//!
//! May use: `objects`.

pub mod apply;
pub mod backoff;
pub mod cache;
pub mod gate;
pub mod hash_key;
pub mod leadership;
pub mod secrets;
pub mod stored;
