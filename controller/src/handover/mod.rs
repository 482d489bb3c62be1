//! Keys kept through a move: when pods join or leave the server list
//! clients hash keys over, each pod's keys that move ([`listing`]) are
//! copied to the servers clients will ask for them ([`copy`], as many as
//! they hold, [`fit`], by the recency their keys had where a copy came
//! from, [`known`]; with meta
//! commands, [`meta`], over a session per server, [`owners`]), placed as the clients' library places them
//! ([`placement`]), and copies of keys changed meanwhile taken back
//! ([`withdraw`]), and once clients use the new list, the moved keys
//! retired where they were ([`retire`]); one handover per Memcached runs in
//! the background, apart from reconciling ([`board`]), its end waking the
//! Memcached's reconcile.
//!
//! May use: `stats`, `cluster`.

pub mod board;
pub mod copy;
pub mod fit;
pub mod known;
pub mod listing;
pub mod meta;
pub mod owners;
pub mod placement;
pub mod retire;
pub mod withdraw;
