//! What the controller knows of each Memcached, as metrics: its conditions,
//! and the numbers memcached itself reported to the controller's last stats
//! collection, per pod. These need no exporter: they are there for an
//! authenticated cache too (the exporter sidecar cannot log in), and they
//! name a pod that accepts connections but does not answer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::stats::client::ClusterStats;

/// One Memcached: the labels of its metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct Instance {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What one Memcached showed last.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shown {
    /// Its conditions: type, reason, and whether true.
    pub conditions: Vec<(String, String, bool)>,
    /// Its pods as the last collection read them.
    pub pods: Vec<PodShown>,
}

/// One pod as the last stats collection read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodShown {
    /// The pod's name (its address when the name is not known).
    pub pod: String,
    /// It answered `stats` (false: it accepts connections but does not answer).
    pub up: bool,
    /// `curr_items`
    pub items: u64,
    /// Clients' connections.
    pub connections: i64,
    /// `max_connections`
    pub max_connections: i64,
    /// `get_hits` since memcached started.
    pub hits: u64,
    /// `get_misses` since memcached started.
    pub misses: u64,
    /// `evictions` since memcached started.
    pub evictions: u64,
}

/// Every Memcached's [`Shown`], encoded at each scrape.
#[derive(Clone, Default)]
pub struct Board(Arc<Mutex<BTreeMap<Instance, Shown>>>);

impl Board {
    /// Record what `instance` shows now: `conditions` from its status, and
    /// `stats` of the pods named by address in `pods`.
    pub fn show(
        &self,
        instance: Instance,
        conditions: &[Condition],
        stats: &ClusterStats,
        pods: &BTreeMap<SocketAddr, String>,
    ) {
        let name = |addr: &SocketAddr| pods.get(addr).cloned().unwrap_or_else(|| addr.to_string());
        let mut shown = Shown {
            conditions: (conditions.iter())
                .map(|c| (c.type_.clone(), c.reason.clone(), c.status == "True"))
                .collect(),
            pods: (stats.pods.iter())
                .map(|(addr, p)| PodShown {
                    pod: name(addr),
                    up: true,
                    items: p.items,
                    connections: p.connections,
                    max_connections: p.max_connections,
                    hits: p.hits,
                    misses: p.misses,
                    evictions: p.evictions,
                })
                .collect(),
        };
        shown
            .pods
            .extend(stats.unanswered.keys().map(|addr| PodShown {
                pod: name(addr),
                ..Default::default()
            }));
        if let Ok(mut board) = self.0.lock() {
            board.insert(instance, shown);
        }
    }

    /// Record only `instance`'s conditions (its pods unchanged).
    pub fn show_conditions(&self, instance: Instance, conditions: &[Condition]) {
        if let Ok(mut board) = self.0.lock() {
            board.entry(instance).or_default().conditions = (conditions.iter())
                .map(|c| (c.type_.clone(), c.reason.clone(), c.status == "True"))
                .collect();
        }
    }

    /// Forget the instances `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&Instance) -> bool) {
        if let Ok(mut board) = self.0.lock() {
            board.retain(|instance, _| keep(instance));
        }
    }
}

/// One series: its name, help, type and value of a pod.
type PodSeries = (&'static str, &'static str, MetricType, fn(&PodShown) -> f64);

const POD_SERIES: [PodSeries; 7] = [
    (
        "memcached_operator_pod_up",
        "1 when the pod's memcached answered the last stats, 0 when it accepted the connection but did not answer",
        MetricType::Gauge,
        |p| f64::from(u8::from(p.up)),
    ),
    (
        "memcached_operator_pod_items",
        "Items the pod's memcached holds (curr_items)",
        MetricType::Gauge,
        |p| p.items as f64,
    ),
    (
        "memcached_operator_pod_connections",
        "Clients connected to the pod's memcached",
        MetricType::Gauge,
        |p| p.connections as f64,
    ),
    (
        "memcached_operator_pod_max_connections",
        "Connections the pod's memcached accepts (max_connections)",
        MetricType::Gauge,
        |p| p.max_connections as f64,
    ),
    (
        "memcached_operator_pod_get_hits",
        "Gets the pod's memcached found the key for, since it started",
        MetricType::Counter,
        |p| p.hits as f64,
    ),
    (
        "memcached_operator_pod_get_misses",
        "Gets the pod's memcached did not find the key for, since it started",
        MetricType::Counter,
        |p| p.misses as f64,
    ),
    (
        "memcached_operator_pod_evictions",
        "Items the pod's memcached evicted to make room, since it started",
        MetricType::Counter,
        |p| p.evictions as f64,
    ),
];

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Board")
    }
}

impl Collector for Board {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(board) = self.0.lock() else {
            return Ok(());
        };
        let mut descriptor = encoder.encode_descriptor(
            "memcached_operator_condition",
            "Each condition of each Memcached: 1 while true, 0 while false, with its reason",
            None,
            MetricType::Gauge,
        )?;
        for (instance, shown) in board.iter() {
            for (type_, reason, status) in &shown.conditions {
                let labels = [
                    ("namespace", instance.namespace.as_str()),
                    ("name", instance.name.as_str()),
                    ("type", type_.as_str()),
                    ("reason", reason.as_str()),
                ];
                let value = f64::from(u8::from(*status));
                ConstGauge::new(value).encode(descriptor.encode_family(&labels)?)?;
            }
        }
        for (name, help, kind, value) in POD_SERIES {
            let mut descriptor = encoder.encode_descriptor(name, help, None, kind)?;
            for (instance, shown) in board.iter() {
                for pod in shown.pods.iter().filter(|p| p.up || name.ends_with("_up")) {
                    let labels = [
                        ("namespace", instance.namespace.as_str()),
                        ("name", instance.name.as_str()),
                        ("pod", pod.pod.as_str()),
                    ];
                    let family = descriptor.encode_family(&labels)?;
                    match kind {
                        MetricType::Counter => ConstCounter::new(value(pod)).encode(family)?,
                        _ => ConstGauge::new(value(pod)).encode(family)?,
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use prometheus_client::registry::Registry;

    use super::*;
    use crate::stats::client::{PodStats, Unanswered};

    fn encode(board: &Board) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(board.clone()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn conditions_and_each_pods_numbers_are_shown_and_forgotten() {
        let board = Board::default();
        let instance = Instance {
            namespace: "ns".into(),
            name: "c".into(),
        };
        let condition = |type_: &str, status: &str, reason: &str| Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Default::default(),
            ),
            observed_generation: None,
        };
        let (a, b): (SocketAddr, SocketAddr) = (
            "10.0.0.1:11211".parse().unwrap(),
            "10.0.0.2:11211".parse().unwrap(),
        );
        let stats = ClusterStats {
            pods: BTreeMap::from([(
                a,
                PodStats {
                    items: 12,
                    hits: 3,
                    misses: 1,
                    evictions: 2,
                    connections: 5,
                    max_connections: 1024,
                    ..Default::default()
                },
            )]),
            unanswered: BTreeMap::from([(b, Unanswered::Silent)]),
            ..Default::default()
        };
        let names = BTreeMap::from([(a, "c-0".to_string())]);
        let conditions = [
            condition("Ready", "False", "PodsNotAnswering"),
            condition("Degraded", "True", "PodsNotAnswering"),
        ];
        board.show(instance.clone(), &conditions, &stats, &names);
        let text = encode(&board);
        for line in [
            r#"memcached_operator_condition{namespace="ns",name="c",type="Ready",reason="PodsNotAnswering"} 0"#,
            r#"memcached_operator_condition{namespace="ns",name="c",type="Degraded",reason="PodsNotAnswering"} 1"#,
            r#"memcached_operator_pod_up{namespace="ns",name="c",pod="c-0"} 1"#,
            r#"memcached_operator_pod_up{namespace="ns",name="c",pod="10.0.0.2:11211"} 0"#,
            r#"memcached_operator_pod_items{namespace="ns",name="c",pod="c-0"} 12"#,
            r#"memcached_operator_pod_get_hits_total{namespace="ns",name="c",pod="c-0"} 3"#,
            r#"memcached_operator_pod_evictions_total{namespace="ns",name="c",pod="c-0"} 2"#,
            r#"memcached_operator_pod_max_connections{namespace="ns",name="c",pod="c-0"} 1024"#,
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(
            !text.contains(
                r#"memcached_operator_pod_items{namespace="ns",name="c",pod="10.0.0.2:11211"}"#
            ),
            "a pod that did not answer has no numbers"
        );
        board.retain(|_| false);
        assert!(!encode(&board).contains(r#"name="c""#));
    }
}
