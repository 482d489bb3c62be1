//! Copies taken back: a key a client changed or deleted on its source while
//! the copy ran would be served from its copy as it was. Each copied key's
//! CAS is read again on the source (`mg <key> c`); where it changed or the
//! key is gone, the copy is deleted where it went, only if it is still the
//! copy (`md <key> C<cas of the copy>`): a value a client wrote there since
//! stays.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::handover::meta::{BATCH_KEYS, Copied, delete_unchanged, flag, meta_key, refused};
use crate::handover::owners::Owners;
use crate::stats::client::StatsClient;
use crate::stats::wire::StatsError;

/// A key in its meta form: the text and its flag ([`meta_key`]).
type MetaKey = (String, &'static str);

/// Take back the copies in `copied` whose key changed or left the server
/// at `source` (sessions to where they went in `owners`); how many were
/// deleted.
pub async fn withdraw_stale(
    client: &StatsClient,
    source: SocketAddr,
    owners: &mut Owners<'_>,
    copied: &[Copied],
) -> Result<u64, StatsError> {
    if copied.is_empty() {
        return Ok(0);
    }
    let mut from = client.session(source).await?;
    let mut withdrawn = 0;
    for batch in copied.chunks(BATCH_KEYS) {
        // Copied under these keys: each has its meta form.
        let batch: Vec<(&Copied, MetaKey)> = (batch.iter())
            .filter_map(|copy| Some((copy, meta_key(&copy.key)?)))
            .collect();
        for (_, (key, base64)) in &batch {
            from.write(format!("mg {key} c{base64}\r\n").as_bytes())
                .await?;
        }
        from.flush().await?;
        let mut stale: BTreeMap<usize, Vec<&Copied>> = BTreeMap::new();
        for (copy, _) in &batch {
            let answer = from.line().await?;
            let now = match answer.split_ascii_whitespace().next() {
                Some("HD") => flag::<u64>(&answer, 'c'),
                Some("EN") => None,
                _ if refused(&answer) => continue,
                _ => return Err(StatsError::Protocol(format!("mg answered {answer:?}"))),
            };
            if now != Some(copy.source_cas) {
                stale.entry(copy.owner).or_default().push(copy);
            }
        }
        for (owner, copies) in stale {
            let session = owners.session(owner).await?;
            let keys: Vec<_> = copies
                .iter()
                .map(|c| (c.key.as_slice(), c.copy_cas))
                .collect();
            withdrawn += delete_unchanged(session, &keys).await?;
        }
    }
    Ok(withdrawn)
}
