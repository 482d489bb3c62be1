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
//! Warm, by what clients feel: a pod that has served [`MIN_GETS`] gets
//! since it started is warm once its hit ratio is at least [`RATIO_SHARE`]
//! of the ratio of the Ready pods not yet replaced; one without that much
//! traffic once it holds at least half the items of their median pod, or
//! items filling half its memory (a shrinking resize: it may never hold
//! half theirs), or they hold fewer than [`MIN_ITEMS`] (nothing to warm).
//! Or, at the latest, [`WARM_TIMEOUT`] after this controller first saw it (a StatefulSet's pod
//! Ready; a Deployment's in any state, and none that cannot run is waited
//! for). No stats read yet, after a restart, counts as not warm until then;
//! so does a Ready pod not yet replaced whose stats cannot be read (its
//! cache may be worth waiting for: never taken for an empty one).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, RollingUpdateStatefulSetStrategy, StatefulSet};

use crate::objects::workload::Workload;
use crate::stats::client::PodStats;
use memcached_api::render::stamp::TemplateStamp;

/// Peers holding fewer items than this have no cache worth waiting for.
pub const MIN_ITEMS: u64 = 100;
/// A pod that served this many gets since it started is judged by its hit ratio.
pub const MIN_GETS: u64 = 100;
/// The share of its peers' hit ratio a pod must be back to.
pub const RATIO_SHARE: f64 = 0.9;
/// How long a replaced pod may take to warm before the next is replaced.
pub const WARM_TIMEOUT: Duration = Duration::from_secs(120);

/// A pod the rollout waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct Warming {
    /// Its name.
    pub pod: String,
    /// Its numbers, when it is Ready and answered.
    pub now: Option<PodStats>,
    /// What the Ready pods not yet replaced hold; `None` while one of them
    /// has not answered.
    pub peers: Option<Peers>,
}

/// What the pods a rollout has not reached yet hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peers {
    /// The items of their median pod.
    pub items: u64,
    /// Their hits over their gets since they started; `None` without gets.
    pub hit_ratio: Option<f64>,
}

impl Peers {
    /// Of the pods at `addresses`, from `stats`; `None` when one of them
    /// has no numbers (it did not answer its last stats).
    pub fn of<'a>(
        addresses: impl Iterator<Item = &'a SocketAddr>,
        stats: &BTreeMap<SocketAddr, PodStats>,
    ) -> Option<Self> {
        let pods = addresses
            .map(|a| stats.get(a))
            .collect::<Option<Vec<&PodStats>>>()?;
        let mut items: Vec<u64> = pods.iter().map(|p| p.items).collect();
        items.sort_unstable();
        let (hits, gets) = pods
            .iter()
            .fold((0, 0), |(h, g), p| (h + p.hits, g + p.hits + p.misses));
        Some(Peers {
            items: items.get(items.len() / 2).copied().unwrap_or(0),
            hit_ratio: (gets > 0).then(|| hits as f64 / gets as f64),
        })
    }
}

/// When each Memcached's rollout started waiting for its pod, by
/// `namespace/name`: the [`WARM_TIMEOUT`] runs from there (again after a
/// controller restart).
#[derive(Default)]
pub struct Waits(Mutex<HashMap<String, (String, Instant)>>);

impl Waits {
    /// True once the rollout of `key` has waited [`WARM_TIMEOUT`] for `pod`.
    pub fn waited_out(&self, key: &str, pod: &str) -> bool {
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
/// and what each address that answered the last stats reported.
#[derive(Default)]
pub struct Pods {
    /// Ready pods' addresses, by pod name (`<name>-<ordinal>`).
    pub ready: BTreeMap<String, SocketAddr>,
    /// The last stats, by address.
    pub stats: BTreeMap<SocketAddr, PodStats>,
    /// Its keys are handed over (`spec.clientHashing`): a pod is ready once
    /// it took its keys back and is listed again, so warm then (its peers'
    /// items count copies not retired yet).
    pub handed_over: bool,
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
        let now = pods
            .ready
            .get(&ordinal_name(ordinal))
            .and_then(|address| pods.stats.get(address))
            .cloned();
        let peers = (0..ordinal).filter_map(|o| pods.ready.get(&ordinal_name(o)));
        let warming = Warming {
            pod: ordinal_name(ordinal),
            now,
            peers: Peers::of(peers, &pods.stats),
        };
        let ready = pods.ready.contains_key(&warming.pod);
        let warm = (ready && pods.handed_over) || warming.warm_or_waited(waits, key, ready);
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
    let (new, running) = (
        TemplateStamp::of(desired.meta()),
        TemplateStamp::of(live.meta()),
    );
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
    /// The last stats, by address.
    pub stats: BTreeMap<SocketAddr, PodStats>,
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
    let Generations { newest, old, stats } = generations;
    let Some(newest) = newest.filter(|n| !n.failing) else {
        waits.done(key);
        return None;
    };
    let warming = Warming {
        pod: newest.pod,
        now: newest.address.and_then(|a| stats.get(&a)).cloned(),
        peers: Peers::of(old.iter(), &stats),
    };
    // Nothing to warm: the Deployment goes at its own pace.
    let nothing_to_warm = warming.peers.is_some_and(|p| p.items < MIN_ITEMS);
    if nothing_to_warm || warming.warm() || waits.waited_out(key, &warming.pod) {
        return None;
    }
    desired.spec.get_or_insert_default().paused = Some(true);
    Some(warming)
}

/// What a pod is judged by.
enum Gate {
    /// Its hit ratio since it started, and the ratio it must reach.
    HitRatio(f64, f64),
    /// Its items, and the items it must hold.
    Items(u64, u64),
}

impl Warming {
    /// The Rollout column's note: `<pod> warming` and the gate.
    pub fn summary(&self) -> String {
        match self.gate() {
            Some(Gate::HitRatio(now, wanted)) => {
                format!("{} warming, hit ratio {now:.2} of {wanted:.2}", self.pod)
            }
            Some(Gate::Items(now, wanted)) => {
                format!("{} warming, {now} of {wanted} items", self.pod)
            }
            None => format!("{} warming", self.pod),
        }
    }

    /// The `Progressing` condition's note.
    pub fn message(&self) -> String {
        let pod = &self.pod;
        match (self.gate(), &self.peers) {
            (Some(Gate::HitRatio(now, wanted)), _) => format!(
                "waiting for {pod} to warm (hit ratio {now:.2} since it started; {wanted:.2}, \
                 {RATIO_SHARE} of the pods not yet replaced, wanted)"
            ),
            (Some(Gate::Items(now, wanted)), _) => format!(
                "waiting for {pod} to warm ({now} items, half the median pod's {} or half its \
                 memory wanted)",
                2 * wanted
            ),
            (None, None) => format!(
                "waiting for {pod} to warm (the pods not yet replaced have not answered stats, \
                 so how warm they are is not known)"
            ),
            (None, Some(_)) => format!("waiting for {pod} to warm (it has not answered stats yet)"),
        }
    }

    /// The rule this pod is judged by, with its numbers: the hit ratio once
    /// it has traffic and its peers had gets, else the items.
    fn gate(&self) -> Option<Gate> {
        let (now, peers) = (self.now.as_ref()?, self.peers?);
        let gets = now.hits + now.misses;
        match peers.hit_ratio {
            Some(ratio) if gets >= MIN_GETS => Some(Gate::HitRatio(
                now.hits as f64 / gets as f64,
                RATIO_SHARE * ratio,
            )),
            _ => Some(Gate::Items(now.items, peers.items.div_ceil(2))),
        }
    }

    /// [`Warming::warm`], or Ready for [`WARM_TIMEOUT`] (the timeout runs
    /// from when the pod is first seen Ready).
    fn warm_or_waited(&self, waits: &Waits, key: &str, ready: bool) -> bool {
        self.warm() || (ready && waits.waited_out(key, &self.pod))
    }

    /// Ready, read and past its [`Gate`] (or, judged by items, its peers
    /// hold too few to wait for). Not read yet (no stats collected since a
    /// restart), or peers not read: not warm, until the timeout.
    pub fn warm(&self) -> bool {
        match self.gate() {
            Some(Gate::HitRatio(now, wanted)) => now >= wanted,
            Some(Gate::Items(now, wanted)) => {
                self.peers.is_some_and(|p| p.items < MIN_ITEMS)
                    || now >= wanted
                    || self.now.as_ref().is_some_and(half_full)
            }
            None => false,
        }
    }
}

/// Its items take half its memory or more: a pod given less memory than its
/// peers (a shrinking resize) may never hold half their items.
fn half_full(pod: &PodStats) -> bool {
    pod.limit > 0 && pod.bytes * 2 >= pod.limit
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

    /// Stats of a pod holding `items` that served `hits` of `gets`.
    fn served(items: u64, hits: u64, gets: u64) -> PodStats {
        PodStats {
            items,
            hits,
            misses: gets - hits,
            ..Default::default()
        }
    }

    fn address(i: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, i], 11211))
    }

    /// Pods at 10.0.0.<i> holding `items` each, no traffic.
    fn holding(items: &[(u8, u64)]) -> BTreeMap<SocketAddr, PodStats> {
        (items.iter())
            .map(|(i, n)| (address(*i), served(*n, 0, 0)))
            .collect()
    }

    #[test]
    fn without_traffic_a_pod_is_warm_with_half_its_peers_items() {
        let peers = |items| {
            Some(Peers {
                items,
                hit_ratio: None,
            })
        };
        let warming = |now: Option<u64>, peers| Warming {
            pod: "c-2".into(),
            now: now.map(|n| served(n, 0, 0)),
            peers,
        };
        assert!(warming(Some(500), peers(1000)).warm());
        assert!(!warming(Some(499), peers(1000)).warm());
        assert_eq!(
            warming(Some(12), peers(1000)).summary(),
            "c-2 warming, 12 of 500 items"
        );
        assert!(!warming(None, peers(1000)).warm(), "not ready or not read");
        assert!(warming(Some(0), peers(10)).warm(), "nothing to warm");
        let smaller = |bytes| Warming {
            now: Some(PodStats {
                items: 12,
                bytes,
                limit: 1000,
                ..Default::default()
            }),
            ..warming(None, peers(1000))
        };
        assert!(
            smaller(500).warm(),
            "half its memory: a smaller pod than its peers"
        );
        assert!(!smaller(499).warm());
        assert!(
            !warming(None, peers(0)).warm(),
            "no stats yet: wait for them"
        );
        assert!(
            !warming(Some(0), None).warm(),
            "peers that did not answer (a rotated password they refuse) are not empty peers"
        );
        let stats = holding(&[(1, 5), (2, 1), (3, 9)]);
        let of = |pods: &[u8]| {
            let addresses: Vec<SocketAddr> = pods.iter().map(|&i| address(i)).collect();
            Peers::of(addresses.iter(), &stats).map(|p| p.items)
        };
        assert_eq!(of(&[1, 2, 3]), Some(5), "the median");
        assert_eq!(of(&[]), Some(0));
        assert_eq!(of(&[1, 4]), None, "10.0.0.4 did not answer");
    }

    /// With traffic, what clients feel decides: the hit ratio since the pod
    /// started against its peers' (90% of it wanted), whatever it holds.
    #[test]
    fn with_traffic_a_pod_is_warm_once_its_hit_ratio_is_back() {
        let stats = BTreeMap::from([
            (address(1), served(1000, 950, 1000)),
            (address(2), served(1000, 850, 1000)),
        ]);
        let peers = Peers::of([address(1), address(2)].iter(), &stats);
        assert_eq!(peers.and_then(|p| p.hit_ratio), Some(0.9));
        let warming = |now| Warming {
            pod: "c-2".into(),
            now: Some(now),
            peers,
        };
        let cold = warming(served(900, 400, 1000));
        assert!(!cold.warm(), "holds most items, yet clients miss");
        assert_eq!(cold.summary(), "c-2 warming, hit ratio 0.40 of 0.81");
        assert!(
            cold.message().contains("hit ratio 0.40 since it started"),
            "{}",
            cold.message()
        );
        assert!(warming(served(10, 810, 1000)).warm(), "clients hit again");
        assert!(
            !warming(served(10, 50, 99)).warm(),
            "too few gets to judge by: the items decide"
        );
        assert!(warming(served(500, 50, 99)).warm());
        let idle = Peers::of([address(3)].iter(), &holding(&[(3, 1000)]));
        assert_eq!(idle.and_then(|p| p.hit_ratio), None, "peers without gets");
    }

    #[test]
    fn a_stateful_set_holds_while_the_pods_not_yet_replaced_cannot_be_read() {
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
        let partition_of = |items: &[(u8, u64)], handed_over| {
            let mut desired = StatefulSet::default();
            desired.spec.get_or_insert_default().replicas = Some(3);
            let pods = || Pods {
                ready: (0..3).map(|o| (format!("c-{o}"), address(o))).collect(),
                stats: holding(items),
                handed_over,
            };
            let waiting = pace(
                &Waits::default(),
                "ns/c",
                "c",
                Some(&live),
                &mut desired,
                pods,
            );
            let strategy = desired.spec.unwrap().update_strategy.unwrap();
            (strategy.rolling_update.and_then(|r| r.partition), waiting)
        };
        let partition = |items: &[(u8, u64)]| partition_of(items, false);
        // c-2 replaced and empty; c-0 and c-1 full: held.
        let (held, waiting) = partition(&[(0, 1000), (1, 1000), (2, 0)]);
        assert_eq!(held, Some(2));
        assert_eq!(waiting.and_then(|w| w.peers).map(|p| p.items), Some(1000));
        // c-0 and c-1 refuse the rotated credentials: not known to be cold, held.
        let (held, waiting) = partition(&[(2, 0)]);
        assert_eq!(held, Some(2), "unread peers are never taken for empty ones");
        let waiting = waiting.expect("waits for c-2");
        assert_eq!(waiting.peers, None);
        assert!(
            waiting.message().contains("have not answered stats"),
            "{}",
            waiting.message()
        );
        // Warm: the next ordinal.
        let (next, waiting) = partition(&[(0, 1000), (1, 1000), (2, 600)]);
        assert_eq!((next, waiting), (Some(1), None));
        // Keys handed over: ready (listed again, its keys taken back) is warm,
        // whatever its peers hold (their copies not retired yet count too).
        let (next, waiting) = partition_of(&[(0, 2000), (1, 2000), (2, 600)], true);
        assert_eq!((next, waiting), (Some(1), None));
    }

    #[test]
    fn a_deployment_waits_paused_for_its_newest_pod_to_warm() {
        let generations =
            |pod: &str, ready: bool, failing: bool, items: &[(u8, u64)]| Generations {
                newest: Some(Newest {
                    pod: pod.to_string(),
                    address: ready.then(|| address(3)),
                    failing,
                    unschedulable: None,
                }),
                old: vec![address(1), address(2)],
                stats: holding(items),
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
