//! One controller process (`memcached-controller run`) with leader election.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::harness::clients::checks::wait_for;
use crate::harness::clients::http::{self, free_address};
use crate::harness::clients::kubectl::Kubectl;
use crate::harness::environment::process::terminate;

/// Namespace of the controller, its ServiceAccount and its Lease (`deploy/rbac.yaml`).
pub const OPERATOR_NAMESPACE: &str = "memcached-operator-system";

/// A running controller.
pub struct Operator {
    child: Child,
    /// Its identity in the Lease.
    pub name: String,
    address: SocketAddr,
    /// Where it logs.
    log: PathBuf,
}

impl Operator {
    /// Start `controller run` as `name`, logging to `<workdir>/<name>.log`.
    pub fn start(
        controller: &Path,
        kubeconfig: &Path,
        workdir: &Path,
        name: &str,
    ) -> Result<Self, String> {
        Self::spawn(controller, kubeconfig, workdir, name, &[])
    }

    /// [`Operator::start`] with a wall clock `ahead` of the host's, as on a
    /// node whose clock drifted (libfaketime; the monotonic clock is true).
    pub fn start_ahead(
        controller: &Path,
        kubeconfig: &Path,
        workdir: &Path,
        name: &str,
        ahead: Duration,
    ) -> Result<Self, String> {
        let library = libfaketime()?;
        let skew = [
            ("LD_PRELOAD", library.display().to_string()),
            ("FAKETIME", format!("+{}s", ahead.as_secs())),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
        ];
        Self::spawn(controller, kubeconfig, workdir, name, &skew)
    }

    fn spawn(
        controller: &Path,
        kubeconfig: &Path,
        workdir: &Path,
        name: &str,
        env: &[(&str, String)],
    ) -> Result<Self, String> {
        let address = free_address()?;
        let log_path = workdir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let child = Command::new(controller)
            .args(["run", "--leader-election", "--log-format", "text"])
            .args(["--lease-namespace", OPERATOR_NAMESPACE, "--identity", name])
            // Plain /metrics beside the probes: the scenarios read its counters.
            .args(["--metrics-secure=false"])
            .args(["--metrics-address", &address.to_string()])
            .args(["--health-address", &address.to_string()])
            .env("KUBECONFIG", kubeconfig)
            // The watches' debug lines too: scenarios count the lists of APIs
            // not served; and the handovers', for a run that kept fewer keys.
            .env(
                "RUST_LOG",
                "info,memcached_controller::cluster::cache=debug,memcached_controller::handover=debug",
            )
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stderr(log.try_clone().map_err(|e| e.to_string())?)
            .stdout(log)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} ({e}); build it with `cargo build -p memcached-controller`",
                    controller.display()
                )
            })?;
        Ok(Operator {
            child,
            name: name.to_string(),
            address,
            log: log_path,
        })
    }

    /// The lines of its log that contain `text`, without their colours.
    pub fn log_lines(&self, text: &str) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        (log.lines())
            .map(without_colours)
            .filter(|line| line.contains(text))
            .collect()
    }

    /// `memcached_operator_reconciles_total` from /metrics.
    pub fn reconciles(&self) -> Result<u64, String> {
        reconciles_at(self.address)
    }

    /// The requests it sent the API server so far, every method and answer
    /// (`memcached_operator_api_requests_total`).
    pub fn api_requests(&self) -> Result<u64, String> {
        let metrics = http::get(self.address, "/metrics")?;
        Ok(metrics
            .lines()
            .filter_map(|line| line.strip_prefix("memcached_operator_api_requests_total{"))
            .filter_map(|rest| rest.rsplit_once("} ")?.1.trim().parse::<u64>().ok())
            .sum())
    }

    /// /readyz answers 200: leading and its watches are synced.
    pub fn ready(&self) -> bool {
        self.http_get("/readyz").is_ok()
    }

    /// Wait (at most `within`) until /readyz answers 200.
    pub fn wait_ready(&self, within: Duration) -> Result<(), String> {
        wait_for(&format!("{} ready", self.name), within, || {
            self.ready()
                .then_some(())
                .ok_or_else(|| "not ready".to_string())
        })
    }

    /// Resident set size in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }

    /// Its exit status, once it exited on its own.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stop it with SIGTERM (as the kubelet would).
    pub fn stop(mut self) {
        terminate(&mut self.child);
    }

    /// Kill it without warning (a crashed or partitioned leader).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn http_get(&self, path: &str) -> Result<String, String> {
        http::get(self.address, path)
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// Debian's libfaketime (package `faketime`, which `make deps` installs).
fn libfaketime() -> Result<PathBuf, String> {
    let multiarch = format!(
        "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
        std::env::consts::ARCH
    );
    [multiarch.as_str(), "/usr/lib/faketime/libfaketime.so.1"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
        .ok_or_else(|| "libfaketime is missing: `make deps` installs it (Debian's faketime)".into())
}

/// `memcached_operator_reconciles_total` from the plain /metrics a
/// controller serves at `address`.
fn reconciles_at(address: SocketAddr) -> Result<u64, String> {
    reconciles_in(&http::get(address, "/metrics")?, address)
}

/// `memcached_operator_reconciles_total` from the secure /metrics
/// (`--metrics-secure`) at `address`, scraped with `token`.
pub fn reconciles_at_secure(address: SocketAddr, token: &str) -> Result<u64, String> {
    match scrape(&format!("https://{address}/metrics"), Some(token))? {
        (200, body, _) => reconciles_in(&body, address),
        (status, body, _) => Err(format!("https://{address}/metrics: {status} {body}")),
    }
}

fn reconciles_in(metrics: &str, address: SocketAddr) -> Result<u64, String> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("memcached_operator_reconciles_total "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no memcached_operator_reconciles_total in {address}/metrics"))
}

/// `curl -k` GET of `url` with an optional bearer token: the status, the
/// body, and the time curl measured (connect to last byte).
pub fn scrape(url: &str, token: Option<&str>) -> Result<(u16, String, Duration), String> {
    let mut curl = Command::new("curl");
    curl.args([
        "-sSk",
        "--max-time",
        "10",
        "-w",
        "\n%{http_code} %{time_total}",
        url,
    ]);
    if let Some(token) = token {
        curl.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = curl.output().map_err(|e| format!("curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (status, seconds) = tail.split_once(' ').unwrap_or((tail, "0"));
    let status = status
        .parse()
        .map_err(|_| format!("curl printed {tail:?}"))?;
    let seconds: f64 = seconds
        .parse()
        .map_err(|_| format!("curl printed {tail:?}"))?;
    Ok((status, body.to_string(), Duration::from_secs_f64(seconds)))
}

/// A token of ServiceAccount `account` in `namespace`, bound (once) to the
/// `memcached-operator-metrics-reader` ClusterRole of deploy/rbac-metrics-auth.yaml.
pub fn metrics_reader_token(
    kubectl: &Kubectl,
    namespace: &str,
    account: &str,
) -> Result<String, String> {
    let binding = format!("{namespace}-{account}-memcached-operator-metrics");
    if kubectl
        .get(&["serviceaccount", account, "-n", namespace])
        .is_err()
    {
        kubectl.ok(&["create", "serviceaccount", account, "-n", namespace])?;
    }
    if kubectl.get(&["clusterrolebinding", &binding]).is_err() {
        kubectl.ok(&[
            "create",
            "clusterrolebinding",
            &binding,
            "--clusterrole=memcached-operator-metrics-reader",
            &format!("--serviceaccount={namespace}:{account}"),
        ])?;
    }
    kubectl
        .ok(&["create", "token", account, "-n", namespace])
        .map(|t| t.trim().to_string())
}

/// `line` without its ANSI colour sequences (`ESC [ ... m`).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| *c == 'm');
        } else {
            plain.push(c);
        }
    }
    plain
}
