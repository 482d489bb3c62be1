//! The product on a real Kubernetes control plane: the `local-cluster` Go program
//! of `e2e-tests/testbed/` (etcd, kube-apiserver, controller manager, scheduler, kwok nodes, a real
//! memcached behind every memcached pod, the controller binary behind the
//! operator's own pods), the policy in the admission chain through
//! Kubewarden's policy-server configured from `deploy/policy.yaml` as
//! kubewarden-controller would ([`environment::kubewarden`]), loading the policy's OCI
//! artifact from a local registry ([`environment::registry`]), and the controller running
//! with the RBAC of `deploy/rbac.yaml`.
//!
//! Pod addresses come from 10.244.0.0/16, which must be local: run inside
//! `e2e-tests/testbed/netns.sh` (a network namespace with that range routed to lo).

pub mod clients;
pub mod environment;
pub mod scenarios;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use clients::checks::{check, condition, condition_status, wait_for, wait_for_progress};
pub use clients::kubectl::{Kubectl, Outcome};
pub use environment::operator::{
    OPERATOR_NAMESPACE, Operator, metrics_reader_token, reconciles_at_secure, scrape,
};
use environment::process::terminate;
pub use environment::programs::{Binaries, kubewarden_charts};

use crate::workspace_root;
use environment::helm::Helm;
use environment::kubewarden::{ClusterAdmissionPolicy, KUBEWARDEN_NAMESPACE};
use environment::kubewarden_charts::TakeOver;
use environment::policy_server::PolicyServer;
use environment::registry::Registry;
use environment::{kubewarden_charts, node, registry};

/// Run this program again inside `e2e-tests/testbed/netns.sh` (a private network
/// namespace where the pod range is local) unless it already runs there, so
/// plain `cargo test` can start the end-to-end suites.
pub fn enter_network_namespace() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os("E2E_IN_NETNS").is_some() {
        return;
    }
    let script = workspace_root().join("e2e-tests/testbed/netns.sh");
    let error = match std::env::current_exe() {
        Ok(exe) => Command::new(&script)
            .arg(exe)
            .args(std::env::args_os().skip(1))
            .exec(),
        Err(e) => e,
    };
    eprintln!(
        "cannot enter the network namespace with {}: {error}",
        script.display()
    );
    std::process::exit(1);
}

/// The running control plane process.
pub struct Cluster {
    child: Child,
    /// Its working directory (logs, kubeconfig, `pods/<namespace>/<pod>-<uid>/`
    /// with each pod's container logs).
    pub workdir: PathBuf,
    /// cluster-admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// From spawn to "cluster ready".
    pub start_time: Duration,
    /// What the control plane printed about stopping and starting the API server.
    restarts: mpsc::Receiver<String>,
}

impl Cluster {
    /// Start the control plane in `workdir` and wait until it is ready;
    /// `args` are further flags of the `cluster` program.
    pub fn start(binaries: &Binaries, workdir: &Path, args: &[String]) -> Result<Self, String> {
        if !binaries.controller.is_file() {
            return Err(format!(
                "{} is missing; build it with `cargo build -p memcached-controller`",
                binaries.controller.display()
            ));
        }
        let _ = std::fs::remove_dir_all(workdir);
        std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut child = Command::new(&binaries.cluster)
            .arg("--workdir")
            .arg(workdir)
            .arg("--memcached")
            .arg(&binaries.memcached)
            .arg("--controller")
            .arg(&binaries.controller)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {} ({e}); build it with `make target/e2e/local-cluster`",
                    binaries.cluster.display()
                )
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready, ready_rx) = mpsc::channel();
        let (restarted, restarts) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("cluster ready") {
                    let _ = ready.send(());
                } else if line.starts_with("api server ") {
                    let _ = restarted.send(line);
                } else if line.starts_with("real node") {
                    println!("{line}");
                }
            }
        });
        let mut cluster = Cluster {
            child,
            workdir: workdir.to_path_buf(),
            kubeconfig: workdir.join("kubeconfig"),
            start_time: Duration::ZERO,
            restarts,
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

impl Cluster {
    /// Freeze the control plane (etcd, kube-apiserver, controllers and the
    /// pod runtime; the pods' processes run on) with SIGSTOP: connections
    /// are accepted and never answered, as from a hung API server. It runs
    /// again when the guard is dropped.
    pub fn pause(&self) -> Result<Paused, String> {
        let pid = self.child.id().to_string();
        signal("-STOP", &pid)?;
        Ok(Paused { pid })
    }
}

impl Cluster {
    /// Compact etcd at its current revision and stop the API server as its
    /// death would (every connection ends); a client resuming a watch from
    /// an older revision once it is back is answered 410 Gone.
    pub fn stop_api_server(&self) -> Result<(), String> {
        self.api_server("-USR1", "api server stopped").map(drop)
    }

    /// Start the API server [`Cluster::stop_api_server`] stopped; returns
    /// once it is ready, with how long that took.
    pub fn start_api_server(&self) -> Result<Duration, String> {
        self.api_server("-USR2", "api server started")
    }

    /// Send `signal` to the control plane and wait for the line it prints
    /// about the API server: `Ok` when that starts with `done`.
    fn api_server(&self, signal_name: &str, done: &str) -> Result<Duration, String> {
        let started = Instant::now();
        signal(signal_name, &self.child.id().to_string())?;
        let line = self
            .restarts
            .recv_timeout(Duration::from_secs(120))
            .map_err(|_| format!("no answer from the control plane to {signal_name} in 120s"))?;
        if line.starts_with(done) {
            Ok(started.elapsed())
        } else {
            Err(line)
        }
    }
}

/// A paused control plane: SIGCONT on drop.
pub struct Paused {
    pid: String,
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = signal("-CONT", &self.pid);
    }
}

fn signal(signal: &str, pid: &str) -> Result<(), String> {
    let status = Command::new("kill").args([signal, pid]).status();
    match status {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("kill {signal} {pid}: {other:?}")),
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
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
    /// `deploy/policy.yaml`: its webhook is registered.
    pub protect: ClusterAdmissionPolicy,
    /// `deploy/policy-audit.yaml`: served by policy-server, its webhook not registered.
    pub audit: ClusterAdmissionPolicy,
    /// `deploy/policy.yaml` at `podSecurityLevel: baseline`, so it reads each
    /// request's Namespace: served by policy-server, its webhook not registered.
    pub namespaced: ClusterAdmissionPolicy,
    /// Kubewarden's policy-server serving the three.
    pub policy_server: PolicyServer,
    /// The policy's OCI artifact in the local registry.
    pub artifact: Artifact,
    /// The local OCI registry.
    pub registry: Registry,
    /// The control plane; dropped last.
    pub cluster: Cluster,
}

/// The annotated policy as pushed to the local registry.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// `registry://127.0.0.1:<port>/policies/memcached:v<version>`.
    pub reference: String,
    /// The manifest digest kwctl push reported and the registry serves.
    pub digest: String,
}

impl Env {
    /// Start the control plane and install the CRD; start the registry, push
    /// the annotated policy and pull it back; start policy-server with both
    /// ClusterAdmissionPolicies loading it from the registry; register the
    /// protect policy's webhook; apply the controller's RBAC and the user
    /// roles (which let Kubewarden's audit scanner read Memcacheds); start
    /// one controller.
    /// `Ok(None)`: Kubewarden's engines are not installed (see [`Binaries::from_env`]).
    pub fn start(workdir: &Path) -> Result<Option<Self>, String> {
        Self::start_with(workdir, false)
    }

    /// [`Env::start`] with a real node ([`node`]) beside the kwok nodes: the
    /// registry starts first (beside `workdir`) and holds the node's images
    /// before the node starts.
    pub fn start_with(workdir: &Path, real_node: bool) -> Result<Option<Self>, String> {
        let Some(binaries) = Binaries::from_env()? else {
            return Ok(None);
        };
        let (cluster, registry) = start_control_plane(&binaries, workdir, real_node)?;
        let kubectl = Kubectl::new(&binaries.kubectl, &cluster.kubeconfig);
        let (artifact, repository) = push_policy(&binaries, &cluster, &registry)?;
        let [protect, audit, namespaced] = load_policies(&repository)?;
        let policy_server_kubeconfig = cluster.workdir.join("policy-server.kubeconfig");
        install_policy_server_rbac(&kubectl, &cluster, &policy_server_kubeconfig)?;
        let policies = [&protect, &audit, &namespaced]
            .into_iter()
            .map(|policy| (policy.id(), policy.policies_entry(&artifact.reference)))
            .collect();
        let policy_server = PolicyServer::start(
            &binaries.policy_server,
            &cluster.workdir,
            policies,
            &registry.sources,
            &policy_server_kubeconfig,
        )?;
        let mut env = Env {
            binaries,
            kubectl,
            operator_kubeconfig: cluster.workdir.join("operator.kubeconfig"),
            operator: None,
            protect,
            audit,
            namespaced,
            policy_server,
            artifact,
            registry,
            cluster,
        };
        env.register(&env.protect)?;
        env.wait_for_protection()?;
        env.install_operator_rbac()?;
        env.operator = Some(env.start_operator("operator-a")?);
        Ok(Some(env))
    }

    /// The controller's namespace, its RBAC (with the writes guard) and the
    /// user roles; a kubeconfig of its ServiceAccount.
    fn install_operator_rbac(&self) -> Result<(), String> {
        self.kubectl
            .ok(&["create", "namespace", OPERATOR_NAMESPACE])?;
        self.apply_operator_rbac()
    }

    /// The controller's RBAC (with the writes guard) and the user roles
    /// applied, and a kubeconfig with a token of its ServiceAccount as it is
    /// now: again after a scenario deleted them (a new ServiceAccount
    /// invalidates the old token).
    pub fn apply_operator_rbac(&self) -> Result<(), String> {
        let root = workspace_root();
        for manifest in OPERATOR_RBAC {
            self.kubectl
                .ok(&["apply", "-f", &root.join(manifest).to_string_lossy()])?;
        }
        write_service_account_kubeconfig(
            &self.kubectl,
            OPERATOR_NAMESPACE,
            "memcached-operator",
            &self.operator_kubeconfig,
        )
    }

    /// The controller's RBAC and the user roles of [`OPERATOR_RBAC`] deleted
    /// (whatever of them is there), as a user moving from those manifests
    /// to the chart does; [`Env::apply_operator_rbac`] puts them back.
    pub fn delete_operator_rbac(&self) -> Result<(), String> {
        let root = workspace_root();
        let paths: Vec<String> = (OPERATOR_RBAC.iter())
            .map(|manifest| root.join(manifest).to_string_lossy().into_owned())
            .collect();
        let mut args = vec!["delete"];
        for path in &paths {
            args.extend(["-f", path]);
        }
        args.extend(["--ignore-not-found", "--wait=true"]);
        self.kubectl.ok(&args).map(drop)
    }

    /// Kubewarden takes over from the suite's policy-server (whose webhook the
    /// caller unregistered): its charts installed ([`kubewarden_charts::install`]), the artifact
    /// pushed where `deploy/policy.yaml`'s module names it (in the registry the
    /// node's pods reach for that host), then `kubectl apply -f` of
    /// `deploy/policy.yaml` and `deploy/policy-audit.yaml` as they are, until
    /// both are `active` and kube-apiserver calls the protect policy's webhook.
    pub fn kubewarden_takes_over(&self) -> Result<TakeOver, String> {
        self.remove_policy_server_rbac()?;
        let helm = Helm::new(&self.cluster.kubeconfig, &self.cluster.workdir);
        let started = Instant::now();
        let module = self.protect.module();
        let host = kubewarden_charts::module_host(module)?;
        kubewarden_charts::install(&helm, &self.kubectl, host)?;
        let installed = started.elapsed();
        registry::push_and_pull(
            &self.binaries.kwctl,
            &self.registry,
            &workspace_root().join("annotated-policy.wasm"),
            &self
                .registry
                .url(kubewarden_charts::module_repository(module)?),
            &self.cluster.workdir.join("mirrored-policy.wasm"),
        )?;
        let applied = Instant::now();
        for manifest in ["deploy/policy.yaml", "deploy/policy-audit.yaml"] {
            let path = workspace_root().join(manifest);
            self.kubectl.ok(&["apply", "-f", &path.to_string_lossy()])?;
        }
        for policy in [&self.protect.name, &self.audit.name] {
            kubewarden_charts::wait_active(&self.kubectl, policy, Duration::from_secs(180))?;
        }
        let active = applied.elapsed();
        self.wait_for_protection()?;
        Ok(TakeOver { installed, active })
    }

    /// Create the webhook configuration kubewarden-controller would create for `policy`.
    pub fn register(&self, policy: &ClusterAdmissionPolicy) -> Result<(), String> {
        let config =
            policy.webhook_configuration(&self.policy_server.url, &self.policy_server.ca_pem);
        self.kubectl.apply(&config.to_string()).map(drop)
    }

    /// Delete the RBAC [`Env::start`] gave the suite's policy-server, which
    /// is `kubewarden-defaults`' own: before that chart is installed.
    pub fn remove_policy_server_rbac(&self) -> Result<(), String> {
        let outcome = self.kubectl.run(
            &["delete", "-f", "-", "--wait=true"],
            Some(&policy_server_rbac(&self.cluster)?),
        );
        check(
            outcome.success,
            format!(
                "deleting the suite's policy-server RBAC: {}",
                outcome.stderr
            ),
        )
    }

    /// Delete `policy`'s webhook configuration.
    pub fn unregister(&self, policy: &ClusterAdmissionPolicy) -> Result<(), String> {
        let config = policy.webhook_configuration("", "");
        let kind = config["kind"].as_str().unwrap_or_default().to_lowercase();
        self.kubectl
            .ok(&["delete", &kind, &policy.id(), "--wait=true"])
            .map(drop)
    }

    /// kube-apiserver picks webhook configurations up asynchronously: wait
    /// until an invalid Memcached is refused by the protect policy.
    pub fn wait_for_protection(&self) -> Result<(), String> {
        let denied = format!(
            "admission webhook \"{}\" denied the request",
            self.protect.webhook_name()
        );
        wait_for("the policy webhook", Duration::from_secs(30), || {
            let outcome = self.kubectl.run(
                &["create", "--dry-run=server", "-f", "-"],
                Some(&invalid_memcached("default", "webhook-probe")),
            );
            if outcome.stderr.contains(&denied) {
                Ok(())
            } else {
                Err(outcome.stderr)
            }
        })
    }

    /// After [`Env::unregister`] of the protect policy: wait until
    /// kube-apiserver no longer calls its webhook (a Memcached the CRD's
    /// schema admits and the policy refuses passes a server-side dry run).
    pub fn wait_for_no_protection(&self) -> Result<(), String> {
        let refused_by_policy = json!({
            "apiVersion": "memcached.c5c3.io/v1beta1",
            "kind": "Memcached",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"image": "Memcached:1.6"},
        });
        wait_for("the policy webhook gone", Duration::from_secs(30), || {
            let outcome = self.kubectl.run(
                &["create", "--dry-run=server", "-f", "-"],
                Some(&refused_by_policy.to_string()),
            );
            check(outcome.success, outcome.stderr)
        })
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

    /// [`Env::start_operator`] with a wall clock `ahead` of the others'.
    pub fn start_operator_ahead(&self, name: &str, ahead: Duration) -> Result<Operator, String> {
        Operator::start_ahead(
            &self.binaries.controller,
            &self.operator_kubeconfig,
            &self.cluster.workdir,
            name,
            ahead,
        )
    }

    /// Stop the running controller and start `name` in its place, as an
    /// upgrade does; return once the new one has reconciled.
    pub fn replace_operator(&mut self, name: &str) -> Result<(), String> {
        if let Some(old) = self.operator.take() {
            old.stop();
        }
        self.operator = Some(self.start_operator(name)?);
        wait_for(
            &format!("{name} reconciling"),
            Duration::from_secs(90),
            || match self.operator()?.reconciles()? {
                0 => Err("no reconcile yet".to_string()),
                _ => Ok(()),
            },
        )
    }

    /// The running controller.
    pub fn operator(&self) -> Result<&Operator, String> {
        self.operator
            .as_ref()
            .ok_or_else(|| "no controller is running".to_string())
    }
}

/// A Memcached every policy setting refuses (`replicas: -1`), as JSON.
pub fn invalid_memcached(namespace: &str, name: &str) -> String {
    json!({
        "apiVersion": "memcached.c5c3.io/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": -1},
    })
    .to_string()
}

/// The control plane with the CRD established, and the local registry
/// (with a real node, started first: it holds the node's images).
fn start_control_plane(
    binaries: &Binaries,
    workdir: &Path,
    real_node: bool,
) -> Result<(Cluster, Registry), String> {
    let (registry, args) = if real_node {
        let registry = node::start_registry(binaries, workdir)?;
        let args = node::cluster_args(binaries, &registry);
        (Some(registry), args)
    } else {
        (None, Vec::new())
    };
    let cluster = Cluster::start(binaries, workdir, &args)?;
    let kubectl = Kubectl::new(&binaries.kubectl, &cluster.kubeconfig);
    let crd = workspace_root().join("deploy/crd.yaml");
    kubectl.ok(&["apply", "-f", &crd.to_string_lossy()])?;
    kubectl.wait_established("memcacheds.memcached.c5c3.io")?;
    let registry = match registry {
        Some(registry) => registry,
        None => Registry::start(&binaries.registry, &cluster.workdir)?,
    };
    Ok((cluster, registry))
}

/// Push the annotated policy to the local registry and pull it back: the
/// artifact, and its repository (`policies/memcached:v<version>`).
fn push_policy(
    binaries: &Binaries,
    cluster: &Cluster,
    registry: &Registry,
) -> Result<(Artifact, String), String> {
    let repository = format!("policies/memcached:v{}", policy_version()?);
    let reference = registry.url(&repository);
    let annotated = workspace_root().join("annotated-policy.wasm");
    if !annotated.is_file() {
        return Err(format!(
            "{} is missing; build it with `make annotated-policy.wasm`",
            annotated.display()
        ));
    }
    let digest = registry::push_and_pull(
        &binaries.kwctl,
        registry,
        &annotated,
        &reference,
        &cluster.workdir.join("pulled-policy.wasm"),
    )?;
    Ok((Artifact { reference, digest }, repository))
}

/// The manifests of the controller's RBAC the suites apply, as `kubectl apply -f` takes them.
pub const OPERATOR_RBAC: [&str; 3] = [
    "deploy/rbac.yaml",
    "deploy/rbac-writes-guard.yaml",
    "deploy/rbac-user-roles.yaml",
];

/// deploy/policy.yaml, deploy/policy-audit.yaml and a namespaced variant at
/// `baseline`, each checked to load `repository` (the artifact metadata.yml
/// describes; the local registry stands in for the one the manifest names).
fn load_policies(repository: &str) -> Result<[ClusterAdmissionPolicy; 3], String> {
    let root = workspace_root();
    let protect = ClusterAdmissionPolicy::load(&root.join("deploy/policy.yaml"))?;
    let audit = ClusterAdmissionPolicy::load(&root.join("deploy/policy-audit.yaml"))?;
    let namespaced = protect.variant(
        "memcached-namespaced",
        &json!({"podSecurityLevel": "baseline"}),
    );
    for policy in [&protect, &audit, &namespaced] {
        if !policy.module().ends_with(&format!("/{repository}")) {
            return Err(format!(
                "ClusterAdmissionPolicy {} loads {}, but the artifact metadata.yml describes is {repository}",
                policy.name,
                policy.module()
            ));
        }
    }
    Ok([protect, audit, namespaced])
}

/// `io.kubewarden.policy.version` from metadata.yml: the artifact's tag is `v<version>`.
fn policy_version() -> Result<String, String> {
    let path = workspace_root().join("metadata.yml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let metadata: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    metadata["annotations"]["io.kubewarden.policy.version"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} has no io.kubewarden.policy.version", path.display()))
}

/// The ServiceAccount and cluster-wide read access Kubewarden's
/// `kubewarden-defaults` chart gives policy-server (its
/// `policy-server-rbac.yaml`, rendered with the chart's default permissions
/// from `../shared/kubewarden`), and a kubeconfig at `path` authenticating
/// as that ServiceAccount: context-aware policies read what Kubewarden users'
/// policy-servers may read.
fn install_policy_server_rbac(
    kubectl: &Kubectl,
    cluster: &Cluster,
    path: &Path,
) -> Result<(), String> {
    kubectl.ok(&["create", "namespace", KUBEWARDEN_NAMESPACE])?;
    kubectl.apply(&policy_server_rbac(cluster)?)?;
    write_service_account_kubeconfig(kubectl, KUBEWARDEN_NAMESPACE, "policy-server", path)
}

/// `kubewarden-defaults`' `policy-server-rbac.yaml`, rendered.
fn policy_server_rbac(cluster: &Cluster) -> Result<String, String> {
    Helm::new(&cluster.kubeconfig, &cluster.workdir).template_chart(
        &kubewarden_charts().join("kubewarden-defaults"),
        "kubewarden-defaults",
        KUBEWARDEN_NAMESPACE,
        // The permissions the node suite gives it (Memcacheds among them).
        &[
            "--show-only",
            "templates/policy-server-rbac.yaml",
            "-f",
            &workspace_root()
                .join("e2e-tests/testbed/kubewarden-values.yaml")
                .to_string_lossy(),
        ],
    )
}

/// A kubeconfig authenticating as ServiceAccount `name` of `namespace`, so
/// the scenarios exercise its RBAC (the controller's: `deploy/rbac.yaml`).
fn write_service_account_kubeconfig(
    kubectl: &Kubectl,
    namespace: &str,
    name: &str,
    path: &Path,
) -> Result<(), String> {
    let token = kubectl.ok(&["create", "token", name, "-n", namespace, "--duration=24h"])?;
    let admin: Value =
        serde_json::from_str(&kubectl.ok(&["config", "view", "--raw", "--minify", "-o", "json"])?)
            .map_err(|e| e.to_string())?;
    let cluster = &admin["clusters"][0]["cluster"];
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token.trim()}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": name}}],
        "current-context": "e2e",
    });
    std::fs::write(path, config.to_string()).map_err(|e| e.to_string())
}
