//! memcached-controller: reconcile Memcached resources, or print the CRD, or
//! render the objects a CR produces.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
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
    Run(RunArgs),
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
    /// Address of /metrics.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    metrics_address: std::net::SocketAddr,
    /// Address of /healthz and /readyz.
    #[arg(long, env = "HEALTH_ADDRESS", default_value = "0.0.0.0:8081")]
    health_address: std::net::SocketAddr,
    /// Comma-separated namespaces to watch (default: all).
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
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
    /// Identity in the Lease (normally the pod name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", default_value = "json", value_parser = ["json", "text"])]
    log_format: String,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => {
            init_logs(&args.log_format);
            let identity = args
                .identity
                .unwrap_or_else(|| format!("memcached-operator-{}", std::process::id()));
            let settings = run::Settings {
                metrics_address: args.metrics_address,
                health_address: args.health_address,
                watch_namespaces: args
                    .watch_namespaces
                    .into_iter()
                    .filter(|n| !n.is_empty())
                    .collect(),
                leader_election: args.leader_election,
                lease_namespace: args.lease_namespace,
                lease_name: args.lease_name,
                identity,
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
