//! Leader election against an in-memory Lease store with the API server's
//! optimistic concurrency, on tokio's paused clock: every replica's
//! monotonic clock is the test's, their wall clocks are skewed at will.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::core::Status;
use memcached_controller::cluster::leadership::{
    Config, Elector, LEASE_DURATION, LeaseStore, Outcome, RENEW_DEADLINE, RETRY_PERIOD, Release,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep};

/// What the API server holds, and every request made to it.
#[derive(Default)]
struct Server {
    lease: Option<Lease>,
    version: u64,
    /// `who op outcome`, in order.
    log: Vec<String>,
    /// Identities whose requests fail with 503.
    failing: HashSet<String>,
    /// Identities whose requests never get an answer.
    unreachable: HashSet<String>,
    /// Run (once) just before the next update is decided: another replica's
    /// write landing between a read and a write.
    before_update: Option<Race>,
}

type Race = Box<dyn FnOnce(&mut Server) + Send>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    fn holder(&self) -> Option<String> {
        self.lease
            .as_ref()
            .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
    }

    fn resource_version(&self) -> Option<String> {
        self.lease.as_ref()?.metadata.resource_version.clone()
    }

    /// Store `spec` as a new version.
    fn store(&mut self, spec: LeaseSpec) -> Lease {
        self.version += 1;
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some("memcached-operator".into()),
                resource_version: Some(self.version.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        };
        self.lease = Some(lease.clone());
        lease
    }

    /// A write (a renewal, or taking the Lease) by a replica this test
    /// does not run as an elector.
    fn write_as(&mut self, holder: &str) {
        let renewed = Timestamp::from_second(self.version as i64).unwrap_or_default();
        let spec = LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..LeaseSpec::default()
        };
        self.store(spec);
        self.log.push(format!("{holder} update ok"));
    }
}

/// One replica's connection to the shared [`Server`]; a write wakes
/// `changes` as a watch would.
#[derive(Clone)]
struct FakeStore {
    server: Arc<Mutex<Server>>,
    changes: Arc<watch::Sender<()>>,
    who: String,
}

fn error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
}

impl FakeStore {
    /// Fail (or hang) as this replica's requests are configured to.
    async fn reach(&self, op: &str) -> kube::Result<()> {
        let (failing, unreachable) = {
            let server = lock(&self.server);
            (
                server.failing.contains(&self.who),
                server.unreachable.contains(&self.who),
            )
        };
        if unreachable {
            self.log(op, "hangs");
            std::future::pending::<()>().await;
        }
        if failing {
            self.log(op, "503");
            return Err(error(503, "ServiceUnavailable"));
        }
        Ok(())
    }

    fn log(&self, op: &str, outcome: &str) {
        let entry = format!("{} {op} {outcome}", self.who);
        lock(&self.server).log.push(entry);
    }
}

impl LeaseStore for FakeStore {
    async fn get(&self) -> kube::Result<Option<Lease>> {
        self.reach("get").await?;
        self.log("get", "ok");
        Ok(lock(&self.server).lease.clone())
    }

    async fn create(&self, spec: LeaseSpec) -> kube::Result<Lease> {
        self.reach("create").await?;
        let mut server = lock(&self.server);
        if server.lease.is_some() {
            server.log.push(format!("{} create 409", self.who));
            return Err(error(409, "AlreadyExists"));
        }
        server.log.push(format!("{} create ok", self.who));
        let lease = server.store(spec);
        self.changes.send_replace(());
        Ok(lease)
    }

    /// A merge patch with a resourceVersion precondition.
    async fn update(&self, resource_version: &str, spec: LeaseSpec) -> kube::Result<Lease> {
        self.reach("update").await?;
        let mut server = lock(&self.server);
        if let Some(race) = server.before_update.take() {
            race(&mut server);
        }
        if server.resource_version().as_deref() != Some(resource_version) {
            server.log.push(format!("{} update 409", self.who));
            return Err(error(409, "Conflict"));
        }
        let mut stored = server
            .lease
            .as_ref()
            .and_then(|l| l.spec.clone())
            .unwrap_or_default();
        macro_rules! merge {
            ($($field:ident),*) => { $(if spec.$field.is_some() { stored.$field = spec.$field; })* };
        }
        merge!(
            holder_identity,
            lease_duration_seconds,
            acquire_time,
            renew_time,
            lease_transitions
        );
        server.log.push(format!("{} update ok", self.who));
        let lease = server.store(stored);
        self.changes.send_replace(());
        Ok(lease)
    }
}

/// The shared server and a way to make replicas of it.
struct Cluster {
    server: Arc<Mutex<Server>>,
    changes: Arc<watch::Sender<()>>,
}

impl Cluster {
    fn new() -> Self {
        Cluster {
            server: Default::default(),
            changes: Arc::new(watch::channel(()).0),
        }
    }

    /// A replica whose wall clock is `skew` seconds ahead.
    fn replica(&self, who: &str, skew: i64) -> Elector<FakeStore> {
        let store = FakeStore {
            server: self.server.clone(),
            changes: self.changes.clone(),
            who: who.into(),
        };
        let config = Config {
            clock_offset: SignedDuration::from_secs(skew),
            ..Config::new(who)
        };
        Elector::new(store, config)
    }

    fn server(&self) -> std::sync::MutexGuard<'_, Server> {
        lock(&self.server)
    }

    /// Log entries of `who`.
    fn requests_of(&self, who: &str) -> Vec<String> {
        let prefix = format!("{who} ");
        self.server()
            .log
            .iter()
            .filter(|l| l.starts_with(&prefix))
            .cloned()
            .collect()
    }
}

/// One try of `elector` (a macro: tests may unwrap).
macro_rules! acquired {
    ($elector:expr) => {
        $elector.try_acquire_or_renew().await.unwrap()
    };
}

#[tokio::test(start_paused = true)]
async fn a_standby_whose_clock_runs_ahead_does_not_take_a_renewed_lease() {
    let cluster = Cluster::new();
    let mut leader = cluster.replica("a", 0);
    // Its renewTime + 15 s is 3 s past on its own clock right after each renewal.
    let mut standby = cluster.replica("b", 12);
    assert!(acquired!(leader));
    let start = Instant::now();
    let mut renewed = start;
    // The leader renews every 5 s (slower than it does, within the Lease);
    // the standby tries every second for a minute.
    while start.elapsed() < Duration::from_secs(60) {
        sleep(Duration::from_secs(1)).await;
        if renewed.elapsed() >= Duration::from_secs(5) {
            assert!(acquired!(leader), "the leader could not renew");
            renewed = Instant::now();
        }
        assert!(!acquired!(standby), "the standby took a valid Lease");
    }
    assert_eq!(cluster.server().holder().as_deref(), Some("a"));
    assert!(leader.is_leader() && !standby.is_leader());

    // Once the leader stops renewing, the Lease expires 15 s after the
    // standby saw its last change: not earlier, and the standby takes it.
    let last_seen = Instant::now();
    sleep(Duration::from_millis(14_900)).await;
    assert!(!acquired!(standby), "taken before it expired");
    sleep(Duration::from_millis(200)).await;
    assert!(acquired!(standby), "not taken once expired");
    assert!(last_seen.elapsed() >= LEASE_DURATION);
    assert_eq!(cluster.server().holder().as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn a_former_holder_cannot_release_its_successors_lease() {
    let cluster = Cluster::new();
    let mut old = cluster.replica("old", 0);
    let mut new = cluster.replica("new", 0);
    assert!(acquired!(old));
    assert!(!acquired!(new));
    // The old leader stalls (no renewals); the Lease expires for the other.
    sleep(LEASE_DURATION + Duration::from_secs(1)).await;
    assert!(acquired!(new));
    let taken = cluster.server().lease.clone();

    // The old leader still believes it holds the Lease and releases it.
    assert!(old.is_leader());
    assert!(matches!(old.release().await, Release::NotHeld));
    assert_eq!(
        cluster.server().lease,
        taken,
        "the successor's Lease changed"
    );
    assert_eq!(
        cluster.requests_of("old"),
        ["old get ok", "old create ok", "old update 409"]
    );
    // Having read the Lease, it does not even try.
    assert!(!acquired!(old));
    let requests = cluster.requests_of("old").len();
    assert!(matches!(old.release().await, Release::NotHeld));
    assert_eq!(cluster.requests_of("old").len(), requests);
    assert_eq!(cluster.server().holder().as_deref(), Some("new"));
}

#[tokio::test(start_paused = true)]
async fn a_conflicting_write_is_read_again_not_overwritten() {
    let cluster = Cluster::new();
    let mut standby = cluster.replica("b", 0);
    cluster.server().write_as("a");
    assert!(!acquired!(standby));
    sleep(LEASE_DURATION + Duration::from_secs(1)).await;
    // Expired for the standby, but "a" renews between its read and its write.
    cluster.server().before_update = Some(Box::new(|server| server.write_as("a")));
    assert!(!acquired!(standby));
    assert_eq!(cluster.server().holder().as_deref(), Some("a"));
    assert_eq!(
        cluster.requests_of("b")[1..],
        ["b get ok", "b update 409"],
        "{:?}",
        cluster.server().log
    );
    // It reads again and sees a fresh change: valid for another 15 s.
    assert!(!acquired!(standby));
    assert_eq!(cluster.requests_of("b").last().unwrap(), "b get ok");
    assert_eq!(cluster.server().holder().as_deref(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewal_conflicts_reads_again_and_stops_leading() {
    let cluster = Cluster::new();
    let mut leader = cluster.replica("a", 0);
    assert!(acquired!(leader));
    // Another replica took it (say, after a pause longer than the Lease).
    cluster.server().write_as("b");
    let (mut work, writes) = busy_work();
    let started = Instant::now();
    let outcome = leader.lead(&mut work).await;
    assert_eq!(outcome, Outcome::Lost("the Lease is held by b".into()));
    assert!(started.elapsed() <= RETRY_PERIOD, "{:?}", started.elapsed());
    assert_eq!(
        cluster.requests_of("a")[2..],
        ["a update 409", "a get ok"],
        "renews optimistically, then reads"
    );
    assert_eq!(cluster.server().holder().as_deref(), Some("b"));
    assert!(work.is_empty());
    let stopped = lock(&writes).len();
    sleep(Duration::from_secs(30)).await;
    assert_eq!(lock(&writes).len(), stopped, "work went on");
}

/// A task that "writes" every 100 ms, and the times it wrote.
fn busy_work() -> (JoinSet<()>, Arc<Mutex<Vec<Instant>>>) {
    let writes = Arc::new(Mutex::new(Vec::new()));
    let mut work = JoinSet::new();
    let log = writes.clone();
    work.spawn(async move {
        loop {
            lock(&log).push(Instant::now());
            sleep(Duration::from_millis(100)).await;
        }
    });
    (work, writes)
}

/// Renewals start failing (503, or no answer at all) after 11 s: the work
/// stops, and is never resumed, before the Lease could expire for a
/// standby that saw the last renewal.
#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewals_fail_stops_its_work_before_the_lease_can_expire() {
    let failures: [fn(&mut Server); 2] = [
        |server| {
            server.failing.insert("a".into());
        },
        |server| {
            server.unreachable.insert("a".into());
        },
    ];
    for failure in failures {
        let cluster = Cluster::new();
        let mut leader = cluster.replica("a", 0);
        assert!(acquired!(leader));
        let acquired_at = Instant::now();
        let (mut work, writes) = busy_work();
        let server = cluster.server.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(11)).await;
            failure(&mut lock(&server));
        });
        let outcome = leader.lead(&mut work).await;
        let stopped = Instant::now();
        assert!(matches!(outcome, Outcome::Lost(_)), "{outcome:?}");
        assert!(work.is_empty());
        // The last successful renewal was sent at 10 s.
        let renewals = cluster
            .requests_of("a")
            .iter()
            .filter(|l| l.ends_with("update ok"))
            .count();
        assert_eq!(renewals, 5, "renewed every 2 s: {:?}", cluster.server().log);
        let last_renewal = acquired_at + Duration::from_secs(10);
        let last_write = *lock(&writes).last().unwrap();
        assert!(last_write <= last_renewal + RENEW_DEADLINE);
        assert!(stopped <= last_renewal + RENEW_DEADLINE + Duration::from_millis(1));
        assert!(stopped < last_renewal + LEASE_DURATION);
        let count = lock(&writes).len();
        sleep(LEASE_DURATION * 2).await;
        assert_eq!(lock(&writes).len(), count, "work went on");
    }
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_a_released_lease_at_once() {
    let cluster = Cluster::new();
    let mut leader = cluster.replica("a", 0);
    let mut standby = cluster.replica("b", 0);
    assert!(acquired!(leader));
    let mut changes = cluster.changes.subscribe();
    let waiting = tokio::spawn(async move {
        let acquired = standby.acquire(&mut changes, std::future::pending()).await;
        (acquired, Instant::now(), standby)
    });
    // The leader's work ends (SIGTERM) after 7 s; then it releases.
    let mut work = JoinSet::new();
    work.spawn(sleep(Duration::from_secs(7)));
    assert_eq!(leader.lead(&mut work).await, Outcome::Finished);
    assert!(matches!(leader.release().await, Release::Released));
    let released = Instant::now();
    let (acquired, at, standby) = waiting.await.unwrap();
    assert!(acquired && standby.is_leader());
    assert!(
        at - released < Duration::from_millis(10),
        "took it {:?} after the release",
        at - released
    );
    let lease = cluster.server().lease.clone().unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert!(!leader.is_leader());
    assert!(matches!(leader.release().await, Release::NotHeld));
}

#[tokio::test(start_paused = true)]
async fn the_leader_renews_every_retry_period_until_its_work_finishes() {
    let cluster = Cluster::new();
    let mut leader = cluster.replica("a", 0);
    assert!(acquired!(leader));
    let acquired_at = cluster
        .server()
        .lease
        .clone()
        .unwrap()
        .spec
        .unwrap()
        .acquire_time;
    let mut work = JoinSet::new();
    work.spawn(sleep(Duration::from_secs(9)));
    assert_eq!(leader.lead(&mut work).await, Outcome::Finished);
    // One create, then one optimistic update per retry period: no reads.
    assert_eq!(
        cluster.requests_of("a"),
        [
            "a get ok",
            "a create ok",
            "a update ok",
            "a update ok",
            "a update ok",
            "a update ok"
        ]
    );
    let spec = cluster.server().lease.clone().unwrap().spec.unwrap();
    assert!(acquired_at.is_some());
    assert_eq!(
        spec.acquire_time, acquired_at,
        "renewals keep the acquire time"
    );
    assert_eq!(spec.lease_transitions, Some(0));
}
