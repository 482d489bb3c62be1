//! Real helm (`$HELM`, default `target/tools/helm`, built by `make
//! target/tools/helm`) with the chart of `deploy/helm/memcached-operator`
//! (or Kubewarden's), against the e2e API server.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

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

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.bin)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .output()
            .map_err(|e| {
                format!(
                    "cannot run {} ({e}); build it with `make target/tools/helm`",
                    self.bin.display()
                )
            })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "helm {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }
}

fn path(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}
