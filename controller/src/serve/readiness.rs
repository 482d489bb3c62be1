//! `/readyz`: true while the Memcached list of every watched namespace is
//! synced and the API server answers.
//!
//! Synced (metadata only): true once each namespace listed, false while any
//! cannot list or watch (access revoked, connections refused), true again
//! once it listed again. A watch that cannot restart begins again with a
//! list: kube's watcher would resume it silently, and nothing would say that
//! it works again. `Store::wait_until_ready` is not used: in kube-runtime 5
//! it wakes only the last of several waiters.
//!
//! Answering: a hung API server (connections accepted, never answered)
//! fails no watch: its streams just stay silent. So the API server is asked
//! its version every [`HEARTBEAT`]; with no answer for [`UNANSWERED`] (the
//! leader's renew deadline, when it stops reconciling) the replica is not
//! ready, and it is ready again at the first answer.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use memcached_api::Memcached;
use tokio::time::{Instant, MissedTickBehavior};

use crate::cluster::backoff::backoff;
use crate::cluster::cache::{self, scoped};
use crate::cluster::leadership::RENEW_DEADLINE;

/// How often the API server is asked its version, and how long an answer may take.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// Without an answer for this long, the replica is not ready.
pub const UNANSWERED: Duration = RENEW_DEADLINE;

/// What `/readyz` is made of; `ready` is what it serves.
struct Readiness {
    synced: AtomicUsize,
    namespaces: usize,
    answering: AtomicBool,
    ready: Arc<AtomicBool>,
}

impl Readiness {
    fn publish(&self) {
        let ready = self.synced.load(Ordering::SeqCst) == self.namespaces
            && self.answering.load(Ordering::SeqCst);
        self.ready.store(ready, Ordering::SeqCst);
    }
}

/// Keep `ready` up to date for a controller watching `namespaces` (`None`: all).
pub fn track(client: &Client, namespaces: &[Option<String>], ready: Arc<AtomicBool>) {
    let readiness = Arc::new(Readiness {
        synced: AtomicUsize::new(0),
        namespaces: namespaces.len(),
        answering: AtomicBool::new(true),
        ready,
    });
    for ns in namespaces {
        let api = scoped::<PartialObjectMeta<Memcached>>(client, ns.as_deref());
        let label = ns.clone().unwrap_or_else(|| "*".to_string());
        tokio::spawn(track_list(api, label, readiness.clone()));
    }
    let client = client.clone();
    tokio::spawn(heartbeat(readiness, move || {
        let client = client.clone();
        async move { client.apiserver_version().await.map(|_| ()) }
    }));
}

/// Count `api`'s list as synced while it lists and watches.
async fn track_list(
    api: kube::Api<PartialObjectMeta<Memcached>>,
    ns: String,
    readiness: Arc<Readiness>,
) {
    let mut listed = false;
    let mut set = |now_listed: bool| {
        if now_listed == listed {
            return;
        }
        listed = now_listed;
        if listed {
            tracing::info!(namespace = ns, "Memcached list synced");
            readiness.synced.fetch_add(1, Ordering::SeqCst);
        } else {
            readiness.synced.fetch_sub(1, Ordering::SeqCst);
        }
        readiness.publish();
    };
    loop {
        let mut events = backoff(watcher(api.clone(), watcher::Config::default())).boxed();
        while let Some(event) = events.next().await {
            match &event {
                Ok(watcher::Event::InitDone) => set(true),
                Err(error) => {
                    cache::log_watch_error(error);
                    match error {
                        watcher::Error::InitialListFailed(_) => set(false),
                        watcher::Error::WatchStartFailed(_) => {
                            set(false);
                            break;
                        }
                        _ => {}
                    }
                }
                Ok(_) => {}
            }
        }
        // Begin again with a list, after the backoff's first pause.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Ask the API server every [`HEARTBEAT`] (`ask`) and mark it not answering
/// once [`UNANSWERED`] passed since the last question it answered was asked.
async fn heartbeat<E: std::fmt::Display, F: Future<Output = Result<(), E>>>(
    readiness: Arc<Readiness>,
    mut ask: impl FnMut() -> F,
) {
    let mut last_answered = Instant::now();
    let mut ticks = tokio::time::interval(HEARTBEAT);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let asked = Instant::now();
        // No longer than the deadline: the replica turns unready on time.
        let deadline = last_answered + UNANSWERED;
        let wait = match deadline.checked_duration_since(asked) {
            Some(left) if !left.is_zero() => left.min(HEARTBEAT),
            _ => HEARTBEAT,
        };
        match tokio::time::timeout(wait, ask()).await {
            Ok(Ok(())) => last_answered = asked,
            Ok(Err(error)) => tracing::debug!(%error, "the API server did not answer"),
            Err(_) => tracing::debug!("the API server did not answer in {wait:?}"),
        }
        let answering = last_answered.elapsed() < UNANSWERED;
        if readiness.answering.swap(answering, Ordering::SeqCst) == answering {
            continue;
        }
        if answering {
            tracing::info!("the API server answers again");
        } else {
            tracing::warn!(
                "the API server has not answered for {}s: not ready",
                UNANSWERED.as_secs()
            );
        }
        readiness.publish();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    /// A heartbeat whose API server answers while `up` is true and hangs otherwise.
    fn started(up: Arc<AtomicBool>, asked: Arc<AtomicU32>) -> Arc<AtomicBool> {
        let ready = Arc::new(AtomicBool::new(false));
        let readiness = Arc::new(Readiness {
            synced: AtomicUsize::new(1),
            namespaces: 1,
            answering: AtomicBool::new(true),
            ready: ready.clone(),
        });
        readiness.publish();
        tokio::spawn(heartbeat(readiness, move || {
            asked.fetch_add(1, Ordering::SeqCst);
            let up = up.load(Ordering::SeqCst);
            async move {
                if !up {
                    std::future::pending::<()>().await;
                }
                Ok::<(), String>(())
            }
        }));
        ready
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_api_server_makes_the_replica_unready_until_it_answers() {
        let (up, asked) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
        let start = Instant::now();
        let ready = started(up.clone(), asked.clone());
        tokio::time::sleep(Duration::from_secs(12)).await;
        assert!(ready.load(Ordering::SeqCst), "answering");

        up.store(false, Ordering::SeqCst);
        let hung = Instant::now();
        while ready.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let unready_after = hung.elapsed();
        assert!(
            unready_after >= UNANSWERED - HEARTBEAT
                && unready_after <= UNANSWERED + Duration::from_millis(100),
            "not ready {unready_after:?} into the outage"
        );

        up.store(true, Ordering::SeqCst);
        let back = Instant::now();
        while !ready.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            back.elapsed() <= HEARTBEAT * 2,
            "ready {:?} after",
            back.elapsed()
        );
        // One question at a time, every HEARTBEAT: no storm while it hangs.
        let most = start.elapsed().as_secs() / HEARTBEAT.as_secs() + 1;
        assert!(u64::from(asked.load(Ordering::SeqCst)) <= most);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_answer_alone_keeps_the_replica_ready() {
        let (up, asked) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU32::new(0)),
        );
        let ready = started(up.clone(), asked);
        // The first question hangs for a whole HEARTBEAT, the next one answers.
        tokio::time::sleep(HEARTBEAT - Duration::from_millis(100)).await;
        up.store(true, Ordering::SeqCst);
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(ready.load(Ordering::SeqCst));
        }
    }
}
