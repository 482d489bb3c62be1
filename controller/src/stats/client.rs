//! Live statistics from memcached's `stats` command, read from every ready
//! pod at once: plain TCP or TLS (the certificate verified against the
//! Service's DNS name), with ASCII authentication when the server asks.
//! Every line and every answer is bounded in bytes.
//! A pod presenting another certificate than the TLS Secret's is asked to
//! load its certificate files again (`refresh_certs`), and a new handshake
//! shows whether it now presents the Secret's ([`Presented`]).
//! An unreachable pod, or one answering garbage, is skipped and logged; one
//! that accepts but does not answer is named; one collection never waits longer than about one
//! connect plus one read timeout, and never inside a reconcile
//! ([`crate::stats::live`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::join_all;
use memcached_api::MemcachedStatus;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::time::timeout;

use crate::stats::credentials::Credentials;
use crate::stats::tls::{Mounted, Presented, Tls};
pub use crate::stats::wire::StatsError;
use crate::stats::wire::{READ_TIMEOUT, UNAUTHENTICATED, connect, log_in, read_line, send};

/// Longest answer accepted from one server.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// The numbers read from one server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// `version`
    pub version: String,
    /// `curr_connections`
    pub curr_connections: i64,
    /// `get_hits`
    pub get_hits: u64,
    /// `get_misses`
    pub get_misses: u64,
    /// `curr_items`
    pub curr_items: u64,
    /// `evictions`
    pub evictions: u64,
    /// `bytes`: what its items take.
    pub bytes: u64,
    /// `limit_maxbytes`: what they may take.
    pub limit_maxbytes: u64,
    /// `max_connections`
    pub max_connections: i64,
    /// `pid`: another process after a restart (its `uptime` goes on across
    /// a warm restart, a pid does not).
    pub pid: u32,
    /// The [`StatsClient::settings`] of its `stats settings`, by name.
    pub settings: BTreeMap<String, String>,
    /// The certificate it presented, against the TLS Secret's.
    pub certificate: Presented,
}

/// What one pod's memcached last reported, for rollouts: how warm it is and
/// what it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodStats {
    /// `curr_items`
    pub items: u64,
    /// `get_hits` since it started.
    pub hits: u64,
    /// `get_misses` since it started.
    pub misses: u64,
    /// `evictions` since it started.
    pub evictions: u64,
    /// `bytes`: what its items take.
    pub bytes: u64,
    /// `limit_maxbytes`: what they may take.
    pub limit: u64,
    /// Clients' connections (`curr_connections` less the reading one).
    pub connections: i64,
    /// `max_connections`
    pub max_connections: i64,
    /// `pid`
    pub pid: u32,
    /// The settings read, by name (none unless asked for).
    pub settings: BTreeMap<String, String>,
    /// Read only with the client that read it before: it refuses the
    /// current credentials or certificate (it runs older Secrets).
    pub stale_secrets: bool,
    /// The certificate it presented.
    pub certificate: Presented,
}

/// The numbers of every reachable server, combined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// Version of the first server that answered (sorted by address).
    pub version: Option<String>,
    /// Clients' connections: the sum of `curr_connections`, less the one
    /// each read uses; `None` when no server answered.
    pub current_connections: Option<i64>,
    /// sum(hits) / sum(hits + misses) as `"0.00"`; `None` when no server
    /// answered or none has served a get (no ratio without gets).
    pub hit_ratio: Option<String>,
    /// How many servers answered.
    pub reachable: usize,
    /// Servers that accepted a connection but gave no usable answer, and how.
    pub unanswered: BTreeMap<SocketAddr, Unanswered>,
    /// What each server that answered reported of itself.
    pub pods: BTreeMap<SocketAddr, PodStats>,
    /// Servers that refused this client's TLS or credentials, and those of
    /// the client that read them before, if one did: they run Secrets this
    /// process cannot read them with (e.g. an auth file fixed since).
    pub refused: BTreeSet<SocketAddr>,
}

impl ClusterStats {
    /// The same numbers for the status: the per-pod numbers aside, which
    /// move with every write to a busy cache and matter only to a rollout
    /// (which requeues on its own).
    pub fn same_status(&self, other: &Self) -> bool {
        self.version == other.version
            && self.current_connections == other.current_connections
            && self.hit_ratio == other.hit_ratio
            && self.reachable == other.reachable
            && self.unanswered == other.unanswered
            && self.certificates().eq(other.certificates())
    }

    /// What certificate each server presented, checked ones only.
    pub fn certificates(&self) -> impl Iterator<Item = (&SocketAddr, &Presented)> {
        (self.pods.iter())
            .map(|(addr, pod)| (addr, &pod.certificate))
            .filter(|(_, presented)| **presented != Presented::Unchecked)
    }

    /// The numbers a status shows (none read by this process yet).
    pub fn from_status(status: Option<&MemcachedStatus>) -> Self {
        ClusterStats {
            version: status.and_then(|s| s.memcached_version.clone()),
            current_connections: status.and_then(|s| s.current_connections),
            hit_ratio: status.and_then(|s| s.hit_ratio.clone()),
            ..Default::default()
        }
    }
}

/// How a server that accepted the connection failed to answer `stats`: a
/// frozen memcached, or something else on its port (a TCP probe passes for
/// all three). Stable words, so the status changes only when the pod's
/// behaviour does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// No complete answer within [`READ_TIMEOUT`].
    Silent,
    /// Reset or closed the connection before answering.
    Closed,
    /// Answered something that is not memcached's `stats` answer.
    Garbled,
}

impl Unanswered {
    /// How `error` failed to answer; `None` for a connection not accepted
    /// (the readiness probe's business) or refused TLS or credentials
    /// (configuration, seen while a rotation rolls out).
    pub fn of(error: &StatsError) -> Option<Self> {
        match error {
            StatsError::Silent => Some(Unanswered::Silent),
            StatsError::Closed(_) => Some(Unanswered::Closed),
            StatsError::Protocol(_) => Some(Unanswered::Garbled),
            StatsError::Connect(_) | StatsError::Tls(_) | StatsError::Auth(_) => None,
        }
    }
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Silent => write!(f, "no complete answer within {READ_TIMEOUT:?}"),
            Unanswered::Closed => f.write_str("connection reset or closed"),
            Unanswered::Garbled => f.write_str("not memcached's stats answer"),
        }
    }
}

/// How to reach the servers of one Memcached.
#[derive(Clone, Default)]
pub struct StatsClient {
    /// TLS when memcached serves TLS.
    pub tls: Option<Tls>,
    /// Credentials, sent only to a server that asks for authentication.
    pub credentials: Option<Credentials>,
    /// The `stats settings` to read and keep (none: the command is not sent).
    /// Sent to a server whose version crashes on it with NAPI ids
    /// ([`settings_crash_with_napi_ids`]) only when its address is in
    /// [`StatsClient::without_napi_ids`].
    pub settings: &'static [&'static str],
    /// The servers whose pod cannot be running NAPI ids (`-N`), by what the
    /// pod itself records ([`crate::stats::setup::may_run_napi_ids`]); empty
    /// by default: then none of a crashing version is asked.
    pub without_napi_ids: Arc<BTreeSet<SocketAddr>>,
}

/// memcached `version` crashes (SIGSEGV) on `stats settings` when it runs
/// NAPI ids (`-N`), or the version cannot be read (the safe side).
///
/// `process_stat_settings` prints the int `settings.num_napi_ids` with `%s`
/// (`APPEND_STAT("num_napi_ids", "%s", settings.num_napi_ids)`), which
/// dereferences the number as a pointer: from 1.6.9, which brought NAPI ids,
/// to 1.6.39; memcached commit 77e3e2f "Fix format specifier for
/// nums_napi_id", first released in 1.6.40, prints it with `%d`. Without
/// `-N` the number is 0, printed as `(null)`: no crash.
pub fn settings_crash_with_napi_ids(version: &str) -> bool {
    let mut parts = version.split(['.', '-', '+', ' ']);
    let mut number = || parts.next()?.parse::<u32>().ok();
    match (number(), number(), number()) {
        (Some(major), Some(minor), Some(patch)) => {
            (major, minor) == (1, 6) && (9..=39).contains(&patch)
        }
        _ => true,
    }
}

/// Which client read a server.
enum Reader {
    /// The current one.
    Now(StatsClient),
    /// The one that read it before, the current being refused.
    Before(StatsClient),
}

/// The client that last read each server. A pod keeps the Secrets it
/// started with: while a rotated password or a renewed certificate rolls
/// out, the pods not yet replaced refuse the new ones, and are read with
/// what read them before (memcached never re-reads its auth file).
#[derive(Clone, Default)]
pub struct Readers(BTreeMap<SocketAddr, StatsClient>);

impl StatsClient {
    /// Read every server at once and combine what answered.
    pub async fn collect(&self, addresses: &[SocketAddr]) -> ClusterStats {
        self.collect_with(addresses, &mut Readers::default()).await
    }

    /// [`StatsClient::collect`], reading a server that refuses this
    /// client's TLS or credentials with the client in `readers` that read
    /// it last; `readers` then holds the client that read each server now
    /// (or last, for one not read), for the servers still listed.
    pub async fn collect_with(
        &self,
        addresses: &[SocketAddr],
        readers: &mut Readers,
    ) -> ClusterStats {
        let mut addresses = addresses.to_vec();
        addresses.sort();
        let reads = addresses
            .iter()
            .map(|addr| self.fetch_as_before(*addr, readers.0.get(addr)));
        let results = join_all(reads).await;
        let mut combined = ClusterStats::default();
        let (mut hits, mut gets) = (0u128, 0u128);
        let mut read_by = BTreeMap::new();
        for (addr, (result, reader)) in addresses.iter().zip(results) {
            let stale_secrets = matches!(reader, Some(Reader::Before(_)));
            let reader = reader.map(|(Reader::Now(r) | Reader::Before(r))| r);
            if let Some(reader) = reader.or_else(|| readers.0.remove(addr)) {
                read_by.insert(*addr, reader);
            }
            match result {
                Ok(stats) => {
                    combined.reachable += 1;
                    combined.version.get_or_insert(stats.version);
                    // Less the connection asking: clients' connections only.
                    let connections = (stats.curr_connections - 1).max(0);
                    *combined.current_connections.get_or_insert(0) += connections;
                    hits += u128::from(stats.get_hits);
                    gets += u128::from(stats.get_hits) + u128::from(stats.get_misses);
                    let pod = PodStats {
                        items: stats.curr_items,
                        hits: stats.get_hits,
                        misses: stats.get_misses,
                        evictions: stats.evictions,
                        bytes: stats.bytes,
                        limit: stats.limit_maxbytes,
                        connections,
                        max_connections: stats.max_connections,
                        pid: stats.pid,
                        settings: stats.settings,
                        stale_secrets,
                        certificate: stats.certificate,
                    };
                    combined.pods.insert(*addr, pod);
                }
                Err(e) => match Unanswered::of(&e) {
                    Some(how) => {
                        tracing::warn!(%addr, error = %e, "memcached does not answer");
                        combined.unanswered.insert(*addr, how);
                    }
                    None => {
                        if matches!(e, StatsError::Auth(_) | StatsError::Tls(_)) {
                            combined.refused.insert(*addr);
                        }
                        tracing::info!(%addr, error = %e, "skipping unreachable memcached");
                    }
                },
            }
        }
        combined.hit_ratio = hit_ratio(hits, gets);
        readers.0 = read_by;
        combined
    }

    /// Read `addr`, with `before` (what read it last) when it refuses this
    /// client's TLS or credentials; the client that read it, if one did.
    async fn fetch_as_before(
        &self,
        addr: SocketAddr,
        before: Option<&StatsClient>,
    ) -> (Result<ServerStats, StatsError>, Option<Reader>) {
        let result = self.fetch(addr).await;
        match (&result, before) {
            (Ok(_), _) => (result, Some(Reader::Now(self.clone()))),
            (Err(StatsError::Auth(_) | StatsError::Tls(_)), Some(before)) => {
                // What the pods run now decides `stats settings`, not what they ran then.
                let before = &StatsClient {
                    without_napi_ids: self.without_napi_ids.clone(),
                    ..before.clone()
                };
                let again = before.fetch(addr).await;
                let reader = again.is_ok().then(|| Reader::Before(before.clone()));
                // Neither reads it: this client's refusal is the one to report.
                (if again.is_ok() { again } else { result }, reader)
            }
            _ => (result, None),
        }
    }

    /// Read one server's stats; over TLS, with the certificate it presents
    /// ([`Presented`]: one another than expected reloaded first).
    pub async fn fetch(&self, addr: SocketAddr) -> Result<ServerStats, StatsError> {
        let tcp = connect(addr).await?;
        let exchange = async {
            let Some(tls) = &self.tls else {
                return self.exchange(addr, tcp, false).await;
            };
            let stream = (tls.handshake(tcp).await).map_err(|e| StatsError::Tls(e.to_string()))?;
            let older = !tls.presents_expected(&stream);
            let mut stats = self.exchange(addr, stream, older).await?;
            if older && stats.certificate == Presented::Reloaded {
                let stream = (tls.handshake(connect(addr).await?).await)
                    .map_err(|e| StatsError::Tls(e.to_string()))?;
                if !tls.presents_expected(&stream) {
                    stats.certificate = Presented::Older;
                }
            } else if matches!(tls.mounted, Mounted::Loadable(_)) && !older {
                stats.certificate = Presented::Current;
            }
            Ok(stats)
        };
        timeout(READ_TIMEOUT, exchange)
            .await
            .map_err(|_| StatsError::Silent)?
    }

    /// `stats` first; the credentials go out only when the server answers
    /// that it requires authentication (an old pod without `-Y` would store
    /// them as an ordinary item anyone could read).
    /// Then, when `reload`, `refresh_certs` ([`Presented::Reloaded`] if
    /// memcached says `OK`, [`Presented::Refused`] with its answer if not).
    async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        addr: SocketAddr,
        stream: S,
        reload: bool,
    ) -> Result<ServerStats, StatsError> {
        let mut stream = BufReader::new(stream);
        let mut stats = self.authenticated_stats(addr, &mut stream).await?;
        if reload {
            send(&mut stream, b"refresh_certs\r\n").await?;
            stats.certificate = match read_line(&mut stream).await? {
                answer if answer == "OK" => Presented::Reloaded,
                answer => Presented::Refused(answer),
            };
        }
        Ok(stats)
    }

    /// `stats` (and settings), logged in first when the server asks.
    async fn authenticated_stats<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        addr: SocketAddr,
        stream: &mut BufReader<S>,
    ) -> Result<ServerStats, StatsError> {
        send(stream, b"stats\r\n").await?;
        let first = read_line(stream).await?;
        if first != UNAUTHENTICATED {
            let stats = read_stats(stream, first).await?;
            return self.with_settings(addr, stream, stats).await;
        }
        log_in(stream, self.credentials.as_ref()).await?;
        send(stream, b"stats\r\n").await?;
        let first = read_line(stream).await?;
        let stats = read_stats(stream, first).await?;
        self.with_settings(addr, stream, stats).await
    }

    /// `stats` with the [`StatsClient::settings`] of `stats settings`, asked
    /// only when [`StatsClient::may_ask_settings`].
    async fn with_settings<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        addr: SocketAddr,
        stream: &mut BufReader<S>,
        mut stats: ServerStats,
    ) -> Result<ServerStats, StatsError> {
        if !self.may_ask_settings(addr, &stats.version) {
            return Ok(stats);
        }
        send(stream, b"stats settings\r\n").await?;
        let first = read_line(stream).await?;
        read_lines(stream, first, |key, value| {
            if self.settings.contains(&key) {
                stats.settings.insert(key.into(), value.into());
            }
            Ok(())
        })
        .await?;
        Ok(stats)
    }

    /// `stats settings` is wanted from the server at `addr`, which says it
    /// runs `version`, and cannot crash it: its version does not crash on it,
    /// or its pod cannot be running NAPI ids.
    pub fn may_ask_settings(&self, addr: SocketAddr, version: &str) -> bool {
        !self.settings.is_empty()
            && (!settings_crash_with_napi_ids(version) || self.without_napi_ids.contains(&addr))
    }
}

/// The numbers of a `stats` answer, `first` line already read.
async fn read_stats<S: AsyncRead + Unpin>(
    stream: &mut BufReader<S>,
    first: String,
) -> Result<ServerStats, StatsError> {
    let mut stats = ServerStats::default();
    read_lines(stream, first, |key, value| {
        parse_stat(&mut stats, key, value)
    })
    .await?;
    Ok(stats)
}

/// Each `STAT <key> <value>` line up to `END` to `each`, `first` already
/// read; at most [`MAX_RESPONSE_BYTES`] in all.
async fn read_lines<S: AsyncRead + Unpin>(
    stream: &mut BufReader<S>,
    first: String,
    mut each: impl FnMut(&str, &str) -> Result<(), StatsError>,
) -> Result<(), StatsError> {
    let mut read = 0;
    let mut line = first;
    loop {
        read += line.len() + 2;
        if read > MAX_RESPONSE_BYTES {
            return Err(StatsError::Protocol("answer too long".into()));
        }
        if line == "END" {
            return Ok(());
        }
        let mut fields = line.split_ascii_whitespace();
        match (fields.next(), fields.next(), fields.next()) {
            (Some("STAT"), Some(key), Some(value)) => each(key, value)?,
            _ => return Err(StatsError::Protocol(format!("unexpected line {line:?}"))),
        }
        line = read_line(stream).await?;
    }
}

/// Keep the numbers the status shows; one that is not a number makes the
/// whole answer garbage (reported as `0` it would be a false number).
fn parse_stat(stats: &mut ServerStats, key: &str, value: &str) -> Result<(), StatsError> {
    fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, StatsError> {
        value
            .parse()
            .map_err(|_| StatsError::Protocol(format!("{key} is not a number: {value:?}")))
    }
    match key {
        "version" => stats.version = value.into(),
        "curr_connections" => stats.curr_connections = number(key, value)?,
        "get_hits" => stats.get_hits = number(key, value)?,
        "get_misses" => stats.get_misses = number(key, value)?,
        "curr_items" => stats.curr_items = number(key, value)?,
        "pid" => stats.pid = number(key, value)?,
        "evictions" => stats.evictions = number(key, value)?,
        "bytes" => stats.bytes = number(key, value)?,
        "limit_maxbytes" => stats.limit_maxbytes = number(key, value)?,
        "max_connections" => stats.max_connections = number(key, value)?,
        _ => {}
    }
    Ok(())
}

/// `hits / gets` rounded to two decimals, computed in integers; `None`
/// without gets.
pub fn hit_ratio(hits: u128, gets: u128) -> Option<String> {
    if gets == 0 {
        return None;
    }
    let hundredths = (hits * 200 + gets) / (gets * 2); // round half up
    Some(format!("{}.{:02}", hundredths / 100, hundredths % 100))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_pod_items_are_not_status_numbers() {
        let address: SocketAddr = "10.0.0.1:11211".parse().unwrap();
        let pod = |items| PodStats {
            items,
            ..Default::default()
        };
        let before = ClusterStats {
            hit_ratio: Some("0.50".into()),
            pods: BTreeMap::from([(address, pod(10))]),
            ..Default::default()
        };
        let written = ClusterStats {
            pods: BTreeMap::from([(address, pod(11))]),
            ..before.clone()
        };
        assert!(before.same_status(&written));
        let hits = ClusterStats {
            hit_ratio: Some("0.51".into()),
            ..before.clone()
        };
        assert!(!before.same_status(&hits));
    }

    #[test]
    fn stats_settings_crash_1_6_9_to_1_6_39_with_napi_ids() {
        for crashing in [
            "1.6.9",
            "1.6.18",
            "1.6.39",
            "1.6.21-12-gabcdef",
            "",
            "unknown",
            "1.6",
        ] {
            assert!(settings_crash_with_napi_ids(crashing), "{crashing:?}");
        }
        for safe in ["1.6.8", "1.6.40", "1.6.41", "1.5.22", "1.7.0", "2.0.1"] {
            assert!(!settings_crash_with_napi_ids(safe), "{safe:?}");
        }
    }

    #[test]
    fn stats_settings_go_to_a_crashing_version_only_where_no_napi_ids_can_run() {
        let (free, unknown): (SocketAddr, SocketAddr) = (
            "10.0.0.1:11211".parse().unwrap(),
            "10.0.0.2:11211".parse().unwrap(),
        );
        let client = StatsClient {
            settings: &["maxconns"],
            without_napi_ids: Arc::new(BTreeSet::from([free])),
            ..Default::default()
        };
        assert!(client.may_ask_settings(free, "1.6.18"));
        assert!(
            !client.may_ask_settings(unknown, "1.6.18"),
            "not known to be free of -N"
        );
        assert!(!client.may_ask_settings(unknown, "garbled"));
        assert!(client.may_ask_settings(unknown, "1.6.40"), "fixed");
        let unwanted = StatsClient {
            settings: &[],
            ..client
        };
        assert!(!unwanted.may_ask_settings(free, "1.6.40"));
    }

    #[test]
    fn hit_ratio_rounds_to_two_decimals() {
        assert_eq!(hit_ratio(0, 0), None, "no gets, no ratio");
        assert_eq!(hit_ratio(0, 4).as_deref(), Some("0.00"));
        assert_eq!(hit_ratio(95, 100).as_deref(), Some("0.95"));
        assert_eq!(hit_ratio(1, 3).as_deref(), Some("0.33"));
        assert_eq!(hit_ratio(2, 3).as_deref(), Some("0.67"));
        assert_eq!(hit_ratio(5, 5).as_deref(), Some("1.00"));
        assert_eq!(hit_ratio(1, 200).as_deref(), Some("0.01"));
    }
}
