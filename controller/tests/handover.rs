//! Keys copied between real memcached servers as a move hands them over:
//! where the client library will ask, with their flags and remaining TTL,
//! never over a value already there, the most recently used first.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use memcached_controller::handover::copy::{Budget, Progress, copy_out};
use memcached_controller::handover::known::SharedKnown;
use memcached_controller::handover::meta::Copied;
use memcached_controller::handover::owners::Owners;
use memcached_controller::handover::placement::{Algorithm, Ring};
use memcached_controller::handover::retire::retire;
use memcached_controller::handover::withdraw::withdraw_stale;
use memcached_controller::stats::client::StatsClient;
use memcached_controller::stats::credentials::Credentials;
use test_support::on_each_release;
use test_support::real_memcached::{self, Memcached, start};

/// A text-protocol client of one server, as an application writes and reads.
struct Client(BufReader<TcpStream>);

impl Client {
    fn new(addr: SocketAddr, login: Option<&str>) -> Self {
        let mut client = Client(BufReader::new(TcpStream::connect(addr).unwrap()));
        if let Some(token) = login {
            let answer = client.ask(&format!("set auth 0 0 {}\r\n{token}\r\n", token.len()));
            assert_eq!(answer, "STORED");
        }
        client
    }

    fn ask(&mut self, command: &str) -> String {
        self.0.get_mut().write_all(command.as_bytes()).unwrap();
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    fn set(&mut self, key: &str, value: &str, flags: u32, ttl: u32) {
        let answer = self.ask(&format!(
            "set {key} {flags} {ttl} {}\r\n{value}\r\n",
            value.len()
        ));
        assert_eq!(answer, "STORED", "set {key}");
    }

    /// The value, flags and remaining TTL (-1: none) of `key`.
    fn get(&mut self, key: &str) -> Option<(String, u32, i64)> {
        let head = self.ask(&format!("mg {key} v f t\r\n"));
        let mut fields = head.split_ascii_whitespace();
        if fields.next()? != "VA" {
            return None;
        }
        let len: usize = fields.next().unwrap().parse().unwrap();
        let (mut flags, mut ttl) = (0, 0);
        for field in fields {
            match field.split_at(1) {
                ("f", n) => flags = n.parse().unwrap(),
                ("t", n) => ttl = n.parse().unwrap(),
                _ => {}
            }
        }
        let mut data = vec![0; len + 2];
        self.0.read_exact(&mut data).unwrap();
        data.truncate(len);
        Some((String::from_utf8(data).unwrap(), flags, ttl))
    }
}

/// Key `k` of a test: some in UTF-8, as pymemcache sends text keys.
fn key_of(k: u32) -> String {
    if k.is_multiple_of(50) {
        format!("clé-{k}")
    } else {
        format!("key-{k}")
    }
}

/// A TTL past memcached's 30 days of relative ones: 40 days.
const LONG_TTL: u32 = 40 * 24 * 3600;

/// Servers as clients name them (a StatefulSet's pods).
fn names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("cache-{i}.cache.ns.svc:11211"))
        .collect()
}

/// Copy the keys of every server of the ring clients use now, `rings.0`
/// (the first of `servers`), to where the next, `rings.1`, places them; the
/// progress of each source.
async fn hand_over(
    client: &StatsClient,
    servers: &[Memcached],
    rings: (&Ring, &Ring),
    max_keys: usize,
) -> Vec<Progress> {
    hand_over_with(client, servers, rings, max_keys, &SharedKnown::default()).await
}

/// [`hand_over`], the sources in turn, with the recency of the keys the
/// copies wrote kept in `known`.
async fn hand_over_with(
    client: &StatsClient,
    servers: &[Memcached],
    rings: (&Ring, &Ring),
    max_keys: usize,
    known: &SharedKnown,
) -> Vec<Progress> {
    let destinations: BTreeMap<usize, SocketAddr> =
        servers.iter().map(|s| s.addr).enumerate().collect();
    let mut done = Vec::new();
    for (server, name) in servers.iter().zip(rings.0.servers()) {
        let budget = Budget {
            deadline: tokio::time::Instant::now() + Duration::from_secs(30),
            max_keys,
            sources: 1,
        };
        let source = (server.addr, name.as_str());
        done.push(
            copy_out(
                client,
                source,
                rings,
                &destinations,
                (budget, known),
                |_| {},
            )
            .await
            .0,
        );
    }
    done
}

on_each_release! {
    /// Scaling 3 -> 4: the keys the client will ask the new server for are
    /// there, with their flags and TTL (none, an hour, 40 days), UTF-8 ones
    /// too, over an earlier copy and never from one left on another server;
    /// the others stay where they were.
    #[tokio::test]
    async fn fills_a_new_server_with_the_keys_clients_will_ask_it_for() {
        for algorithm in [Algorithm::Rendezvous, Algorithm::Ketama] {
            let servers: Vec<Memcached> = (0..4).map(|_| start(&[])).collect();
            let (three, four) = (Ring::new(algorithm, &names(3)), Ring::new(algorithm, &names(4)));
            let mut clients: Vec<Client> = servers.iter().map(|s| Client::new(s.addr, None)).collect();
            // Past 30 days memcached takes a Unix time: 40 days from now.
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as u32;
            for k in 0..600 {
                let key = key_of(k);
                let ttl = match k % 4 {
                    0 | 2 => 0,
                    1 => 3600,
                    _ => now + LONG_TTL,
                };
                clients[three.owner(key.as_bytes()).unwrap()].set(&key, &format!("value {k}"), k, ttl);
            }
            // An earlier copy, of a move that did not end, on the new server:
            // overwritten; one a move left on server 0 of a key clients ask
            // server 1 for: not copied over server 1's value.
            let moving = |from: usize| (0..600).map(key_of).find(|k| three.owner(k.as_bytes()) == Some(from) && four.owner(k.as_bytes()) == Some(3)).unwrap();
            clients[3].set(&moving(0), "an earlier copy", 0, 0);
            clients[0].set(&moving(1), "a copy left behind", 0, 0);
            let done = hand_over(&StatsClient::default(), &servers, (&three, &four), 100_000).await;
            let moving: u64 = done.iter().map(|p| p.moving).sum();
            let copied: u64 = done.iter().map(|p| p.copied).sum();
            assert!(done.iter().all(Progress::finished), "{algorithm:?}: {done:?}");
            assert_eq!((moving, copied), (moving, moving), "{algorithm:?}: {done:?}");
            let expected = (0..600).filter(|k| four.owner(key_of(*k).as_bytes()) == Some(3)).count();
            assert_eq!(moving as usize, expected, "{algorithm:?}: every key that moves, only those");
            for k in 0..600u32 {
                let key = key_of(k);
                let owner = four.owner(key.as_bytes()).unwrap();
                let (value, flags, ttl) = clients[owner].get(&key).unwrap_or_else(|| panic!("{algorithm:?}: {key} missing on {owner}"));
                assert_eq!((value, flags), (format!("value {k}"), k), "{algorithm:?}: {key}");
                match k % 4 {
                    0 | 2 => assert_eq!(ttl, -1, "{algorithm:?}: {key} never expires"),
                    1 => assert!((3590..=3600).contains(&ttl), "{algorithm:?}: {key} ttl {ttl}"),
                    _ => assert!((LONG_TTL - 10..=LONG_TTL + 2).contains(&(ttl as u32)), "{algorithm:?}: {key} ttl {ttl}"),
                }
            }
        }
    }

    /// Scaling 4 -> 3 under ASCII authentication: the leaving server's keys
    /// go to the servers clients will ask; a key a client already wrote
    /// there keeps the client's value.
    #[tokio::test]
    async fn empties_a_leaving_server_without_overwriting_newer_values() {
        let dir = real_memcached::readable_tempdir();
        let file = dir.path().join("auth");
        std::fs::write(&file, "cache:s3cret\n").unwrap();
        let servers: Vec<Memcached> = (0..4).map(|_| start(&["-Y".into(), file.display().to_string()])).collect();
        let (four, three) = (Ring::new(Algorithm::Rendezvous, &names(4)), Ring::new(Algorithm::Rendezvous, &names(3)));
        let mut clients: Vec<Client> = servers.iter().map(|s| Client::new(s.addr, Some("cache s3cret"))).collect();
        let on_leaving: Vec<String> = (0..400).map(|k| format!("key-{k}")).filter(|k| four.owner(k.as_bytes()) == Some(3)).collect();
        for key in &on_leaving {
            clients[3].set(key, "old", 0, 0);
        }
        let newer = &on_leaving[0];
        clients[three.owner(newer.as_bytes()).unwrap()].set(newer, "newer", 0, 0);
        let client = StatsClient {
            credentials: Credentials::from_auth_file("cache:s3cret\n"),
            ..Default::default()
        };
        let destinations: BTreeMap<usize, SocketAddr> = servers.iter().take(3).map(|s| s.addr).enumerate().collect();
        let budget = Budget { deadline: tokio::time::Instant::now() + Duration::from_secs(30), max_keys: 100_000, sources: 1 };
        let (done, _) = copy_out(&client, (servers[3].addr, "cache-3.cache.ns.svc:11211"), (&four, &three), &destinations, (budget, &SharedKnown::default()), |_| {}).await;
        assert!(done.finished(), "{done:?}");
        assert_eq!((done.moving, done.copied, done.skipped, done.failed), (on_leaving.len() as u64, on_leaving.len() as u64 - 1, 1, 0));
        for key in &on_leaving {
            let value = clients[three.owner(key.as_bytes()).unwrap()].get(key).map(|(v, _, _)| v);
            assert_eq!(value.as_deref(), Some(if key == newer { "newer" } else { "old" }), "{key}");
        }
        let anonymous = hand_over(&StatsClient::default(), &servers, (&four, &three), 10).await;
        assert!(anonymous[0].stopped.as_deref().unwrap_or_default().contains("no credentials"), "{anonymous:?}");
    }

    /// A budget of 10 keys copies the 10 most recently written that move.
    #[tokio::test]
    async fn copies_the_most_recently_used_first() {
        let servers: Vec<Memcached> = (0..2).map(|_| start(&[])).collect();
        let two = Ring::new(Algorithm::Rendezvous, &names(2));
        let mut source = Client::new(servers[0].addr, None);
        let moving = |range: std::ops::Range<u32>| range.map(|k| format!("key-{k}")).filter(|k| two.owner(k.as_bytes()) == Some(1));
        for key in moving(0..200) {
            source.set(&key, "older", 0, 0);
        }
        // memcached's clock ticks each second: the next keys are newer by it.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let recent: Vec<String> = moving(200..400).take(10).collect();
        for key in &recent {
            source.set(key, "recent", 0, 0);
        }
        let done = hand_over(&StatsClient::default(), &servers, (&Ring::new(Algorithm::Rendezvous, &names(1)), &two), 10).await;
        assert_eq!((done[0].moving, done[0].copied), (10, 10), "{done:?}");
        let mut destination = Client::new(servers[1].addr, None);
        for key in &recent {
            assert_eq!(destination.get(key).map(|(v, _, _)| v).as_deref(), Some("recent"), "{key}");
        }
    }

    /// A server that cannot hold every key that moves to it (8 MiB for
    /// about 23 MiB) is sent no more than its memory, and keeps the most
    /// recently used: memcached evicts the items written earliest.
    #[tokio::test]
    async fn a_server_too_small_keeps_the_most_recently_used() {
        let servers = vec![start(&[]), start(&["-m".into(), "8".into()])];
        let two = Ring::new(Algorithm::Rendezvous, &names(2));
        let mut source = Client::new(servers[0].addr, None);
        let mut moving = (0..).map(|k| format!("key-{k}")).filter(|k| two.owner(k.as_bytes()) == Some(1));
        let value = |tag: &str| format!("{tag}{}", "-".repeat(8000 - tag.len()));
        for key in moving.by_ref().take(2700) {
            source.set(&key, &value("older"), 0, 0);
        }
        // memcached's clock ticks each second: the next keys are newer by it.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let recent: Vec<String> = moving.take(300).collect();
        for key in &recent {
            source.set(key, &value("recent"), 0, 0);
        }
        let done = hand_over(&StatsClient::default(), &servers, (&Ring::new(Algorithm::Rendezvous, &names(1)), &two), 100_000).await;
        let p = &done[0];
        assert_eq!(p.moving, 3000, "{p:?}");
        assert!(p.unfit > 1500 && p.copied + p.unfit == 3000 && p.finished(), "{p:?}");
        let mut destination = Client::new(servers[1].addr, None);
        let kept = recent.iter().filter(|key| destination.get(key).is_some_and(|(v, _, _)| v == value("recent"))).count();
        assert_eq!(kept, recent.len(), "the most recently used kept: {p:?}");
    }

    /// A full server keeps the most recently used of what it held and of the
    /// keys sent to it: a copy never pushes out a key used after it.
    #[tokio::test]
    async fn a_full_server_keeps_the_most_recently_used_of_its_own_and_the_copies() {
        let servers = vec![start(&[]), start(&["-m".into(), "8".into()])];
        let two = Ring::new(Algorithm::Rendezvous, &names(2));
        let (mut source, mut destination) = (Client::new(servers[0].addr, None), Client::new(servers[1].addr, None));
        let mut moving = (0..).map(|k| format!("key-{k}")).filter(|k| two.owner(k.as_bytes()) == Some(1));
        let value = |tag: &str| format!("{tag}{}", "-".repeat(8000 - tag.len()));
        let stage = |client: &mut Client, tag: &str, keys: Vec<String>| {
            for key in &keys {
                client.set(key, &value(tag), 0, 0);
            }
            keys
        };
        // memcached's clock ticks each second: each stage is newer by it.
        let pause = || tokio::time::sleep(Duration::from_millis(2100));
        stage(&mut source, "src-old", moving.by_ref().take(600).collect());
        stage(&mut destination, "own-old", (0..500).map(|k| format!("own-old-{k}")).collect());
        pause().await;
        let middle = stage(&mut source, "src-mid", moving.by_ref().take(300).collect());
        pause().await;
        let own_new = stage(&mut destination, "own-new", (0..300).map(|k| format!("own-new-{k}")).collect());
        pause().await;
        let newest = stage(&mut source, "src-new", moving.take(200).collect());
        let done = hand_over(&StatsClient::default(), &servers, (&Ring::new(Algorithm::Rendezvous, &names(1)), &two), 100_000).await;
        let p = &done[0];
        assert_eq!((p.moving, p.unfit, p.copied), (1100, 600, 500), "the older copies left out: {p:?}");
        for (keys, tag) in [(&own_new, "own-new"), (&middle, "src-mid"), (&newest, "src-new")] {
            let kept = keys.iter().filter(|key| destination.get(key).is_some_and(|(v, _, _)| v == value(tag))).count();
            assert_eq!(kept, keys.len(), "{tag} kept: {p:?}");
        }
    }

    /// A copy counts by its key's recency where it came from, not by when it
    /// was written: a server holding copies of older keys takes newer ones
    /// sent after them (they push those copies out).
    #[tokio::test]
    async fn a_copy_counts_by_the_recency_its_key_had() {
        let servers = vec![start(&[]), start(&[]), start(&["-m".into(), "8".into()])];
        let (two, three) = (Ring::new(Algorithm::Rendezvous, &names(2)), Ring::new(Algorithm::Rendezvous, &names(3)));
        let to_third = |from: usize| {
            let (two, three) = (two.clone(), three.clone());
            (0..).map(|k| format!("key-{k}")).filter(move |k| two.owner(k.as_bytes()) == Some(from) && three.owner(k.as_bytes()) == Some(2))
        };
        let value = |tag: &str| format!("{tag}{}", "-".repeat(8000 - tag.len()));
        let mut first = Client::new(servers[0].addr, None);
        for key in to_third(0).take(600) {
            first.set(&key, &value("old"), 0, 0);
        }
        // memcached's clock ticks each second: the next keys are newer by it,
        // and older than the copies of the first ones written after them.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let mut second = Client::new(servers[1].addr, None);
        let middle: Vec<String> = to_third(1).take(400).collect();
        for key in &middle {
            second.set(key, &value("mid"), 0, 0);
        }
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let done = hand_over_with(&StatsClient::default(), &servers, (&two, &three), 100_000, &SharedKnown::default()).await;
        assert_eq!((done[0].copied, done[0].unfit), (600, 0), "{done:?}");
        assert_eq!((done[1].copied, done[1].unfit), (400, 0), "the newer keys all sent: {done:?}");
        let mut third = Client::new(servers[2].addr, None);
        let kept = middle.iter().filter(|key| third.get(key).is_some_and(|(v, _, _)| v == value("mid"))).count();
        assert_eq!(kept, middle.len(), "{done:?}");
    }
}

on_each_release! {
    /// A key changed or deleted on its source after it was copied loses its
    /// copy; a copy a client wrote over since, and an unchanged one, stay.
    #[tokio::test]
    async fn takes_back_copies_of_keys_changed_meanwhile() {
        let servers: Vec<Memcached> = (0..2).map(|_| start(&[])).collect();
        let (mut source, mut destination) = (Client::new(servers[0].addr, None), Client::new(servers[1].addr, None));
        let mut copied = Vec::new();
        for key in ["changed", "deleted", "overwritten", "unchanged"] {
            source.set(key, "old", 0, 0);
            let source_cas = cas(&source.ask(&format!("mg {key} c\r\n")));
            let copy_cas = cas(&destination.ask(&format!("ms {key} 3 ME c\r\nold\r\n")));
            copied.push(Copied { key: key.as_bytes().to_vec(), owner: 1, source_cas, copy_cas, last_access: 0 });
        }
        source.set("changed", "new", 0, 0);
        assert_eq!(source.ask("md deleted\r\n"), "HD");
        destination.set("overwritten", "client", 0, 0);
        let client = StatsClient::default();
        let addresses = BTreeMap::from([(1, servers[1].addr)]);
        let mut owners = Owners::new(&client, &addresses);
        let withdrawn = withdraw_stale(&client, servers[0].addr, &mut owners, &copied).await.unwrap();
        assert_eq!(withdrawn, 2);
        let mut value = |key: &str| destination.get(key).map(|(v, _, _)| v);
        assert_eq!(value("changed"), None);
        assert_eq!(value("deleted"), None);
        assert_eq!(value("overwritten").as_deref(), Some("client"));
        assert_eq!(value("unchanged").as_deref(), Some("old"));
    }
}

on_each_release! {
    /// Scaling 1 -> 2 then back: once the new list is published, the keys
    /// that moved are retired (deleted) where they were, unless a client
    /// wrote them there since, so the move back copies what clients wrote
    /// on the new server, not the value from before the move; a client's
    /// write on the old server after the copy is kept (a value it wrote
    /// there is never overwritten, however old).
    #[tokio::test]
    async fn retires_moved_keys_so_a_move_back_brings_the_newer_values() {
        let servers: Vec<Memcached> = (0..2).map(|_| start(&[])).collect();
        let (one, two) = (Ring::new(Algorithm::Rendezvous, &names(1)), Ring::new(Algorithm::Rendezvous, &names(2)));
        let (mut old, mut new) = (Client::new(servers[0].addr, None), Client::new(servers[1].addr, None));
        let moving: Vec<String> = (0..200).map(key_of).filter(|k| two.owner(k.as_bytes()) == Some(1)).collect();
        for k in 0..200 {
            old.set(&key_of(k), "before", 0, 0);
        }
        let client = StatsClient::default();
        let destinations = BTreeMap::from([(1, servers[1].addr)]);
        let budget = || Budget { deadline: tokio::time::Instant::now() + Duration::from_secs(30), max_keys: 1000, sources: 1 };
        let (done, copies) = copy_out(&client, (servers[0].addr, names(2)[0].as_str()), (&one, &two), &destinations, (budget(), &SharedKnown::default()), |_| {}).await;
        assert_eq!((done.copied, copies.len()), (moving.len() as u64, moving.len()), "{done:?}");
        // A client still on the old list writes one after the copy.
        let (lagging, retired) = moving.split_first().unwrap();
        old.set(lagging, "lagging", 0, 0);
        assert_eq!(retire(&client, servers[0].addr, &copies).await.unwrap(), retired.len() as u64);
        for key in retired {
            assert_eq!(old.get(key), None, "{key} retired");
        }
        assert_eq!(old.get(lagging).map(|(v, _, _)| v).as_deref(), Some("lagging"));
        // Clients on the new list write newer values; then the move back.
        for key in &moving {
            new.set(key, "after", 0, 0);
        }
        let destinations = BTreeMap::from([(0, servers[0].addr)]);
        let (back, _) = copy_out(&client, (servers[1].addr, names(2)[1].as_str()), (&two, &one), &destinations, (budget(), &SharedKnown::default()), |_| {}).await;
        assert_eq!((back.moving, back.copied, back.skipped, back.failed), (moving.len() as u64, retired.len() as u64, 1, 0), "{back:?}");
        for key in retired {
            assert_eq!(old.get(key), Some(("after".into(), 0, -1)), "{key}");
        }
        assert_eq!(old.get(lagging).map(|(v, _, _)| v).as_deref(), Some("lagging"), "a client's write kept");
    }
}

/// The CAS value of a meta answer (`HD c42`).
fn cas(answer: &str) -> u64 {
    (answer
        .split_ascii_whitespace()
        .find_map(|f| f.strip_prefix('c')))
    .and_then(|n| n.parse().ok())
    .unwrap_or_else(|| panic!("no CAS in {answer:?}"))
}
