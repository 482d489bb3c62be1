//! Keys kept through a move: when pods join or leave the server list
//! clients hash keys over, each pod's keys are copied to the servers
//! clients will ask for them ([`copy`]), placed as the clients' library
//! places them ([`placement`]).
//!
//! May use: `stats`.

pub mod copy;
pub mod placement;
