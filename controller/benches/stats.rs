//! Stats collection over 50 servers of which 10 accept but never answer:
//! one collection must stay near one read timeout (goal: under 3.5 s).
//! Also prints the size of the release binary when it has been built.
//! Real memcached processes on loopback; prints numbers, asserts nothing.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memcached_controller::stats::client::StatsClient;

const SERVERS: usize = 40;
const SILENT: usize = 10;
const ROUNDS: usize = 3;

fn main() {
    let mut children: Vec<Child> = Vec::new();
    let mut addresses: Vec<SocketAddr> = Vec::new();
    for _ in 0..SERVERS {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("memcached")
            .args([
                "-u",
                "nobody",
                "-m",
                "16",
                "-t",
                "1",
                "-U",
                "0",
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("memcached is installed");
        children.push(child);
        addresses.push(format!("127.0.0.1:{port}").parse().unwrap());
    }
    let silent: Vec<TcpListener> = (0..SILENT)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    addresses.extend(silent.iter().map(|l| l.local_addr().unwrap()));
    std::thread::sleep(Duration::from_millis(500));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = StatsClient::default();
    for round in 1..=ROUNDS {
        let started = Instant::now();
        let stats = runtime.block_on(client.collect(&addresses));
        println!(
            "round {round}: {} servers ({SILENT} silent): {} answered in {:.2?} (goal < 3.5 s)",
            addresses.len(),
            stats.reachable,
            started.elapsed()
        );
    }
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }

    let binary = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/release/memcached-controller"
    );
    match std::fs::metadata(binary) {
        Ok(m) => println!(
            "release binary: {:.1} MiB (goal <= 20 MiB)",
            m.len() as f64 / (1024.0 * 1024.0)
        ),
        Err(_) => println!("release binary: not built (make bench builds it)"),
    }
}
