//! Moved keys retired where they were: a scale-up copies the keys that move
//! to the new pods and leaves them on their old ones, where a later move
//! back would find them and keep them (a copy never overwrites) over the
//! value clients wrote since. A while after the new list is published
//! ([`GRACE`]: clients still on the old list read them meanwhile), or before
//! the next move starts, each is deleted where it was, only if it is still
//! the value copied (`md <key> C<its CAS then>`): a value a client wrote
//! there since stays.

use std::net::SocketAddr;
use std::time::Duration;

use crate::handover::meta::{BATCH_KEYS, Copied, delete_unchanged};
use crate::stats::client::StatsClient;
use crate::stats::wire::StatsError;

/// How long moved keys stay where they were once the new list is published:
/// longer than clients take to read a changed ConfigMap (the kubelet's sync,
/// a minute by default, and its cache).
pub const GRACE: Duration = Duration::from_secs(300);

/// Delete the keys of `copied` on the server at `source` they were copied
/// from, each only if unchanged since; how many were.
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
        let keys: Vec<_> = batch
            .iter()
            .map(|c| (c.key.as_slice(), c.source_cas))
            .collect();
        retired += delete_unchanged(&mut session, &keys).await?;
    }
    Ok(retired)
}
