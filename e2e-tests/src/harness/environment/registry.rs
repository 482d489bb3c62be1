//! A local OCI registry (CNCF Distribution, `target/e2e/registry`) on
//! 127.0.0.1, and the policy's OCI artifact pushed to it and pulled back
//! with kwctl, the way a release publishes it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::harness::clients::checks::wait_for;
use crate::harness::clients::http::{self, free_address};
use crate::harness::environment::process::terminate;

/// The running registry.
pub struct Registry {
    child: Child,
    address: SocketAddr,
    /// `sources.yml` marking this registry insecure (plain HTTP), for kwctl and policy-server.
    pub sources: PathBuf,
}

impl Registry {
    /// Start `binary` with a config in `workdir` (storage in `workdir/registry`,
    /// log in `workdir/registry.log`) and wait until `/v2/` answers.
    pub fn start(binary: &Path, workdir: &Path) -> Result<Self, String> {
        let address = free_address()?;
        let config = workdir.join("registry.yml");
        // Distribution's configuration format (docs/content/about/configuration.md).
        // It listens on every address of the suite's network namespace: the
        // real node's pods reach it at the node's IP (its mirror Service).
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: :{}\n",
                workdir.join("registry").display(),
                address.port()
            ),
        )
        .map_err(|e| e.to_string())?;
        let sources = workdir.join("sources.yml");
        // policy-server's and kwctl's sources file (policy-fetcher's `Sources`).
        std::fs::write(&sources, format!("insecure_sources:\n  - \"{address}\"\n"))
            .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(workdir.join("registry.log")).map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} ({e}); build it with `make target/e2e/registry`",
                    binary.display()
                )
            })?;
        let registry = Registry {
            child,
            address,
            sources,
        };
        wait_for("the OCI registry", Duration::from_secs(30), || {
            http::get(address, "/v2/").map(drop)
        })
        .map_err(|e| format!("{e}; see {}", workdir.join("registry.log").display()))?;
        Ok(registry)
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `registry://127.0.0.1:<port>/<repository>`.
    pub fn url(&self, repository: &str) -> String {
        format!("registry://{}/{repository}", self.address)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// `kwctl push` of `artifact` to `reference`, `kwctl pull` of it into
/// `pulled`; fails unless the pulled module is the pushed one byte for byte
/// and the registry serves the manifest digest the push reported.
/// Returns that digest (`sha256:...`).
pub fn push_and_pull(
    kwctl: &Path,
    registry: &Registry,
    artifact: &Path,
    reference: &str,
    pulled: &Path,
) -> Result<String, String> {
    let sources = registry.sources.to_string_lossy();
    let pushed = kwctl_json(
        kwctl,
        &[
            "push",
            "--sources-path",
            &sources,
            "-o",
            "json",
            &artifact.to_string_lossy(),
            reference,
        ],
    )?;
    let immutable = pushed["immutable_ref"]
        .as_str()
        .ok_or_else(|| format!("kwctl push answered {pushed}"))?;
    let digest = immutable
        .rsplit_once('@')
        .map(|(_, digest)| digest.to_string())
        .ok_or_else(|| format!("kwctl push: no digest in {immutable}"))?;
    kwctl_out(
        kwctl,
        &[
            "pull",
            "--sources-path",
            &sources,
            "-o",
            &pulled.to_string_lossy(),
            reference,
        ],
    )?;
    let served = kwctl_out(kwctl, &["digest", "--sources-path", &sources, reference])?;
    if !served.trim().ends_with(&format!("@{digest}")) {
        return Err(format!(
            "the registry serves {} for {reference}, kwctl push reported {digest}",
            served.trim()
        ));
    }
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
    if read(artifact)? != read(pulled)? {
        return Err(format!(
            "kwctl pull of {reference} gave another module than {}",
            artifact.display()
        ));
    }
    Ok(digest)
}

/// Run kwctl; its stdout (its stderr carries logs, such as the Sigstore
/// warning offline, and is only shown on failure).
fn kwctl_out(kwctl: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new(kwctl)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", kwctl.display()))?;
    if !output.status.success() {
        return Err(format!(
            "kwctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn kwctl_json(kwctl: &Path, args: &[&str]) -> Result<Value, String> {
    let out = kwctl_out(kwctl, args)?;
    serde_json::from_str(&out).map_err(|e| format!("kwctl {}: {e}: {out}", args.join(" ")))
}
