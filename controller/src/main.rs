//! memcached-controller: reconcile Memcached resources, or print the CRD, or
//! render the objects a CR produces.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use memcached_controller::{crd, render};

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
    /// Print the CustomResourceDefinition (both versions) as YAML.
    Crd,
    /// Print every object the controller would apply for the CRs in a file, without a cluster.
    Render {
        /// YAML file with one or more Memcached documents (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
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
