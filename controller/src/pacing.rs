//! Cache-aware pacing of rollouts: never more than one cold pod at a time.
//!
//! StatefulSet mode (`spec.workload: StatefulSet`): a StatefulSet replaces
//! one pod at a time and the next as soon as the last is Ready: Ready, but
//! empty, so under read traffic the keys of two pods miss at once. The
//! controller holds the rollout with the StatefulSet's `partition`: a
//! template change is applied with the partition at the highest ordinal
//! (only that pod is replaced), and the partition moves down one ordinal
//! once the pod just replaced is warm again. Each ordinal keeps its name, so
//! clients configured by name keep their map.
//!
//! Deployment mode: a Deployment (surge 1, none unavailable) adds a new pod,
//! removes an old one once the new is Ready, and adds the next at once. The
//! controller pauses the Deployment while the newest pod of its newest
//! ReplicaSet is not warm, so the old pod it replaces keeps serving
//! meanwhile, and resumes it once that pod is warm.
//!
//! Warm: Ready, with at least half the items of the median pod not yet
//! replaced (or those hold fewer than [`MIN_ITEMS`]: nothing to warm), or
//! [`WARM_TIMEOUT`] after this controller first saw it (a StatefulSet's pod
//! Ready; a Deployment's in any state, and none that cannot run is waited
//! for). No stats read yet, after a restart, counts as not warm until then;
//! so does a Ready pod not yet replaced whose stats cannot be read (its
//! cache may be worth waiting for: never taken for an empty one).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, RollingUpdateStatefulSetStrategy, StatefulSet};

use crate::intent::TemplateStamp;
use crate::workload::Workload;

/// Peers holding fewer items than this have no cache worth waiting for.
pub const MIN_ITEMS: u64 = 100;
/// How long a replaced pod may take to warm before the next is replaced.
pub const WARM_TIMEOUT: Duration = Duration::from_secs(120);

/// A pod the rollout waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warming {
    /// Its name.
    pub pod: String,
    /// Its items, when it is Ready and answered.
    pub items: Option<u64>,
    /// The median items of the Ready pods not yet replaced; `None` while
    /// one of them has not answered.
    pub peers: Option<u64>,
}

/// When each Memcached's rollout started waiting for its pod, by
/// `namespace/name`: the [`WARM_TIMEOUT`] runs from there (again after a
/// controller restart).
#[derive(Default)]
pub struct Waits(Mutex<HashMap<String, (String, Instant)>>);

impl Waits {
    /// True once the rollout of `key` has waited [`WARM_TIMEOUT`] for `pod`.
    fn waited_out(&self, key: &str, pod: &str) -> bool {
        let Ok(mut waits) = self.0.lock() else {
            return true;
        };
        let (waiting, since) = waits
            .entry(key.to_string())
            .or_insert((pod.to_string(), Instant::now()));
        if waiting != pod {
            *waiting = pod.to_string();
            *since = Instant::now();
        }
        since.elapsed() >= WARM_TIMEOUT
    }

    /// Forget `key`'s wait (its rollout is paced no more).
    pub fn done(&self, key: &str) {
        if let Ok(mut waits) = self.0.lock() {
            waits.remove(key);
        }
    }

    /// Forget the Memcached objects whose `namespace/name` `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut waits) = self.0.lock() {
            waits.retain(|key, _| keep(key));
        }
    }
}

/// What pacing reads of the pods: the address of each Ready pod by name,
/// and the items of each address that answered the last stats.
#[derive(Default)]
pub struct Pods {
    /// Ready pods' addresses, by pod name (`<name>-<ordinal>`).
    pub ready: BTreeMap<String, SocketAddr>,
    /// `curr_items` by address.
    pub items: BTreeMap<SocketAddr, u64>,
}

/// Set the partition of `desired` (the StatefulSet of Memcached `key`
/// named `name`) from `live` as the cache holds it; the pod the rollout
/// waits for, if any. `pods` is read only while a rollout is paced.
pub fn pace(
    waits: &Waits,
    key: &str,
    name: &str,
    live: Option<&StatefulSet>,
    desired: &mut StatefulSet,
    pods: impl FnOnce() -> Pods,
) -> Option<Warming> {
    let replicas = live
        .and_then(|l| l.spec.as_ref()?.replicas)
        .or_else(|| desired.spec.as_ref()?.replicas)
        .unwrap_or(1);
    let changes = live.is_some_and(|l| retemplated(desired, l));
    let live_partition = live
        .and_then(|l| {
            l.spec
                .as_ref()?
                .update_strategy
                .as_ref()?
                .rolling_update
                .as_ref()?
                .partition
        })
        .unwrap_or(0);
    let rollout = live.map(Workload::rollout).unwrap_or_default();
    let ordinal_name = |ordinal: i32| format!("{name}-{ordinal}");
    let mut waiting = None;
    let partition = next_partition(replicas, live_partition, changes, |ordinal| {
        // Pods at and above `ordinal` run the new template once the
        // StatefulSet reports them.
        if !rollout.observed || rollout.updated < replicas - ordinal {
            return false;
        }
        let pods = pods();
        let items = pods
            .ready
            .get(&ordinal_name(ordinal))
            .and_then(|address| pods.items.get(address))
            .copied();
        let peers = (0..ordinal).filter_map(|o| pods.ready.get(&ordinal_name(o)));
        let warming = Warming {
            pod: ordinal_name(ordinal),
            items,
            peers: median_items(peers, &pods.items),
        };
        let ready = pods.ready.contains_key(&warming.pod);
        let warm = warming.warm_or_waited(waits, key, ready);
        waiting = (!warm).then_some(warming);
        warm
    });
    // A new template (or none to pace) waits anew.
    if partition == 0 || changes {
        waits.done(key);
    }
    if let Some(spec) = desired.spec.as_mut() {
        let strategy = spec.update_strategy.get_or_insert_default();
        strategy.rolling_update = (partition > 0).then_some(RollingUpdateStatefulSetStrategy {
            partition: Some(partition),
            max_unavailable: None,
        });
    }
    waiting.filter(|_| partition > 0)
}

/// `desired` has another pod template than `live` (not a new rendering of
/// the same intent, which is held): a new rollout starts.
pub fn retemplated<W: Workload>(desired: &W, live: &W) -> bool {
    let (new, running) = (TemplateStamp::of(desired), TemplateStamp::of(live));
    new.zip(running)
        .is_some_and(|(new, running)| new.template != running.template && !new.held_by(&running))
}

/// The newest pod of a Deployment's newest ReplicaSet.
pub struct Newest {
    /// Its name.
    pub pod: String,
    /// Its address, once it is Ready.
    pub address: Option<SocketAddr>,
    /// Its memcached container cannot run (a crash loop, an image that
    /// cannot be pulled): nothing to wait for.
    pub failing: bool,
    /// The scheduler finds no node for it: its message.
    pub unschedulable: Option<String>,
}

/// The pods of a Deployment's rollout, as Deployment pacing reads them.
#[derive(Default)]
pub struct Generations {
    /// The newest pod of the newest ReplicaSet.
    pub newest: Option<Newest>,
    /// The addresses of the Ready pods of the older ReplicaSets.
    pub old: Vec<SocketAddr>,
    /// `curr_items` by address.
    pub items: BTreeMap<SocketAddr, u64>,
}

/// Pods of an older template are left on `live`: a rollout that replaces
/// pods runs (a scale or an unready pod alone is no rollout).
pub fn deployment_rolling(live: &Deployment) -> bool {
    let rollout = live.rollout();
    rollout.updated < rollout.pods
}

/// Pause `desired` (the Deployment of Memcached `key`) while the newest pod
/// of the rollout `generations` is not warm; the pod waited for, if any.
/// Resumed (no `paused`), the Deployment replaces the next pod. A pod is
/// waited for at most [`WARM_TIMEOUT`] from when it is first seen, Ready or
/// not, and not at all when it cannot run: a Deployment paused on it would
/// never roll out a fix.
pub fn pace_deployment(
    waits: &Waits,
    key: &str,
    desired: &mut Deployment,
    generations: Generations,
) -> Option<Warming> {
    let Generations { newest, old, items } = generations;
    let Some(newest) = newest.filter(|n| !n.failing) else {
        waits.done(key);
        return None;
    };
    let warming = Warming {
        pod: newest.pod,
        items: newest.address.and_then(|a| items.get(&a)).copied(),
        peers: median_items(old.iter(), &items),
    };
    // Nothing to warm: the Deployment goes at its own pace.
    let nothing_to_warm = warming.peers.is_some_and(|p| p < MIN_ITEMS);
    if nothing_to_warm || warming.warm() || waits.waited_out(key, &warming.pod) {
        return None;
    }
    desired.spec.get_or_insert_default().paused = Some(true);
    Some(warming)
}

impl Warming {
    /// The Rollout column's note: `<pod> warming`.
    pub fn summary(&self) -> String {
        format!("{} warming", self.pod)
    }

    /// The `Progressing` condition's note.
    pub fn message(&self) -> String {
        let items = self.items.map_or("no".to_string(), |i| i.to_string());
        match self.peers {
            Some(peers) => format!(
                "waiting for {} to warm ({items} items, half the median pod's {peers} wanted)",
                self.pod
            ),
            None => format!(
                "waiting for {} to warm ({items} items; the pods not yet replaced have not \
                 answered stats, so how warm they are is not known)",
                self.pod
            ),
        }
    }

    /// [`Warming::warm`], or Ready for [`WARM_TIMEOUT`] (the timeout runs
    /// from when the pod is first seen Ready).
    fn warm_or_waited(&self, waits: &Waits, key: &str, ready: bool) -> bool {
        self.warm() || (ready && waits.waited_out(key, &self.pod))
    }

    /// Ready and read, and holding at least half of its peers' median items
    /// (or the peers hold too few to wait for). Not read yet (no stats
    /// collected since a restart), or peers not read: not warm, until the timeout.
    fn warm(&self) -> bool {
        let (Some(items), Some(peers)) = (self.items, self.peers) else {
            return false;
        };
        peers < MIN_ITEMS || items.saturating_mul(2) >= peers
    }
}

/// The partition after this reconcile: `live` as it is, the highest
/// ordinal for a new template, one lower once the pod at it is `warm`.
fn next_partition(replicas: i32, live: i32, changes: bool, warm: impl FnOnce(i32) -> bool) -> i32 {
    if replicas <= 1 {
        return 0;
    }
    if changes {
        return replicas - 1;
    }
    let partition = live.clamp(0, replicas - 1);
    if partition > 0 && warm(partition) {
        partition - 1
    } else {
        partition
    }
}

/// The median of the `items` of the pods at `addresses`; `None` when one
/// of them has no number (it did not answer its last stats).
fn median_items<'a>(
    addresses: impl Iterator<Item = &'a SocketAddr>,
    items: &BTreeMap<SocketAddr, u64>,
) -> Option<u64> {
    let mut values = addresses
        .map(|a| items.get(a).copied())
        .collect::<Option<Vec<u64>>>()?;
    values.sort_unstable();
    Some(values.get(values.len() / 2).copied().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_template_starts_at_the_highest_ordinal_and_moves_down_when_warm() {
        assert_eq!(next_partition(3, 0, true, |_| unreachable!()), 2);
        assert_eq!(next_partition(3, 2, false, |o| o == 2), 1);
        assert_eq!(next_partition(3, 2, false, |_| false), 2, "waits");
        assert_eq!(next_partition(3, 1, false, |_| true), 0);
        assert_eq!(next_partition(3, 0, false, |_| unreachable!()), 0);
        assert_eq!(
            next_partition(1, 0, true, |_| unreachable!()),
            0,
            "one pod: nothing to pace"
        );
        assert_eq!(
            next_partition(2, 5, false, |o| o == 1),
            0,
            "scaled down meanwhile"
        );
    }

    #[test]
    fn a_pod_is_warm_with_half_its_peers_items() {
        let warming = |items, peers| Warming {
            pod: "c-2".into(),
            items,
            peers,
        };
        assert!(warming(Some(500), Some(1000)).warm());
        assert!(!warming(Some(499), Some(1000)).warm());
        assert!(!warming(None, Some(1000)).warm(), "not ready or not read");
        assert!(warming(Some(0), Some(10)).warm(), "nothing to warm");
        assert!(!warming(None, Some(0)).warm(), "no stats yet: wait for them");
        assert!(
            !warming(Some(0), None).warm(),
            "peers that did not answer (a rotated password they refuse) are not empty peers"
        );
        let address = |i: u8| SocketAddr::from(([10, 0, 0, i], 11211));
        let items = BTreeMap::from([(address(1), 5), (address(2), 1), (address(3), 9)]);
        let median = |of: &[u8]| median_items(of.iter().map(|&i| address(i)).collect::<Vec<_>>().iter(), &items);
        assert_eq!(median(&[1, 2, 3]), Some(5));
        assert_eq!(median(&[]), Some(0));
        assert_eq!(median(&[1, 4]), None, "10.0.0.4 did not answer");
    }

    #[test]
    fn a_stateful_set_holds_while_the_pods_not_yet_replaced_cannot_be_read() {
        let address = |i: u8| SocketAddr::from(([10, 0, 0, i], 11211));
        let mut live = StatefulSet::default();
        live.metadata.generation = Some(2);
        let spec = live.spec.get_or_insert_default();
        spec.replicas = Some(3);
        spec.update_strategy = Some(k8s_openapi::api::apps::v1::StatefulSetUpdateStrategy {
            rolling_update: Some(RollingUpdateStatefulSetStrategy {
                partition: Some(2),
                max_unavailable: None,
            }),
            ..Default::default()
        });
        live.status = Some(k8s_openapi::api::apps::v1::StatefulSetStatus {
            observed_generation: Some(2),
            updated_replicas: Some(1),
            ..Default::default()
        });
        let partition = |items: &[(u8, u64)]| {
            let mut desired = StatefulSet::default();
            desired.spec.get_or_insert_default().replicas = Some(3);
            let pods = || Pods {
                ready: (0..3).map(|o| (format!("c-{o}"), address(o))).collect(),
                items: items.iter().map(|(i, n)| (address(*i), *n)).collect(),
            };
            let waiting = pace(&Waits::default(), "ns/c", "c", Some(&live), &mut desired, pods);
            let strategy = desired.spec.unwrap().update_strategy.unwrap();
            (strategy.rolling_update.and_then(|r| r.partition), waiting)
        };
        // c-2 replaced and empty; c-0 and c-1 full: held.
        let (held, waiting) = partition(&[(0, 1000), (1, 1000), (2, 0)]);
        assert_eq!(held, Some(2));
        assert_eq!(waiting.map(|w| w.peers), Some(Some(1000)));
        // c-0 and c-1 refuse the rotated credentials: not known to be cold, held.
        let (held, waiting) = partition(&[(2, 0)]);
        assert_eq!(held, Some(2), "unread peers are never taken for empty ones");
        let waiting = waiting.expect("waits for c-2");
        assert_eq!(waiting.peers, None);
        assert!(waiting.message().contains("have not answered stats"), "{}", waiting.message());
        // Warm: the next ordinal.
        let (next, waiting) = partition(&[(0, 1000), (1, 1000), (2, 600)]);
        assert_eq!((next, waiting), (Some(1), None));
    }

    #[test]
    fn a_deployment_waits_paused_for_its_newest_pod_to_warm() {
        let address = |i: u8| SocketAddr::from(([10, 0, 0, i], 11211));
        let generations =
            |pod: &str, ready: bool, failing: bool, items: &[(u8, u64)]| Generations {
                newest: Some(Newest {
                    pod: pod.to_string(),
                    address: ready.then(|| address(3)),
                    failing,
                    unschedulable: None,
                }),
                old: vec![address(1), address(2)],
                items: items.iter().map(|(i, n)| (address(*i), *n)).collect(),
            };
        let waits = Waits::default();
        let paused = |generations: Generations| {
            let mut desired = Deployment::default();
            let waiting = pace_deployment(&waits, "ns/c", &mut desired, generations);
            let paused = desired.spec.as_ref().and_then(|s| s.paused);
            assert_eq!(
                paused.is_some(),
                waiting.is_some(),
                "paused exactly while waiting"
            );
            paused == Some(true)
        };
        let full = [(1, 1000), (2, 1000)];
        assert!(
            paused(generations("c-new", false, false, &full)),
            "not Ready yet"
        );
        assert!(
            paused(generations("c-new", true, false, &[(3, 0)])),
            "old pods that refuse a rotated password are not known to be cold"
        );
        assert!(paused(generations(
            "c-new",
            true,
            false,
            &[(1, 1000), (2, 1000), (3, 499)]
        )));
        assert!(
            !paused(generations(
                "c-new",
                true,
                false,
                &[(1, 1000), (2, 1000), (3, 500)]
            )),
            "warm: resumed for the next pod"
        );
        assert!(
            !paused(generations(
                "c-new",
                true,
                false,
                &[(1, 10), (2, 10), (3, 0)]
            )),
            "nothing to warm"
        );
        assert!(!paused(Generations::default()), "no new pod");
        assert!(
            !paused(generations("c-bad", false, true, &full)),
            "cannot run"
        );

        // Not Ready for WARM_TIMEOUT since first seen: waited for no longer.
        assert!(paused(generations("c-slow", false, false, &full)));
        let past = Instant::now() - WARM_TIMEOUT;
        waits
            .0
            .lock()
            .unwrap()
            .insert("ns/c".into(), ("c-slow".into(), past));
        assert!(!paused(generations("c-slow", false, false, &full)));
    }

    #[test]
    fn the_wait_times_out_per_pod() {
        let waits = Waits::default();
        assert!(!waits.waited_out("ns/c", "c-2"));
        let past = Instant::now() - WARM_TIMEOUT;
        waits
            .0
            .lock()
            .unwrap()
            .insert("ns/c".into(), ("c-2".into(), past));
        assert!(waits.waited_out("ns/c", "c-2"));
        assert!(!waits.waited_out("ns/c", "c-1"), "the next pod waits anew");
    }
}
