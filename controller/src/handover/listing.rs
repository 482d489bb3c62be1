//! The keys of one memcached that move: its items as the LRU crawler lists
//! them (`lru_crawler metadump all`, walked twice: [`WALKS`]), those clients
//! ask it for now that the new [`Ring`] places on another server, most
//! recently used first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::sleep;

use crate::handover::known::{self, Copies};
use crate::handover::placement::Ring;
use crate::stats::client::StatsClient;
use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// Walks of the LRU crawler per listing: one does not list an item
/// memcached moves between its LRUs meanwhile (a client reading it), which
/// the next walk finds.
const WALKS: usize = 2;
/// How long to wait for a crawler another client runs (`BUSY`).
const CRAWLER_RETRY: Duration = Duration::from_millis(200);

/// One item of the listing that moves.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    /// Last access (Unix seconds, as the crawler lists it): most recent first.
    pub last_access: u64,
    /// The key, decoded.
    pub key: Vec<u8>,
    /// The item's size in memcached, in bytes.
    pub size: u64,
    /// Index of the server clients will ask, in the ring.
    pub owner: usize,
}

/// The keys of `source` (named `source_name`) that the ring clients use now
/// places on it and the ring they will use on another server (not a copy
/// an earlier move left there), most recently used first (a copy, in
/// `copies`, by its source's last access), at most `max_keys` of them.
pub async fn list(
    client: &StatsClient,
    (source, source_name): (SocketAddr, &str),
    (now, next): (&Ring, &Ring),
    max_keys: usize,
    copies: &Copies,
) -> Result<Vec<Listed>, StatsError> {
    let mut session = client.session(source).await?;
    let index = |ring: &Ring| ring.servers().iter().position(|s| s == source_name);
    let (owns, stays) = (index(now), index(next));
    let mut kept = BinaryHeap::new();
    // The keys in `kept`: a key both walks list is kept once.
    let mut keys = HashSet::new();
    for _ in 0..WALKS {
        metadump(&mut session, |key, last_access, size| {
            let owner = (now.owner(&key) == owns)
                .then(|| next.owner(&key))
                .flatten();
            let Some(owner) = owner.filter(|o| Some(*o) != stays) else {
                return;
            };
            if !keys.insert(key.clone()) {
                return;
            }
            let listed = Listed {
                last_access: known::last_access(copies, &key, last_access),
                key,
                size,
                owner,
            };
            kept.push(Reverse(listed));
            if kept.len() > max_keys
                && let Some(Reverse(oldest)) = kept.pop()
            {
                keys.remove(&oldest.key);
            }
        })
        .await?;
    }
    let mut listed: Vec<Listed> = kept.into_iter().map(|Reverse(l)| l).collect();
    listed.sort_by(|a, b| b.cmp(a));
    Ok(listed)
}

/// Each item of the memcached of `session` as its LRU crawler lists it
/// (`lru_crawler metadump all`, waiting for a crawl another client runs) to
/// `each`: its key, last access (Unix seconds) and size.
pub async fn metadump(
    session: &mut Session,
    mut each: impl FnMut(Vec<u8>, u64, u64),
) -> Result<(), StatsError> {
    let first = loop {
        session.write(b"lru_crawler metadump all\r\n").await?;
        session.flush().await?;
        let first = session.line().await?;
        if !first.starts_with("BUSY") {
            break first;
        }
        sleep(CRAWLER_RETRY).await;
    };
    // A recent memcached (1.6.45, not 1.6.18) says OK before the listing.
    let mut line = if first == "OK" {
        session.line().await?
    } else {
        first
    };
    while line != "END" {
        let (key, last_access, size) = parse_metadump(&line).ok_or_else(|| {
            StatsError::Protocol(format!("not a line of lru_crawler metadump: {line:?}"))
        })?;
        each(key, last_access, size);
        line = session.line().await?;
    }
    Ok(())
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
}
