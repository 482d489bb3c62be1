//! One session per server keys go to, opened when first needed.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use crate::stats::client::StatsClient;
use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// Sessions with the servers keys go to, by index in the ring.
pub struct Owners<'a> {
    /// Those that join the servers clients hash over: no client uses them
    /// yet, so what they hold is an earlier copy, overwritten.
    pub fresh: BTreeSet<usize>,
    client: &'a StatsClient,
    addresses: &'a BTreeMap<usize, SocketAddr>,
    sessions: BTreeMap<usize, Session>,
}

impl<'a> Owners<'a> {
    /// No session yet, to the servers at `addresses`.
    pub fn new(client: &'a StatsClient, addresses: &'a BTreeMap<usize, SocketAddr>) -> Self {
        Owners {
            fresh: BTreeSet::new(),
            client,
            addresses,
            sessions: BTreeMap::new(),
        }
    }

    /// The session with server `owner`, opened if needed.
    pub async fn session(&mut self, owner: usize) -> Result<&mut Session, StatsError> {
        match self.sessions.entry(owner) {
            Entry::Occupied(s) => Ok(s.into_mut()),
            Entry::Vacant(slot) => {
                let addr = self.addresses.get(&owner).ok_or_else(|| {
                    StatsError::Connect("no address for the server clients will ask".into())
                })?;
                Ok(slot.insert(self.client.session(*addr).await?))
            }
        }
    }

    /// Close the session with `owner` (after a failure: the next opens anew).
    pub fn close(&mut self, owner: usize) {
        self.sessions.remove(&owner);
    }
}
