//! memcached-controller: reconcile Memcached resources, or print the CRD, or
//! render the objects a CR produces.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{ArgAction, Parser, Subcommand};
use memcached_api::quantity::Quantity;
use memcached_api::validation::{DEFAULT_MEMORY_OVERHEAD, Options};
use memcached_controller::address::ListenAddress;
use memcached_controller::endpoints::HttpSettings;
use memcached_controller::network_policy::Access;
use memcached_controller::{crd, render, run};

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
                identity,
                validation: args.memory_overhead,
                access: Access {
                    operator_namespace: args.lease_namespace.clone(),
                    operator_labels: args.operator_pod_labels.into_iter().collect(),
                    metrics_namespaces: args
                        .metrics_namespaces
                        .into_iter()
                        .filter(|n| !n.is_empty())
                        .collect(),
                },
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(run::run(settings))?;
        }
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
