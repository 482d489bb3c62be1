//! memcached run with an argument list and what it did, and the policy's
//! judgment of the same list: what the tests of the policy's model of
//! memcached's command line share (`policy_on_memcached.rs`,
//! `option_table_on_memcached.rs`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use memcached_api::render::args::memcached_args;
use memcached_api::validation::{ObjectName, Options, check};
use memcached_api::{MemcachedSpec, apply_defaults};
use serde_json::json;

use super::{Release, free_port, loopback_args, readable_tempdir};

/// What memcached did with an argument list.
#[derive(Debug)]
pub enum Outcome {
    /// It exited: its code and what it printed.
    Exited(Option<i32>, String),
    /// It serves TCP on `port`; `stats settings` as name -> value.
    Serves(BTreeMap<String, String>),
    /// Still running after 2 s, but nothing listens on its TCP port.
    NoTcp,
}

/// Run memcached with the loopback test flags first, then `args` (so an `--`
/// in `args` cannot hide them), and report what it does. Another process
/// may take the free port first (tests run beside other suites): then the
/// run is repeated on a new port.
pub fn run(args: &[String]) -> Outcome {
    for _ in 0..5 {
        if let Some(outcome) = run_on(free_port(), args) {
            return outcome;
        }
    }
    panic!("no free port for memcached {args:?}");
}

/// `None`: the port was someone else's.
pub fn run_on(port: u16, args: &[String]) -> Option<Outcome> {
    let release = Release::current();
    let mut command = release.command();
    command
        .args(loopback_args(port))
        .args(["-u", "nobody"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("{release:?} memcached: {e}"));
    let deadline = Instant::now() + Duration::from_secs(2);
    let outcome = loop {
        if let Ok(Some(status)) = child.try_wait() {
            let mut text = String::new();
            child.stdout.take().map(|mut o| o.read_to_string(&mut text));
            child.stderr.take().map(|mut e| e.read_to_string(&mut text));
            if text.contains("failed to listen on TCP port") {
                return None;
            }
            if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
                // SIGBUS: a memory file (`-e`) could not grow, its disk is full.
                let bus = if signal == 7 {
                    " (SIGBUS: is its disk full?)"
                } else {
                    ""
                };
                text.push_str(&format!("[killed by signal {signal}{bus}]"));
            }
            break Outcome::Exited(status.code(), text);
        }
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
            match stats(stream, "stats").remove("pid") {
                Some(pid) if pid == child.id().to_string() => {}
                // Someone else's memcached listens there.
                Some(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
                // No text-protocol answer (`-B binary`, or not a memcached):
                // ours unless it exits for want of the port.
                None => {
                    std::thread::sleep(Duration::from_millis(200));
                    if let Ok(Some(_)) = child.try_wait() {
                        continue;
                    }
                }
            }
            let stream = TcpStream::connect(("127.0.0.1", port)).expect("it listens");
            break Outcome::Serves(stats(stream, "stats settings"));
        }
        if Instant::now() > deadline {
            break Outcome::NoTcp;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = child.kill();
    let _ = child.wait();
    Some(outcome)
}

/// The answer to a `stats` command as name -> value.
pub fn stats(mut stream: TcpStream, command: &str) -> BTreeMap<String, String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.ends_with("END\r\n") && !text.contains("ERROR") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A directory memcached can write to after dropping to nobody.
pub fn writable_tempdir() -> tempfile::TempDir {
    let dir = readable_tempdir();
    let mut permissions = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o777);
    std::fs::set_permissions(dir.path(), permissions).unwrap();
    dir
}

pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The policy's errors for `spec`, with `spec.image` the test's release
/// (`memcached:1.6.18`), and the args the controller renders for it.
pub fn judged(spec: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let mut spec = spec.clone();
    spec["image"] = json!(format!("memcached:{}", Release::current().version()));
    let spec: MemcachedSpec = serde_json::from_value(spec).unwrap();
    let name = ObjectName {
        name: "cache",
        generate_name: "",
    };
    let checked = check(name, spec, &Options::default());
    let errors: Vec<String> = checked.errors.iter().map(ToString::to_string).collect();
    (errors, memcached_args(&checked.spec))
}

/// The policy's errors for a CR with these extraArgs (and `memcached` fields).
pub fn policy(config: serde_json::Value) -> Vec<String> {
    judged(&json!({"memcached": config})).0
}

/// The args the controller renders for these `memcached` fields.
pub fn rendered(config: serde_json::Value) -> Vec<String> {
    memcached_args(&apply_defaults(
        serde_json::from_value(json!({"memcached": config})).unwrap(),
    ))
}

/// memcached, with the rendered args and then `args`, exits printing what
/// the policy's `error` quotes after "memcached exits on it: ".
pub fn assert_exits_as_quoted(args: &[String], error: &str) {
    let quoted = error
        .split_once("memcached exits on it: ")
        .map(|(_, m)| m.to_string())
        .unwrap_or_else(|| panic!("{args:?}: {error}"));
    let mut full = rendered(json!({}));
    full.extend(args.iter().cloned());
    match run(&full) {
        Outcome::Exited(Some(code), text) => {
            assert_ne!(code, 0, "{args:?}");
            // memcached prints the protocol error over two lines.
            let text = text.replace("\n -- ", " -- ");
            assert!(
                text.contains(&quoted),
                "{args:?}: {quoted:?} not in {text:?}"
            );
        }
        other => panic!("{args:?}: memcached did not exit: {other:?}"),
    }
}
