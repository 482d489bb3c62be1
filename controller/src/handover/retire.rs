//! Moved keys retired where they were: a scale-up copies the keys that move
//! to the new pods and leaves them on their old ones, where a later move
//! back would find them and keep them (a copy never overwrites) over the
//! value clients wrote since. A while after the new list is published
//! ([`GRACE`]: clients still on the old list read them meanwhile), or before
//! the next move that moves them again ([`due_before`]), each is deleted
//! where it was, only if it is still the value copied (`md <key> C<its CAS
//! then>`): a value a client wrote there since stays.

use std::net::SocketAddr;
use std::time::Duration;

use crate::handover::meta::{BATCH_KEYS, Copied, delete_unchanged};
use crate::handover::placement::Ring;
use crate::stats::client::StatsClient;
use crate::stats::wire::StatsError;

/// How long moved keys stay where they were once the new list is published:
/// longer than clients take to read a changed ConfigMap (the kubelet's sync,
/// a minute by default, and its cache).
pub const GRACE: Duration = Duration::from_secs(300);

/// Moved keys not retired yet, each list by the address it was copied from.
pub type Unretired = Vec<(SocketAddr, Vec<Copied>)>;

/// Of the keys an earlier move copied (`unretired`, each owned by the
/// server of the ring clients use now, `rings.0`, it went to), those the
/// next move (to `rings.1`) moves again, retired before it copies (it could
/// add one back where its old copy would win over a newer value), and the
/// others, kept (owned in `rings.1`) for a [`GRACE`] after its list is
/// published: a client not yet on the earlier move's list (a pod replaced
/// during a rollout is listed again just before the next one leaves) still
/// reads them where they were.
pub fn due_before(rings: (&Ring, &Ring), unretired: Unretired) -> (Unretired, Unretired) {
    let (now, next) = rings;
    let (mut due, mut kept) = (Vec::new(), Vec::new());
    for (source, copied) in unretired {
        let (mut moves, mut stays) = (Vec::new(), Vec::new());
        for mut copy in copied {
            let held_by = now.servers().get(copy.owner);
            match next.owner(&copy.key) {
                Some(owner) if next.servers().get(owner) == held_by => {
                    copy.owner = owner;
                    stays.push(copy);
                }
                _ => moves.push(copy),
            }
        }
        for (list, copies) in [(&mut due, moves), (&mut kept, stays)] {
            if !copies.is_empty() {
                list.push((source, copies));
            }
        }
    }
    (due, kept)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handover::placement::Algorithm;

    fn ring(ordinals: &[usize]) -> Ring {
        let servers: Vec<String> = (ordinals.iter())
            .map(|i| format!("c-{i}.c.ns.svc:11211"))
            .collect();
        Ring::new(Algorithm::Rendezvous, &servers)
    }

    /// A replaced pod's keys, copied back to it from the others, stay
    /// there while the next pod of a rollout leaves: only those a move takes
    /// elsewhere are retired before it.
    #[test]
    fn only_the_keys_a_move_moves_again_are_retired_before_it() {
        let three = ring(&[0, 1, 2]);
        let source: SocketAddr = "10.0.0.1:11211".parse().unwrap();
        // The keys of c-2, copied back to it from `source`.
        let unretired = || {
            let copied: Vec<Copied> = (0..300)
                .map(|i| format!("key-{i}").into_bytes())
                .filter_map(|key| {
                    let owner = three.owner(&key).filter(|o| *o == 2)?;
                    let (source_cas, copy_cas) = (1, 2);
                    Some(Copied {
                        key,
                        owner,
                        source_cas,
                        copy_cas,
                        last_access: 0,
                    })
                })
                .collect();
            vec![(source, copied)]
        };
        let count = unretired()[0].1.len();
        assert!(count > 50, "{count} keys of c-2");

        let (due, kept) = due_before((&three, &ring(&[0, 2])), unretired());
        assert!(due.is_empty(), "c-1 leaves: c-2 keeps its keys");
        assert_eq!(kept[0].1.len(), count);
        assert!(kept[0].1.iter().all(|c| c.owner == 1), "c-2 in [c-0, c-2]");

        let (due, kept) = due_before((&three, &ring(&[0, 1])), unretired());
        assert_eq!((due[0].1.len(), kept.len()), (count, 0), "c-2 leaves");

        let (due, kept) = due_before((&three, &ring(&[0, 1, 2, 3])), unretired());
        let (due, kept): (usize, usize) = (
            due.iter().map(|(_, c)| c.len()).sum(),
            kept.iter().map(|(_, c)| c.len()).sum(),
        );
        assert!(
            due > 0 && kept > 0 && due + kept == count,
            "3 -> 4: {due} move, {kept} stay"
        );
    }
}
