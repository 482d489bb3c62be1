//! What the copy and its withdrawal share: keys as meta commands take them,
//! the numbers of meta answers, one session per server keys go to (opened
//! when first needed), and the copies written.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::net::SocketAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::stats::client::StatsClient;
use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// Keys of one batch of meta commands, at most.
pub const BATCH_KEYS: usize = 256;

/// A key written where it moved, with the CAS values that tell whether it
/// changed since: on its source when read, of the copy when written.
pub struct Copied {
    /// The key.
    pub key: Vec<u8>,
    /// Index of the server it went to, in the ring.
    pub owner: usize,
    /// Its CAS on the source when read.
    pub source_cas: u64,
    /// The CAS of the copy.
    pub copy_cas: u64,
}

/// A key as meta commands take it: as is, or base64 with the `b` flag when
/// it holds bytes the ASCII protocol cannot carry.
pub fn meta_key(key: &[u8]) -> (String, &'static str) {
    if !key.is_empty() && key.iter().all(|b| b.is_ascii_graphic()) {
        (String::from_utf8_lossy(key).into_owned(), "")
    } else {
        (STANDARD.encode(key), " b")
    }
}

/// The number a meta answer's flag `name` carries (`c1234` for `c`).
pub fn flag<T: std::str::FromStr>(answer: &str, name: char) -> Option<T> {
    (answer.split_ascii_whitespace().skip(1))
        .find_map(|f| f.strip_prefix(name))
        .and_then(|n| n.parse().ok())
}

/// Sessions with the servers keys go to, by index in the ring.
pub struct Owners<'a> {
    client: &'a StatsClient,
    addresses: &'a BTreeMap<usize, SocketAddr>,
    sessions: BTreeMap<usize, Session>,
}

impl<'a> Owners<'a> {
    /// No session yet, to the servers at `addresses`.
    pub fn new(client: &'a StatsClient, addresses: &'a BTreeMap<usize, SocketAddr>) -> Self {
        Owners {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_ascii_protocol_cannot_carry_go_in_base64() {
        assert_eq!(meta_key(b"plain:key"), ("plain:key".into(), ""));
        assert_eq!(meta_key("k é".as_bytes()), ("ayDDqQ==".into(), " b"));
    }

    #[test]
    fn reads_a_flag_of_an_answer() {
        assert_eq!(flag::<u64>("HD c42 t-1", 'c'), Some(42));
        assert_eq!(flag::<i64>("VA 3 f0 t-1", 't'), Some(-1));
        assert_eq!(flag::<u64>("HD", 'c'), None);
    }
}
