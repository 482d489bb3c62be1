//! Prometheus metrics of the controller.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::metrics::api_requests::Counts;
use crate::metrics::memcacheds::{Board, Instance};
use crate::metrics::process::ProcessCollector;

/// What became of a key a handover listed (the label of `handover_keys_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyResult {
    /// `copied`, `skipped` (the destination held it, it left the source, or the
    /// destination's memory holds no more) or `failed`.
    pub result: &'static str,
}

/// The controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Counter,
    errors: Counter,
    duration: Histogram,
    desired: Family<Instance, Gauge>,
    ready: Family<Instance, Gauge>,
    api_requests: Counts,
    handover_keys: Family<KeyResult, Counter>,
    known: Mutex<HashSet<Instance>>,
    /// Each Memcached's conditions and its pods' numbers.
    pub memcacheds: Board,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let memcacheds = Board::default();
        registry.register_collector(Box::new(memcacheds.clone()));
        let ours = registry.sub_registry_with_prefix("memcached_operator");
        let reconciles = Counter::default();
        let errors = Counter::default();
        let duration = Histogram::new(exponential_buckets(0.005, 2.0, 12));
        let desired = Family::<Instance, Gauge>::default();
        let ready = Family::<Instance, Gauge>::default();
        let api_requests = Counts::default();
        let handover_keys = Family::<KeyResult, Counter>::default();
        ours.register("reconciles", "Reconciles run", reconciles.clone());
        ours.register("reconcile_errors", "Reconciles that failed", errors.clone());
        ours.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            duration.clone(),
        );
        ours.register(
            "desired_replicas",
            "Replicas each Memcached should run",
            desired.clone(),
        );
        ours.register(
            "ready_replicas",
            "Ready replicas of each Memcached",
            ready.clone(),
        );
        ours.register(
            "api_requests",
            "Requests to the API server, by method and HTTP status code",
            api_requests.clone(),
        );
        ours.register(
            "handover_keys",
            "Keys handovers listed to copy where clients will ask for them, by result",
            handover_keys.clone(),
        );
        Metrics {
            registry,
            reconciles,
            errors,
            duration,
            desired,
            ready,
            api_requests,
            handover_keys,
            known: Mutex::default(),
            memcacheds,
        }
    }
}

impl Metrics {
    /// Count one reconcile and how long it took.
    pub fn reconciled(&self, took: Duration, failed: bool) {
        self.reconciles.inc();
        if failed {
            self.errors.inc();
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// Count the keys one handover copied, skipped and failed to copy.
    pub fn handed_over(&self, copied: u64, skipped: u64, failed: u64) {
        for (result, keys) in [("copied", copied), ("skipped", skipped), ("failed", failed)] {
            self.handover_keys
                .get_or_create(&KeyResult { result })
                .inc_by(keys);
        }
    }

    /// Record an instance's replica counts.
    pub fn replicas(&self, instance: Instance, desired: i32, ready: i32) {
        self.desired.get_or_create(&instance).set(desired.into());
        self.ready.get_or_create(&instance).set(ready.into());
        self.known.lock().map(|mut k| k.insert(instance)).ok();
    }

    /// Forget instances of `namespace` (`None`: all) that no longer exist;
    /// other namespaces' instances are another controller's to judge.
    pub fn retain(&self, namespace: Option<&str>, exists: impl Fn(&Instance) -> bool) {
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        let keep = |instance: &Instance| {
            namespace.is_some_and(|ns| ns != instance.namespace) || exists(instance)
        };
        self.memcacheds.retain(keep);
        known.retain(|instance| {
            let keep = keep(instance);
            if !keep {
                self.desired.remove(instance);
                self.ready.remove(instance);
            }
            keep
        });
    }

    /// Where the client counts its requests to the API server.
    pub fn api_requests(&self) -> Counts {
        self.api_requests.clone()
    }

    /// Reconciles run so far.
    pub fn reconcile_count(&self) -> u64 {
        self.reconciles.get()
    }

    /// The OpenMetrics text exposition (the controller's own metrics and
    /// the process's).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_and_forgets_instances() {
        let m = Metrics::default();
        let i = Instance {
            namespace: "ns".into(),
            name: "c".into(),
        };
        m.reconciled(Duration::from_millis(3), false);
        m.reconciled(Duration::from_millis(3), true);
        m.replicas(i.clone(), 3, 2);
        let text = m.encode();
        assert!(
            text.contains("memcached_operator_reconciles_total 2"),
            "{text}"
        );
        assert!(
            text.contains("memcached_operator_reconcile_errors_total 1"),
            "{text}"
        );
        assert!(
            text.contains(r#"memcached_operator_ready_replicas{namespace="ns",name="c"} 2"#),
            "{text}"
        );
        let other = Instance {
            namespace: "other".into(),
            name: "d".into(),
        };
        m.replicas(other, 1, 1);
        m.retain(Some("other"), |_| false);
        assert!(
            m.encode().contains(r#"name="c""#),
            "another namespace's instance is kept"
        );
        assert!(!m.encode().contains(r#"name="d""#));
        m.retain(None, |_| false);
        assert!(!m.encode().contains(r#"name="c""#));
    }
}
