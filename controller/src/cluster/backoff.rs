//! The backoff of every watch: kube's default (0.8 s, doubling up to 30 s),
//! reset only when the watch makes progress.
//!
//! kube's watcher sends `Event::Init` before each attempt to list, and kube's
//! `StreamBackoff` resets on any `Ok`: a list that keeps failing (an API the
//! cluster does not serve, such as ServiceMonitors without Prometheus
//! Operator; access denied) was retried every 0.8 s for ever, each attempt a
//! request and a warning. Here `Init` alone does not count as progress.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::utils::{Backoff, StreamBackoff};
use kube::runtime::watcher::{self, DefaultBackoff, Event};

/// `events` paused after each error as [`ProgressBackoff`] says.
pub fn backoff<K>(
    events: impl Stream<Item = watcher::Result<Event<K>>> + Send,
) -> impl Stream<Item = watcher::Result<Event<K>>> + Send {
    let backoff = ProgressBackoff::default();
    let progressed = backoff.progressed.clone();
    let events = events.inspect(move |event| {
        if matches!(event, Ok(event) if !matches!(event, Event::Init)) {
            progressed.store(true, Ordering::Relaxed);
        }
    });
    StreamBackoff::new(events, backoff)
}

/// kube's [`DefaultBackoff`], reset only after an event other than `Init`.
#[derive(Default)]
struct ProgressBackoff {
    inner: DefaultBackoff,
    progressed: Arc<AtomicBool>,
}

impl Iterator for ProgressBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.inner.next()
    }
}

impl Backoff for ProgressBackoff {
    fn reset(&mut self) {
        if self.progressed.swap(false, Ordering::Relaxed) {
            self.inner.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use kube::runtime::watcher::Error;
    use tokio::time::Instant;

    use super::*;

    fn failed() -> watcher::Result<Event<()>> {
        Err(Error::NoResourceVersion)
    }

    /// The pauses between the errors of a watch whose list fails `n` times
    /// (each attempt announced by `Init`, as kube's watcher does), then lists.
    async fn pauses(n: usize, listed_between: bool) -> Vec<Duration> {
        let (tx, rx) = mpsc::unbounded();
        let mut events = Box::pin(backoff(rx));
        let mut pauses = Vec::new();
        let mut last = Instant::now();
        for attempt in 0..n {
            tx.unbounded_send(Ok(Event::Init)).unwrap();
            assert!(matches!(events.next().await, Some(Ok(Event::Init))));
            if listed_between && attempt > 0 {
                tx.unbounded_send(Ok(Event::InitDone)).unwrap();
                events.next().await;
            }
            tx.unbounded_send(failed()).unwrap();
            assert!(events.next().await.unwrap().is_err());
            let now = Instant::now();
            pauses.push(now - last);
            last = now;
        }
        pauses
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_that_keeps_failing_backs_off_to_half_a_minute() {
        let pauses = pauses(10, false).await;
        let total: Duration = pauses.iter().sum();
        // 0.8 s doubling (with jitter) up to 30 s: far beyond 10 x 0.8 s.
        assert!(total >= Duration::from_secs(60), "{pauses:?}");
        assert!(
            pauses.iter().all(|p| *p <= Duration::from_secs(60)),
            "{pauses:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn progress_resets_the_backoff() {
        let pauses = pauses(10, true).await;
        assert!(
            pauses.iter().all(|p| *p <= Duration::from_millis(1600)),
            "{pauses:?}"
        );
    }
}
