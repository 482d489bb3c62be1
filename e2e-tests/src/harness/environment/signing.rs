//! The signed artifact as a release makes it: a cosign key pair
//! (`target/tools/cosign`, v2), `deploy/push-policy.sh` (what `make push`
//! runs: kwctl push, then cosign signs the pushed digest), and the
//! ConfigMaps a PolicyServer names to require that key
//! (`e2e-tests/testbed/verification-config.sh`, `e2e-tests/testbed/sigstore-trust-config.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::Env;
use crate::harness::environment::kubewarden::KUBEWARDEN_NAMESPACE;
use crate::workspace_root;

/// The password the suite's keys are written with.
const PASSWORD: &str = "e2e-signing";

/// A cosign key pair: `<name>.key` (encrypted) and `<name>.pub`.
pub struct KeyPair {
    /// The private key.
    pub key: PathBuf,
    /// The public key (PEM).
    pub public: PathBuf,
}

/// cosign (`$COSIGN`, default `target/tools/cosign`).
fn cosign() -> PathBuf {
    std::env::var_os("COSIGN")
        .filter(|path| !path.is_empty())
        .map_or_else(
            || workspace_root().join("target/tools/cosign"),
            PathBuf::from,
        )
}

/// Generate the key pair `name` in `dir`.
pub fn key_pair(dir: &Path, name: &str) -> Result<KeyPair, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let prefix = dir.join(name);
    run(Command::new(cosign())
        .args(["generate-key-pair", "--output-key-prefix"])
        .arg(&prefix)
        .env("COSIGN_PASSWORD", PASSWORD))?;
    Ok(KeyPair {
        key: prefix.with_extension("key"),
        public: prefix.with_extension("pub"),
    })
}

/// `deploy/push-policy.sh` of `annotated-policy.wasm` to `reference`
/// (`registry://...` in the suite's registry), signed with `key` or, without
/// one, unsigned on purpose (`SIGN=no`). Returns the immutable reference.
pub fn push(env: &Env, reference: &str, key: Option<&KeyPair>) -> Result<String, String> {
    let mut command = Command::new(workspace_root().join("deploy/push-policy.sh"));
    command
        .arg(workspace_root().join("annotated-policy.wasm"))
        .arg(reference)
        .env("KWCTL", &env.binaries.kwctl)
        .env("COSIGN", cosign())
        .env("SOURCES_PATH", &env.registry.sources);
    match key {
        Some(pair) => command
            .env("COSIGN_KEY", &pair.key)
            .env("COSIGN_PASSWORD", PASSWORD),
        None => command.env("SIGN", "no").env_remove("COSIGN_KEY"),
    };
    let out = run(&mut command)?;
    out.lines()
        .last()
        .map(str::to_string)
        .ok_or_else(|| format!("deploy/push-policy.sh printed nothing for {reference}"))
}

/// The ConfigMap `name` in `kubewarden` with the verification config
/// requiring `public`'s signature.
pub fn verification_config_map(name: &str, public: &Path) -> Result<String, String> {
    run(
        Command::new(workspace_root().join("e2e-tests/testbed/verification-config.sh"))
            .args(["--configmap", name, KUBEWARDEN_NAMESPACE])
            .arg(public)
            .arg("memcached-operator release"),
    )
}

/// The ConfigMap `name` in `kubewarden` with the Sigstore trust config that
/// lets policy-server verify offline (without it, it verifies nothing).
pub fn sigstore_trust_config_map(name: &str) -> Result<String, String> {
    run(
        Command::new(workspace_root().join("e2e-tests/testbed/sigstore-trust-config.sh")).args([
            "--configmap",
            name,
            KUBEWARDEN_NAMESPACE,
        ]),
    )
}

/// Run `command`; its stdout, or its stderr as the error.
fn run(command: &mut Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{:?}: {}",
            command.get_program(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
