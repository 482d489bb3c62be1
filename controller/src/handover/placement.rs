//! Where clients look for a key: the server a client library picks for it
//! from the servers it was given, computed as that library computes it, so
//! keys can be copied to where clients will ask for them.

use md5::{Digest, Md5};

/// How a client library places keys on its servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// pymemcache's `HashClient` (as oslo.cache configures it): rendezvous
    /// hashing, each server named `host:port`, the highest MurmurHash3 of
    /// `"{server}-{key}"` wins (pymemcache `RendezvousHash`).
    Rendezvous,
    /// libmemcached's weighted ketama (`MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`,
    /// libketama's continuum, pylibmc's `ketama_weighted`), equal weights:
    /// 160 points per server from MD5s of `"{host}-{i}"` (`"{host}:{port}-{i}"`
    /// off port 11211); a key goes to the first point at or after its MD5.
    Ketama,
}

/// The servers of one server list, as an [`Algorithm`] sees them.
#[derive(Clone, Debug)]
pub struct Ring {
    algorithm: Algorithm,
    servers: Vec<String>,
    /// Ketama's continuum: (point, server index), sorted by point.
    points: Vec<(u32, usize)>,
}

/// memcached's default port, which libmemcached leaves out of a server's points.
const DEFAULT_PORT: &str = "11211";
/// Points per server of libmemcached's weighted ketama (`MEMCACHED_POINTS_PER_SERVER_KETAMA`).
const KETAMA_POINTS: f32 = 160.0;

impl Ring {
    /// The ring of `servers` (`host:port` each, as clients are given them).
    pub fn new(algorithm: Algorithm, servers: &[String]) -> Self {
        let points = match algorithm {
            Algorithm::Rendezvous => Vec::new(),
            Algorithm::Ketama => continuum(servers),
        };
        Ring {
            algorithm,
            servers: servers.to_vec(),
            points,
        }
    }

    /// The servers, in the order given.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The index of the server a client asks for `key` (pymemcache takes it
    /// as text, libmemcached as bytes); `None` without servers.
    pub fn owner(&self, key: &[u8]) -> Option<usize> {
        match self.algorithm {
            Algorithm::Rendezvous => self.rendezvous(&String::from_utf8_lossy(key)),
            Algorithm::Ketama => {
                let hash = md5_point(key, 0);
                let at = self.points.partition_point(|(point, _)| *point < hash);
                let (_, server) = self.points.get(at).or(self.points.first())?;
                Some(*server)
            }
        }
    }

    /// pymemcache `RendezvousHash.get_node`: the highest score wins, a tie
    /// goes to the greater name.
    fn rendezvous(&self, key: &str) -> Option<usize> {
        let mut best: Option<(u32, usize)> = None;
        for (i, server) in self.servers.iter().enumerate() {
            let score = murmur3_chars(&format!("{server}-{key}"));
            best = match best {
                Some((high, winner))
                    if high > score || (high == score && self.servers[winner] >= *server) =>
                {
                    Some((high, winner))
                }
                _ => Some((score, i)),
            };
        }
        best.map(|(_, i)| i)
    }
}

/// libmemcached's `update_continuum` for equal weights: each server's share
/// of the points computed in `float` as its C does.
fn continuum(servers: &[String]) -> Vec<(u32, usize)> {
    let live = servers.len() as f32;
    let share = 1.0 / live;
    let per_server = ((share * KETAMA_POINTS / 4.0 * live + 0.000_000_000_1).floor() as u32) * 4;
    let mut points = Vec::with_capacity(servers.len() * per_server as usize);
    for (index, server) in servers.iter().enumerate() {
        let host = match server.rsplit_once(':') {
            Some((host, DEFAULT_PORT)) => host,
            _ => server,
        };
        for i in 0..per_server / 4 {
            let name = format!("{host}-{i}");
            for alignment in 0..4 {
                points.push((md5_point(name.as_bytes(), alignment), index));
            }
        }
    }
    points.sort_unstable();
    points
}

/// libmemcached `ketama_server_hash`: four bytes of the MD5, little endian.
fn md5_point(bytes: &[u8], alignment: usize) -> u32 {
    let digest = Md5::digest(bytes);
    let at = alignment * 4;
    u32::from_le_bytes([digest[at], digest[at + 1], digest[at + 2], digest[at + 3]])
}

/// pymemcache's `murmur3_32(text, seed=0)`: MurmurHash3 over the low byte of
/// each character (the same as over the bytes for ASCII).
fn murmur3_chars(text: &str) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let data: Vec<u8> = text.chars().map(|c| c as u32 as u8).collect();
    let mut h1: u32 = 0;
    let mut blocks = data.chunks_exact(4);
    let mix = |k1: u32| k1.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    for block in &mut blocks {
        h1 ^= mix(u32::from_le_bytes([block[0], block[1], block[2], block[3]]));
        h1 = h1.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k1 = tail
            .iter()
            .rev()
            .fold(0u32, |k, b| (k << 8) | u32::from(*b));
        h1 ^= mix(k1);
    }
    h1 ^= data.len() as u32;
    h1 ^= h1 >> 16;
    h1 = h1.wrapping_mul(0x85eb_ca6b);
    h1 ^= h1 >> 13;
    h1 = h1.wrapping_mul(0xc2b2_ae35);
    h1 ^ (h1 >> 16)
}

#[cfg(test)]
mod tests {
    //! Expected placements computed by the libraries themselves:
    //! pymemcache 4.0.0 `RendezvousHash(nodes)` and uhashring's ketama
    //! `HashRing(nodes, hash_fn="ketama")` (libketama's continuum), over
    //! `cache-{i}.cache.ns.svc[:11211]` and the keys `key-0`..`key-999`.
    use super::*;

    fn servers(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("cache-{i}.cache.ns.svc:11211"))
            .collect()
    }

    fn owners(ring: &Ring) -> (Vec<usize>, Vec<usize>) {
        let all: Vec<usize> = (0..1000)
            .map(|k| ring.owner(format!("key-{k}").as_bytes()).unwrap())
            .collect();
        let mut counts = vec![0; ring.servers().len()];
        for owner in &all {
            counts[*owner] += 1;
        }
        (all[..16].to_vec(), counts)
    }

    /// A server list and where the library puts keys on it.
    struct Case {
        name: &'static str,
        algorithm: Algorithm,
        servers: usize,
        /// The owners of `key-0`..`key-15`.
        first: [usize; 16],
        /// How many of `key-0`..`key-999` each server owns.
        counts: &'static [usize],
    }

    #[test]
    fn places_keys_as_the_client_library() {
        let cases = [
            Case {
                name: "rendezvous, 3",
                algorithm: Algorithm::Rendezvous,
                servers: 3,
                first: [1, 1, 2, 0, 2, 0, 2, 0, 0, 1, 1, 2, 1, 1, 0, 1],
                counts: &[340, 347, 313],
            },
            Case {
                name: "rendezvous, 4",
                algorithm: Algorithm::Rendezvous,
                servers: 4,
                first: [1, 1, 3, 0, 3, 0, 2, 0, 0, 3, 3, 2, 1, 3, 0, 1],
                counts: &[263, 262, 236, 239],
            },
            Case {
                name: "ketama, 3",
                algorithm: Algorithm::Ketama,
                servers: 3,
                first: [0, 1, 0, 2, 2, 0, 2, 2, 1, 0, 0, 2, 0, 1, 2, 0],
                counts: &[349, 304, 347],
            },
            Case {
                name: "ketama, 4",
                algorithm: Algorithm::Ketama,
                servers: 4,
                first: [0, 1, 0, 2, 2, 0, 2, 2, 3, 0, 0, 2, 0, 1, 2, 0],
                counts: &[266, 199, 277, 258],
            },
        ];
        for case in cases {
            let (all, per_server) = owners(&Ring::new(case.algorithm, &servers(case.servers)));
            assert_eq!(all, case.first, "{}: the first 16 keys", case.name);
            assert_eq!(per_server, case.counts, "{}: keys per server", case.name);
        }
    }

    #[test]
    fn rendezvous_hashes_characters_as_pymemcache() {
        // RendezvousHash(...).get_node("k\u00e9y-\u20ac") and ("x").
        let three = Ring::new(Algorithm::Rendezvous, &servers(3));
        let four = Ring::new(Algorithm::Rendezvous, &servers(4));
        assert_eq!(three.owner("kéy-€".as_bytes()), Some(2));
        assert_eq!(four.owner("kéy-€".as_bytes()), Some(3));
        assert_eq!((three.owner(b"x"), four.owner(b"x")), (Some(2), Some(2)));
    }

    #[test]
    fn ketama_gives_every_server_its_points() {
        for n in 1..=64 {
            let ring = Ring::new(Algorithm::Ketama, &servers(n));
            assert_eq!(ring.points.len() % n, 0, "{n} servers");
            assert!(ring.points.len() / n >= 156, "{n} servers");
        }
    }

    #[test]
    fn no_servers_no_owner() {
        for algorithm in [Algorithm::Rendezvous, Algorithm::Ketama] {
            assert_eq!(Ring::new(algorithm, &[]).owner(b"k"), None);
        }
    }
}
