//! A flood of idle connections (more than the server holds) does not lock
//! out the probes, and the server's file descriptors stay bounded. Alone
//! in its test binary: it counts the descriptors of the whole process.
//! `cargo test -p memcached-controller --test http_flood -- --nocapture`
//! prints what it measured.

use std::time::{Duration, Instant};

use memcached_controller::metrics::process::Sample;
use memcached_controller::serve::http::Limits;
use test_support::http_client::{get, start_plain};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

const IDLE: usize = 300;

fn open_fds() -> usize {
    Sample::read().open_fds.unwrap() as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_through_a_flood_of_idle_connections() {
    let limits = Limits::default();
    assert!(IDLE > 2 * limits.max_connections);
    let addr = start_plain(limits).await;
    assert_eq!(get(addr, "/healthz", &[]).await.status, 200);
    let before = open_fds();

    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    for round in 0..20 {
        let path = if round % 2 == 0 {
            "/healthz"
        } else {
            "/readyz"
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(2), get(addr, path, &[])).await;
        slowest = slowest.max(started.elapsed());
        if matches!(answer, Ok(ref a) if a.status == 200) {
            answered += 1;
        }
    }
    // Our 300 client ends plus the server's ends of what it still holds.
    let during = open_fds() - before;
    let server_held = during - IDLE;

    // The server closed all but its limit of the idle connections.
    let mut closed = 0;
    for stream in &mut idle {
        let mut buf = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(20), stream.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    println!(
        "flood: {IDLE} idle connections, limit {}; probes answered {answered}/20 (slowest {slowest:?}); \
         server closed {closed} idle connections and held {server_held} sockets",
        limits.max_connections
    );
    assert_eq!(answered, 20, "every probe answered");
    assert!(
        closed >= IDLE - limits.max_connections,
        "only {closed} of {IDLE} idle connections closed"
    );
    assert!(
        server_held <= limits.max_connections + 8,
        "the server holds {server_held} sockets"
    );
}
