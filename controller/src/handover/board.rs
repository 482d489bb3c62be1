//! The handovers under way, one per Memcached, run apart from reconciling:
//! a reconcile says which move it needs ([`Plan`]) and reads how far its
//! copy went ([`State`]); it never waits for a pod. A copy that ends has
//! its Memcached reconciled again at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::future::join_all;
use kube::runtime::reflector::ObjectRef;
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep};

use crate::cluster::stored::Stored;
use crate::handover::copy::{Budget, Progress, copy_out};
use crate::handover::known::SharedKnown;
use crate::handover::meta::Copied;
use crate::handover::placement::{Algorithm, Ring};
use crate::handover::retire::{GRACE, Unretired, due_before, retire};
use crate::stats::client::StatsClient;

/// How long one handover may copy before the move goes on without the rest.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// Keys one handover lists at most, over all its sources (about 100 bytes
/// of the controller's memory each).
pub const MAX_KEYS: usize = 200_000;

/// One move of a server list: clients hash over `from` now, and will over `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// How the clients place keys.
    pub algorithm: Algorithm,
    /// The servers clients use now (`host:port`).
    pub from: Vec<String>,
    /// The servers they will use.
    pub to: Vec<String>,
}

impl Plan {
    /// The first server that joins or leaves.
    pub fn first_moved(&self) -> Option<&String> {
        (self.to.iter().chain(&self.from)).find(|s| !self.from.contains(s) || !self.to.contains(s))
    }
}

/// How far a handover went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The sum over its sources.
    pub progress: Progress,
    /// Every source is done (or the deadline passed).
    pub done: bool,
    /// Since it started, or how long it took.
    pub elapsed: Duration,
    /// Since it ended (zero while it runs): read by the reconcile that
    /// publishes the new list, how long after the copy that began.
    pub since_done: Duration,
}

/// A server list published, and the uid of the Memcached it was for.
type Published = (Option<String>, Vec<String>);

/// Keys copied, with the address of the server they were copied from.
type Moved = Arc<Mutex<Unretired>>;

struct Entry {
    plan: Plan,
    started: Instant,
    /// Each source's progress, by server.
    sources: Arc<Mutex<BTreeMap<String, Progress>>>,
    took: Arc<Mutex<Option<Duration>>>,
    /// The keys a growing list's copy wrote, and those an earlier move
    /// wrote that this one does not move, by the address of their source:
    /// retired there a [`GRACE`] after the list is published, or before the
    /// next move that moves them (emptied by whichever comes first).
    moved: Moved,
    /// How many of `moved`'s first lists are those an earlier move wrote.
    carried: usize,
    /// Its end was reported.
    reported: bool,
    /// The copy, stopped when the entry goes (a plan replaced or forgotten:
    /// its copies are for a list that will not be published).
    task: AbortHandle,
    /// The list is published: the moved keys are retired after the grace.
    published: bool,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The handovers of every Memcached, by `namespace/name`.
pub struct Handovers {
    entries: Mutex<HashMap<String, Entry>>,
    /// The server list this controller last published for each Memcached
    /// whose keys are handed over (with its uid: not another object's of the
    /// same name): what its clients use, even before the status written
    /// with it is read back.
    published: Mutex<HashMap<String, Published>>,
    /// Memcached objects whose copy ended: reconciled again to go on.
    ended: UnboundedSender<ObjectRef<Stored>>,
    /// The keys each Memcached's handovers copied, with their recency.
    known: Mutex<HashMap<String, SharedKnown>>,
    /// The leaving servers of each Memcached whose keys were handed over
    /// (a Deployment's pods, terminating until they are gone).
    left: Mutex<HashMap<String, BTreeSet<String>>>,
}

impl Handovers {
    /// No handover yet, and the Memcached objects to reconcile again as
    /// their copies end.
    pub fn new() -> (Self, UnboundedReceiver<ObjectRef<Stored>>) {
        let (ended, receiver) = unbounded();
        let handovers = Handovers {
            entries: Mutex::default(),
            published: Mutex::default(),
            ended,
            known: Mutex::default(),
            left: Mutex::default(),
        };
        (handovers, receiver)
    }

    /// The handover of `plan` for `key`: started (copying from each server of
    /// `plan.from` at `addresses`, by server, to the servers of `plan.to`
    /// there, with the stats `client` made then) unless one of the same plan
    /// runs or ran; how far it went. `None` when it cannot start: no client.
    pub fn step(
        &self,
        key: &str,
        plan: &Plan,
        client: impl FnOnce() -> Option<StatsClient>,
        addresses: &BTreeMap<String, SocketAddr>,
    ) -> Option<State> {
        let mut entries = self.entries.lock().ok()?;
        if entries.get(key).is_none_or(|e| e.plan != *plan) {
            let client = client()?;
            // The keys the move before moved, not retired yet. If its list
            // is the one clients use now, those this move moves again are
            // retired first and the others kept; else all are retired first,
            // but for its own copies of a list never published (clients still
            // read those keys where they were).
            let unretired = match entries.remove(key) {
                Some(before) if before.plan.to == plan.from => (take(&before.moved), Vec::new()),
                Some(before) => {
                    let mut carried = take(&before.moved);
                    if !before.published {
                        carried.truncate(before.carried);
                    }
                    (Vec::new(), carried)
                }
                None => Default::default(),
            };
            let ended = (self.ended.clone(), object_of(key));
            let known = self.known_of(key, addresses);
            let entry = start(plan, client, addresses, (unretired, known), ended);
            entries.insert(key.to_string(), entry);
        }
        let entry = entries.get(key)?;
        let progress = entry
            .sources
            .lock()
            .ok()?
            .values()
            .fold(Progress::default(), add);
        let took = *entry.took.lock().ok()?;
        let since_start = entry.started.elapsed();
        Some(State {
            progress,
            done: took.is_some(),
            elapsed: took.unwrap_or(since_start),
            since_done: took.map_or(Duration::ZERO, |t| since_start.saturating_sub(t)),
        })
    }

    /// The copies `key`'s handovers wrote, those on servers no longer at
    /// `addresses` (and old ones) forgotten.
    fn known_of(&self, key: &str, addresses: &BTreeMap<String, SocketAddr>) -> SharedKnown {
        let known = self
            .known
            .lock()
            .map(|mut k| k.entry(key.to_string()).or_default().clone())
            .unwrap_or_default();
        if let Ok(mut copies) = known.lock() {
            copies.prune(|server| addresses.values().any(|a| a == server));
        }
        known
    }

    /// Whether the end of `key`'s handover is still to be reported (once).
    pub fn first_report(&self, key: &str) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        entries
            .get_mut(key)
            .is_some_and(|e| !std::mem::replace(&mut e.reported, true))
    }

    /// After `key`'s server list is published as `published` (no move
    /// needed): a handover that grew the list to it, or carried keys from an
    /// earlier move, retires them where they were a [`GRACE`] later
    /// ([`retire`], with the stats `client` made now), unless the next move
    /// does first, and is forgotten once they are; any other is forgotten
    /// now, the keys it carried retired at once. The recency of its old
    /// copies is forgotten ([`crate::handover::known`]).
    pub fn settle(
        &self,
        key: &str,
        published: &[String],
        client: impl FnOnce() -> Option<StatsClient>,
    ) {
        if let Ok(mut known) = self.known.lock() {
            let forgotten =
                (known.get(key)).is_some_and(|k| k.lock().is_ok_and(|mut k| k.prune(|_| true)));
            if forgotten {
                known.remove(key);
            }
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let Some(entry) = entries.get_mut(key) else {
            return;
        };
        let done = entry.took.lock().is_ok_and(|took| took.is_some());
        let unretired = entry.moved.lock().is_ok_and(|moved| !moved.is_empty());
        if entry.published && unretired {
            return;
        }
        let publishes = !entry.published && done && entry.plan.to == published && unretired;
        // Forgotten before its list was published: the keys it carried from
        // an earlier move are retired now (its own copies never were read).
        let carried = if publishes || entry.published {
            Vec::new()
        } else {
            let mut carried = take(&entry.moved);
            carried.truncate(entry.carried);
            carried
        };
        let client = (publishes || !carried.is_empty()).then(client).flatten();
        if !publishes {
            entries.remove(key);
            if let Some(client) = client {
                tokio::spawn(async move { retire_moved(&client, carried).await });
            }
            return;
        }
        let Some(client) = client else {
            entries.remove(key);
            return;
        };
        entry.published = true;
        // Not stopped with the entry: the next move takes the keys first, or
        // a deleted Memcached's are dropped with it.
        let moved = Arc::downgrade(&entry.moved);
        tokio::spawn(async move {
            sleep(GRACE).await;
            if let Some(moved) = moved.upgrade() {
                retire_moved(&client, take(&moved)).await;
            }
        });
    }

    /// Which of `key`'s `leaving` servers handed their keys over already
    /// ([`Handovers::left`]); those no longer leaving are forgotten.
    pub fn handed_over_by(&self, key: &str, leaving: &BTreeSet<String>) -> BTreeSet<String> {
        let Ok(mut left) = self.left.lock() else {
            return BTreeSet::new();
        };
        let Some(servers) = left.get_mut(key) else {
            return BTreeSet::new();
        };
        servers.retain(|s| leaving.contains(s));
        let handed = servers.clone();
        if servers.is_empty() {
            left.remove(key);
        }
        handed
    }

    /// Record that `servers` of `key`, leaving, handed their keys over.
    pub fn left(&self, key: &str, servers: impl IntoIterator<Item = String>) {
        if let Ok(mut left) = self.left.lock() {
            left.entry(key.to_string()).or_default().extend(servers);
        }
    }

    /// Record that the clients of `key` (of `uid`) were given `servers`
    /// (`None`: forget what they were given, its keys are no longer handed
    /// over).
    pub fn publish(&self, key: &str, uid: Option<String>, servers: Option<&[String]>) {
        if let Ok(mut published) = self.published.lock() {
            match servers {
                Some(servers) => published.insert(key.to_string(), (uid, servers.to_vec())),
                None => published.remove(key),
            };
        }
    }

    /// The server list last published for `key` (of `uid`) by this controller.
    pub fn published(&self, key: &str, uid: Option<String>) -> Option<Vec<String>> {
        let published = self.published.lock().ok()?;
        let (of, servers) = published.get(key)?;
        (*of == uid).then(|| servers.clone())
    }

    /// The plan of `key`'s handover, while its copy goes on.
    pub fn unfinished(&self, key: &str) -> Option<Plan> {
        self.last(key)
            .filter(|(_, done)| !done)
            .map(|(plan, _)| plan)
    }

    /// The plan of `key`'s handover, once its copy is done.
    pub fn finished(&self, key: &str) -> Option<Plan> {
        self.last(key)
            .filter(|(_, done)| *done)
            .map(|(plan, _)| plan)
    }

    /// The plan of `key`'s last handover, and whether its copy is done.
    fn last(&self, key: &str) -> Option<(Plan, bool)> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(key)?;
        let done = entry.took.lock().is_ok_and(|took| took.is_some());
        Some((entry.plan.clone(), done))
    }

    /// Forget the handovers of the Memcached objects whose key `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|key, _| keep(key));
        }
        if let Ok(mut published) = self.published.lock() {
            published.retain(|key, _| keep(key));
        }
        if let Ok(mut known) = self.known.lock() {
            known.retain(|key, _| keep(key));
        }
        if let Ok(mut left) = self.left.lock() {
            left.retain(|key, _| keep(key));
        }
    }
}

/// The Memcached of `key` (`namespace/name`).
fn object_of(key: &str) -> ObjectRef<Stored> {
    match key.split_once('/') {
        Some((namespace, name)) => ObjectRef::new(name).within(namespace),
        None => ObjectRef::new(key),
    }
}

/// The keys in `moved`, taken.
fn take(moved: &Moved) -> Unretired {
    (moved.lock())
        .map(|mut moved| std::mem::take(&mut *moved))
        .unwrap_or_default()
}

/// Retire the keys in `moved` where they were copied from ([`retire`]),
/// from every source at once (one that is gone costs its connect timeout).
async fn retire_moved(client: &StatsClient, moved: Unretired) {
    let mut by_source: BTreeMap<SocketAddr, Vec<Copied>> = BTreeMap::new();
    for (source, copied) in moved {
        by_source.entry(source).or_default().extend(copied);
    }
    join_all(by_source.into_iter().map(|(source, copied)| async move {
        let of = copied.len();
        match retire(client, source, &copied).await {
            Ok(n) => tracing::info!(%source, retired = n, of, "moved keys retired"),
            Err(e) => tracing::info!(%source, error = %e, of, "moved keys not retired"),
        }
    }))
    .await;
}

/// Start copying `plan`'s keys from every source at once: every server of a
/// growing list (each hands some keys to the new ones), the leaving ones of
/// a shrinking list (rendezvous and ketama keep the others' keys where
/// they are), after retiring the keys of `unretired.0` it moves again
/// ([`due_before`]) and those of `unretired.1`, with the recency of the
/// keys earlier copies wrote (`known`, which takes this one's); `object`
/// sent to `ended` once done.
fn start(
    plan: &Plan,
    client: StatsClient,
    addresses: &BTreeMap<String, SocketAddr>,
    (unretired, known): ((Unretired, Unretired), SharedKnown),
    (ended, object): (UnboundedSender<ObjectRef<Stored>>, ObjectRef<Stored>),
) -> Entry {
    let started = Instant::now();
    let sources: Arc<Mutex<BTreeMap<String, Progress>>> = Arc::default();
    let took: Arc<Mutex<Option<Duration>>> = Arc::default();
    let rings = (
        Ring::new(plan.algorithm, &plan.from),
        Ring::new(plan.algorithm, &plan.to),
    );
    let destinations: BTreeMap<usize, SocketAddr> = (plan.to.iter().enumerate())
        .filter_map(|(i, server)| Some((i, *addresses.get(server)?)))
        .collect();
    // Pods only leave: the others keep their keys (a move that adds a pod
    // copies from every pod).
    let shrinks = plan.to.iter().all(|server| plan.from.contains(server));
    let from: Vec<(String, SocketAddr)> = (plan.from.iter())
        .filter(|server| !shrinks || !plan.to.contains(server))
        .filter_map(|server| Some((server.clone(), *addresses.get(server)?)))
        .collect();
    // A server without a ready address is left out: the log says which.
    tracing::info!(
        from = ?plan.from,
        to = ?plan.to,
        sources = ?from,
        destinations = destinations.len(),
        "handover started"
    );
    let budget = Budget {
        deadline: started + DEADLINE,
        max_keys: MAX_KEYS / from.len().max(1),
        sources: from.len(),
    };
    let (mut due, kept) = due_before((&rings.0, &rings.1), unretired.0);
    due.extend(unretired.1);
    let carried = kept.len();
    let moved: Moved = Arc::new(Mutex::new(kept));
    let (board, done, written) = (sources.clone(), took.clone(), moved.clone());
    // Not stopped with the entry: a move replaced meanwhile loses no key to retire.
    let retiring = tokio::spawn({
        let client = client.clone();
        async move { retire_moved(&client, due).await }
    });
    let task = tokio::spawn(async move {
        let _ = retiring.await;
        let copies = from.iter().map(|(server, addr)| {
            let (rings, destinations, client, board, known) =
                ((&rings.0, &rings.1), &destinations, &client, &board, &known);
            async move {
                let report = |p: &Progress| {
                    if let Ok(mut sources) = board.lock() {
                        sources.insert(server.clone(), p.clone());
                    }
                };
                let source = (*addr, server.as_str());
                let (_, copied) =
                    copy_out(client, source, rings, destinations, (budget, known), report).await;
                (*addr, copied)
            }
        });
        let copied = join_all(copies).await;
        // A leaving server's keys go with it.
        if let (false, Ok(mut moved)) = (shrinks, written.lock()) {
            moved.extend(copied);
        }
        if let Ok(mut took) = done.lock() {
            *took = Some(started.elapsed());
        }
        let _ = ended.unbounded_send(object);
    });
    Entry {
        plan: plan.clone(),
        started,
        sources,
        took,
        moved,
        carried,
        reported: false,
        task: task.abort_handle(),
        published: false,
    }
}

/// Two sources' progress summed; the first reason to stop kept.
fn add(mut sum: Progress, one: &Progress) -> Progress {
    sum.moving += one.moving;
    sum.copied += one.copied;
    sum.skipped += one.skipped;
    sum.failed += one.failed;
    sum.unfit += one.unfit;
    sum.withdrawn += one.withdrawn;
    sum.stopped = sum.stopped.or_else(|| one.stopped.clone());
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list published for a Memcached is its own: another object of
    /// the same name (deleted and created again) starts from its status.
    #[test]
    fn a_published_list_belongs_to_its_memcached() {
        let (handovers, _ended) = Handovers::new();
        let list = vec!["c-0.c.ns.svc:11211".to_string()];
        handovers.publish("ns/c", Some("uid-1".into()), Some(&list));
        assert_eq!(
            handovers.published("ns/c", Some("uid-1".into())),
            Some(list)
        );
        assert_eq!(handovers.published("ns/c", Some("uid-2".into())), None);
        handovers.publish("ns/c", Some("uid-1".into()), None);
        assert_eq!(
            handovers.published("ns/c", Some("uid-1".into())),
            None,
            "no longer handed over"
        );
        handovers.publish("ns/c", Some("uid-1".into()), Some(&[]));
        handovers.retain(|key| key != "ns/c");
        assert_eq!(
            handovers.published("ns/c", Some("uid-1".into())),
            None,
            "deleted"
        );
    }
}
