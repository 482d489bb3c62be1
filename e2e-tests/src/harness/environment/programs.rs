//! Where the programs and charts under test are: built here (`target/`),
//! or Kubewarden's engines and charts from `$KWCTL`, `$POLICY_SERVER`,
//! `$KUBEWARDEN_CHARTS`, `PATH` or `../shared`.

use std::path::{Path, PathBuf};

use crate::workspace_root;

/// Where the programs under test are.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The Go control plane (`$E2E_CLUSTER`, default `target/e2e/local-cluster`).
    pub cluster: PathBuf,
    /// kubectl built from the same release (`$E2E_KUBECTL`, default `target/e2e/kubectl`).
    pub kubectl: PathBuf,
    /// CNCF Distribution's registry (`$E2E_REGISTRY`, default `target/e2e/registry`).
    pub registry: PathBuf,
    /// The controller (`$MEMCACHED_CONTROLLER`, default `target/debug/memcached-controller`).
    pub controller: PathBuf,
    /// memcached (`$MEMCACHED`, default `memcached` on PATH).
    pub memcached: PathBuf,
    /// Kubewarden's kwctl (`$KWCTL`, on PATH, or `../shared/bin/kwctl`).
    pub kwctl: PathBuf,
    /// Kubewarden's policy-server (`$POLICY_SERVER`, on PATH, or `../shared/bin/policy-server`).
    pub policy_server: PathBuf,
    /// The real node's kubelet, containerd, CoreDNS and images (`$E2E_NODE_BIN`, default `target/e2e`).
    pub node: PathBuf,
}

impl Binaries {
    /// From the environment, with the defaults `make e2e` builds. `Ok(None)`
    /// when Kubewarden's engines are not installed and `../shared/bin` (where
    /// CI keeps them) does not exist either: the caller skips; an error when
    /// `../shared/bin` exists but lacks them.
    pub fn from_env() -> Result<Option<Self>, String> {
        let target = workspace_root().join("target");
        let pick =
            |var: &str, default: PathBuf| std::env::var_os(var).map_or(default, PathBuf::from);
        let shared = workspace_root().join("../shared/bin");
        let (Some(kwctl), Some(policy_server)) = (
            kubewarden_tool("KWCTL", "kwctl", &shared),
            kubewarden_tool("POLICY_SERVER", "policy-server", &shared),
        ) else {
            let missing = "Kubewarden's kwctl and policy-server are needed (set KWCTL and \
                POLICY_SERVER, put them on PATH, or in ../shared/bin)";
            return if shared.is_dir() {
                Err(format!(
                    "{missing}; {} exists but lacks them",
                    shared.display()
                ))
            } else {
                eprintln!("skipped: {missing}");
                Ok(None)
            };
        };
        Ok(Some(Binaries {
            cluster: pick("E2E_CLUSTER", target.join("e2e/local-cluster")),
            kubectl: pick("E2E_KUBECTL", target.join("e2e/kubectl")),
            registry: pick("E2E_REGISTRY", target.join("e2e/registry")),
            controller: pick(
                "MEMCACHED_CONTROLLER",
                cargo_build_dir().join("memcached-controller"),
            ),
            memcached: pick("MEMCACHED", PathBuf::from("memcached")),
            kwctl,
            policy_server,
            node: pick("E2E_NODE_BIN", target.join("e2e")),
        }))
    }
}

/// The Cargo build directory this program was built into (`target/debug`):
/// the controller built by the same `cargo test` or `cargo build` is there.
fn cargo_build_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().unwrap_or(Path::new("."));
    if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// `$var` when set and not empty, else `name` on PATH, else `shared/name`.
fn kubewarden_tool(var: &str, name: &str, shared: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .chain([shared.to_path_buf()])
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The directory of Kubewarden's charts: `$KUBEWARDEN_CHARTS`, else
/// `../shared/kubewarden`.
pub fn kubewarden_charts() -> PathBuf {
    std::env::var_os("KUBEWARDEN_CHARTS")
        .filter(|dir| !dir.is_empty())
        .map_or_else(
            || workspace_root().join("../shared/kubewarden"),
            PathBuf::from,
        )
}
