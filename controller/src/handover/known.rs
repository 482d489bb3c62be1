//! What memcached cannot keep of a copy: the last access of its key where
//! it was copied from. memcached gives a copy the time it was written, later
//! than any key a client wrote before it, so to the next move a copy would
//! be among the most recently used of its server (a pod refilled in a
//! rollout would refuse the keys the next pod hands it). The keys the
//! handovers of a Memcached copied keep, by the server they went to, their
//! source's last access until a client writes them there.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a copy's recency is kept: a rollout's moves follow each other
/// within minutes.
const KEPT_FOR: u64 = 15 * 60;
/// Copies kept at most per Memcached (about 100 bytes each): twice the keys
/// one handover lists; the oldest go first.
const MAX_COPIES: usize = 400_000;
/// How far a copy's time in memcached may be from when it was written (its
/// clock ticks each second).
const CLOCK_SLACK: u64 = 2;

/// One copy: its key's last access where it came from, and when it was
/// written (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copy {
    last_access: u64,
    written: u64,
}

/// The copies on one server, by key.
pub type Copies = HashMap<Vec<u8>, Copy>;

/// The copies the handovers of one Memcached wrote, by server (shared with
/// the copies reading them, written anew when they change).
#[derive(Debug, Default)]
pub struct Known {
    on: HashMap<SocketAddr, Arc<Copies>>,
    /// When the oldest copy was written: nothing to forget before
    /// [`KEPT_FOR`] after it, so pruning is cheap on each reconcile.
    oldest: u64,
}

/// [`Known`], shared by a Memcached's handovers.
pub type SharedKnown = Arc<Mutex<Known>>;

impl Known {
    /// `copies` (each key and its last access where it came from) written
    /// to `server` now.
    pub fn record(&mut self, server: SocketAddr, copies: Vec<(Vec<u8>, u64)>) {
        let written = now();
        if self.on.is_empty() {
            self.oldest = written;
        }
        let on = Arc::make_mut(self.on.entry(server).or_default());
        for (key, last_access) in copies {
            on.insert(
                key,
                Copy {
                    last_access,
                    written,
                },
            );
        }
        let total: usize = self.on.values().map(|c| c.len()).sum();
        if total > MAX_COPIES {
            let mut times: Vec<u64> = (self.on.values().flat_map(|c| c.values()))
                .map(|c| c.written)
                .collect();
            let (_, newest_dropped, _) = times.select_nth_unstable(total - MAX_COPIES);
            self.forget(|copy| copy.written > *newest_dropped);
        }
    }

    /// The copies on `server`.
    pub fn on(&self, server: SocketAddr) -> Arc<Copies> {
        self.on.get(&server).cloned().unwrap_or_default()
    }

    /// Forget the servers that are not `live`, and copies written more
    /// than [`KEPT_FOR`] ago; whether none is left.
    pub fn prune(&mut self, live: impl Fn(&SocketAddr) -> bool) -> bool {
        let since = now().saturating_sub(KEPT_FOR);
        self.on.retain(|server, _| live(server));
        if self.oldest < since {
            self.forget(|copy| copy.written >= since);
        }
        self.on.is_empty()
    }

    /// Keep only the copies `keep` says.
    fn forget(&mut self, keep: impl Fn(&Copy) -> bool) {
        for copies in self.on.values_mut() {
            if copies.values().any(|c| !keep(c)) {
                Arc::make_mut(copies).retain(|_, copy| keep(copy));
            }
        }
        self.on.retain(|_, copies| !copies.is_empty());
        let kept = self.on.values().flat_map(|c| c.values());
        self.oldest = kept.map(|c| c.written).min().unwrap_or_default();
    }
}

/// The last access of `key` on a server whose LRU crawler lists it at
/// `listed`: its source's, for a copy in `copies` not written since (within
/// memcached's clock); else `listed`.
pub fn last_access(copies: &Copies, key: &[u8], listed: u64) -> u64 {
    match copies.get(key) {
        Some(copy) if listed <= copy.written + CLOCK_SLACK => copy.last_access,
        _ => listed,
    }
}

/// Now, in Unix seconds.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_its_sources_last_access_until_written_again() {
        let server: SocketAddr = "10.0.0.1:11211".parse().unwrap();
        let mut known = Known::default();
        known.record(server, vec![(b"k".to_vec(), 1_000)]);
        let copies = known.on(server);
        let written = now();
        assert_eq!(last_access(&copies, b"k", written), 1_000, "as copied");
        assert_eq!(
            last_access(&copies, b"k", written + 60),
            written + 60,
            "written since"
        );
        assert_eq!(last_access(&copies, b"other", 7), 7, "not a copy");
        assert!(!known.prune(|_| true), "a copy just written is kept");
        assert_eq!(known.on(server).len(), 1);
        known.prune(|s| *s != server);
        assert!(known.on(server).is_empty(), "a server gone is forgotten");
    }
}
