//! The stats client against real memcached servers.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use common::{free_port, make_pki, start};
use memcached_controller::stats::{Credentials, StatsClient, StatsError};
use memcached_controller::tls::client_config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Send `text` and wait for `answers` complete answers (each ends in END or STORED).
async fn command(addr: SocketAddr, text: &str, answers: usize) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(text.as_bytes()).await.unwrap();
    let mut seen = String::new();
    while seen.matches("END\r\n").count() + seen.matches("STORED\r\n").count() < answers {
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "memcached closed the connection after {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// A TLS stats client trusting `trusted`'s CA, presenting `identity` if given.
fn tls_client(
    trusted: &common::Pki,
    server: &common::Pki,
    identity: Option<(&[u8], &[u8])>,
) -> StatsClient {
    let config = client_config(
        Some(trusted.ca.as_bytes()),
        server.cert.as_bytes(),
        identity,
    )
    .unwrap();
    StatsClient {
        tls: Some(Arc::new(config)),
        ..Default::default()
    }
}

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

#[tokio::test]
async fn sums_several_servers_and_skips_dead_ones() {
    let (a, b) = (start(&[]), start(&[]));
    command(a.addr, "set k 0 0 1\r\nv\r\nget k\r\n", 2).await;
    command(b.addr, "get nope\r\n", 1).await;
    let refused: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap(); // accepts, never answers
    let stats = StatsClient::default()
        .collect(&[a.addr, refused, silent.local_addr().unwrap(), b.addr])
        .await;
    assert_eq!(stats.reachable, 2);
    assert_eq!(stats.hit_ratio, "0.50");
    assert!(stats.current_connections >= 2);
    assert!(stats.version.is_some());
}

#[tokio::test]
async fn authenticates_with_the_auth_file() {
    let dir = common::readable_tempdir();
    let file = dir.path().join("auth");
    std::fs::write(&file, "cache:s3cret\n").unwrap();
    let server = start(&["-Y".into(), file.display().to_string()]);
    let anonymous = StatsClient::default().fetch(server.addr).await;
    assert!(
        anonymous.is_err(),
        "memcached -Y must refuse unauthenticated stats: {anonymous:?}"
    );
    let wrong = StatsClient {
        credentials: Some(Credentials {
            username: "cache".into(),
            password: "x".into(),
        }),
        ..Default::default()
    };
    assert!(matches!(
        wrong.fetch(server.addr).await,
        Err(StatsError::Auth(_))
    ));
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

#[tokio::test]
async fn speaks_tls_and_presents_a_client_certificate_when_required() {
    let dir = common::readable_tempdir();
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
    assert!(
        client.fetch(mtls.addr).await.is_err(),
        "mTLS must refuse a client without certificate"
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
}
