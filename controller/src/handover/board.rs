//! The handovers under way, one per Memcached, run apart from reconciling:
//! a reconcile says which move it needs ([`Plan`]) and reads how far its
//! copy went ([`State`]); it never waits for a pod.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::handover::copy::{Budget, Progress, copy_out};
use crate::handover::placement::{Algorithm, Ring};
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

/// How far a handover went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The sum over its sources.
    pub progress: Progress,
    /// Every source is done (or the deadline passed).
    pub done: bool,
    /// Since it started, or how long it took.
    pub elapsed: Duration,
}

struct Entry {
    plan: Plan,
    started: Instant,
    /// Each source's progress, by server.
    sources: Arc<Mutex<BTreeMap<String, Progress>>>,
    took: Arc<Mutex<Option<Duration>>>,
    /// Its end was reported.
    reported: bool,
    /// The copy, stopped when the entry goes (a plan replaced or forgotten:
    /// its copies are for a list that will not be published).
    task: AbortHandle,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The handovers of every Memcached, by `namespace/name`.
#[derive(Default)]
pub struct Handovers {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Handovers {
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
            entries.insert(key.to_string(), start(plan, client()?, addresses));
        }
        let entry = entries.get(key)?;
        let progress = entry
            .sources
            .lock()
            .ok()?
            .values()
            .fold(Progress::default(), add);
        let took = *entry.took.lock().ok()?;
        Some(State {
            progress,
            done: took.is_some(),
            elapsed: took.unwrap_or_else(|| entry.started.elapsed()),
        })
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

    /// Forget the handover of `key` (none needed now).
    pub fn forget(&self, key: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
    }

    /// Forget the handovers of the Memcached objects whose key `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|key, _| keep(key));
        }
    }
}

/// Start copying `plan`'s keys from every source at once: every server of a
/// growing list (each hands some keys to the new ones), the leaving ones of
/// a shrinking list (rendezvous and ketama keep the others' keys where
/// they are).
fn start(plan: &Plan, client: StatsClient, addresses: &BTreeMap<String, SocketAddr>) -> Entry {
    let started = Instant::now();
    let sources: Arc<Mutex<BTreeMap<String, Progress>>> = Arc::default();
    let took: Arc<Mutex<Option<Duration>>> = Arc::default();
    let ring = Ring::new(plan.algorithm, &plan.to);
    let destinations: BTreeMap<usize, SocketAddr> = (plan.to.iter().enumerate())
        .filter_map(|(i, server)| Some((i, *addresses.get(server)?)))
        .collect();
    let shrinks = plan.to.len() < plan.from.len();
    let from: Vec<(String, SocketAddr)> = (plan.from.iter())
        .filter(|server| !shrinks || !plan.to.contains(server))
        .filter_map(|server| Some((server.clone(), *addresses.get(server)?)))
        .collect();
    let budget = Budget {
        deadline: started + DEADLINE,
        max_keys: MAX_KEYS / from.len().max(1),
    };
    let (board, done) = (sources.clone(), took.clone());
    let task = tokio::spawn(async move {
        let copies = from.iter().map(|(server, addr)| {
            let (ring, destinations, client, board) = (&ring, &destinations, &client, &board);
            async move {
                let report = |p: &Progress| {
                    if let Ok(mut sources) = board.lock() {
                        sources.insert(server.clone(), p.clone());
                    }
                };
                copy_out(client, (*addr, server), ring, destinations, budget, report).await
            }
        });
        join_all(copies).await;
        if let Ok(mut took) = done.lock() {
            *took = Some(started.elapsed());
        }
    });
    Entry {
        plan: plan.clone(),
        started,
        sources,
        took,
        reported: false,
        task: task.abort_handle(),
    }
}

/// Two sources' progress summed; the first reason to stop kept.
fn add(mut sum: Progress, one: &Progress) -> Progress {
    sum.moving += one.moving;
    sum.copied += one.copied;
    sum.skipped += one.skipped;
    sum.failed += one.failed;
    sum.withdrawn += one.withdrawn;
    sum.stopped = sum.stopped.or_else(|| one.stopped.clone());
    sum
}
