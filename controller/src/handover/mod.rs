//! Keys kept through a move: when pods join or leave the server list
//! clients hash keys over, each pod's keys are copied to the servers
//! clients will ask for them ([`copy`]), placed as the clients' library
//! places them ([`placement`]); one handover per Memcached runs in the
//! background, apart from reconciling ([`board`]).
//!
//! May use: `stats`.

pub mod board;
pub mod copy;
pub mod placement;
