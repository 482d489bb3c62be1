//! memcached-controller: reconcile Memcached resources, or print the CRD, or
//! render the objects a CR produces.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand};
use memcached_api::quantity::Quantity;
use memcached_api::validation::{DEFAULT_MEMORY_OVERHEAD, Options};
use memcached_controller::cluster::hash_key;
use memcached_controller::commands::{crd, render};
use memcached_controller::objects::desired::Installation;
use memcached_controller::objects::network_policy::Access;
use memcached_controller::run;
use memcached_controller::serve::address::ListenAddress;
use memcached_controller::serve::endpoints::HttpSettings;

#[derive(Parser)]
#[command(
    version,
    about = "Kubernetes controller for Memcached (memcached.c5c3.io)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reconcile Memcached resources (the default in the container image).
    ///
    /// A flag given twice takes its last value, as Go flags do, so a
    /// deployment's extra arguments can override the ones it sets.
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinition (both versions) as YAML.
    Crd,
    /// Print every object the controller would apply for the CRs in a file, without a cluster.
    Render {
        /// YAML file with one or more Memcached documents (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
    },
    /// Check a running installation (what the Helm chart's `helm test` runs):
    /// a Ready controller pod of it holds its Lease, and a Memcached created
    /// in a namespace it watches is reconciled (then deleted). Exits 1 saying
    /// what is wrong.
    Check(Box<CheckArgs>),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Namespace of the installation: its controller pods and its Lease.
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: String,
    /// Labels of its controller pods, `key=value,...`.
    #[arg(long, required = true, value_delimiter = ',', action = ArgAction::Set, value_parser = parse_label)]
    pod_labels: Vec<(String, String)>,
    /// The Lease its leader holds; without it (no leader election) the Lease is not checked.
    #[arg(long)]
    lease_name: Option<String>,
    /// Namespace of the Memcached the check creates: one the installation watches (default: --namespace).
    #[arg(long)]
    memcached_namespace: Option<String>,
    /// Name of that Memcached (0 replicas; deleted afterwards).
    #[arg(long, default_value = "memcached-operator-check")]
    memcached_name: String,
    /// Seconds the whole check may take.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// This check's own pod (in --namespace), given to --owner-service-account first: a
    /// finished check pod (kept for `kubectl logs`) then goes with the installation.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    /// The installation's ServiceAccount (in --namespace) that owns --pod-name.
    #[arg(long)]
    owner_service_account: Option<String>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Address of /metrics: `:PORT` (every address, IPv4 and IPv6),
    /// `IPV4:PORT` or `[IPV6]:PORT`.
    #[arg(long, env = "METRICS_ADDRESS", default_value = ":8080")]
    metrics_address: ListenAddress,
    /// Serve /metrics over TLS to scrapers whose bearer token passes a
    /// TokenReview and a SubjectAccessReview (`get` on `/metrics`);
    /// `--metrics-secure=false`: plain HTTP, open to anyone who reaches it.
    #[arg(long, env = "METRICS_SECURE", default_value_t = true, action = ArgAction::Set,
        num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    metrics_secure: bool,
    /// Directory with `tls.crt` and `tls.key` for /metrics (re-read when they
    /// change); without it a self-signed certificate is made at start.
    #[arg(long, env = "METRICS_CERT_DIR")]
    metrics_cert_dir: Option<PathBuf>,
    /// Address of /healthz and /readyz (plain HTTP), written as `--metrics-address`.
    #[arg(long, env = "HEALTH_ADDRESS", default_value = ":8081")]
    health_address: ListenAddress,
    /// Comma-separated namespaces to watch (default: all).
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',', action = ArgAction::Set)]
    watch_namespaces: Vec<String>,
    /// Reconcile only while holding the coordination.k8s.io Lease.
    #[arg(long, env = "LEADER_ELECTION", default_value_t = false)]
    leader_election: bool,
    /// Namespace of the Lease (normally the controller's own).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "memcached-operator-system"
    )]
    lease_namespace: String,
    /// Name of the Lease.
    #[arg(long, env = "LEASE_NAME", default_value = "memcached-operator")]
    lease_name: String,
    /// Name of the Secret, in the controller's namespace, holding the key of
    /// the pod-template Secret hash (read, or created at the first start).
    #[arg(long, env = "HASH_KEY_SECRET", default_value = hash_key::SECRET_NAME)]
    hash_key_secret: String,
    /// Identity in the Lease: the pod name (downward API), else the host name.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Memory reserved on top of maxMemoryMB in the container limit; must
    /// equal the policy's `memoryOverhead` setting so both validate alike.
    #[arg(long, env = "MEMORY_OVERHEAD", default_value = DEFAULT_MEMORY_OVERHEAD, value_parser = parse_overhead)]
    memory_overhead: Options,
    /// Labels of the operator's pods, admitted to port 11211 by every
    /// Memcached NetworkPolicy (its namespace is POD_NAMESPACE).
    #[arg(long, env = "OPERATOR_POD_LABELS", value_delimiter = ',', action = ArgAction::Set, default_value = "app.kubernetes.io/name=memcached-operator", value_parser = parse_label)]
    operator_pod_labels: Vec<(String, String)>,
    /// Namespaces admitted to the exporter's metrics port (Prometheus).
    #[arg(
        long,
        env = "METRICS_NAMESPACES",
        value_delimiter = ',',
        action = ArgAction::Set,
        default_value = "monitoring"
    )]
    metrics_namespaces: Vec<String>,
    /// Labels on the ServiceMonitor of every Memcached with monitoring,
    /// `key=value,...` (e.g. `release=kube-prometheus-stack`, what its
    /// Prometheus selects by); a Memcached's own `additionalLabels` win.
    /// Empty: none.
    #[arg(long, env = "SERVICE_MONITOR_LABELS", value_delimiter = ',', action = ArgAction::Set, value_parser = parse_optional_label)]
    service_monitor_labels: Vec<Option<(String, String)>>,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", default_value = "json", value_parser = ["json", "text"])]
    log_format: String,
}

/// Exit 1 with the error in one line (its causes joined by `: `), never
/// a backtrace: what is wrong and how to fix it.
fn main() -> std::process::ExitCode {
    match command(Cli::parse().command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(args) => {
            init_logs(&args.log_format);
            let identity = args
                .identity
                .filter(|i| !i.is_empty())
                .or_else(hostname)
                .ok_or_else(|| anyhow::anyhow!("no POD_NAME and no host name: pass --identity"))?;
            let settings = run::Settings {
                http: HttpSettings {
                    metrics_address: args.metrics_address,
                    health_address: args.health_address,
                    metrics_secure: args.metrics_secure,
                    metrics_cert_dir: args.metrics_cert_dir,
                },
                watch_namespaces: args
                    .watch_namespaces
                    .into_iter()
                    .filter(|n| !n.is_empty())
                    .collect(),
                leader_election: args.leader_election,
                lease_namespace: args.lease_namespace.clone(),
                lease_name: args.lease_name,
                hash_key_secret: args.hash_key_secret,
                identity,
                validation: args.memory_overhead,
                installation: Installation {
                    access: Access {
                        operator_namespace: args.lease_namespace.clone(),
                        operator_labels: args.operator_pod_labels.into_iter().collect(),
                        metrics_namespaces: args
                            .metrics_namespaces
                            .into_iter()
                            .filter(|n| !n.is_empty())
                            .collect(),
                    },
                    service_monitor_labels: args
                        .service_monitor_labels
                        .into_iter()
                        .flatten()
                        .collect(),
                },
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(run::run(settings))?;
        }
        Command::Check(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(check(*args))?,
        Command::Crd => emit(&crd::crd_yaml()),
        Command::Render { file } => {
            let yaml = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file)
                    .with_context(|| format!("reading {}", file.display()))?
            };
            let (objects, notes) = render::render(&yaml).map_err(anyhow::Error::msg)?;
            for note in notes {
                eprintln!("{note}");
            }
            emit(&objects);
        }
    }
    Ok(())
}

/// The validation options for a `--memory-overhead` quantity.
fn parse_overhead(text: &str) -> Result<Options, String> {
    let quantity = Quantity::parse(text).map_err(|e| format!("{text:?}: {e}"))?;
    if quantity.is_negative() {
        return Err(format!("{text:?} is negative"));
    }
    Ok(Options {
        memory_overhead: quantity,
        memory_overhead_text: text.to_string(),
    })
}

/// `key=value`.
fn parse_label(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{text:?} is not key=value"))
}

/// `key=value`, or nothing (an empty list).
fn parse_optional_label(text: &str) -> Result<Option<(String, String)>, String> {
    (!text.is_empty()).then(|| parse_label(text)).transpose()
}

/// The kernel's host name (in a pod: the pod name).
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn emit(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().with_current_span(true).init();
    } else {
        builder.init();
    }
}

/// `check`: the installation's pods, its Lease, a Memcached reconciled.
async fn check(args: CheckArgs) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};

    let client = kube::Client::try_default().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    if let (Some(pod), Some(account)) = (&args.pod_name, &args.owner_service_account) {
        match owned_pod(&client, &args.namespace, pod, account).await {
            Ok(()) => println!(
                "ok: pod {pod} is owned by ServiceAccount {account}: it goes with the installation"
            ),
            Err(error) => println!("note: pod {pod} stays after the installation: {error:#}"),
        }
    }
    let selector = args
        .pod_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let (namespace, selector) = (args.namespace.as_str(), selector.as_str());
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods = &pods;
    let ready_pods = move || async move {
        let list = pods.list(&ListParams::default().labels(selector)).await?;
        let ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && pod_ready(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        anyhow::ensure!(
            !ready.is_empty(),
            "no Ready controller pod among the {} in {namespace} labelled {selector}",
            list.items.len()
        );
        Ok(ready)
    };
    let ready = until(deadline, ready_pods).await?;
    println!("ok: Ready controller pods: {}", ready.join(", "));

    if let Some(lease) = args.lease_name.as_deref() {
        let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let leases = &leases;
        // A handover takes at most the Lease's duration (15 s): another holder after 30 s stays.
        let handover = deadline.min(tokio::time::Instant::now() + Duration::from_secs(30));
        let holder = until(handover, move || async move {
            let holder = leases
                .get(lease)
                .await?
                .spec
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty())
                .ok_or_else(|| anyhow::anyhow!("the Lease {namespace}/{lease} has no holder"))?;
            let ready = ready_pods().await?;
            anyhow::ensure!(
                ready.contains(&holder),
                "the Lease {namespace}/{lease} is held by {holder}, no Ready controller pod of this \
                 installation ({selector}): another installation in {namespace} uses the same \
                 Lease name, and this one never leads (set another leaderElection.leaseName)"
            );
            Ok(holder)
        })
        .await?;
        println!("ok: {holder} holds the Lease {namespace}/{lease}");
    }

    let mc_namespace = args.memcached_namespace.as_deref().unwrap_or(namespace);
    let name = args.memcached_name.as_str();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("memcached.c5c3.io", "v1beta1", "Memcached"),
        "memcacheds",
    );
    let memcacheds: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), mc_namespace, &resource);
    let memcacheds = &memcacheds;
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": mc_namespace},
        "spec": {"replicas": 0},
    }))?;
    let gone = move || async move {
        match memcacheds.get_opt(name).await? {
            None => Ok(()),
            Some(_) => {
                let _ = memcacheds.delete(name, &DeleteParams::default()).await;
                anyhow::bail!("Memcached {mc_namespace}/{name} is still there")
            }
        }
    };
    // Left over by an interrupted check.
    until(deadline, gone).await?;
    let started = tokio::time::Instant::now();
    memcacheds
        .create(&kube::api::PostParams::default(), &object)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create Memcached {mc_namespace}/{name}: {e}"))?;
    let reconciled = until(deadline, move || async move {
        let mc = memcacheds.get(name).await?;
        let generation = mc.metadata.generation;
        let status = &mc.data["status"];
        anyhow::ensure!(
            generation.is_some() && status["observedGeneration"].as_i64() == generation,
            "Memcached {mc_namespace}/{name} (generation {generation:?}) not reconciled: status {status}"
        );
        let degraded = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Degraded" && c["status"] == "True");
        anyhow::ensure!(
            degraded.is_none(),
            "Memcached {mc_namespace}/{name} is Degraded: {}",
            degraded.map(|c| c["message"].to_string()).unwrap_or_default()
        );
        Ok(status["state"].as_str().unwrap_or_default().to_string())
    })
    .await;
    let took = started.elapsed();
    let deleted = until(deadline, gone).await;
    let state = reconciled?;
    deleted?;
    println!(
        "ok: Memcached {mc_namespace}/{name} reconciled {:.1}s after its creation ({state}), deleted",
        took.as_secs_f64()
    );
    Ok(())
}

/// Make the ServiceAccount `account` the owner of the pod `pod` (both in
/// `namespace`): the garbage collector deletes the pod with it.
async fn owned_pod(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    account: &str,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    use kube::api::{Api, Patch, PatchParams};

    let uid = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .get(account)
        .await?
        .metadata
        .uid
        .ok_or_else(|| anyhow::anyhow!("ServiceAccount {account} has no uid"))?;
    let patch = serde_json::json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "name": account,
        "uid": uid,
    }]}});
    Api::<Pod>::namespaced(client.clone(), namespace)
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The pod's Ready condition is True.
fn pod_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `attempt` again every second until it succeeds; its last error once `deadline` passed.
async fn until<T, F, Fut>(deadline: tokio::time::Instant, mut attempt: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["memcached-controller", "run"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        match cli.command {
            Command::Run(args) => *args,
            _ => panic!("not run"),
        }
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        let args = run_args(&["--log-format", "json", "--log-format", "text"]);
        assert_eq!(args.log_format, "text");
        let args = run_args(&["--watch-namespaces", "a,b", "--watch-namespaces", "c"]);
        assert_eq!(args.watch_namespaces, ["c"]);
        let args = run_args(&["--watch-namespaces", "a,b"]);
        assert_eq!(args.watch_namespaces, ["a", "b"]);
    }

    #[test]
    fn the_hash_key_secret_is_named_by_a_flag() {
        assert_eq!(run_args(&[]).hash_key_secret, "memcached-operator-hash-key");
        let args = run_args(&["--hash-key-secret=rel-memcached-operator-hash-key"]);
        assert_eq!(args.hash_key_secret, "rel-memcached-operator-hash-key");
    }

    #[test]
    fn check_flags() {
        let cli = Cli::try_parse_from([
            "memcached-controller",
            "check",
            "--namespace=ops",
            "--pod-labels=app.kubernetes.io/instance=rel,app.kubernetes.io/name=memcached-operator",
            "--lease-name=rel-memcached-operator",
            "--memcached-namespace=team-a",
            "--memcached-name=rel-memcached-operator-test",
            "--owner-service-account=rel-memcached-operator",
            "--pod-name=rel-memcached-operator-test",
            "--timeout=60",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Command::Check(args) = cli.command else {
            panic!("not check")
        };
        assert_eq!(args.namespace, "ops");
        assert_eq!(
            args.pod_labels,
            [
                ("app.kubernetes.io/instance".into(), "rel".into()),
                ("app.kubernetes.io/name".into(), "memcached-operator".into())
            ]
        );
        assert_eq!(args.lease_name.as_deref(), Some("rel-memcached-operator"));
        assert_eq!(args.memcached_namespace.as_deref(), Some("team-a"));
        assert_eq!(
            args.owner_service_account.as_deref(),
            Some("rel-memcached-operator")
        );
        assert_eq!(
            args.pod_name.as_deref(),
            Some("rel-memcached-operator-test")
        );
        assert_eq!(args.timeout, 60);
        let missing = Cli::try_parse_from(["memcached-controller", "check", "--namespace=ops"]);
        assert!(missing.is_err(), "--pod-labels is required");
    }

    #[test]
    fn service_monitor_labels_are_key_value_pairs() {
        assert!(run_args(&[]).service_monitor_labels.is_empty());
        let args = run_args(&["--service-monitor-labels=release=kube-prometheus-stack,team=ops"]);
        assert_eq!(
            args.service_monitor_labels,
            [
                Some(("release".into(), "kube-prometheus-stack".into())),
                Some(("team".into(), "ops".into()))
            ]
        );
        // An empty value (SERVICE_MONITOR_LABELS="") is no label, not an error.
        let args = run_args(&["--service-monitor-labels="]);
        assert!(
            args.service_monitor_labels
                .iter()
                .flatten()
                .next()
                .is_none()
        );
        let cli = Cli::try_parse_from([
            "memcached-controller",
            "run",
            "--service-monitor-labels=release",
        ]);
        assert!(cli.is_err(), "a label without a value was accepted");
    }

    #[test]
    fn endpoint_flags() {
        let args = run_args(&[]);
        assert_eq!(args.metrics_address, ListenAddress::AnyHost(8080));
        assert_eq!(args.health_address, ListenAddress::AnyHost(8081));
        assert!(
            args.metrics_secure,
            "secure by default, as controller-runtime"
        );
        assert_eq!(args.metrics_cert_dir, None);
        let args = run_args(&[
            "--metrics-address",
            ":9443",
            "--health-address=[::1]:9000",
            "--metrics-secure=false",
            "--metrics-cert-dir=/certs",
        ]);
        assert_eq!(args.metrics_address, ListenAddress::AnyHost(9443));
        assert_eq!(
            args.health_address,
            ListenAddress::Exact("[::1]:9000".parse().unwrap())
        );
        assert!(!args.metrics_secure);
        assert_eq!(args.metrics_cert_dir, Some(PathBuf::from("/certs")));
        assert!(run_args(&["--metrics-secure=false", "--metrics-secure"]).metrics_secure);
        for bad in [
            &["--metrics-address", "8080"][..],
            &["--health-address", "localhost:8081"],
            &["--metrics-secure=maybe"],
        ] {
            let cli = Cli::try_parse_from(["memcached-controller", "run"].iter().chain(bad));
            assert!(cli.is_err(), "{bad:?} was accepted");
        }
    }
}
