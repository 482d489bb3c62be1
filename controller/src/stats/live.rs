//! Live stats, collected apart from reconciling. A reconcile reads the last
//! numbers collected for its Memcached and never waits for a pod: a frozen
//! memcached costs its own collection a read timeout, never another
//! Memcached's reconcile.
//!
//! Each reconcile starts a collection in the background (one at a time per
//! Memcached) unless it reads numbers fresh from one; a reconcile that comes
//! while one runs gets another one after it. A collection that ends with
//! other numbers than the last (or that a reconcile waits for) reconciles
//! the Memcached again, and that reconcile writes them without starting
//! another: a change is in the status one collection after a reconcile,
//! and a busy cache whose numbers always change causes no loop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::runtime::reflector::ObjectRef;

use crate::cluster::stored::Stored;
use crate::stats::client::{ClusterStats, Readers, StatsClient};

/// The last stats of every Memcached, by `namespace/name`.
pub struct LiveStats {
    entries: Mutex<HashMap<String, Entry>>,
    /// Memcached objects to reconcile again for their numbers.
    changed: UnboundedSender<ObjectRef<Stored>>,
}

#[derive(Default)]
struct Entry {
    /// What the last collection read; `None` before the first one ended.
    stats: Option<ClusterStats>,
    /// A collection runs.
    running: bool,
    /// The pods it reads.
    addresses: Vec<SocketAddr>,
    /// The last collection brought new numbers no reconcile read yet.
    fresh: bool,
    /// A reconcile came while a collection ran: collect again after it.
    wanted: bool,
    /// The client that last read each pod (taken by a running collection).
    readers: Readers,
}

impl LiveStats {
    /// An empty board, and the Memcached objects to reconcile again for
    /// their numbers.
    pub fn new() -> (Arc<Self>, UnboundedReceiver<ObjectRef<Stored>>) {
        let (changed, receiver) = unbounded();
        let board = LiveStats {
            entries: Mutex::default(),
            changed,
        };
        (Arc::new(board), receiver)
    }

    /// The last stats collected for Memcached `namespace/name` (`None`
    /// before the first collection ended; empty without pods); starts collecting from
    /// `addresses` with `client` unless one runs, or the last one read the
    /// same pods and brought these numbers.
    pub fn read(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        client: StatsClient,
        addresses: Vec<SocketAddr>,
    ) -> Option<ClusterStats> {
        if addresses.is_empty() {
            return Some(ClusterStats::default()); // no ready pod to read
        }
        let key = format!("{namespace}/{name}");
        let mut entries = self.entries.lock().ok()?;
        let entry = entries.entry(key.clone()).or_default();
        let fresh = std::mem::take(&mut entry.fresh);
        if entry.running {
            entry.wanted = true;
        } else if !fresh || entry.addresses != addresses {
            entry.running = true;
            entry.addresses.clone_from(&addresses);
            let board = self.clone();
            let object = ObjectRef::new(name).within(namespace);
            let mut readers = std::mem::take(&mut entry.readers);
            tokio::spawn(async move {
                let stats = client.collect_with(&addresses, &mut readers).await;
                board.finished(&key, stats, readers, object);
            });
        }
        entry.stats.clone()
    }

    /// The last stats collected for Memcached `namespace/name`, starting no collection.
    pub fn last(&self, namespace: &str, name: &str) -> Option<ClusterStats> {
        let entries = self.entries.lock().ok()?;
        entries.get(&format!("{namespace}/{name}"))?.stats.clone()
    }

    /// Keep what a collection read; reconcile the Memcached again when the
    /// numbers changed or a reconcile waits for another collection (not
    /// when it was forgotten meanwhile).
    fn finished(
        &self,
        key: &str,
        stats: ClusterStats,
        readers: Readers,
        object: ObjectRef<Stored>,
    ) {
        let again = self.entries.lock().ok().and_then(|mut entries| {
            let entry = entries.get_mut(key)?;
            entry.running = false;
            entry.readers = readers;
            let changed = entry.stats.as_ref().is_none_or(|s| !s.same_status(&stats));
            entry.stats = Some(stats);
            let wanted = std::mem::take(&mut entry.wanted);
            // Waited for: the next reconcile collects again.
            entry.fresh = changed && !wanted;
            Some(changed || wanted)
        });
        if again == Some(true) {
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
    use std::time::Duration;

    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    /// A server that answers one `stats` with `version` and the number of
    /// connections it accepted (the numbers always change); that number.
    async fn counted(version: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
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

    fn version(stats: Option<ClusterStats>) -> Option<String> {
        stats?.version
    }

    #[tokio::test]
    async fn nothing_is_known_before_the_first_collection_then_it_reconciles_again() {
        let (board, mut changed) = LiveStats::new();
        let addr = server("1.6.40").await;
        assert_eq!(
            board.read("ns", "c", StatsClient::default(), vec![addr]),
            None
        );
        let object = changed.next().await.unwrap();
        assert_eq!(object, ObjectRef::new("c").within("ns"));
        let read = board.read("ns", "c", StatsClient::default(), vec![addr]);
        assert_eq!(version(read), Some("1.6.40".into()));
    }

    #[tokio::test]
    async fn the_reconcile_that_reads_fresh_numbers_starts_no_collection() {
        let (board, mut changed) = LiveStats::new();
        let (addr, accepted) = counted("1.6.40").await;
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![addr]);
        // The fake counts the reading connection; clients' connections leave it out.
        assert_eq!(read.and_then(|s| s.current_connections), Some(0));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "no loop");
        // The next reconcile collects again.
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_reconcile_during_a_collection_gets_one_after_it() {
        let (board, mut changed) = LiveStats::new();
        let (addr, accepted) = counted("1.6.40").await;
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        // Waited for: this reconcile collects again, once.
        board.read("ns", "c", StatsClient::default(), vec![addr]);
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![addr]);
        // The second collection's count, 2, less the reading connection.
        assert_eq!(read.and_then(|s| s.current_connections), Some(1));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn other_pods_are_read_at_once() {
        let (board, mut changed) = LiveStats::new();
        let (old, new) = (server("1.6.39").await, server("1.6.40").await);
        board.read("ns", "c", StatsClient::default(), vec![old]);
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![new]);
        assert_eq!(version(read), Some("1.6.39".into()));
        changed.next().await.unwrap();
        let read = board.read("ns", "c", StatsClient::default(), vec![new]);
        assert_eq!(version(read), Some("1.6.40".into()));
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
