//! kubectl, built from the same Kubernetes release as the control plane.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// kubectl bound to one kubeconfig.
#[derive(Clone, Debug)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

/// What one kubectl run printed.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error (where kubectl prints rejections).
    pub stderr: String,
}

impl Kubectl {
    /// kubectl at `bin` using `kubeconfig`.
    pub fn new(bin: &Path, kubeconfig: &Path) -> Self {
        Kubectl {
            bin: bin.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
        }
    }

    /// Run with `args`, feeding `stdin` when given.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Outcome {
        let spawned = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                return Outcome {
                    success: false,
                    stdout: String::new(),
                    stderr: format!("cannot run {}: {e}", self.bin.display()),
                };
            }
        };
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(input.as_bytes());
        }
        match child.wait_with_output() {
            Ok(output) => Outcome {
                success: output.status.success(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            },
            Err(e) => Outcome {
                success: false,
                stdout: String::new(),
                stderr: e.to_string(),
            },
        }
    }

    /// Run with `args`; its stdout, or an error carrying the command and stderr.
    pub fn ok(&self, args: &[&str]) -> Result<String, String> {
        Self::checked(args, self.run(args, None))
    }

    /// `kubectl apply -f -` of a manifest (YAML or JSON).
    pub fn apply(&self, manifest: &str) -> Result<String, String> {
        let args = ["apply", "-f", "-"];
        Self::checked(&args, self.run(&args, Some(manifest)))
    }

    /// Wait (at most 60 s) until the CRD `name` is Established. `kubectl
    /// wait` fails at once instead of waiting while a new CRD has no
    /// conditions yet, so that answer is asked again.
    pub fn wait_established(&self, name: &str) -> Result<(), String> {
        let crd = format!("crd/{name}");
        let args = ["wait", "--for=condition=Established", "--timeout=60s", &crd];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match self.ok(&args) {
                Err(e) if e.contains("accessor error") && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                outcome => return outcome.map(drop),
            }
        }
    }

    /// `kubectl get <args> -o json`, decoded.
    pub fn get(&self, args: &[&str]) -> Result<Value, String> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&all)?).map_err(|e| format!("kubectl get: {e}"))
    }

    fn checked(args: &[&str], outcome: Outcome) -> Result<String, String> {
        if outcome.success {
            Ok(outcome.stdout)
        } else {
            Err(format!(
                "kubectl {}: {}",
                args.join(" "),
                outcome.stderr.trim()
            ))
        }
    }
}
