//! Which listed keys the servers they go to can hold, and the order to
//! write them in. memcached, out of memory, evicts the items written
//! earliest: copied most recently used first into a server that overflows,
//! the most recently used copies would be the first to go.

use std::collections::{BTreeMap, BTreeSet};

use crate::handover::listing::Listed;
use crate::handover::owners::Owners;

/// What memcached charges an item above its size, at most: its slab
/// chunk, at most one growth factor (1.25 by default) larger.
const CHUNK_ROUNDING: (u64, u64) = (5, 4);

/// The keys to write, in their order, and how many of `listed` (most
/// recently used first) were left out: for each server they go to, no more
/// bytes than its memory holds, the most recently used kept. In that same
/// order while `sources` copying at once (this one among them) fit in what
/// each server has free; least recently used first once one may overflow,
/// so that what memcached evicts is the least recently used of them. A
/// server whose memory cannot be read keeps every key (the write will say
/// why it fails).
pub async fn fit(
    owners: &mut Owners<'_>,
    listed: Vec<Listed>,
    sources: usize,
) -> (Vec<Listed>, u64) {
    let mut memory = BTreeMap::new();
    for owner in listed
        .iter()
        .map(|item| item.owner)
        .collect::<BTreeSet<_>>()
    {
        memory.insert(owner, owners.memory(owner).await.ok());
    }
    let mut taken: BTreeMap<usize, u64> = BTreeMap::new();
    let before = listed.len() as u64;
    let mut kept: Vec<Listed> = (listed.into_iter())
        .filter(|item| {
            let bytes = taken.entry(item.owner).or_default();
            *bytes += item.size;
            memory[&item.owner].is_none_or(|m| *bytes <= m.limit)
        })
        .collect();
    let left_out = before - kept.len() as u64;
    let overflows = taken.iter().any(|(owner, bytes)| {
        memory[owner].is_some_and(|m| {
            let charged = (m.used + bytes * sources.max(1) as u64) * CHUNK_ROUNDING.0;
            charged > m.limit * CHUNK_ROUNDING.1
        })
    });
    if overflows {
        kept.reverse();
    }
    (kept, left_out)
}
