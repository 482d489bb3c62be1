//! One controller process (`memcached-controller run`) with leader election.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};

use super::http::{self, free_address};
use super::{OPERATOR_NAMESPACE, terminate};

/// A running controller.
pub struct Operator {
    child: Child,
    /// Its identity in the Lease.
    pub name: String,
    address: SocketAddr,
}

impl Operator {
    /// Start `controller run` as `name`, logging to `<workdir>/<name>.log`.
    pub fn start(
        controller: &Path,
        kubeconfig: &Path,
        workdir: &Path,
        name: &str,
    ) -> Result<Self, String> {
        let address = free_address()?;
        let log = std::fs::File::create(workdir.join(format!("{name}.log")))
            .map_err(|e| e.to_string())?;
        let child = Command::new(controller)
            .args(["run", "--leader-election", "--log-format", "text"])
            .args(["--lease-namespace", OPERATOR_NAMESPACE, "--identity", name])
            .args(["--metrics-address", &address.to_string()])
            .args(["--health-address", &address.to_string()])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
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
        })
    }

    /// `memcached_operator_reconciles_total` from /metrics.
    pub fn reconciles(&self) -> Result<u64, String> {
        reconciles_at(self.address)
    }

    /// /readyz answers 200: leading and its watches are synced.
    pub fn ready(&self) -> bool {
        self.http_get("/readyz").is_ok()
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

/// `memcached_operator_reconciles_total` from the /metrics a controller
/// serves at `address`.
pub fn reconciles_at(address: SocketAddr) -> Result<u64, String> {
    let metrics = http::get(address, "/metrics")?;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("memcached_operator_reconciles_total "))
        .and_then(|value| value.trim().parse().ok())
        .ok_or_else(|| format!("no memcached_operator_reconciles_total in {address}/metrics"))
}
