//! Copying one memcached's keys to the servers clients will ask for them:
//! the keys that move ([`crate::handover::listing`]), most recently used
//! first, each read with `mg` (value, client flags, remaining TTL) and
//! written with `ms` in add mode (`ME`), so a copy never overwrites what a
//! client wrote there; then the copies of keys changed or deleted on the
//! source meanwhile are taken back ([`crate::handover::withdraw`]).
//! Bounded by a [`Budget`]: a deadline, a number of keys, and the bytes of
//! one batch.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::time::{Instant, timeout_at};

use crate::handover::listing::{Listed, list};
use crate::handover::meta::{BATCH_KEYS, Copied, Owners, flag, meta_key};
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
}

/// What one copy did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Keys listed on the source that clients will ask another server for
    /// (at most [`Budget::max_keys`]).
    pub moving: u64,
    /// Written where clients will ask for them.
    pub copied: u64,
    /// Not written: the destination held the key already (never
    /// overwritten), or it expired or left the source meanwhile.
    pub skipped: u64,
    /// Not written: a server refused or did not answer.
    pub failed: u64,
    /// Copies taken back: the key changed or left the source while the
    /// copy ran (counted in `copied` too).
    pub withdrawn: u64,
    /// Why the copy ended before every moving key was tried.
    pub stopped: Option<String>,
}

impl Progress {
    /// Every moving key was tried.
    pub fn finished(&self) -> bool {
        self.stopped.is_none() && self.copied + self.skipped + self.failed >= self.moving
    }
}

/// Bytes of values one batch reads before writing them.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;

/// Copy the keys of the server at `source` (named `source_name` in `ring`)
/// that `ring` places on another of its servers to that server's address in
/// `destinations` (by index in the ring), most recently used first, within
/// `budget`; `report` sees the progress after each batch.
pub async fn copy_out(
    client: &StatsClient,
    (source, source_name): (SocketAddr, &str),
    ring: &Ring,
    destinations: &BTreeMap<usize, SocketAddr>,
    budget: Budget,
    mut report: impl FnMut(&Progress),
) -> Progress {
    let mut progress = Progress::default();
    let listing = list(client, (source, source_name), ring, budget.max_keys);
    let listed = match timeout_at(budget.deadline, listing).await {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => {
            progress.stopped = Some(format!("listing the keys of {source}: {e}"));
            return progress;
        }
        Err(_) => {
            let why = format!("the deadline passed while listing the keys of {source}");
            progress.stopped = Some(why);
            return progress;
        }
    };
    progress.moving = listed.len() as u64;
    report(&progress);
    let mut owners = Owners::new(client, destinations);
    let copy = async {
        let mut from = client.session(source).await?;
        let copied =
            copy_listed(&mut from, &mut owners, &listed, &mut progress, &mut report).await?;
        progress.withdrawn = withdraw_stale(&mut from, &mut owners, &copied).await?;
        Ok::<_, StatsError>(())
    };
    match timeout_at(budget.deadline, copy).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => progress.stopped = Some(format!("reading {source}: {e}")),
        Err(_) => progress.stopped = Some("the deadline passed".into()),
    }
    report(&progress);
    progress
}

/// One value read from the source.
struct Value {
    data: Vec<u8>,
    flags: u32,
    /// Remaining seconds, 0 for none (as `ms` takes it).
    ttl: u64,
    cas: u64,
}

/// Copy `listed` in batches: read a batch's values from the source, then
/// add each where it moves; the copies written.
async fn copy_listed(
    from: &mut Session,
    owners: &mut Owners<'_>,
    listed: &[Listed],
    progress: &mut Progress,
    report: &mut impl FnMut(&Progress),
) -> Result<Vec<Copied>, StatsError> {
    let mut copied = Vec::new();
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
                Ok(written) => {
                    progress.copied += written.len() as u64;
                    progress.skipped += (items.len() - written.len()) as u64;
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
    Ok(copied)
}

/// The values of `batch` (`None`: gone or about to expire), asked for at once.
async fn read_values(
    from: &mut Session,
    batch: &[Listed],
) -> Result<Vec<Option<Value>>, StatsError> {
    for item in batch {
        let (key, base64) = meta_key(&item.key);
        let command = format!("mg {key} v f t c{base64}\r\n");
        from.write(command.as_bytes()).await?;
    }
    from.flush().await?;
    let mut values = Vec::with_capacity(batch.len());
    for _ in batch {
        let line = from.line().await?;
        let garbled = || StatsError::Protocol(format!("mg answered {line:?}"));
        match line.split_ascii_whitespace().next() {
            Some("VA") => {
                let len: usize = (line.split_ascii_whitespace().nth(1))
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(garbled)?;
                let data = from.data(len).await?;
                let flags = flag(&line, 'f').unwrap_or(0);
                let cas = flag(&line, 'c').ok_or_else(garbled)?;
                // -1: no expiry (0 for ms); 0: expiring now, not worth a copy.
                values.push(match flag::<i64>(&line, 't') {
                    Some(-1) => Some(Value {
                        data,
                        flags,
                        ttl: 0,
                        cas,
                    }),
                    Some(t) if t > 0 => Some(Value {
                        data,
                        flags,
                        ttl: t as u64,
                        cas,
                    }),
                    _ => None,
                });
            }
            Some("EN") => values.push(None),
            _ => return Err(garbled()),
        }
    }
    Ok(values)
}

/// Add each of `items` under its key on server `owner`: the copies written
/// (the others the owner held already).
async fn write_values(
    owners: &mut Owners<'_>,
    owner: usize,
    items: &[(&Listed, Value)],
) -> Result<Vec<Copied>, StatsError> {
    let session = owners.session(owner).await?;
    for (item, value) in items {
        let (key, base64) = meta_key(&item.key);
        let Value {
            data, flags, ttl, ..
        } = value;
        let command = format!("ms {key} {} F{flags} T{ttl} ME c{base64}\r\n", data.len());
        session.write(command.as_bytes()).await?;
        session.write(data).await?;
        session.write(b"\r\n").await?;
    }
    session.flush().await?;
    let mut written = Vec::new();
    for (item, value) in items {
        let answer = session.line().await?;
        match answer.split_ascii_whitespace().next() {
            Some("HD") => written.push(Copied {
                key: item.key.clone(),
                owner,
                source_cas: value.cas,
                copy_cas: (flag(&answer, 'c'))
                    .ok_or_else(|| StatsError::Protocol(format!("ms answered {answer:?}")))?,
            }),
            Some("NS") => {}
            _ => return Err(StatsError::Protocol(format!("ms answered {answer:?}"))),
        }
    }
    Ok(written)
}
