//! One session per server keys go to, opened when first needed.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use crate::handover::known::{self, Copies};
use crate::handover::listing::metadump;
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

    /// Server `owner`'s memory, from its `stats` ([`StatsClient::fetch`]).
    pub async fn memory(&mut self, owner: usize) -> Result<Memory, StatsError> {
        let addr = self.address(owner).ok_or_else(|| {
            StatsError::Connect("no address for the server clients will ask".into())
        })?;
        let stats = self.client.fetch(addr).await?;
        match stats.limit_maxbytes {
            0 => Err(StatsError::Protocol("stats without limit_maxbytes".into())),
            limit => Ok(Memory {
                limit,
                used: stats.bytes,
            }),
        }
    }

    /// The bytes server `owner`'s items take, by their last access (its LRU
    /// crawler's listing; a copy in `copies`, its source's).
    pub async fn recency(
        &mut self,
        owner: usize,
        copies: &Copies,
    ) -> Result<BTreeMap<u64, u64>, StatsError> {
        let mut held = BTreeMap::new();
        metadump(self.session(owner).await?, |key, last_access, size| {
            let last_access = known::last_access(copies, &key, last_access);
            *held.entry(last_access).or_default() += size;
        })
        .await?;
        Ok(held)
    }

    /// The address of server `owner`.
    pub fn address(&self, owner: usize) -> Option<SocketAddr> {
        self.addresses.get(&owner).copied()
    }

    /// Close the session with `owner` (after a failure: the next opens anew).
    pub fn close(&mut self, owner: usize) {
        self.sessions.remove(&owner);
    }
}

/// A server's memory, as its `stats` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// `limit_maxbytes`: what it may hold.
    pub limit: u64,
    /// `bytes`: what its items take.
    pub used: u64,
}
