//! The args the controller renders, run by a real memcached with files where
//! the Secrets would be mounted, and read back with the stats client built
//! from the same Secret data.

mod common;

use std::collections::BTreeMap;

use common::{Release, loopback_args, make_pki, readable_tempdir, start};
use memcached_api::{MemcachedSpec, apply_defaults};
use memcached_controller::cluster::secrets::SecretData;
use memcached_controller::objects::args::{
    AUTH_DIR, TLS_DIR, WARM_RESTART_DIR, confirmed_settings, memcached_args,
};
use memcached_controller::objects::warm_start;
use memcached_controller::stats::setup::stats_client;
use memcached_controller::stats::tls::server_name;
use serde_json::json;

/// Start memcached with the rendered args of `spec`, Secret files in a temp dir.
async fn serves(spec: serde_json::Value, secrets: SecretData) {
    let spec = apply_defaults(serde_json::from_value(spec).unwrap());
    let dir = readable_tempdir();
    for (folder, secret) in [("auth", "auth-secret"), ("tls", "tls-secret")] {
        for (key, value) in secrets.get(secret).into_iter().flatten() {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
            std::fs::write(dir.path().join(folder).join(key), value).unwrap();
        }
    }
    let root = dir.path().display().to_string();
    let args: Vec<String> = memcached_args(&spec)
        .into_iter()
        .map(|a| {
            a.replace(AUTH_DIR, &format!("{root}/auth"))
                .replace(TLS_DIR, &format!("{root}/tls"))
        })
        .collect();
    let server = start(&args);
    let name = server_name("cache", "default").unwrap();
    let stats = stats_client(&spec, &secrets, name)
        .unwrap()
        .fetch(server.addr)
        .await;
    assert!(
        stats.as_ref().is_ok_and(|s| s.version.starts_with("1.6")),
        "{args:?}: {stats:?}"
    );
}

fn tls_secret() -> SecretData {
    let pki = make_pki();
    let data = BTreeMap::from([
        ("tls.crt".to_string(), pki.cert.into_bytes()),
        ("tls.key".to_string(), pki.key.into_bytes()),
        ("ca.crt".to_string(), pki.ca.into_bytes()),
    ]);
    BTreeMap::from([("tls-secret".to_string(), data)])
}

on_each_release! {
    #[tokio::test]
    async fn plain_args_serve() {
        serves(json!({"memcached": {"maxMemoryMB": 128, "maxConnections": 64, "threads": 2, "maxItemSize": "2m", "verbosity": 1}}), SecretData::new()).await;
    }
}

on_each_release! {
    #[tokio::test]
    async fn tls_args_serve() {
        serves(json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}}}}), tls_secret()).await;
    }
}

on_each_release! {
    #[tokio::test]
    async fn mtls_args_serve_clients_with_certificates() {
        let spec = json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}, "enableClientCert": true}}});
        serves(spec, tls_secret()).await;
    }
}

on_each_release! {
    #[tokio::test]
    async fn sasl_args_serve_authenticated_clients() {
        let secrets = BTreeMap::from([(
            "auth-secret".to_string(),
            BTreeMap::from([("auth".to_string(), b"app:pa55word\n".to_vec())]),
        )]);
        let spec = json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth-secret"}}}, "memcached": {"extraArgs": ["-o", "modern"]}});
        serves(spec, secrets).await;
    }
}

on_each_release! {
    #[tokio::test]
    async fn tls_and_auth_together_serve() {
        let mut secrets = tls_secret();
        secrets.insert(
            "auth-secret".into(),
            BTreeMap::from([("auth".to_string(), b"app:pw\n".to_vec())]),
        );
        let spec = json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth-secret"}},
            "tls": {"enabled": true, "certificateSecretRef": {"name": "tls-secret"}, "enableClientCert": true}}});
        serves(spec, secrets).await;
    }
}

on_each_release! {
    /// Why the controller warns about an auth Secret without a final newline:
    /// memcached up to 1.6.31 reads an unterminated last line of its `-Y` file
    /// one byte short, so that password is refused (its last character
    /// chopped, `app:p` is what it takes); 1.6.32 reads it whole
    /// (memcached 8203c934b, "fix ascii auth bug with missing newlines").
    #[tokio::test]
    async fn memcached_up_to_1_6_31_chops_an_unterminated_last_auth_line() {
        let dir = readable_tempdir();
        let file = dir.path().join("auth");
        std::fs::write(&file, "app:pw").unwrap();
        let server = start(&["-Y".into(), file.display().to_string()]);
        let fetch = |line: &str| {
            let client = memcached_controller::stats::client::StatsClient {
                credentials: memcached_controller::stats::client::Credentials::from_auth_file(line),
                ..Default::default()
            };
            async move { client.fetch(server.addr).await }
        };
        let (whole, chopped) = (fetch("app:pw").await, fetch("app:p").await);
        let release = Release::current();
        if release.patch() < 32 {
            assert!(whole.is_err() && chopped.is_ok(), "{release:?}: {whole:?}, {chopped:?}");
        } else {
            assert!(whole.is_ok() && chopped.is_err(), "{release:?}: {whole:?}, {chopped:?}");
        }
    }
}

// ---- The policy's model of memcached's command line, against the real binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use memcached_api::extra_args::options::{
    self as table, HasArg, LONG_OPTIONS, SHORT_OPTIONS, SUBOPTIONS,
};
use memcached_api::extra_args::release::Release as TableRelease;
use memcached_api::validation::{ObjectName, Options, check};

/// What memcached did with an argument list.
#[derive(Debug)]
enum Outcome {
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
fn run(args: &[String]) -> Outcome {
    for _ in 0..5 {
        if let Some(outcome) = run_on(free_port(), args) {
            return outcome;
        }
    }
    panic!("no free port for memcached {args:?}");
}

/// `None`: the port was someone else's.
fn run_on(port: u16, args: &[String]) -> Option<Outcome> {
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
fn stats(mut stream: TcpStream, command: &str) -> BTreeMap<String, String> {
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
fn writable_tempdir() -> tempfile::TempDir {
    let dir = readable_tempdir();
    let mut permissions = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o777);
    std::fs::set_permissions(dir.path(), permissions).unwrap();
    dir
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The policy's errors for `spec`, with `spec.image` the test's release
/// (`memcached:1.6.18`), and the args the controller renders for it.
fn judged(spec: &serde_json::Value) -> (Vec<String>, Vec<String>) {
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
fn policy(config: serde_json::Value) -> Vec<String> {
    judged(&json!({"memcached": config})).0
}

/// The release of the option table the test's memcached is.
fn table_release() -> TableRelease {
    TableRelease(Release::current().patch())
}

/// The args the controller renders for these `memcached` fields.
fn rendered(config: serde_json::Value) -> Vec<String> {
    memcached_args(&apply_defaults(
        serde_json::from_value(json!({"memcached": config})).unwrap(),
    ))
}

/// What this release's memcached prints for `-h`.
fn help() -> String {
    match run(&strings(&["-h"])) {
        Outcome::Exited(Some(0), text) => text,
        other => panic!("-h: {other:?}"),
    }
}

/// Each of `lacking`, options the table gives other releases only: the
/// policy refuses it for the test's release, and memcached exits on it
/// printing what the policy quotes.
fn lacking_options_exit_as_the_policy_says(lacking: impl IntoIterator<Item = Vec<String>>) {
    for args in lacking {
        let errors = policy(json!({"extraArgs": args}));
        assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
        assert!(
            errors[0].contains(&format!(
                "and spec.image memcached:{} runs {}",
                table_release(),
                table_release()
            )),
            "{args:?}: {errors:?}"
        );
        assert_exits_as_quoted(&args, &errors[0]);
    }
}

on_each_release! {
    /// The letters the table gives the release are the ones its getopt
    /// takes, each with a value or not as the table says; any other letter
    /// is an invalid option.
    #[test]
    fn the_short_options_of_the_release_are_the_tables() {
        let release = table_release();
        for c in ('a'..='z').chain('A'..='Z').chain('0'..='9') {
            // A letter memcached lacks is refused; one that takes a value needs
            // one; any other is taken, and memcached then exits on the invalid
            // `-q` after it (before `-d` could daemonize).
            let needs = table::short_option(c)
                .filter(|o| o.span.has(release))
                .map(|o| o.has_arg);
            let args = match needs {
                Some(HasArg::Required) => vec![format!("-{c}")],
                _ => vec![format!("-{c}"), "-q".to_string()],
            };
            let outcome = run(&args);
            let text = match &outcome {
                Outcome::Exited(_, text) => text.clone(),
                _ => String::new(),
            };
            let invalid = text.contains(&format!("invalid option -- '{c}'"));
            let needs_value = text.contains(&format!("option requires an argument -- '{c}'"));
            match needs {
                None => assert!(invalid, "-{c}: {outcome:?}"),
                Some(HasArg::Required) => assert!(needs_value, "-{c}: {outcome:?}"),
                Some(_) => assert!(
                    matches!(outcome, Outcome::Exited(..)) && !invalid && !needs_value,
                    "-{c}: {outcome:?}"
                ),
            }
        }
        let lacking = SHORT_OPTIONS.iter().filter(|o| !o.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|o| vec![format!("-{}", o.letter), "1".into()]));
    }
}

on_each_release! {
    /// The long options the table gives the release are the ones its `-h`
    /// lists, and its getopt takes each with a value or not as the table
    /// says; the table's others it does not know.
    #[test]
    fn the_long_options_of_the_release_are_the_tables() {
        let release = table_release();
        let mut given = std::collections::BTreeSet::new();
        for option in LONG_OPTIONS.iter().filter(|o| o.span.has(release)) {
            let name = option.name;
            given.insert(name.to_string());
            match option.has_arg {
                HasArg::Required => {
                    let outcome = run(&[format!("--{name}")]);
                    assert!(
                        matches!(&outcome, Outcome::Exited(Some(1), t) if t.contains(&format!("option '--{name}' requires an argument"))),
                        "--{name}: {outcome:?}"
                    );
                }
                HasArg::No => {
                    let outcome = run(&[format!("--{name}=x")]);
                    assert!(
                        matches!(&outcome, Outcome::Exited(Some(1), t) if t.contains(&format!("option '--{name}' doesn't allow an argument"))),
                        "--{name}: {outcome:?}"
                    );
                }
                HasArg::Optional => assert!(
                    matches!(run(&[format!("--{name}=1")]), Outcome::Serves(_)),
                    "--{name}"
                ),
            }
        }
        // `-p, --port=<num>  TCP port...`, `-W  --disable-watch  ...`; -h
        // spells --napi-ids `--napi_ids` (getopt takes the dash only, as
        // checked above).
        let listed: std::collections::BTreeSet<String> = help()
            .lines()
            .filter(|line| line.starts_with('-'))
            .filter_map(|line| line.split_once("--"))
            .map(|(_, long)| {
                long.chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '-' || *c == '_')
                    .map(|c| if c == '_' { '-' } else { c })
                    .collect()
            })
            .collect();
        assert_eq!(listed, given, "memcached -h against the table for {release}");
        let lacking = LONG_OPTIONS.iter().filter(|o| !o.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|o| vec![format!("--{}=1", o.name)]));
    }
}

/// Every word memcached's binary holds that could name a `-o` setting: the
/// NUL-ended runs of `[a-z0-9_]`, and their tails after an underscore (the
/// linker stores `modern` as the tail of `no_modern`).
fn words_of_the_binary() -> std::collections::BTreeSet<String> {
    let bytes = std::fs::read(Release::current().binary()).unwrap();
    let mut words = std::collections::BTreeSet::new();
    for run in bytes.split(|b| *b == 0) {
        let Ok(word) = std::str::from_utf8(run) else {
            continue;
        };
        if word.len() < 3 || !word.starts_with(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        if !word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            continue;
        }
        for (at, _) in word.match_indices('_') {
            words.insert(word[at + 1..].to_string());
        }
        words.insert(word.to_string());
    }
    words
}

/// True when memcached knows the `-o` setting `name`: it goes on to the
/// unknown one after it (or stops on the missing value) instead of exiting
/// on `name` itself.
fn takes_suboption(name: &str) -> bool {
    let output = Release::current()
        .command()
        .args(["-u", "nobody", "-o", &format!("{name},zz_unknown")])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "-o {name},zz_unknown: {text}");
    !text.contains(&format!("Illegal suboption \"{name}\""))
}

on_each_release! {
    /// The `-o` settings the table gives the release are those its binary
    /// takes, out of every word in the binary and every name in the table,
    /// and those its `-h` lists are among them; the table's others it
    /// refuses as the policy says.
    #[test]
    fn the_suboptions_of_the_release_are_the_tables() {
        let release = table_release();
        let given: std::collections::BTreeSet<String> = SUBOPTIONS
            .iter()
            .filter(|s| s.span.has(release))
            .map(|s| s.name.to_string())
            .collect();
        let mut candidates = words_of_the_binary();
        candidates.extend(SUBOPTIONS.iter().map(|s| s.name.to_string()));
        let taken: std::collections::BTreeSet<String> =
            candidates.into_iter().filter(|name| takes_suboption(name)).collect();
        let (unlisted, refused): (Vec<_>, Vec<_>) = (
            taken.difference(&given).collect(),
            given.difference(&taken).collect(),
        );
        assert!(
            unlisted.is_empty() && refused.is_empty(),
            "{release} takes -o {unlisted:?}, which the table does not give it, and refuses -o {refused:?}, which it does"
        );
        // `   - maxconns_fast:       immediately close ...`, and headings
        // such as `   - External storage (ext_*) related options`.
        let help = help();
        let listed: Vec<&str> = help
            .lines()
            .filter_map(|line| line.strip_prefix("   - "))
            .filter_map(|line| line.split_once(':'))
            .map(|(name, _)| name)
            .filter(|name| name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .collect();
        assert!(listed.len() > 40, "{listed:?}");
        for name in listed {
            assert!(given.contains(name), "-h lists -o {name}, the table gives {release} none");
        }
        let lacking = SUBOPTIONS.iter().filter(|s| !s.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|s| strings(&["-o", &format!("{}=1", s.name)])));
    }
}

on_each_release! {
    /// For every extraArgs the policy refuses as "memcached exits on it", memcached
    /// does exit, printing the message the policy quotes.
    #[test]
    fn memcached_exits_where_the_policy_says_it_would() {
        let cases: [&[&str]; 33] = [
            &["-N", "5"],
            &["-o", "temporary_ttl=61", "-o", "no_modern"],
            &["-ohashpower=12"],
            &["-o", "modern,hot_lru_pct=90"],
            &["-olru_crawler_sleep"],
            &["-o", "hot_lru_pct=30", "-o", "warm_lru_pct=60"],
            &["-o", "slab_sizes=100-108"],
            &["-o", "slab_sizes=100-100"],
            &["-o", "worker_logbuf_size=47"],
            &["-o", "hashpower=11"],
            &["-o", "hash_algorithm=Jenkins"],
            &["-o", "read_buf_mem_limit=0x10"],
            &["-o", "ext_threads=-1"],
            &["-o", "lru_crawler_tocrawl=-1"],
            &["-o", "tail_repair_time=9"],
            &["-o", "slab_automove_ratio=0"],
            &["-o", "ext_max_frag=1e999"],
            &["-R", "0"],
            &["--slab-growth-factor=1"],
            &["-f", "0x2p-1"],
            &["-vn", "abc"],
            &["-D", ""],
            &["-N", "4294967296"],
            &["-vx"],
            &["--foo=bar"],
            &["--ver"],
            &["--mem=64"],
            &["-v", "-R"],
            &["--disable-cas=yes"],
            &["--protocol=text"],
            &["-o", "bogus"],
            &["-o", "modern,,track_sizes"],
            &["-:"],
        ];
        let release = Release::current();
        for args in cases {
            let errors = policy(json!({"extraArgs": args}));
            assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
            // memcached up to 1.6.39 reads a worker_logbuf_size as slab_sizes
            // too (a missing `break`) and exits on a size below the smallest
            // chunk; 1.6.40 takes it (memcached 112797f1b). The policy judges
            // by the older releases: it refuses what today's serves.
            if args == ["-o", "worker_logbuf_size=47"] && release.patch() >= 40 {
                let mut full = rendered(json!({}));
                full.extend(strings(args));
                match run(&full) {
                    Outcome::Serves(settings) => assert_eq!(
                        settings.get("worker_logbuf_size").map(String::as_str),
                        Some("48128"),
                        "{release:?} {args:?}"
                    ),
                    other => panic!("{release:?} {args:?}: {other:?}"),
                }
                continue;
            }
            assert_exits_as_quoted(&strings(args), &errors[0]);
        }
    }
}

/// memcached, with the rendered args and then `args`, exits printing what
/// the policy's `error` quotes after "memcached exits on it: ".
fn assert_exits_as_quoted(args: &[String], error: &str) {
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

on_each_release! {
    /// What memcached would do with the flags the policy refuses as managed or
    /// pod-breaking: it takes them, overriding what the operator set, or it stops
    /// serving TCP, or it exits.
    #[test]
    fn refused_flags_would_override_the_operator_or_stop_memcached() {
        let overrides: [(&[&str], &str, &str); 5] = [
            (&["-m", "128"], "maxbytes", "134217728"),
            (&["--conn-l=100"], "maxconns", "100"),
            (&["-vt2"], "num_threads", "2"),
            (&["--max-item-size", "2m"], "item_size_max", "2097152"),
            (&["-U", "11311"], "udpport", "11311"),
        ];
        for (args, setting, value) in overrides {
            assert!(!policy(json!({"extraArgs": args})).is_empty(), "{args:?}");
            let mut full = rendered(json!({}));
            full.extend(strings(args));
            match run(&full) {
                Outcome::Serves(settings) => assert_eq!(
                    settings.get(setting).map(String::as_str),
                    Some(value),
                    "{args:?}"
                ),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        let dir = writable_tempdir();
        let socket = dir.path().join("m.sock").display().to_string();
        /// Arguments and what memcached does with them.
        type Stop = (Vec<String>, fn(&Outcome) -> bool);
        let stops: [Stop; 10] = [
            // A sub-option that needs a value, without one: memcached crashes (SIGSEGV).
            (strings(&["-o", "slab_sizes"]), |o| {
                matches!(o, Outcome::Exited(None, _))
            }),
            // External storage on a path it cannot create.
            (
                strings(&["-o", "ext_path=/proc/no-such-dir/extstore:64m"]),
                |o| matches!(o, Outcome::Exited(Some(1), t) if t.contains("Failed to initialize external storage")),
            ),
            // No file can be created there: memcached aborts.
            (
                strings(&["-e", "/proc/no-such-dir/memory"]),
                |o| matches!(o, Outcome::Exited(None, t) if t.contains("failed to open file for mmap")),
            ),
            // A NaN growth factor passes memcached's `<= 1.0` check, then kills it (SIGFPE).
            (strings(&["-f", "nan"]), |o| {
                matches!(o, Outcome::Exited(None, _))
            }),
            // Binary only: the ASCII `stats` of the probes and the operator gets no answer.
            (
                strings(&["-B", "binary"]),
                |o| matches!(o, Outcome::Serves(s) if s.is_empty()),
            ),
            (
                strings(&["-h"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.contains("-p, --port")),
            ),
            (
                strings(&["--vers"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.starts_with("memcached 1.6")),
            ),
            (
                strings(&["-i"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.contains("Copyright")),
            ),
            (
                strings(&["-Z"]),
                |o| matches!(o, Outcome::Exited(Some(c), _) if *c != 0),
            ),
            (strings(&["-s", &socket]), |o| matches!(o, Outcome::NoTcp)),
        ];
        for (args, expected) in stops {
            assert!(!policy(json!({"extraArgs": args})).is_empty(), "{args:?}");
            let mut full = rendered(json!({}));
            full.extend(args.clone());
            let outcome = run(&full);
            assert!(expected(&outcome), "{args:?}: {outcome:?}");
        }
    }
}

on_each_release! {
    /// `-d`: the process the container runs exits at once, leaving a daemon.
    #[test]
    fn daemon_mode_ends_the_containers_process() {
        assert!(!policy(json!({"extraArgs": ["--daemon"]})).is_empty());
        let dir = writable_tempdir();
        let pidfile = dir.path().join("pid");
        let mut full = rendered(json!({}));
        full.extend(strings(&["-d", "-P", &pidfile.display().to_string()]));
        let outcome = run(&full);
        // Stop the daemon it left, by the pid it wrote.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !pidfile.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Ok(pid) = std::fs::read_to_string(&pidfile) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        assert!(
            matches!(outcome, Outcome::Exited(Some(0), _)),
            "{outcome:?}"
        );
    }
}

on_each_release! {
    /// Every extraArgs list the policy accepts starts with the rendered args.
    #[test]
    fn accepted_extra_args_serve() {
        let cases: [&[&str]; 10] = [
            &[
                "-o",
                "hot_lru_pct=40,warm_lru_pct=40,slab_sizes=48-100-200,hashpower=13,modern=x",
            ],
            &["-o", "no_modern,temporary_ttl=61,lru_maintainer", "-N", "4"],
            &["-f1.05", "-n", "48", "-N", "1", "-b", "abc", "-a", "700"],
            &[
                "-v",
                "-o",
                "modern",
                "--disable-cas",
                "-R",
                "20",
                "-B",
                "ascii",
            ],
            &["-o", "modern", "-P", "-m"],
            &["-oslab_reassign,lru_crawler,", "-vvLC", "-D", ":"],
            &["--disable-c", "--lock", "--slab-g=1.5", "--verbose"],
            &["foo", "--", "-m", "1", "-d"],
            &["-o", ""],
            &["--max-r=30", "-b", "512", "-A", "-F", "-X", "-W"],
        ];
        for args in cases {
            let config = json!({"extraArgs": args, "verbosity": 1});
            assert_eq!(policy(config.clone()), Vec::<String>::new(), "{args:?}");
            let outcome = run(&rendered(config.clone()));
            let Outcome::Serves(running) = outcome else {
                panic!("{args:?}: {outcome:?}");
            };
            // What a change in place confirms is what memcached says it runs
            // (its verbosity counts the -v of extraArgs too).
            let spec = apply_defaults(serde_json::from_value(json!({"memcached": config})).unwrap());
            for (name, wanted) in confirmed_settings(&spec) {
                if let Some(value) = running.get(name) {
                    assert_eq!(value, &wanted, "{args:?}: {name}");
                }
            }
        }
    }
}

on_each_release! {
    /// maxItemSize at the boundaries: what the policy accepts runs, what it
    /// refuses makes memcached exit with EX_USAGE (64).
    #[test]
    fn item_sizes_the_policy_accepts_are_the_ones_memcached_runs() {
        let cases = [
            ("1k", 4096),
            ("100k", 4096),
            ("511k", 4096),
            ("512k", 4096),
            ("513k", 4096),
            ("700k", 4096),
            ("1m", 4096),
            ("1024k", 4096),
            ("1536k", 4096),
            ("2m", 4096),
            ("2047k", 4096),
            ("32m", 64),
            ("33m", 64),
            ("1024m", 4096),
            ("1025m", 4096),
        ];
        for (size, mb) in cases {
            let config = json!({"maxItemSize": size, "maxMemoryMB": mb});
            let accepted = policy(config.clone()).is_empty();
            let outcome = run(&rendered(config));
            match outcome {
                Outcome::Serves(settings) if accepted => assert_eq!(
                    settings
                        .get("item_size_max")
                        .and_then(|v| v.parse::<u64>().ok()),
                    Some(
                        if size.ends_with('k') {
                            1024
                        } else {
                            1024 * 1024
                        } * size[..size.len() - 1].parse::<u64>().unwrap()
                    ),
                    "{size}"
                ),
                Outcome::Exited(Some(64), _) if !accepted => {}
                other => {
                    panic!("{size} with -m {mb}: policy accepts: {accepted}, memcached: {other:?}")
                }
            }
        }
    }
}

on_each_release! {
    /// Warm restarts at the policy's bound of maxMemoryMB, on the args the
    /// controller renders (the memory file in a fresh temp dir): memcached starts
    /// at the minimum the policy computes, and one below it, which the policy
    /// refuses, it exits preallocating its slab pages; without warm restarts
    /// 16 MB starts. The default geometry and others of `-f` and `-n`.
    #[test]
    fn warm_restarts_start_from_the_policys_minimum_memory() {
        let spec = |warm: bool, mb: i32, extra: &[&str]| {
            json!({"warmRestart": {"enabled": warm},
                "memcached": {"maxMemoryMB": mb, "extraArgs": extra}})
        };
        let start = |args: &[String]| {
            let dir = writable_tempdir();
            let local = dir.path().display().to_string();
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace(WARM_RESTART_DIR, &local))
                .collect();
            run(&args)
        };
        for (extra, minimum) in [
            (&[][..], 39),
            (&["-f", "1.5"][..], 22),
            (&["--slab-growth-factor=1.1"][..], 63),
            (&["-n", "96"][..], 37),
        ] {
            let (errors, args) = judged(&spec(true, minimum, extra));
            assert_eq!(errors, Vec::<String>::new(), "{extra:?} at {minimum}");
            assert!(args.iter().any(|a| a == "-e"), "{args:?}");
            let outcome = start(&args);
            assert!(
                matches!(outcome, Outcome::Serves(_)),
                "{extra:?} at {minimum}: {outcome:?}"
            );

            let below = minimum - 1;
            let (errors, args) = judged(&spec(true, below, extra));
            assert!(
                errors.len() == 1
                    && errors[0].starts_with(&format!(
                        "spec.memcached.maxMemoryMB: Invalid value: {below}: warm restarts preallocate"
                    ))
                    && errors[0].contains(&format!("needs at least {minimum} ")),
                "{extra:?} at {below}: {errors:?}"
            );
            match start(&args) {
                Outcome::Exited(Some(1), text)
                    if text.contains("Error while preallocating slab memory!") => {}
                other => panic!("{extra:?} at {below}: {other:?}"),
            }

            let (errors, args) = judged(&spec(false, 16, extra));
            assert_eq!(errors, Vec::<String>::new(), "{extra:?} cold at 16");
            assert!(!args.iter().any(|a| a == "-e"), "{args:?}");
            let outcome = start(&args);
            assert!(
                matches!(outcome, Outcome::Serves(_)),
                "{extra:?} cold at 16: {outcome:?}"
            );
        }
        // A geometry that needs less than the schema's 16 starts warm at 16.
        let (errors, args) = judged(&spec(true, 16, &["-f", "2"]));
        assert_eq!(errors, Vec::<String>::new());
        let outcome = start(&args);
        assert!(matches!(outcome, Outcome::Serves(_)), "{outcome:?}");
    }
}

on_each_release! {
    /// Large pages (`-L`, in each spelling) preallocate as the memory file does:
    /// below the minimum the policy refuses them naming `maxMemoryMB`, warm
    /// restarts or not, and memcached exits; at it the policy admits them and
    /// memcached serves (or, on a kernel without transparent huge pages,
    /// refuses `-L` itself, whatever the memory).
    #[test]
    fn large_pages_start_from_the_policys_minimum_memory() {
        for spelling in [&["-L"][..], &["--enable-largepages"], &["-vL"]] {
            let judged_at = |mb: i32| {
                judged(&json!({"warmRestart": {"enabled": false},
                    "memcached": {"maxMemoryMB": mb, "extraArgs": spelling}}))
            };
            let no_huge_pages = |text: &str| text.contains("Cannot enable large pages");
            let (errors, args) = judged_at(39);
            assert_eq!(errors, Vec::<String>::new(), "{spelling:?} at 39");
            match run(&args) {
                Outcome::Serves(_) => {}
                Outcome::Exited(Some(1), text) if no_huge_pages(&text) => {}
                other => panic!("{spelling:?} at 39: {other:?}"),
            }
            let (errors, args) = judged_at(38);
            assert!(
                errors.len() == 1
                    && errors[0].starts_with(
                        "spec.memcached.maxMemoryMB: Invalid value: 38: extraArgs -L preallocates"
                    )
                    && errors[0].contains("needs at least 39 "),
                "{spelling:?} at 38: {errors:?}"
            );
            match run(&args) {
                Outcome::Exited(Some(1), text)
                    if text.contains("Error while preallocating slab memory!")
                        || no_huge_pages(&text) => {}
                other => panic!("{spelling:?} at 38: {other:?}"),
            }
        }
    }
}

/// `count` keys set over the text protocol, then memcached's `curr_items`.
fn fill_and_count(addr: std::net::SocketAddr, count: usize) -> u64 {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    for i in 0..count {
        write!(stream, "set key-{i} 0 0 5 noreply\r\nvalue\r\n").unwrap();
    }
    stream.write_all(b"stats\r\n").unwrap();
    let mut items = None;
    for line in BufReader::new(stream).lines() {
        let line = line.unwrap();
        if line == "END" {
            break;
        }
        if let Some(n) = line.strip_prefix("STAT curr_items ") {
            items = n.parse().ok();
        }
    }
    items.expect("stats has curr_items")
}

on_each_release! {
    /// Warm restarts on the real memcached through the pod's supervisor
    /// (`warm_start`), its volumes in a temp dir where the pod mounts them, the
    /// args file written as the kubelet writes the downward API volume:
    /// a changed args annotation restarts memcached warm with the new settings
    /// (a new process, every key kept), so does a changed Secret hash, once
    /// the Secret files changed too (or after a wait, and again when they
    /// come), while files changing alone restart nothing; the
    /// preStop hook returns once the save is done and the supervisor then waits
    /// for SIGTERM (no hook failure), and the container's next start restores
    /// every key; SIGTERM alone saves too; another `maxMemoryMB` starts cold, and
    /// memcached restores nothing in the second of the save (the supervisor
    /// waits for the next).
    #[test]
    fn the_supervisor_restarts_memcached_warm_when_the_pod_changes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // memcached drops to an unprivileged user when the tests run as root.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let (data, run, auth) = (
            dir.path().join("data"),
            dir.path().join("run"),
            dir.path().join("auth"),
        );
        for d in [&data, &run, &auth] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        // The pod's paths, here; the wait for Secret files 8 s.
        let wait = format!("-lt {}", warm_start::SECRET_FILES_WAIT_SECONDS);
        let local = |text: &str| {
            text.replace(warm_start::RUN_DIR, &run.display().to_string())
                .replace(WARM_RESTART_DIR, &data.display().to_string())
                .replace(AUTH_DIR, &auth.display().to_string())
                .replace(&wait, "-lt 8")
        };
        // What the kubelet writes from the auth Secret.
        let mount =
            |password: &str| std::fs::write(auth.join("auth"), format!("op:{password}\n")).unwrap();
        let port = common::free_port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // What the kubelet writes from the pod's annotations.
        let annotate = |spec: serde_json::Value, secrets: &str| {
            let spec = apply_defaults(serde_json::from_value(spec).unwrap());
            let mut args: Vec<String> = memcached_args(&spec).iter().map(|a| local(a)).collect();
            args.extend(loopback_args(port));
            args.extend(["-u".into(), "nobody".into()]);
            std::fs::write(run.join("args"), warm_start::args_annotation(&args)).unwrap();
            std::fs::write(run.join("secrets"), secrets).unwrap();
        };
        let warm = |threads: i32, connections: i32| {
            json!({"warmRestart": {"enabled": true},
                "memcached": {"maxMemoryMB": 64, "threads": threads, "maxConnections": connections}})
        };
        let command: Vec<String> = warm_start::command().iter().map(|c| local(c)).collect();
        let start = || Supervised::start(&command, addr);

        annotate(warm(4, 1024), "");
        let mut supervisor = start();
        assert_eq!(fill_and_count(addr, 5_000), 5_000);
        let first = settings(addr);

        annotate(warm(2, 512), "");
        let changed = wait_for_new_process(addr, &first["pid"]);
        assert_eq!(
            (
                changed["num_threads"].as_str(),
                changed["maxconns"].as_str()
            ),
            ("2", "512"),
            "the new args"
        );
        assert_eq!(fill_and_count(addr, 0), 5_000, "warm across the change");

        // A rotated Secret: the kubelet refreshes its files with the hash.
        mount("second");
        annotate(warm(2, 512), "rotated");
        let rotated = wait_for_new_process(addr, &changed["pid"]);
        assert_eq!(
            fill_and_count(addr, 0),
            5_000,
            "warm across a Secret change"
        );

        // The hash before the files (the kubelet's Secret cache behind): the
        // restart waits for them.
        annotate(warm(2, 512), "rotated again");
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert_eq!(settings(addr)["pid"], rotated["pid"], "waits for the files");
        mount("third");
        let refreshed = wait_for_new_process(addr, &rotated["pid"]);

        // Files later than the wait: restarted without them, and again once
        // they come (nothing else would).
        annotate(warm(2, 512), "rotated late");
        let early = wait_for_new_process(addr, &refreshed["pid"]);
        mount("fourth");
        let late = wait_for_new_process(addr, &early["pid"]);
        assert_eq!(fill_and_count(addr, 0), 5_000, "warm across a late refresh");

        // Files that change while the hash does not (the kubelet refreshes
        // every pod's at once) restart nothing.
        mount("fifth");
        std::thread::sleep(std::time::Duration::from_secs(3));
        assert_eq!(settings(addr)["pid"], late["pid"], "not restarted");
        let rotated = late;

        // The preStop hook returns once the save is done; the supervisor waits
        // for the kubelet's SIGTERM.
        let hook = local(&warm_start::save_and_wait()).replace(
            "kill -USR1 1 ",
            &format!("kill -USR1 {} ", supervisor.pid()),
        );
        let hooked = std::process::Command::new("sh")
            .args(["-c", &hook])
            .status()
            .unwrap();
        assert!(hooked.success(), "the hook fails no more");
        assert!(supervisor.running(), "alive until SIGTERM");
        assert!(supervisor.stop_with("TERM").success());
        let supervisor = start();
        assert_ne!(settings(addr)["pid"], rotated["pid"]);
        assert_eq!(fill_and_count(addr, 0), 5_000, "warm after the hook's stop");

        assert!(supervisor.stop_with("TERM").success());
        let supervisor = start();
        assert_eq!(fill_and_count(addr, 0), 5_000, "SIGTERM alone saves too");

        assert!(supervisor.stop_with("TERM").success());
        let mut resized = warm(2, 512);
        resized["memcached"]["maxMemoryMB"] = json!(128);
        annotate(resized, "rotated");
        let _supervisor = start();
        assert_eq!(fill_and_count(addr, 0), 0, "another -m starts cold");
    }
}

/// The supervisor, as the container runs it.
struct Supervised(std::process::Child);

impl Supervised {
    /// Start `command` and wait until memcached listens at `addr`.
    fn start(command: &[String], addr: std::net::SocketAddr) -> Self {
        // Its script runs `memcached` from PATH: the test's release.
        let child = std::process::Command::new(&command[0])
            .args(&command[1..])
            .env("PATH", Release::current().path_env())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let supervised = Supervised(child);
        wait_until(
            || std::net::TcpStream::connect(addr).is_ok(),
            "memcached to listen",
        );
        supervised
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    /// Send `signal`; its exit status.
    fn stop_with(mut self, signal: &str) -> std::process::ExitStatus {
        let kill = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let mut status = None;
        wait_until(
            || {
                status = self.0.try_wait().unwrap();
                status.is_some()
            },
            "the supervisor to exit",
        );
        status.unwrap()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Wait (at most 60 s) until `done`.
fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    // A bound for a failure, not a measure: a busy machine takes its time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `stats` and `stats settings` of the memcached at `addr`, by name.
fn settings(addr: std::net::SocketAddr) -> BTreeMap<String, String> {
    read_settings(addr).unwrap()
}

/// [`settings`], or the error of a memcached restarting meanwhile.
fn read_settings(addr: std::net::SocketAddr) -> std::io::Result<BTreeMap<String, String>> {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.write_all(b"stats\r\nstats settings\r\n")?;
    let mut values = BTreeMap::new();
    let mut ends = 0;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        if line == "END" {
            ends += 1;
            if ends == 2 {
                break;
            }
        }
        if let Some((name, value)) = line.strip_prefix("STAT ").and_then(|l| l.split_once(' ')) {
            values.insert(name.to_string(), value.to_string());
        }
    }
    Ok(values)
}

/// [`settings`] once another memcached process than `pid` answers at `addr`.
fn wait_for_new_process(addr: std::net::SocketAddr, pid: &str) -> BTreeMap<String, String> {
    let mut now = BTreeMap::new();
    wait_until(
        || {
            now = read_settings(addr).unwrap_or_default();
            now.get("pid").is_some_and(|p| p != pid)
        },
        "memcached restarted",
    );
    now
}
