//! Copying one memcached's keys to the servers clients will ask for them:
//! the keys that move ([`crate::handover::listing`]), most recently used
//! first, each read with `mg` (value, client flags, remaining TTL) and
//! written with `ms` in add mode (`ME`), so a copy never overwrites what a
//! client wrote there (to a server that joins, which no client uses yet,
//! set over an earlier copy); then the copies of keys changed or deleted on
//! the source meanwhile are taken back ([`crate::handover::withdraw`]).
//! Bounded by a [`Budget`]: a deadline, a number of keys, the memory of
//! each server written to ([`crate::handover::fit`]), and the bytes of one
//! batch.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::{Instant, timeout_at};

use crate::handover::fit::fit;
use crate::handover::known::SharedKnown;
use crate::handover::listing::{Listed, list};
use crate::handover::meta::{BATCH_KEYS, Copied, flag, meta_key, refused};
use crate::handover::owners::Owners;
use crate::handover::placement::Ring;
use crate::handover::withdraw::withdraw_stale;
use crate::stats::client::StatsClient;
use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// How far one copy may go.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// When to stop, copied or not.
    pub deadline: Instant,
    /// The most recently used keys kept from the listing, at most.
    pub max_keys: usize,
    /// Sources copying to the same servers at once, this one among them.
    pub sources: usize,
}

/// What one copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Keys listed on the source that clients will ask another server for
    /// (at most [`Budget::max_keys`]).
    pub moving: u64,
    /// Written where clients will ask for them.
    pub copied: u64,
    /// Not written: the destination held the key already (a client wrote
    /// it there), or it expired, left the source or was marked stale there
    /// meanwhile.
    pub skipped: u64,
    /// Not written: a server refused the key or did not answer.
    pub failed: u64,
    /// Not written: more than the memory of the server it goes to holds
    /// (the least recently used left out).
    pub unfit: u64,
    /// Copies taken back: the key changed or left the source while the
    /// copy ran (counted in `copied` too).
    pub withdrawn: u64,
    /// Why the copy ended before every moving key was tried.
    pub stopped: Option<String>,
}

impl Progress {
    /// Every moving key was tried.
    pub fn finished(&self) -> bool {
        self.stopped.is_none()
            && self.copied + self.skipped + self.failed + self.unfit >= self.moving
    }
}

/// Bytes of values one batch reads before writing them.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;
/// memcached reads a TTL above 30 days as a Unix time.
const LONGEST_RELATIVE_TTL: u64 = 30 * 24 * 3600;
/// What the copy leaves of its budget to take back stale copies.
const WITHDRAW_RESERVE: Duration = Duration::from_secs(10);

/// Copy the keys clients ask the server at `source` (named `source_name`)
/// for now, under the ring `rings.0`, that the ring they will use,
/// `rings.1`, places on another of its servers, to that server's address in
/// `destinations` (by index in `rings.1`): the most recently used, as many
/// as each holds, within `budget`; then take back the copies of keys changed on the source
/// meanwhile, whether the copy ended or not. `known` gives the recency of
/// keys earlier copies wrote ([`crate::handover::known`]) and takes this
/// one's. `report` sees the progress after each batch. What it did, and the
/// keys it copied.
pub async fn copy_out(
    client: &StatsClient,
    (source, source_name): (SocketAddr, &str),
    rings: (&Ring, &Ring),
    destinations: &BTreeMap<usize, SocketAddr>,
    (budget, known): (Budget, &SharedKnown),
    mut report: impl FnMut(&Progress),
) -> (Progress, Vec<Copied>) {
    let mut progress = Progress::default();
    let copy_until = budget.deadline - WITHDRAW_RESERVE.min(budget.deadline - Instant::now());
    let on_source = (known.lock()).map_or_else(|_| Default::default(), |k| k.on(source));
    let listing = list(
        client,
        (source, source_name),
        rings,
        budget.max_keys,
        &on_source,
    );
    let listed = match timeout_at(copy_until, listing).await {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => {
            progress.stopped = Some(format!("listing the keys of {source}: {e}"));
            report(&progress);
            return (progress, Vec::new());
        }
        Err(_) => {
            let why = format!("the deadline passed while listing the keys of {source}");
            progress.stopped = Some(why);
            report(&progress);
            return (progress, Vec::new());
        }
    };
    progress.moving = listed.len() as u64;
    report(&progress);
    let mut owners = Owners::new(client, destinations);
    let (now, next) = rings;
    owners.fresh = (next.servers().iter().enumerate())
        .filter(|(_, server)| !now.servers().contains(server))
        .map(|(i, _)| i)
        .collect();
    let fitting = fit(&mut owners, listed, budget.sources, known);
    let (listed, unfit) = match timeout_at(copy_until, fitting).await {
        Ok(fitted) => fitted,
        Err(_) => {
            progress.stopped = Some("the deadline passed while reading the servers' memory".into());
            report(&progress);
            return (progress, Vec::new());
        }
    };
    progress.unfit = unfit;
    report(&progress);
    let mut copied = Vec::new();
    let copy = async {
        let mut from = client.session(source).await?;
        let into = (&mut owners, &mut copied);
        copy_listed(&mut from, into, &listed, &mut progress, &mut report).await
    };
    let outcome = timeout_at(copy_until, copy).await;
    progress.stopped = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("reading {source}: {e}")),
        Err(_) => Some("the deadline passed".into()),
    };
    let mut by_server: BTreeMap<SocketAddr, Vec<(Vec<u8>, u64)>> = BTreeMap::new();
    for copy in &copied {
        if let Some(server) = destinations.get(&copy.owner) {
            let at = by_server.entry(*server).or_default();
            at.push((copy.key.clone(), copy.last_access));
        }
    }
    if let Ok(mut known) = known.lock() {
        for (server, copies) in by_server {
            known.record(server, copies);
        }
    }
    let withdraw = withdraw_stale(client, source, &mut owners, &copied);
    match timeout_at(budget.deadline, withdraw).await {
        Ok(Ok(withdrawn)) => progress.withdrawn = withdrawn,
        Ok(Err(e)) => {
            let why = format!("checking the copies against {source}: {e}");
            progress.stopped.get_or_insert(why);
        }
        Err(_) => {
            let why = "the deadline passed while checking the copies".to_string();
            progress.stopped.get_or_insert(why);
        }
    }
    report(&progress);
    (progress, copied)
}

/// One value read from the source.
struct Value {
    data: Vec<u8>,
    flags: u32,
    /// As `ms` takes it: 0 for none, remaining seconds, or past 30 days
    /// the Unix time it expires at.
    ttl: u64,
    cas: u64,
}

/// Copy `listed` in batches: read a batch's values from the source, then
/// add each where it moves (to the sessions of `owners`), keeping what was
/// written in `copied`.
async fn copy_listed(
    from: &mut Session,
    (owners, copied): (&mut Owners<'_>, &mut Vec<Copied>),
    listed: &[Listed],
    progress: &mut Progress,
    report: &mut impl FnMut(&Progress),
) -> Result<(), StatsError> {
    let mut rest = listed;
    while !rest.is_empty() {
        let mut bytes = 0;
        let size = (rest.iter().take(BATCH_KEYS))
            .take_while(|l| {
                bytes += l.size;
                bytes <= BATCH_BYTES
            })
            .count()
            .max(1);
        let (batch, next) = rest.split_at(size);
        rest = next;
        let values = read_values(from, batch).await?;
        // Per destination, its values at once: all `ms` sent, then the answers read.
        let mut by_owner: BTreeMap<usize, Vec<(&Listed, Value)>> = BTreeMap::new();
        for (item, value) in batch.iter().zip(values) {
            match value {
                Some(value) => by_owner.entry(item.owner).or_default().push((item, value)),
                None => progress.skipped += 1,
            }
        }
        for (owner, items) in by_owner {
            match write_values(owners, owner, &items).await {
                Ok((written, present)) => {
                    progress.copied += written.len() as u64;
                    progress.skipped += present;
                    progress.failed += items.len() as u64 - written.len() as u64 - present;
                    copied.extend(written);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "copying keys failed");
                    owners.close(owner);
                    progress.failed += items.len() as u64;
                }
            }
        }
        report(progress);
    }
    Ok(())
}

/// The values of `batch` (`None`: gone, about to expire, or a key memcached
/// refuses), asked for at once.
async fn read_values(
    from: &mut Session,
    batch: &[Listed],
) -> Result<Vec<Option<Value>>, StatsError> {
    let keys: Vec<_> = batch.iter().map(|item| meta_key(&item.key)).collect();
    for (key, base64) in keys.iter().flatten() {
        from.write(format!("mg {key} v f t c{base64}\r\n").as_bytes())
            .await?;
    }
    from.flush().await?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut values = Vec::with_capacity(batch.len());
    for key in &keys {
        if key.is_none() {
            values.push(None);
            continue;
        }
        let line = from.line().await?;
        let garbled = || StatsError::Protocol(format!("mg answered {line:?}"));
        match line.split_ascii_whitespace().next() {
            Some("VA") => {
                let len: usize = (line.split_ascii_whitespace().nth(1))
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(garbled)?;
                let data = from.data(len).await?;
                let flags = flag(&line, 'f').unwrap_or(0);
                // Marked stale (`md ... I`) by a client: not worth a copy.
                let stale = line.split_ascii_whitespace().any(|f| f == "X");
                let cas = flag(&line, 'c').ok_or_else(garbled)?;
                // -1: no expiry; 0: expiring now, not worth a copy.
                let ttl = match flag::<i64>(&line, 't') {
                    Some(-1) => Some(0),
                    Some(t) if t > 0 && t as u64 > LONGEST_RELATIVE_TTL => {
                        Some(now.as_secs() + t as u64)
                    }
                    Some(t) if t > 0 => Some(t as u64),
                    _ => None,
                };
                values.push(ttl.filter(|_| !stale).map(|ttl| Value {
                    data,
                    flags,
                    ttl,
                    cas,
                }));
            }
            Some("EN") => values.push(None),
            _ if refused(&line) => values.push(None),
            _ => return Err(garbled()),
        }
    }
    Ok(values)
}

/// Add each of `items` under its key on server `owner` (set it, on a
/// server that joins: [`Owners::fresh`]): the copies written, and how many
/// the owner held already (the others it refused).
async fn write_values(
    owners: &mut Owners<'_>,
    owner: usize,
    items: &[(&Listed, Value)],
) -> Result<(Vec<Copied>, u64), StatsError> {
    let mode = if owners.fresh.contains(&owner) {
        "MS"
    } else {
        "ME"
    };
    let session = owners.session(owner).await?;
    let mut sent = Vec::with_capacity(items.len());
    for (item, value) in items {
        // Read from the source under this key: it has its meta form.
        let Some((key, base64)) = meta_key(&item.key) else {
            continue;
        };
        let Value {
            data, flags, ttl, ..
        } = value;
        let command = format!(
            "ms {key} {} F{flags} T{ttl} {mode} c{base64}\r\n",
            data.len()
        );
        session.write(command.as_bytes()).await?;
        session.write(data).await?;
        session.write(b"\r\n").await?;
        sent.push((item, value));
    }
    session.flush().await?;
    let (mut written, mut present) = (Vec::new(), 0);
    for (item, value) in sent {
        let answer = session.line().await?;
        match answer.split_ascii_whitespace().next() {
            Some("HD") => written.push(Copied {
                key: item.key.clone(),
                owner,
                source_cas: value.cas,
                copy_cas: (flag(&answer, 'c'))
                    .ok_or_else(|| StatsError::Protocol(format!("ms answered {answer:?}")))?,
                last_access: item.last_access,
            }),
            Some("NS") => present += 1,
            _ if refused(&answer) => {}
            _ => return Err(StatsError::Protocol(format!("ms answered {answer:?}"))),
        }
    }
    Ok((written, present))
}
