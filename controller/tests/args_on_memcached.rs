//! The args the controller renders, run by a real memcached with files where
//! the Secrets would be mounted, and read back with the stats client built
//! from the same Secret data.

use std::collections::BTreeMap;

use memcached_api::apply_defaults;
use memcached_api::render::args::{AUTH_DIR, TLS_DIR, WARM_RESTART_DIR, memcached_args};
use memcached_api::render::warm_restart;
use memcached_controller::cluster::secrets::SecretData;
use memcached_controller::stats::setup::stats_client;
use memcached_controller::stats::tls::server_name;
use serde_json::json;
use test_support::on_each_release;
use test_support::real_memcached::{
    self, Release, loopback_args, make_pki, readable_tempdir, start,
};

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
                credentials: memcached_controller::stats::credentials::Credentials::from_auth_file(line),
                ..Default::default()
            };
            async move { client.fetch(server.addr).await }
        };
        // Each password alone: newline-terminated lines, so that the client
        // does not also try the password as this memcached misreads it.
        let (whole, chopped) = (fetch("app:pw\n").await, fetch("app:p\n").await);
        let release = Release::current();
        if release.patch() < 32 {
            assert!(whole.is_err() && chopped.is_ok(), "{release:?}: {whole:?}, {chopped:?}");
        } else {
            assert!(whole.is_ok() && chopped.is_err(), "{release:?}: {whole:?}, {chopped:?}");
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
    /// (`warm_restart`), its volumes in a temp dir where the pod mounts them, the
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
        let wait = format!("-lt {}", warm_restart::SECRET_FILES_WAIT_SECONDS);
        let local = |text: &str| {
            text.replace(warm_restart::RUN_DIR, &run.display().to_string())
                .replace(WARM_RESTART_DIR, &data.display().to_string())
                .replace(AUTH_DIR, &auth.display().to_string())
                .replace(&wait, "-lt 8")
        };
        // What the kubelet writes from the auth Secret.
        let mount =
            |password: &str| std::fs::write(auth.join("auth"), format!("op:{password}\n")).unwrap();
        let port = real_memcached::free_port();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // What the kubelet writes from the pod's annotations.
        let annotate = |spec: serde_json::Value, secrets: &str| {
            let spec = apply_defaults(serde_json::from_value(spec).unwrap());
            let mut args: Vec<String> = memcached_args(&spec).iter().map(|a| local(a)).collect();
            args.extend(loopback_args(port));
            args.extend(["-u".into(), "nobody".into()]);
            std::fs::write(run.join("args"), warm_restart::args_annotation(&args)).unwrap();
            std::fs::write(run.join("secrets"), secrets).unwrap();
        };
        let warm = |threads: i32, connections: i32| {
            json!({"warmRestart": {"enabled": true},
                "memcached": {"maxMemoryMB": 64, "threads": threads, "maxConnections": connections}})
        };
        let command: Vec<String> = warm_restart::command().iter().map(|c| local(c)).collect();
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
        let hook = local(&warm_restart::save_and_wait()).replace(
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
