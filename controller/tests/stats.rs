//! The stats client against real memcached servers.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use memcached_controller::stats::client::{ClusterStats, StatsClient, StatsError, Unanswered};
use memcached_controller::stats::credentials::Credentials;
use memcached_controller::stats::tls::{self, Mounted, Presented, Tls, client_config};
use test_support::on_each_release;
use test_support::real_memcached::{self, free_port, make_pki, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;

/// Send `text` and wait for `answers` complete answers (each ends in END or
/// STORED); the connection is returned, so a caller may keep it as a client.
async fn command(addr: SocketAddr, text: &str, answers: usize) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(text.as_bytes()).await.unwrap();
    let mut seen = String::new();
    while seen.matches("END\r\n").count() + seen.matches("STORED\r\n").count() < answers {
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "memcached closed the connection after {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    s
}

/// `collect` from `addresses`, again (up to 5 s) until it counts
/// `connections`: memcached counts a closed connection (the start probe's, a
/// finished command's, an earlier reader's) until its worker notices the close.
async fn collect_counting(addresses: &[SocketAddr], connections: i64) -> ClusterStats {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let stats = StatsClient::default().collect(addresses).await;
        if stats.current_connections == Some(connections) || std::time::Instant::now() > deadline {
            return stats;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A TLS stats client trusting `trusted`'s CA, presenting `identity` if
/// given, expecting the certificate's name `memcached.test`.
fn tls_client(
    trusted: &real_memcached::Pki,
    server: &real_memcached::Pki,
    identity: Option<(&[u8], &[u8])>,
) -> StatsClient {
    named_tls_client(trusted, server, identity, "memcached.test")
}

fn named_tls_client(
    trusted: &real_memcached::Pki,
    server: &real_memcached::Pki,
    identity: Option<(&[u8], &[u8])>,
    name: &str,
) -> StatsClient {
    let config = client_config(
        Some(trusted.ca.as_bytes()),
        server.cert.as_bytes(),
        identity,
    )
    .unwrap();
    StatsClient {
        tls: Some(Tls {
            config: Arc::new(config),
            server_name: ServerName::try_from(name.to_string()).unwrap(),
            mounted: Mounted::Unknown,
        }),
        ..Default::default()
    }
}

on_each_release! {
    #[tokio::test]
    async fn reads_version_connections_and_hits_over_plain_tcp() {
        let server = start(&[]);
        command(server.addr, "set k 0 0 1\r\nv\r\n", 1).await;
        command(server.addr, "get k\r\n", 1).await;
        command(server.addr, "get k\r\nget missing\r\nget missing2\r\n", 3).await;
        let stats = StatsClient::default().fetch(server.addr).await.unwrap();
        assert!(stats.version.starts_with("1.6"), "{stats:?}");
        assert!(stats.curr_connections >= 1);
        assert_eq!((stats.get_hits, stats.get_misses), (2, 2));
    }
}

on_each_release! {
    #[tokio::test]
    async fn sums_several_servers_and_skips_dead_ones() {
        let (a, b) = (start(&[]), start(&[]));
        // One client still connected to each: the one that sent the commands.
        let clients = [
            command(a.addr, "set k 0 0 1\r\nv\r\nget k\r\n", 2).await,
            command(b.addr, "get nope\r\n", 1).await,
        ];
        let refused: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let silent = TcpListener::bind("127.0.0.1:0").unwrap(); // accepts, never answers
        let stats = collect_counting(&[a.addr, refused, silent.local_addr().unwrap(), b.addr], 2).await;
        assert_eq!(stats.reachable, 2);
        let silent = silent.local_addr().unwrap();
        assert_eq!(
            stats.unanswered,
            BTreeMap::from([(silent, Unanswered::Silent)]),
            "a refused connection is the probe's business, a silent one is named"
        );
        assert_eq!(stats.hit_ratio.as_deref(), Some("0.50"));
        assert_eq!(
            stats.current_connections,
            Some(2),
            "the clients' connections, not the reader's own: {stats:?}"
        );
        drop(clients);
        assert!(stats.version.is_some());
    }
}

on_each_release! {
    /// What was not read stays unknown: no ratio before the first get, no
    /// numbers at all when no server answered (kubectl then shows blanks).
    #[tokio::test]
    async fn unknown_numbers_stay_absent() {
        let server = start(&[]);
        let idle = collect_counting(&[server.addr], 0).await;
        assert_eq!(idle.reachable, 1);
        assert_eq!(idle.hit_ratio, None, "no gets yet: {idle:?}");
        assert_eq!(idle.current_connections, Some(0), "no client: {idle:?}");
        let refused: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let none = StatsClient::default().collect(&[refused]).await;
        assert_eq!((none.current_connections, none.hit_ratio), (None, None));
    }
}

on_each_release! {
    #[tokio::test]
    async fn authenticates_with_the_auth_file() {
        let dir = real_memcached::readable_tempdir();
        let file = dir.path().join("auth");
        std::fs::write(&file, "cache:s3cret\n").unwrap();
        let server = start(&["-Y".into(), file.display().to_string()]);
        let anonymous = StatsClient::default().fetch(server.addr).await;
        assert!(
            anonymous.is_err(),
            "memcached -Y must refuse unauthenticated stats: {anonymous:?}"
        );
        let wrong = StatsClient {
            credentials: Credentials::from_auth_file("cache:x\n"),
            ..Default::default()
        };
        assert!(matches!(
            wrong.fetch(server.addr).await,
            Err(StatsError::Auth(_))
        ));
        // Collected: a pod that refuses to be read, not one that does not answer.
        let collected = wrong.collect(&[server.addr]).await;
        assert_eq!(collected.refused, [server.addr].into());
        assert!(collected.unanswered.is_empty() && collected.pods.is_empty());
        let right = StatsClient {
            credentials: Credentials::from_auth_file("cache:s3cret"),
            ..Default::default()
        };
        assert!(
            right
                .fetch(server.addr)
                .await
                .unwrap()
                .version
                .starts_with("1.6")
        );
    }

    /// A file whose last line has no newline (the Go operator's e2e Secret):
    /// memcached up to 1.6.31 admits its password without the last
    /// character, later ones as written; the stats client reads both, so a
    /// pod started on such a file can be read, and so restarted in place on
    /// the fixed file.
    #[tokio::test]
    async fn reads_a_pod_started_on_an_unterminated_auth_file() {
        let dir = real_memcached::readable_tempdir();
        let file = dir.path().join("auth");
        std::fs::write(&file, "cache:s3cret").unwrap();
        let server = start(&["-Y".into(), file.display().to_string()]);
        let client = StatsClient {
            credentials: Credentials::from_auth_file("cache:s3cret"),
            ..Default::default()
        };
        let read = client.fetch(server.addr).await;
        assert!(read.is_ok(), "{read:?}");
    }
}

on_each_release! {
    #[tokio::test]
    async fn speaks_tls_and_presents_a_client_certificate_when_required() {
        let dir = real_memcached::readable_tempdir();
        let pki = make_pki();
        let path = |name: &str, content: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, content).unwrap();
            p.display().to_string()
        };
        let (ca, cert, key) = (
            path("ca.crt", &pki.ca),
            path("tls.crt", &pki.cert),
            path("tls.key", &pki.key),
        );
        let tls = start(&[
            "-Z".into(),
            "-o".into(),
            format!("ssl_chain_cert={cert},ssl_key={key}"),
        ]);
        let client = tls_client(&pki, &pki, None);
        assert!(
            client
                .fetch(tls.addr)
                .await
                .unwrap()
                .version
                .starts_with("1.6")
        );
        assert!(
            StatsClient::default().fetch(tls.addr).await.is_err(),
            "plain text must not work against TLS"
        );

        let mtls = start(&[
            "-Z".into(),
            "-o".into(),
            format!("ssl_chain_cert={cert},ssl_key={key},ssl_ca_cert={ca},ssl_verify_mode=2"),
        ]);
        let refused = client.fetch(mtls.addr).await;
        assert!(
            matches!(refused, Err(StatsError::Tls(_))),
            "mTLS must refuse a client without certificate, as TLS (not a closed connection): {refused:?}"
        );
        let identity = Some((pki.cert.as_bytes(), pki.key.as_bytes()));
        let with_cert = tls_client(&pki, &pki, identity);
        assert!(
            with_cert
                .fetch(mtls.addr)
                .await
                .unwrap()
                .version
                .starts_with("1.6")
        );

        let stranger = make_pki();
        let untrusting = tls_client(&stranger, &stranger, None);
        assert!(
            matches!(untrusting.fetch(tls.addr).await, Err(StatsError::Tls(_))),
            "a server outside the CA is refused"
        );
        let other_name = named_tls_client(&pki, &pki, None, "other.default.svc");
        assert!(
            matches!(other_name.fetch(tls.addr).await, Err(StatsError::Tls(_))),
            "a certificate of the same CA for another name is refused"
        );
        let no_ca = StatsClient {
            tls: Some(Tls {
                config: Arc::new(client_config(None, pki.cert.as_bytes(), None).unwrap()),
                server_name: ServerName::try_from("other.default.svc").unwrap(),
                mounted: Mounted::Unknown,
            }),
            ..Default::default()
        };
        assert!(
            matches!(no_ca.fetch(tls.addr).await, Err(StatsError::Tls(_))),
            "without ca.crt the name is checked too"
        );
    }
}

on_each_release! {
    /// A certificate renewed under the same CA: the pod's memcached is asked
    /// to load its files again until it presents the renewed one, after
    /// logging in; the same process serves on, its items kept. A renewal it
    /// cannot load (a key of another certificate) would break it: it is
    /// never asked to.
    #[tokio::test]
    async fn a_renewed_certificate_is_loaded_without_a_restart() {
        let dir = real_memcached::readable_tempdir();
        let [first, renewed, mismatched]: [real_memcached::Pki; 3] =
            real_memcached::make_renewed_pki(3).try_into().ok().unwrap();
        // As the kubelet does: each file replaced whole.
        let write = |name: &str, content: &str| {
            let part = dir.path().join(format!(".{name}"));
            std::fs::write(&part, content).unwrap();
            std::fs::rename(&part, dir.path().join(name)).unwrap();
            dir.path().join(name).display().to_string()
        };
        let install = |pki: &real_memcached::Pki, key_of: &real_memcached::Pki| {
            (write("tls.crt", &pki.cert), write("tls.key", &key_of.key))
        };
        let (cert, key) = install(&first, &first);
        let auth = write("auth", "cache:s3cret\n");
        let server = start(&[
            "-Z".into(),
            "-o".into(),
            format!("ssl_chain_cert={cert},ssl_key={key}"),
            "-Y".into(),
            auth,
        ]);
        command_over_tls(&first, server.addr, "set kept 0 0 1\r\nx\r\n", "STORED").await;
        let expecting = |pki: &real_memcached::Pki, key_of: &real_memcached::Pki| StatsClient {
            credentials: Credentials::from_auth_file("cache:s3cret"),
            tls: Some(Tls {
                mounted: match tls::loadable(pki.cert.as_bytes(), Some(key_of.key.as_bytes())) {
                    Ok(certificate) => Mounted::Loadable(certificate),
                    Err(why) => Mounted::Unloadable(why),
                },
                ..tls_client(pki, pki, None).tls.unwrap()
            }),
            ..Default::default()
        };
        let presented = |stats: &memcached_controller::stats::client::ServerStats| {
            (stats.certificate.clone(), stats.pid, stats.curr_items)
        };
        let before = expecting(&first, &first).fetch(server.addr).await.unwrap();
        assert_eq!(presented(&before), (Presented::Current, server.pid(), 1));

        // The Secret renewed, the pod's files not yet.
        let not_yet = expecting(&renewed, &renewed).fetch(server.addr).await.unwrap();
        assert_eq!(presented(&not_yet), (Presented::Older, server.pid(), 1));
        install(&renewed, &renewed);
        let reloaded = expecting(&renewed, &renewed).fetch(server.addr).await.unwrap();
        assert_eq!(presented(&reloaded), (Presented::Reloaded, server.pid(), 1));
        let after = expecting(&renewed, &renewed).fetch(server.addr).await.unwrap();
        assert_eq!(presented(&after), (Presented::Current, server.pid(), 1));

        // A Secret whose key is another certificate's: not asked to load it.
        install(&mismatched, &renewed);
        let unloadable = expecting(&mismatched, &renewed);
        assert!(matches!(
            &unloadable.tls.as_ref().unwrap().mounted,
            Mounted::Unloadable(why) if why.contains("not the certificate's")
        ));
        let unchecked = unloadable.fetch(server.addr).await.unwrap();
        assert_eq!(presented(&unchecked), (Presented::Unchecked, server.pid(), 1));
        let kept = expecting(&renewed, &renewed).fetch(server.addr).await.unwrap();
        assert_eq!(presented(&kept), (Presented::Current, server.pid(), 1));
        // Why not: memcached takes the certificate, refuses the key, and then
        // fails every handshake.
        command_over_tls(&renewed, server.addr, "refresh_certs\r\n", "Error").await;
        let broken = expecting(&renewed, &renewed).fetch(server.addr).await;
        assert!(matches!(broken, Err(StatsError::Tls(_))), "{broken:?}");
    }
}

/// Log in and send `text` over TLS (trusting `pki`'s CA, as `memcached.test`);
/// the first line of the answer must start with `answer`.
async fn command_over_tls(pki: &real_memcached::Pki, addr: SocketAddr, text: &str, answer: &str) {
    use tokio::io::AsyncBufReadExt;
    let config = client_config(Some(pki.ca.as_bytes()), pki.cert.as_bytes(), None).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("memcached.test").unwrap();
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let mut stream = tokio::io::BufReader::new(stream);
    let login = "cache s3cret";
    let auth = format!("set auth 0 0 {}\r\n{login}\r\n", login.len());
    stream.write_all(auth.as_bytes()).await.unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut line = String::new();
    stream.read_line(&mut line).await.unwrap();
    assert_eq!(line.trim_end(), "STORED", "login");
    line.clear();
    stream.read_line(&mut line).await.unwrap();
    assert!(line.starts_with(answer), "{text:?}: {line:?}");
}

on_each_release! {
    #[tokio::test]
    async fn never_sends_credentials_to_a_server_that_does_not_ask() {
        let server = start(&[]);
        let client = StatsClient {
            credentials: Credentials::from_auth_file("cache:s3cret"),
            ..Default::default()
        };
        assert!(client.fetch(server.addr).await.is_ok());
        let mut s = TcpStream::connect(server.addr).await.unwrap();
        s.write_all(b"get auth\r\n").await.unwrap();
        let mut answer = [0u8; 64];
        let n = s.read(&mut answer).await.unwrap();
        assert_eq!(
            &answer[..n],
            b"END\r\n",
            "the password was stored as an item on a server without -Y"
        );
    }
}

/// A server that answers every connection with `chunk`, repeated forever.
async fn endless_server(chunk: &'static [u8]) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move { while s.write_all(chunk).await.is_ok() {} });
        }
    });
    addr
}

/// Cut off by the byte bounds (the error says which), not by the read
/// timeout: memory and time stay bounded.
#[tokio::test]
async fn endless_answers_are_cut_off_at_the_byte_bounds() {
    let no_newline = endless_server(&[b'x'; 4096]).await;
    let result = StatsClient::default().fetch(no_newline).await;
    assert!(
        matches!(&result, Err(StatsError::Protocol(m)) if m.contains("longer than")),
        "{result:?}"
    );
    let endless_stats = endless_server(b"STAT pid 1\r\n").await;
    let result = StatsClient::default().fetch(endless_stats).await;
    assert!(
        matches!(&result, Err(StatsError::Protocol(m)) if m == "answer too long"),
        "{result:?}"
    );
}

/// A server that answers every connection's first request with `answer`,
/// then closes it; with `reset`, it closes with a TCP reset instead, before
/// answering.
async fn one_answer_server(answer: &'static [u8], reset: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut request = [0u8; 64];
            let _ = s.read(&mut request).await;
            if reset {
                let _ = s.set_zero_linger();
            } else {
                let _ = s.write_all(answer).await;
            }
        }
    });
    addr
}

on_each_release! {
    /// A pod sending garbage or resetting the connection is named with how it
    /// failed; its numbers never reach the status, the others' do.
    #[tokio::test]
    async fn garbage_answers_and_resets_are_named_not_counted() {
        let not_a_number = one_answer_server(b"STAT get_hits banana\r\nEND\r\n", false).await;
        let result = StatsClient::default().fetch(not_a_number).await;
        assert!(
            matches!(&result, Err(StatsError::Protocol(m)) if m == "get_hits is not a number: \"banana\""),
            "{result:?}"
        );
        let binary = one_answer_server(b"\x00\xff\xfe garbage\r\nEND\r\n", false).await;
        let result = StatsClient::default().fetch(binary).await;
        assert!(
            matches!(&result, Err(StatsError::Protocol(m)) if m.starts_with("unexpected line")),
            "{result:?}"
        );
        let reset = one_answer_server(b"", true).await;
        let result = StatsClient::default().fetch(reset).await;
        assert!(matches!(&result, Err(StatsError::Closed(_))), "{result:?}");

        let good = start(&[]);
        command(good.addr, "set k 0 0 1\r\nv\r\nget k\r\nget nope\r\n", 3).await;
        let stats = StatsClient::default()
            .collect(&[not_a_number, binary, reset, good.addr])
            .await;
        assert_eq!(stats.reachable, 1, "{stats:?}");
        assert_eq!(stats.hit_ratio.as_deref(), Some("0.50"), "{stats:?}");
        assert_eq!(
            stats.unanswered,
            BTreeMap::from([
                (not_a_number, Unanswered::Garbled),
                (binary, Unanswered::Garbled),
                (reset, Unanswered::Closed),
            ]),
            "garbage is not silence"
        );
    }
}
