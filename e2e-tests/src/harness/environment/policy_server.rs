//! Kubewarden's policy-server, run outside a cluster the way
//! kubewarden-controller runs it inside one: `policies.yml` and `sources.yml`
//! as its ConfigMap holds them, a serving certificate signed by the CA the
//! webhooks trust, readiness on `/readiness`
//! (kubewarden-controller `internal/controller/policyserver_controller_deployment.go`
//! and `internal/constants/constants.go`). Logs JSON lines to `<workdir>/policy-server.log`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::harness::clients::checks::wait_for;
use crate::harness::clients::http::{self, free_address};
use crate::harness::environment::process::terminate;

/// The running policy-server.
pub struct PolicyServer {
    child: Child,
    /// `https://127.0.0.1:<port>`: webhooks append `/validate/<policy id>`.
    pub url: String,
    /// PEM of the CA that signed its serving certificate (the webhooks' caBundle).
    pub ca_pem: String,
    log: PathBuf,
}

impl PolicyServer {
    /// Write `policies` (policy id to `policies.yml` entry) and a serving
    /// certificate into `workdir`, start `binary` on loopback as the user of
    /// `kubeconfig` (context-aware policies read the cluster with it, as
    /// policy-server's ServiceAccount in a cluster) and wait until every
    /// policy is loaded (readiness answers 200).
    pub fn start(
        binary: &Path,
        workdir: &Path,
        policies: Map<String, Value>,
        sources: &Path,
        kubeconfig: &Path,
    ) -> Result<Self, String> {
        let write = |name: &str, text: &str| -> Result<PathBuf, String> {
            let path = workdir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(path)
        };
        // JSON is YAML: policies.yml as kubewarden-controller writes it (json.Marshal).
        let policies = write("policies.yml", &Value::Object(policies).to_string())?;
        let pki = crate::harness::environment::pki::issue(&["127.0.0.1"])?;
        let cert = write("policy-server.crt", &pki.cert)?;
        let key = write("policy-server.key", &pki.key)?;
        let downloads = workdir.join("policies");
        std::fs::create_dir_all(&downloads).map_err(|e| e.to_string())?;
        let (address, readiness) = (free_address()?, free_address()?);
        let log = workdir.join("policy-server.log");
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(binary)
            .arg("--policies")
            .arg(&policies)
            .arg("--sources-path")
            .arg(sources)
            .arg("--policies-download-dir")
            .arg(&downloads)
            .arg("--sigstore-cache-dir")
            .arg(workdir.join("sigstore-data"))
            .arg("--cert-file")
            .arg(&cert)
            .arg("--key-file")
            .arg(&key)
            .args(["--addr", &address.ip().to_string()])
            .args(["--port", &address.port().to_string()])
            .args(["--readiness-probe-port", &readiness.port().to_string()])
            .args(["--log-fmt", "json", "--log-level", "info"])
            .env("KUBECONFIG", kubeconfig)
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file)
            .current_dir(workdir)
            .spawn()
            .map_err(|e| format!("cannot start {} ({e})", binary.display()))?;
        let mut server = PolicyServer {
            child,
            url: format!("https://{address}"),
            ca_pem: pki.ca,
            log,
        };
        // Readiness answers once every policy is downloaded and compiled;
        // stop waiting as soon as the process is gone.
        let ready = wait_for(
            "policy-server readiness",
            Duration::from_secs(120),
            || match server.child.try_wait() {
                Ok(Some(status)) => Ok(Err(format!("policy-server exited ({status})"))),
                _ => http::get(readiness, "/readiness").map(|_| Ok(())),
            },
        );
        match ready.and_then(|exited| exited) {
            Ok(()) => Ok(server),
            Err(e) => {
                terminate(&mut server.child);
                Err(format!("{e}; see {}", server.log.display()))
            }
        }
    }

    /// The responses policy-server computed but did not enforce: every
    /// evaluation of a `monitor` mode policy, as it logs them.
    pub fn monitor_mode_evaluations(&self) -> Result<Vec<MonitorEvaluation>, String> {
        let log = std::fs::read_to_string(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        Ok(log
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["fields"]["message"] == "policy evaluation (monitor mode)")
            .map(|entry| {
                let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
                MonitorEvaluation {
                    policy_id: text(&entry["fields"]["policy_id"]),
                    namespace: text(&entry["span"]["namespace"]),
                    response: text(&entry["fields"]["response"]),
                }
            })
            .collect())
    }

    /// How long each request to `/validate/<policy_id>` took inside
    /// policy-server, from its request log (tower-http, millisecond resolution),
    /// oldest first.
    pub fn request_latencies(&self, policy_id: &str) -> Result<Vec<Duration>, String> {
        let path = format!("/validate/{policy_id}");
        let log = std::fs::read_to_string(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        Ok(log
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["fields"]["message"] == "finished processing request")
            .filter(|entry| {
                entry["span"]["uri"]
                    .as_str()
                    .is_some_and(|uri| uri.split('?').next() == Some(path.as_str()))
            })
            .filter_map(|entry| {
                let millis = entry["fields"]["latency"].as_str()?.strip_suffix(" ms")?;
                millis.parse().ok().map(Duration::from_millis)
            })
            .collect())
    }
}

/// One monitor-mode evaluation from policy-server's log.
#[derive(Clone, Debug)]
pub struct MonitorEvaluation {
    /// The policy id (`clusterwide-<name>`).
    pub policy_id: String,
    /// The namespace of the object judged (the span's `name` field is ambiguous:
    /// the span's own name shares the key).
    pub namespace: String,
    /// The AdmissionResponse it would have sent, in policy-server's debug format.
    pub response: String,
}

impl MonitorEvaluation {
    /// The policy would have refused the request.
    pub fn would_reject(&self) -> bool {
        self.response.contains("allowed: false")
    }
}

impl Drop for PolicyServer {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}
