//! Copies taken back: a key a client changed or deleted on its source while
//! the copy ran would be served from its copy as it was. Each copied key's
//! CAS is read again on the source (`mg <key> c`); where it changed or the
//! key is gone, the copy is deleted where it went, only if it is still the
//! copy (`md <key> C<cas of the copy>`): a value a client wrote there since
//! stays.

use std::collections::BTreeMap;

use crate::handover::meta::{BATCH_KEYS, Copied, Owners, flag, meta_key};
use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// Take back the copies in `copied` whose key changed or left the source
/// (`from`); how many were deleted.
pub async fn withdraw_stale(
    from: &mut Session,
    owners: &mut Owners<'_>,
    copied: &[Copied],
) -> Result<u64, StatsError> {
    let mut withdrawn = 0;
    for batch in copied.chunks(BATCH_KEYS) {
        for copy in batch {
            let (key, base64) = meta_key(&copy.key);
            from.write(format!("mg {key} c{base64}\r\n").as_bytes())
                .await?;
        }
        from.flush().await?;
        let mut stale: BTreeMap<usize, Vec<&Copied>> = BTreeMap::new();
        for copy in batch {
            let answer = from.line().await?;
            let now = match answer.split_ascii_whitespace().next() {
                Some("HD") => flag::<u64>(&answer, 'c'),
                Some("EN") => None,
                _ => return Err(StatsError::Protocol(format!("mg answered {answer:?}"))),
            };
            if now != Some(copy.source_cas) {
                stale.entry(copy.owner).or_default().push(copy);
            }
        }
        for (owner, copies) in stale {
            let session = owners.session(owner).await?;
            for copy in &copies {
                let (key, base64) = meta_key(&copy.key);
                let command = format!("md {key} C{}{base64}\r\n", copy.copy_cas);
                session.write(command.as_bytes()).await?;
            }
            session.flush().await?;
            for _ in &copies {
                // HD: deleted; EX: a client wrote it since; NF: gone.
                if session.line().await?.starts_with("HD") {
                    withdrawn += 1;
                }
            }
        }
    }
    Ok(withdrawn)
}
