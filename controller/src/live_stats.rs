//! Live stats, collected apart from reconciling. A reconcile reads the last
//! numbers collected for its Memcached and never waits for a pod: a frozen
//! memcached costs its own collection a read timeout, never another
//! Memcached's reconcile.
//!
//! Each reconcile starts a collection in the background (one at a time per
//! Memcached, at most every [`MIN_INTERVAL`]) unless it reads numbers
//! fresh from one. A collection that ends with other numbers than the last
//! reconciles the Memcached again, and that reconcile writes them without
//! starting another: a change is in the status within one collection, and
//! a busy cache whose numbers always change causes no loop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::runtime::reflector::ObjectRef;

use crate::stats::{ClusterStats, StatsClient};
use crate::stored::Stored;

/// Least time between two collections of one Memcached of the same pods.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The last stats of every Memcached, by `namespace/name`.
pub struct LiveStats {
    entries: Mutex<HashMap<String, Entry>>,
    /// Memcached objects whose numbers changed: reconciled again.
    changed: UnboundedSender<ObjectRef<Stored>>,
}

#[derive(Default)]
struct Entry {
    stats: ClusterStats,
    /// A collection runs.
    running: bool,
    /// When the last collection started.
    started: Option<Instant>,
    /// The pods it reads.
    addresses: Vec<SocketAddr>,
    /// `stats` changed with the last collection and no reconcile read it yet.
    fresh: bool,
}

impl LiveStats {
    /// An empty board, and the Memcached objects to reconcile again when
    /// their numbers changed.
    pub fn new() -> (Arc<Self>, UnboundedReceiver<ObjectRef<Stored>>) {
        let (changed, receiver) = unbounded();
        let board = LiveStats {
            entries: Mutex::default(),
            changed,
        };
        (Arc::new(board), receiver)
    }

    /// The last stats collected for Memcached `namespace/name` (none yet:
    /// empty); starts collecting from `addresses` with `client` unless a
    /// collection runs, or the last one read the same pods and either
    /// brought these numbers or started less than [`MIN_INTERVAL`] ago.
    pub fn read(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        client: StatsClient,
        addresses: Vec<SocketAddr>,
    ) -> ClusterStats {
        let key = format!("{namespace}/{name}");
        let Ok(mut entries) = self.entries.lock() else {
            return ClusterStats::default();
        };
        let entry = entries.entry(key.clone()).or_default();
        let fresh = std::mem::take(&mut entry.fresh);
        let due = !entry.running
            && (entry.addresses != addresses
                || (!fresh && entry.started.is_none_or(|t| t.elapsed() >= MIN_INTERVAL)));
        if due {
            entry.running = true;
            entry.started = Some(Instant::now());
            entry.addresses.clone_from(&addresses);
            let board = self.clone();
            let object = ObjectRef::new(name).within(namespace);
            tokio::spawn(async move {
                let stats = client.collect(&addresses).await;
                board.finished(&key, stats, object);
            });
        }
        entry.stats.clone()
    }

    /// Keep what a collection read; reconcile the Memcached again when it
    /// differs from the last numbers (not when it was forgotten meanwhile).
    fn finished(&self, key: &str, stats: ClusterStats, object: ObjectRef<Stored>) {
        let changed = self.entries.lock().ok().and_then(|mut entries| {
            let entry = entries.get_mut(key)?;
            entry.running = false;
            entry.fresh = entry.stats != stats;
            entry.stats = stats;
            Some(entry.fresh)
        });
        if changed == Some(true) {
            let _ = self.changed.unbounded_send(object);
        }
    }

    /// Forget the Memcached objects whose `namespace/name` `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|key, _| keep(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// A server that answers one `stats` with `version`; the connections it
    /// accepted.
    async fn counted(version: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                // Each answer differs: the numbers always change.
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                let answer =
                    format!("STAT version {version}\r\nSTAT curr_connections {n}\r\nEND\r\n");
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (addr, accepted)
    }

    async fn server(version: &'static str) -> SocketAddr {
        counted(version).await.0
    }

    #[tokio::test]
    async fn the_reconcile_that_reads_fresh_numbers_starts_no_collection() {
        let (board, mut changed) = LiveStats::new();
        let (addr, accepted) = counted("1.6.40").await;
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        tokio::time::sleep(MIN_INTERVAL).await;
        let read = board.read("ns", "c", StatsClient::default(), vec![addr]);
        assert_eq!(read.current_connections, Some(1));
        tokio::time::sleep(MIN_INTERVAL).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no loop");
        // The next reconcile collects again.
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_first_read_is_empty_and_the_collection_reconciles_again() {
        let (board, mut changed) = LiveStats::new();
        let addr = server("1.6.40").await;
        let first = board.read("ns", "c", StatsClient::default(), vec![addr]);
        assert_eq!(first, ClusterStats::default());
        let object = changed.next().await.unwrap();
        assert_eq!(object, ObjectRef::new("c").within("ns"));
        let second = board.read("ns", "c", StatsClient::default(), vec![addr]);
        assert_eq!(second.version.as_deref(), Some("1.6.40"));
        assert_eq!(second.reachable, 1);
    }

    #[tokio::test]
    async fn other_pods_are_read_at_once_the_same_ones_after_the_interval() {
        let (board, mut changed) = LiveStats::new();
        let (old, new) = (server("1.6.39").await, server("1.6.40").await);
        board.read("ns", "c", StatsClient::default(), vec![old]);
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![old]);
        assert_eq!(read.version.as_deref(), Some("1.6.39"));
        board.read("ns", "c", StatsClient::default(), vec![new]);
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![new]);
        assert_eq!(read.version.as_deref(), Some("1.6.40"));
    }

    #[tokio::test]
    async fn a_forgotten_memcached_is_not_reconciled_again() {
        let (board, mut changed) = LiveStats::new();
        let addr = server("1.6.40").await;
        board.read("ns", "gone", StatsClient::default(), vec![addr]);
        board.retain(|key| key != "ns/gone");
        board.read("ns", "kept", StatsClient::default(), vec![addr]);
        assert_eq!(
            changed.next().await.unwrap(),
            ObjectRef::new("kept").within("ns")
        );
        drop(board);
        assert_eq!(changed.next().await, None, "nothing for the forgotten one");
    }
}
