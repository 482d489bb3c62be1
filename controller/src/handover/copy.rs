//! Copying one memcached's keys to the servers clients will ask for them:
//! list its items with the LRU crawler (`lru_crawler metadump all`), keep
//! those a [`Ring`] places on another server, most recently used first, and
//! copy each with meta commands: `mg` reads the value, its client flags and
//! remaining TTL; `ms` in add mode (`ME`) writes them, so a copy never
//! overwrites what a client wrote there, nor brings back what it deleted
//! from the source meanwhile (gone from the source: not copied). Bounded by
//! a [`Budget`]: a deadline, a number of keys and the bytes of one batch.

use std::cmp::Reverse;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tokio::time::{Instant, sleep, timeout_at};

use crate::handover::placement::Ring;
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
/// Keys of one batch, at most.
const BATCH_KEYS: usize = 256;
/// How long to wait for a crawler another client runs (`BUSY`).
const CRAWLER_RETRY: Duration = Duration::from_millis(200);

/// One item of the crawler's listing that moves.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    /// Last access, seconds since the server started: most recent first.
    last_access: u64,
    key: Vec<u8>,
    size: u64,
    /// Index of the server clients will ask, in the ring.
    owner: usize,
}

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
    let listed = match timeout_at(
        budget.deadline,
        list(client, source, source_name, ring, budget),
    )
    .await
    {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => {
            progress.stopped = Some(format!("listing the keys of {source}: {e}"));
            return progress;
        }
        Err(_) => {
            progress.stopped = Some(format!(
                "the deadline passed while listing the keys of {source}"
            ));
            return progress;
        }
    };
    progress.moving = listed.len() as u64;
    report(&progress);
    let copy = copy_listed(
        client,
        source,
        destinations,
        listed,
        &mut progress,
        &mut report,
    );
    match timeout_at(budget.deadline, copy).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => progress.stopped = Some(format!("reading {source}: {e}")),
        Err(_) => progress.stopped = Some("the deadline passed".into()),
    }
    report(&progress);
    progress
}

/// The keys of `source` that move, most recently used first, at most
/// [`Budget::max_keys`] of them.
async fn list(
    client: &StatsClient,
    source: SocketAddr,
    source_name: &str,
    ring: &Ring,
    budget: Budget,
) -> Result<Vec<Listed>, StatsError> {
    let mut session = client.session(source).await?;
    let first = loop {
        session.write(b"lru_crawler metadump all\r\n").await?;
        session.flush().await?;
        let first = session.line().await?;
        if !first.starts_with("BUSY") {
            break first;
        }
        sleep(CRAWLER_RETRY).await;
    };
    let stays = ring.servers().iter().position(|s| s == source_name);
    let mut kept = BinaryHeap::new();
    // A recent memcached (1.6.45, not 1.6.18) says OK before the listing.
    let mut line = if first == "OK" {
        session.line().await?
    } else {
        first
    };
    while line != "END" {
        let item = parse_metadump(&line).ok_or_else(|| {
            StatsError::Protocol(format!("not a line of lru_crawler metadump: {line:?}"))
        })?;
        let owner = ring.owner(&String::from_utf8_lossy(&item.0));
        if let Some(owner) = owner.filter(|o| Some(*o) != stays) {
            let (key, last_access, size) = item;
            kept.push(Reverse(Listed {
                last_access,
                key,
                size,
                owner,
            }));
            if kept.len() > budget.max_keys {
                kept.pop();
            }
        }
        line = session.line().await?;
    }
    let mut listed: Vec<Listed> = kept.into_iter().map(|Reverse(l)| l).collect();
    listed.sort_by(|a, b| b.cmp(a));
    Ok(listed)
}

/// The key, last access and size of one `lru_crawler metadump` line
/// (`key=<URI-encoded> exp=<unix time|-1> la=<seconds> ... size=<bytes>`);
/// `None` when it is not one.
fn parse_metadump(line: &str) -> Option<(Vec<u8>, u64, u64)> {
    let (mut key, mut last_access, mut size) = (None, None, 0);
    for field in line.split_ascii_whitespace() {
        match field.split_once('=')? {
            ("key", value) => key = Some(percent_decode(value)?),
            ("la", value) => last_access = value.parse().ok(),
            ("size", value) => size = value.parse().ok()?,
            _ => {}
        }
    }
    Some((key?, last_access?, size))
}

/// `%XX` escapes decoded (the crawler's URI encoding of a key).
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A key as meta commands take it: as is, or base64 with the `b` flag when
/// it holds bytes the ASCII protocol cannot carry.
fn meta_key(key: &[u8]) -> (String, &'static str) {
    if !key.is_empty() && key.iter().all(|b| b.is_ascii_graphic()) {
        (String::from_utf8_lossy(key).into_owned(), "")
    } else {
        (STANDARD.encode(key), " b")
    }
}

/// One value read from the source.
struct Value {
    data: Vec<u8>,
    flags: u32,
    /// Remaining seconds, 0 for none (as `ms` takes it).
    ttl: u64,
}

/// Copy `listed` in batches: read a batch's values from the source, then
/// add each where it moves.
async fn copy_listed(
    client: &StatsClient,
    source: SocketAddr,
    destinations: &BTreeMap<usize, SocketAddr>,
    listed: Vec<Listed>,
    progress: &mut Progress,
    report: &mut impl FnMut(&Progress),
) -> Result<(), StatsError> {
    let mut from = client.session(source).await?;
    let mut to: BTreeMap<usize, Session> = BTreeMap::new();
    let mut rest = listed.as_slice();
    while !rest.is_empty() {
        let mut bytes = 0;
        let size = rest
            .iter()
            .take(BATCH_KEYS)
            .take_while(|l| {
                bytes += l.size;
                bytes <= BATCH_BYTES
            })
            .count()
            .max(1);
        let (batch, next) = rest.split_at(size);
        rest = next;
        let values = read_values(&mut from, batch).await?;
        // Per destination, its values at once: all `ms` sent, then the answers read.
        let mut by_owner: BTreeMap<usize, Vec<(&Listed, Value)>> = BTreeMap::new();
        for (item, value) in batch.iter().zip(values) {
            match value {
                Some(value) => by_owner.entry(item.owner).or_default().push((item, value)),
                None => progress.skipped += 1,
            }
        }
        for (owner, items) in by_owner {
            match write_values(client, destinations, &mut to, owner, &items).await {
                Ok(written) => {
                    progress.copied += written;
                    progress.skipped += items.len() as u64 - written;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "copying keys failed");
                    to.remove(&owner);
                    progress.failed += items.len() as u64;
                }
            }
        }
        report(progress);
    }
    Ok(())
}

/// The values of `batch` (`None`: gone or about to expire), asked for at once.
async fn read_values(
    from: &mut Session,
    batch: &[Listed],
) -> Result<Vec<Option<Value>>, StatsError> {
    for item in batch {
        let (key, base64) = meta_key(&item.key);
        from.write(format!("mg {key} v f t{base64}\r\n").as_bytes())
            .await?;
    }
    from.flush().await?;
    let mut values = Vec::with_capacity(batch.len());
    for _ in batch {
        let line = from.line().await?;
        let mut fields = line.split_ascii_whitespace();
        match fields.next() {
            Some("VA") => {
                let len: usize = (fields.next().and_then(|n| n.parse().ok()))
                    .ok_or_else(|| StatsError::Protocol(format!("mg answered {line:?}")))?;
                let data = from.data(len).await?;
                let (mut flags, mut ttl) = (0, None);
                for field in fields {
                    match field.split_at(1) {
                        ("f", n) => flags = n.parse().unwrap_or(0),
                        ("t", n) => ttl = n.parse::<i64>().ok(),
                        _ => {}
                    }
                }
                // -1: no expiry (0 for ms); 0: expiring now, not worth a copy.
                values.push(match ttl {
                    Some(-1) => Some(Value {
                        data,
                        flags,
                        ttl: 0,
                    }),
                    Some(t) if t > 0 => Some(Value {
                        data,
                        flags,
                        ttl: t as u64,
                    }),
                    _ => None,
                });
            }
            Some("EN") => values.push(None),
            _ => return Err(StatsError::Protocol(format!("mg answered {line:?}"))),
        }
    }
    Ok(values)
}

/// Add each of `items` under its key on server `owner`: how many were
/// written (the others the owner held already).
async fn write_values(
    client: &StatsClient,
    destinations: &BTreeMap<usize, SocketAddr>,
    sessions: &mut BTreeMap<usize, Session>,
    owner: usize,
    items: &[(&Listed, Value)],
) -> Result<u64, StatsError> {
    let session = match sessions.entry(owner) {
        Entry::Occupied(s) => s.into_mut(),
        Entry::Vacant(slot) => {
            let addr = destinations.get(&owner).ok_or_else(|| {
                StatsError::Connect("no address for the server clients will ask".into())
            })?;
            slot.insert(client.session(*addr).await?)
        }
    };
    for (item, Value { data, flags, ttl }) in items {
        let (key, base64) = meta_key(&item.key);
        let command = format!("ms {key} {} F{flags} T{ttl} ME{base64}\r\n", data.len());
        session.write(command.as_bytes()).await?;
        session.write(data).await?;
        session.write(b"\r\n").await?;
    }
    session.flush().await?;
    let mut written = 0;
    for _ in items {
        match session.line().await?.as_str() {
            "HD" => written += 1,
            "NS" => {}
            other => return Err(StatsError::Protocol(format!("ms answered {other:?}"))),
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_crawlers_lines() {
        let line = "key=k%20%C3%A9 exp=-1 la=1234 cas=7 fetch=no cls=1 size=68 flags=3";
        assert_eq!(
            parse_metadump(line),
            Some(("k é".as_bytes().to_vec(), 1234, 68))
        );
        assert_eq!(parse_metadump("key=a exp=-1 cas=7"), None, "no last access");
        assert_eq!(parse_metadump("key=a%2 la=1 size=1"), None, "a cut escape");
        assert_eq!(parse_metadump("BUSY currently processing"), None);
    }

    #[test]
    fn keys_the_ascii_protocol_cannot_carry_go_in_base64() {
        assert_eq!(meta_key(b"plain:key"), ("plain:key".into(), ""));
        assert_eq!(meta_key("k é".as_bytes()), ("ayDDqQ==".into(), " b"));
    }
}
