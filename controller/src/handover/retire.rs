//! Moved keys retired where they were: after a scale-up's new list is
//! published, the keys copied to the new pods are still on their old
//! servers, where a later move back would find them and keep them over the
//! value clients wrote since. Each is marked stale with a short TTL, only if
//! it is still the value copied (`md <key> C<its CAS then> I T<ttl>`): a
//! client still on the old list reads it until it expires (a plain `get`
//! serves a stale item), a later copy may overwrite it
//! ([`crate::handover::copy`]), and a value a client wrote there since stays.

use std::net::SocketAddr;
use std::time::Duration;

use crate::handover::meta::{BATCH_KEYS, Copied, LONGEST_RELATIVE_TTL, meta_key};
use crate::stats::client::StatsClient;
use crate::stats::wire::StatsError;

/// How long a retired key stays readable: longer than clients take to read
/// a changed ConfigMap (the kubelet's sync, about a minute, and its cache).
pub const RETIRED_TTL: Duration = Duration::from_secs(300);

/// Mark the keys of `copied` stale on the server at `source` they were
/// copied from; how many were (the others changed or left since).
pub async fn retire(
    client: &StatsClient,
    source: SocketAddr,
    copied: &[Copied],
) -> Result<u64, StatsError> {
    if copied.is_empty() {
        return Ok(0);
    }
    let mut session = client.session(source).await?;
    let mut retired = 0;
    for batch in copied.chunks(BATCH_KEYS) {
        let mut sent = 0;
        for copy in batch {
            let Some((key, base64)) = meta_key(&copy.key) else {
                continue;
            };
            let (cas, ttl) = (copy.source_cas, retired_ttl(copy.ttl));
            session
                .write(format!("md {key} C{cas} I T{ttl}{base64}\r\n").as_bytes())
                .await?;
            sent += 1;
        }
        session.flush().await?;
        for _ in 0..sent {
            // HD: marked; EX: a client wrote it since; NF: gone.
            if session.line().await?.starts_with("HD") {
                retired += 1;
            }
        }
    }
    Ok(retired)
}

/// The TTL of a retired key: [`RETIRED_TTL`], or the one it had when copied
/// if shorter (a relative one; the seconds since the copy are not counted).
fn retired_ttl(ttl: u64) -> u64 {
    match ttl {
        0 => RETIRED_TTL.as_secs(),
        t if t > LONGEST_RELATIVE_TTL => RETIRED_TTL.as_secs(),
        t => t.min(RETIRED_TTL.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_key_expires_no_later_than_it_would_have() {
        assert_eq!(retired_ttl(0), 300, "no expiry");
        assert_eq!(retired_ttl(60), 60);
        assert_eq!(retired_ttl(3600), 300);
        assert_eq!(retired_ttl(2_000_000_000), 300, "a Unix time");
    }
}
