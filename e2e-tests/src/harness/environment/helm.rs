//! Real helm (`$HELM`, default `target/tools/helm`, built by `make
//! target/tools/helm`) with the chart of `deploy/helm/memcached-operator`
//! (or Kubewarden's), against the e2e API server; and the chart published
//! as a release publishes it (`deploy/helm/push-chart.sh`, what `make
//! push-chart` runs: helm push, then cosign v2 signs the pushed digest).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

/// The password of the cosign keys the chart scenarios generate.
pub const KEY_PASSWORD: &str = "e2e-chart-signing";

/// helm bound to one kubeconfig, its cache and config under a work dir.
pub struct Helm {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Helm {
    /// helm as `kubeconfig`'s user; its state under `<workdir>/helm`.
    pub fn new(kubeconfig: &Path, workdir: &Path) -> Self {
        let bin = std::env::var_os("HELM")
            .map_or_else(|| workspace_root().join("target/tools/helm"), PathBuf::from);
        Helm {
            bin,
            kubeconfig: kubeconfig.to_path_buf(),
            home: workdir.join("helm"),
        }
    }

    /// The chart's directory.
    pub fn chart() -> PathBuf {
        workspace_root().join("deploy/helm/memcached-operator")
    }

    /// `helm template <release> <chart> -n <namespace> <args>`: the manifests.
    pub fn template(
        &self,
        release: &str,
        namespace: &str,
        args: &[&str],
    ) -> Result<String, String> {
        self.template_chart(&Self::chart(), release, namespace, args)
    }

    /// `helm template` of another chart (a directory).
    pub fn template_chart(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut all = vec!["template", release, path(chart), "--namespace", namespace];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// `helm install` into `namespace` (created), waiting until every
    /// Deployment's pods are Ready (their readiness probes pass).
    pub fn install(&self, release: &str, namespace: &str, args: &[&str]) -> Result<String, String> {
        self.install_chart(&Self::chart(), release, namespace, args)
    }

    /// [`Helm::install`] of another chart (a directory).
    pub fn install_chart(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut all = vec![
            "install",
            release,
            path(chart),
            "--namespace",
            namespace,
            "--create-namespace",
            "--wait",
            "--timeout=120s",
        ];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// `helm install` of a chart reference (`oci://...`, a path, a packaged
    /// chart) with `args`, waiting as [`Helm::install`] does.
    pub fn install_reference(
        &self,
        reference: &str,
        release: &str,
        namespace: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut all = vec![
            "install",
            release,
            reference,
            "--namespace",
            namespace,
            "--create-namespace",
            "--wait",
            "--timeout=120s",
        ];
        all.extend_from_slice(args);
        self.run(&all)
    }

    /// `helm uninstall`, waiting until its objects are gone.
    pub fn uninstall(&self, release: &str, namespace: &str) -> Result<String, String> {
        self.run(&[
            "uninstall",
            release,
            "--namespace",
            namespace,
            "--wait",
            "--timeout=120s",
        ])
    }

    /// `helm test --logs`: the release's test hooks run; their output.
    pub fn test(&self, release: &str, namespace: &str) -> Result<String, String> {
        self.run(&[
            "test",
            release,
            "--namespace",
            namespace,
            "--logs",
            "--timeout=180s",
        ])
    }

    /// helm with `args`, as this kubeconfig's user: its output.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = self.command().args(args).output().map_err(|e| {
            format!(
                "cannot run {} ({e}); build it with `make target/tools/helm`",
                self.bin.display()
            )
        })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            // What it printed too: `helm test --logs` prints the test pods' logs on stdout.
            let stdout = String::from_utf8_lossy(&output.stdout);
            Err(format!(
                "helm {}: {}{}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim(),
                if stdout.trim().is_empty() { "" } else { "\n" },
                stdout.trim()
            ))
        }
    }
}

impl Helm {
    /// The helm binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// A command with helm's environment (kubeconfig, helm's homes) and no
    /// arguments: `helm` itself, or a shell running a documented command line.
    pub fn environment(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"));
        command
    }

    fn command(&self) -> Command {
        self.environment(&self.bin)
    }

    /// `deploy/helm/push-chart.sh` of `chart` to `repository` (`oci://...`,
    /// a plain-HTTP registry), signed with `key` (a cosign key written with
    /// [`KEY_PASSWORD`]) or, without one, unsigned on purpose (`SIGN=no`).
    /// The immutable reference it prints (`oci://...@sha256:...`).
    pub fn push_chart(
        &self,
        chart: &Path,
        repository: &str,
        key: Option<&Path>,
    ) -> Result<String, String> {
        let mut command = self.environment(workspace_root().join("deploy/helm/push-chart.sh"));
        command
            .arg(chart)
            .arg(repository)
            .env("HELM", &self.bin)
            .env("COSIGN", cosign())
            .env("PLAIN_HTTP", "yes");
        match key {
            Some(key) => command
                .env("COSIGN_KEY", key)
                .env("COSIGN_PASSWORD", KEY_PASSWORD)
                .env_remove("SIGN"),
            None => command.env("SIGN", "no").env_remove("COSIGN_KEY"),
        };
        let out = output(&mut command)?;
        out.lines()
            .last()
            .map(str::to_string)
            .ok_or_else(|| format!("push-chart.sh printed nothing for {repository}"))
    }
}

/// cosign (`$COSIGN`, default `target/tools/cosign`, built by `make target/tools/cosign`).
pub fn cosign() -> PathBuf {
    std::env::var_os("COSIGN")
        .filter(|path| !path.is_empty())
        .map_or_else(
            || workspace_root().join("target/tools/cosign"),
            PathBuf::from,
        )
}

/// A cosign key pair `<dir>/<name>.key` (written with [`KEY_PASSWORD`]) and `<dir>/<name>.pub`.
pub fn key_pair(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prefix = dir.join(name);
    output(
        Command::new(cosign())
            .args(["generate-key-pair", "--output-key-prefix"])
            .arg(&prefix)
            .env("COSIGN_PASSWORD", KEY_PASSWORD),
    )?;
    Ok((prefix.with_extension("key"), prefix.with_extension("pub")))
}

/// `cosign verify` of `reference` (`oci://` or not, by digest) under `public`,
/// offline (no transparency log), from a plain-HTTP registry: its output, or
/// why it refused.
pub fn verify_chart(reference: &str, public: &Path) -> Result<String, String> {
    let image = reference.strip_prefix("oci://").unwrap_or(reference);
    output(
        Command::new(cosign())
            .args(["verify", "--key"])
            .arg(public)
            .args([
                "--insecure-ignore-tlog=true",
                "--allow-http-registry",
                "--allow-insecure-registry",
                image,
            ]),
    )
}

/// Run `command`: its stdout, or its stderr as the error.
fn output(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?}: {}{}",
            command.get_program(),
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    }
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}
