//! The product on a real Kubernetes control plane: the `cluster` Go program
//! (etcd, kube-apiserver, controller manager, scheduler, kwok nodes, a real
//! memcached behind every pod), the policy in the admission chain through
//! [`admission::AdmissionHost`], and the controller running with the RBAC of
//! `deploy/rbac.yaml`.
//!
//! Pod addresses come from 10.244.0.0/16, which must be local: run inside
//! `e2e-tests/netns.sh` (a network namespace with that range routed to lo).

pub mod admission;
mod kubectl;
mod operator;
pub mod pki;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use kubectl::{Kubectl, Outcome};
pub use operator::Operator;

use crate::workspace_root;
use admission::AdmissionHost;

/// Namespace of the controller, its ServiceAccount and its Lease (`deploy/rbac.yaml`).
pub const OPERATOR_NAMESPACE: &str = "memcached-operator-system";

/// Where the programs under test are.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The Go control plane (`$E2E_CLUSTER`, default `target/e2e/cluster`).
    pub cluster: PathBuf,
    /// kubectl built from the same release (`$E2E_KUBECTL`, default `target/e2e/kubectl`).
    pub kubectl: PathBuf,
    /// The controller (`$MEMCACHED_CONTROLLER`, default `target/debug/memcached-controller`).
    pub controller: PathBuf,
    /// memcached (`$MEMCACHED`, default `memcached` on PATH).
    pub memcached: PathBuf,
}

impl Binaries {
    /// From the environment, with the defaults `make e2e` builds.
    pub fn from_env() -> Self {
        let target = workspace_root().join("target");
        let pick =
            |var: &str, default: PathBuf| std::env::var_os(var).map_or(default, PathBuf::from);
        Binaries {
            cluster: pick("E2E_CLUSTER", target.join("e2e/cluster")),
            kubectl: pick("E2E_KUBECTL", target.join("e2e/kubectl")),
            controller: pick(
                "MEMCACHED_CONTROLLER",
                target.join("debug/memcached-controller"),
            ),
            memcached: pick("MEMCACHED", PathBuf::from("memcached")),
        }
    }
}

/// Poll `check` every 200 ms until it succeeds or `timeout` passes; the
/// error names what was awaited and the last reason it was not there yet.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(reason) if Instant::now() >= deadline => {
                return Err(format!(
                    "timed out after {}s waiting for {what}: {reason}",
                    timeout.as_secs()
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// The condition of type `kind` in an object's status.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The status ("True", "False", "Unknown") of an object's `kind` condition.
pub fn condition_status<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    condition(object, kind)?["status"].as_str()
}

/// The running control plane process.
pub struct Cluster {
    child: Child,
    /// Its working directory (logs, kubeconfig, per-pod memcached files).
    pub workdir: PathBuf,
    /// cluster-admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// From spawn to "cluster ready".
    pub start_time: Duration,
}

impl Cluster {
    /// Start the control plane in `workdir` and wait until it is ready.
    pub fn start(binaries: &Binaries, workdir: &Path) -> Result<Self, String> {
        let _ = std::fs::remove_dir_all(workdir);
        std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut child = Command::new(&binaries.cluster)
            .arg("--workdir")
            .arg(workdir)
            .arg("--memcached")
            .arg(&binaries.memcached)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} ({e}); build it with `make e2e-cluster`",
                    binaries.cluster.display()
                )
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("cluster ready") {
                    let _ = ready.send(());
                }
            }
        });
        let mut cluster = Cluster {
            child,
            workdir: workdir.to_path_buf(),
            kubeconfig: workdir.join("kubeconfig"),
            start_time: Duration::ZERO,
        };
        if ready_rx.recv_timeout(Duration::from_secs(180)).is_err() {
            return Err(format!(
                "the control plane did not become ready; see {}",
                workdir.join("cluster.log").display()
            ));
        }
        cluster.start_time = started.elapsed();
        Ok(cluster)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// SIGTERM, then SIGKILL if the process is still there after 20 s.
pub(crate) fn terminate(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Everything the scenarios need, running.
pub struct Env {
    /// The programs.
    pub binaries: Binaries,
    /// kubectl as cluster-admin.
    pub kubectl: Kubectl,
    /// Kubeconfig with the controller's ServiceAccount token.
    pub operator_kubeconfig: PathBuf,
    /// The first controller (leader election on).
    pub operator: Option<Operator>,
    /// The policy webhook.
    pub admission: AdmissionHost,
    /// The control plane; dropped last.
    pub cluster: Cluster,
}

impl Env {
    /// Start the control plane, install the CRD, the policy webhook and the
    /// controller's RBAC, and start one controller.
    pub fn start(workdir: &Path) -> Result<Self, String> {
        let binaries = Binaries::from_env();
        let cluster = Cluster::start(&binaries, workdir)?;
        let kubectl = Kubectl::new(&binaries.kubectl, &cluster.kubeconfig);
        let root = workspace_root();
        kubectl.ok(&[
            "apply",
            "-f",
            &root.join("deploy/crd.yaml").to_string_lossy(),
        ])?;
        kubectl.ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/memcacheds.memcached.c5c3.io",
        ])?;
        let admission = AdmissionHost::start(json!({}))?;
        kubectl.apply(&admission.webhook_configuration().to_string())?;
        wait_for_webhook(&kubectl)?;

        kubectl.ok(&["create", "namespace", OPERATOR_NAMESPACE])?;
        kubectl.ok(&[
            "apply",
            "-f",
            &root.join("deploy/rbac.yaml").to_string_lossy(),
        ])?;
        let operator_kubeconfig = cluster.workdir.join("operator.kubeconfig");
        write_service_account_kubeconfig(&kubectl, &operator_kubeconfig)?;
        let mut env = Env {
            binaries,
            kubectl,
            operator_kubeconfig,
            operator: None,
            admission,
            cluster,
        };
        env.operator = Some(env.start_operator("operator-a")?);
        Ok(env)
    }

    /// Start a controller process named `name` with leader election on.
    pub fn start_operator(&self, name: &str) -> Result<Operator, String> {
        Operator::start(
            &self.binaries.controller,
            &self.operator_kubeconfig,
            &self.cluster.workdir,
            name,
        )
    }

    /// The running controller.
    pub fn operator(&self) -> Result<&Operator, String> {
        self.operator
            .as_ref()
            .ok_or_else(|| "no controller is running".to_string())
    }
}

/// The API server picks webhook configurations up asynchronously: wait until
/// an invalid Memcached is refused by the policy.
fn wait_for_webhook(kubectl: &Kubectl) -> Result<(), String> {
    let probe = json!({
        "apiVersion": "memcached.c5c3.io/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"replicas": -1},
    })
    .to_string();
    wait_for("the policy webhook", Duration::from_secs(30), || {
        let outcome = kubectl.run(&["create", "--dry-run=server", "-f", "-"], Some(&probe));
        if outcome.stderr.contains("denied the request") {
            Ok(())
        } else {
            Err(outcome.stderr)
        }
    })
}

/// A kubeconfig authenticating as the controller's ServiceAccount, so the
/// scenarios exercise `deploy/rbac.yaml`.
fn write_service_account_kubeconfig(kubectl: &Kubectl, path: &Path) -> Result<(), String> {
    let token = kubectl.ok(&[
        "create",
        "token",
        "memcached-operator",
        "-n",
        OPERATOR_NAMESPACE,
        "--duration=24h",
    ])?;
    let admin: Value =
        serde_json::from_str(&kubectl.ok(&["config", "view", "--raw", "--minify", "-o", "json"])?)
            .map_err(|e| e.to_string())?;
    let cluster = &admin["clusters"][0]["cluster"];
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "memcached-operator", "user": {"token": token.trim()}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "memcached-operator"}}],
        "current-context": "e2e",
    });
    std::fs::write(path, config.to_string()).map_err(|e| e.to_string())
}
