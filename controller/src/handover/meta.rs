//! What the copy, its withdrawal and the retiring of moved keys say and
//! read: keys as meta commands take them, the numbers of meta answers, the
//! copies written, deletes that spare a value changed since.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::stats::session::Session;
use crate::stats::wire::StatsError;

/// Keys of one batch of meta commands, at most.
pub const BATCH_KEYS: usize = 256;

/// A key written where it moved, with the CAS values that tell whether it
/// changed since: on its source when read, of the copy when written.
pub struct Copied {
    /// The key.
    pub key: Vec<u8>,
    /// Index of the server it went to, in the ring.
    pub owner: usize,
    /// Its CAS on the source when read.
    pub source_cas: u64,
    /// The CAS of the copy.
    pub copy_cas: u64,
    /// Its last access on the source ([`crate::handover::known`]).
    pub last_access: u64,
}

/// memcached's longest key, as a command carries it.
const MAX_KEY_BYTES: usize = 250;

/// A key as meta commands take it: as is (UTF-8 too), or base64 with the
/// `b` flag when it holds a space, a control byte or is not UTF-8; `None`
/// when that is longer than memcached takes (a key a binary-protocol
/// client stored).
pub fn meta_key(key: &[u8]) -> Option<(String, &'static str)> {
    let plain = (key.iter().all(|b| *b > b' ' && *b != 0x7f))
        .then(|| std::str::from_utf8(key).ok())
        .flatten()
        .filter(|k| !k.is_empty());
    let (text, flag) = match plain {
        Some(key) => (key.to_string(), ""),
        None => (STANDARD.encode(key), " b"),
    };
    (text.len() <= MAX_KEY_BYTES).then_some((text, flag))
}

/// Delete each of `keys` over `session` only if its CAS is still the one
/// given (`md <key> C<cas>`), all sent at once; how many were deleted (the
/// others a client wrote since, or gone). Keys meta commands cannot carry
/// are passed over.
pub async fn delete_unchanged(
    session: &mut Session,
    keys: &[(&[u8], u64)],
) -> Result<u64, StatsError> {
    let mut sent = 0;
    for &(key, cas) in keys {
        let Some((key, base64)) = meta_key(key) else {
            continue;
        };
        session
            .write(format!("md {key} C{cas}{base64}\r\n").as_bytes())
            .await?;
        sent += 1;
    }
    session.flush().await?;
    let mut deleted = 0;
    for _ in 0..sent {
        // HD: deleted; EX: a client wrote it since; NF: gone.
        if session.line().await?.starts_with("HD") {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// A one-line refusal of one command (a bad key, a server out of memory):
/// the session is still in step.
pub fn refused(answer: &str) -> bool {
    answer.starts_with("CLIENT_ERROR") || answer.starts_with("SERVER_ERROR")
}

/// The number a meta answer's flag `name` carries (`c1234` for `c`).
pub fn flag<T: std::str::FromStr>(answer: &str, name: char) -> Option<T> {
    (answer.split_ascii_whitespace().skip(1))
        .find_map(|f| f.strip_prefix(name))
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_the_ascii_protocol_cannot_carry_go_in_base64() {
        assert_eq!(meta_key(b"plain:key"), Some(("plain:key".into(), "")));
        assert_eq!(meta_key("clé".as_bytes()), Some(("clé".into(), "")));
        assert_eq!(meta_key("k é".as_bytes()), Some(("ayDDqQ==".into(), " b")));
        assert_eq!(meta_key(&[b' '; 200]), None, "longer than 250 in base64");
        assert_eq!(meta_key(&[0xff]), Some(("/w==".into(), " b")), "not UTF-8");
    }

    #[test]
    fn reads_a_flag_of_an_answer() {
        assert_eq!(flag::<u64>("HD c42 t-1", 'c'), Some(42));
        assert_eq!(flag::<i64>("VA 3 f0 t-1", 't'), Some(-1));
        assert_eq!(flag::<u64>("HD", 'c'), None);
    }
}
