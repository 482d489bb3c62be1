//! Which listed keys the servers they go to can hold, and the order to
//! write them in. memcached, out of memory, evicts the items written
//! earliest: copied most recently used first into a server that overflows,
//! the most recently used copies would be the first to go, and every copy
//! counts as newer than what the server held.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::timeout;

use crate::handover::known::SharedKnown;
use crate::handover::listing::Listed;
use crate::handover::owners::{Memory, Owners};

/// What memcached charges an item above its size, about: its slab chunk,
/// up to one growth factor (1.25 by default) larger.
const CHUNK_ROUNDING: (u64, u64) = (5, 4);
/// How long reading one server's memory may take: one slow server does not
/// hold the copy to the others.
const MEMORY_READ: Duration = Duration::from_secs(10);

/// The keys to write, in their order, and how many of `listed` (most
/// recently used first) were left out. A server that holds what it has and
/// what `sources` copying at once (this one among them) send it is sent
/// them all, most recently used first. One that may overflow keeps the
/// most recently used of its items (a copy by its source's last access,
/// [`crate::handover::known`]) and of the keys sent, as many as its memory
/// holds ([`Room`]); those are written after the others, least recently
/// used first, so that what memcached evicts is the least recently used of
/// them. A server whose memory cannot be read in [`MEMORY_READ`] is sent
/// every key, or only what it has free when what it holds cannot be read.
pub async fn fit(
    owners: &mut Owners<'_>,
    listed: Vec<Listed>,
    sources: usize,
    known: &SharedKnown,
) -> (Vec<Listed>, u64) {
    let sources = sources.max(1) as u64;
    let mut sent: BTreeMap<usize, u64> = BTreeMap::new();
    for item in &listed {
        *sent.entry(item.owner).or_default() += item.size * sources;
    }
    let mut rooms = BTreeMap::new();
    for (owner, bytes) in sent {
        let memory = match timeout(MEMORY_READ, owners.memory(owner)).await {
            Ok(Ok(memory)) => memory,
            outcome => {
                let owner = owners.address(owner);
                tracing::debug!(
                    ?owner,
                    ?outcome,
                    "a server's memory not read: every key sent"
                );
                continue;
            }
        };
        if (memory.used + bytes) * CHUNK_ROUNDING.0 > memory.limit * CHUNK_ROUNDING.1 {
            let copies = (owners.address(owner))
                .and_then(|a| Some(known.lock().ok()?.on(a)))
                .unwrap_or_default();
            let held = match timeout(MEMORY_READ, owners.recency(owner, &copies)).await {
                Ok(Ok(held)) => held,
                // Unread, what it holds counts as more recent than every key
                // sent; the session closed, an answer may be left in it.
                outcome => {
                    let address = owners.address(owner);
                    tracing::debug!(owner = ?address, ?outcome, "what a server holds not read: counted as the most recent");
                    owners.close(owner);
                    BTreeMap::from([(u64::MAX, memory.used)])
                }
            };
            tracing::debug!(
                owner = ?owners.address(owner),
                limit = memory.limit,
                used = memory.used,
                sent = bytes,
                held = held.values().sum::<u64>(),
                "a server keys go to may overflow"
            );
            rooms.insert(owner, Room::new(memory, held, sources));
        }
    }
    let before = listed.len() as u64;
    let overflowing: BTreeSet<usize> = rooms.keys().copied().collect();
    let (mut kept, mut crowded): (Vec<Listed>, Vec<Listed>) = (listed.into_iter())
        .filter(|item| (rooms.get_mut(&item.owner)).is_none_or(|room| room.takes(item)))
        .partition(|item| !overflowing.contains(&item.owner));
    let left_out = before - (kept.len() + crowded.len()) as u64;
    for (owner, room) in &rooms {
        let (owner, refused) = (owners.address(*owner), room.refused);
        tracing::debug!(?owner, refused, "keys left out: more than a server holds");
    }
    crowded.reverse();
    kept.append(&mut crowded);
    (kept, left_out)
}

/// What a server that may overflow keeps: from the most recently used
/// down, its own items and the keys sent (each counted once per source
/// copying at once, the others sending as much), until its memory, less
/// what slab chunks add, is used.
struct Room {
    /// Bytes still free.
    left: u64,
    /// The bytes of its items by last access, the most recent last.
    held: Vec<(u64, u64)>,
    /// Sources copying at once.
    sources: u64,
    /// Keys it did not take.
    refused: u64,
}

impl Room {
    fn new(memory: Memory, held: BTreeMap<u64, u64>, sources: u64) -> Self {
        Room {
            left: memory.limit * CHUNK_ROUNDING.1 / CHUNK_ROUNDING.0,
            held: held.into_iter().collect(),
            sources,
            refused: 0,
        }
    }

    /// Whether `item`, the most recently used of those sent not yet taken,
    /// fits after the items held that are at least as recent.
    fn takes(&mut self, item: &Listed) -> bool {
        while let Some(&(last_access, bytes)) = self.held.last() {
            if last_access < item.last_access {
                break;
            }
            self.left = self.left.saturating_sub(bytes);
            self.held.pop();
        }
        let bytes = item.size * self.sources;
        let fits = self.left > 0 && bytes <= self.left;
        // An older key never takes the place a newer one did not fit in.
        self.left = if fits { self.left - bytes } else { 0 };
        self.refused += u64::from(!fits);
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(last_access: u64, size: u64) -> Listed {
        Listed {
            last_access,
            key: Vec::new(),
            size,
            owner: 0,
        }
    }

    #[test]
    fn a_full_server_keeps_the_most_recent_of_its_items_and_the_keys_sent() {
        // 100 bytes (80 after slab chunks): 30 held at 50, 30 at 10.
        let memory = Memory {
            limit: 100,
            used: 60,
        };
        let mut room = Room::new(memory, BTreeMap::from([(10, 30), (50, 30)]), 1);
        let taken: Vec<bool> = [item(60, 20), item(40, 20), item(30, 20), item(5, 1)]
            .iter()
            .map(|i| room.takes(i))
            .collect();
        assert_eq!(taken, [true, true, false, false]);
    }

    #[test]
    fn each_key_counts_once_per_source() {
        let memory = Memory {
            limit: 100,
            used: 0,
        };
        let mut room = Room::new(memory, BTreeMap::new(), 2);
        assert!(room.takes(&item(9, 40)));
        assert!(!room.takes(&item(8, 1)), "80 of 80 taken");
    }

    #[test]
    fn what_cannot_be_read_counts_as_most_recent() {
        let memory = Memory {
            limit: 100,
            used: 70,
        };
        let mut room = Room::new(memory, BTreeMap::from([(u64::MAX, 70)]), 1);
        assert!(room.takes(&item(u64::MAX - 1, 10)));
        assert!(!room.takes(&item(1, 1)));
    }
}
