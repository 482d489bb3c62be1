//! The real node (`local-cluster --node-bin`, e2e-tests/testbed/local-cluster/node.go): a
//! kubelet on containerd and runc, with CoreDNS for cluster.local, in the
//! suite's network namespace and private PID and mount namespaces. Its
//! images (memcached, the exporter, pause, and the controller's own image
//! packed from the suite's controller binary) come from the suite's
//! registry, pushed before the node starts; what the node ran and left is
//! read from `/proc`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::environment::kubewarden_charts;
use crate::harness::environment::programs::Binaries;
use crate::harness::environment::registry::Registry;
use crate::workspace_root;

/// The real node's name.
pub const NAME: &str = "real-node";
/// Its taint (NoSchedule): only pods that tolerate it run there.
pub const TAINT: &str = "e2e.c5c3.io/real-node";
/// The range its pods' addresses come from.
pub const POD_PREFIX: &str = "10.245.0.";

/// The host-wide sysctls the kubelet writes (node.go restores them).
pub const KUBELET_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// The exporter image the node has: memcached_exporter v0.14.3 from its Go
/// module (the newest release the module proxy here serves; the CRD's
/// default, v0.15.4, is not), so Memcacheds with monitoring on the node name
/// it in `spec.monitoring.exporterImage`.
pub const EXPORTER_IMAGE: &str = "prom/memcached-exporter:v0.14.3";

/// The controller image's repository, as the chart names it by default.
pub const CONTROLLER_REPOSITORY: &str = "c5c3/memcached-operator";

/// The images the node pulls: (tag in the OCI layout, repository:tag in the
/// registry, mirrored for docker.io, registry.k8s.io and ghcr.io). Its
/// `memcached:1.6` is today's memcached (Debian sid's, e2e-tests/testbed/local-cluster/images/memcached-newest.sh);
/// the older release beside it is pushed by its version ([`previous_memcached_image`]).
const IMAGES: [(&str, &str); 5] = [
    ("memcached", "library/memcached:1.6"),
    ("memcached-exporter", EXPORTER_IMAGE),
    ("pause", "pause:catatonit"),
    (
        "faulty-memcached-garbage-stats",
        "c5c3/faulty-memcached:garbage-stats",
    ),
    (
        "faulty-memcached-resets-connections",
        "c5c3/faulty-memcached:resets-connections",
    ),
];

/// An image that listens on memcached's port (its TCP probe passes) and
/// fails every `stats` as `fault` says: `garbage-stats` answers a number
/// that is not one, `resets-connections` resets each connection unanswered.
pub fn faulty_memcached_image(fault: &str) -> String {
    format!("c5c3/faulty-memcached:{fault}")
}

/// Start the registry in `<workdir>-registry` (`workdir` itself is the
/// cluster's, emptied when it starts) and push the node's images to it: the
/// built ones, Kubewarden's, and the controller's image packed by `deploy/image.sh` (as
/// `make image` packs the release build) from the suite's controller binary,
/// tagged with the chart's appVersion.
pub fn start_registry(binaries: &Binaries, workdir: &Path) -> Result<Registry, String> {
    let dir = PathBuf::from(format!("{}-registry", workdir.display()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let registry = Registry::start(&binaries.registry, &dir)?;
    let layout = binaries.node.join("images");
    for (tag, name) in IMAGES {
        push(&layout, tag, &registry, name).map_err(|e| {
            format!("{e} (build the images with `make target/e2e/images/index.json`)")
        })?;
    }
    let previous = previous_memcached_image(binaries)?;
    push(
        &layout,
        PREVIOUS_MEMCACHED,
        &registry,
        &format!("library/{previous}"),
    )?;
    let kubewarden = binaries.node.join("kubewarden/images");
    for (tag, repository) in kubewarden_charts::IMAGES {
        let name = format!("{repository}:{}", kubewarden_charts::VERSION);
        push(&kubewarden, tag, &registry, &name).map_err(|e| {
            format!("{e} (build them with `make target/e2e/kubewarden/images/index.json`)")
        })?;
    }
    let tag = chart_app_version()?;
    let controller = dir.join("controller-image");
    let output = Command::new(workspace_root().join("deploy/image.sh"))
        .arg(&binaries.controller)
        .arg(&controller)
        .arg(&tag)
        .output()
        .map_err(|e| format!("cannot run deploy/image.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "deploy/image.sh: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    push(
        &controller,
        &tag,
        &registry,
        &format!("{CONTROLLER_REPOSITORY}:{tag}"),
    )?;
    Ok(registry)
}

/// The layout tag of the older memcached (the host's, Debian 12's 1.6.18).
const PREVIOUS_MEMCACHED: &str = "memcached-previous";

/// The memcached release an image of the node's layout runs: its
/// `org.opencontainers.image.version` label, as e2e-tests/testbed/local-cluster/images/images.sh set it.
pub fn memcached_release(binaries: &Binaries, tag: &str) -> Result<String, String> {
    let layout = binaries.node.join("images");
    let read = |path: PathBuf| -> Result<Value, String> {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (build the images with `make target/e2e/images/index.json`)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let blob = |descriptor: &Value| -> Result<PathBuf, String> {
        let digest = descriptor["digest"].as_str().unwrap_or_default();
        let (algorithm, hex) = digest
            .split_once(':')
            .ok_or_else(|| format!("a descriptor without a digest: {descriptor}"))?;
        Ok(layout.join("blobs").join(algorithm).join(hex))
    };
    let index = read(layout.join("index.json"))?;
    let manifest = index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .ok_or_else(|| format!("{}: no image tagged {tag}", layout.display()))?;
    let manifest = read(blob(manifest)?)?;
    let config = read(blob(&manifest["config"])?)?;
    config["config"]["Labels"]["org.opencontainers.image.version"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("the image {tag} has no version label"))
}

/// The older memcached release the node has beside today's `memcached:1.6`,
/// as a user names it: `memcached:<version>` (the host's memcached, 1.6.18 on
/// Debian 12): an image to upgrade from.
pub fn previous_memcached_image(binaries: &Binaries) -> Result<String, String> {
    Ok(format!(
        "memcached:{}",
        memcached_release(binaries, PREVIOUS_MEMCACHED)?
    ))
}

/// `skopeo copy` of `tag` in the OCI layout to `name` in the registry.
fn push(layout: &Path, tag: &str, registry: &Registry, name: &str) -> Result<(), String> {
    let output = Command::new("skopeo")
        .args([
            "copy",
            "--quiet",
            "--insecure-policy",
            "--dest-tls-verify=false",
        ])
        .arg(format!("oci:{}:{tag}", layout.display()))
        .arg(format!("docker://{}/{name}", registry.address()))
        .output()
        .map_err(|e| format!("cannot run skopeo: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "skopeo copy of {tag} from {}: {}",
            layout.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The chart's appVersion: the tag of the image it runs by default.
fn chart_app_version() -> Result<String, String> {
    let path = workspace_root().join("deploy/helm/memcached-operator/Chart.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .find_map(|line| line.strip_prefix("appVersion:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .ok_or_else(|| format!("{} has no appVersion", path.display()))
}

/// The `cluster` flags that start the node, pulling from `registry`.
pub fn cluster_args(binaries: &Binaries, registry: &Registry) -> Vec<String> {
    vec![
        "--node-bin".into(),
        binaries.node.display().to_string(),
        "--node-registry".into(),
        registry.address().to_string(),
    ]
}

/// Memcached spec fields that put its pods on the real node.
pub fn scheduling() -> Value {
    json!({
        "nodeSelector": {"type": "real"},
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
    })
}

/// The image `pod`'s first container runs, by digest (`<repo>@sha256:...`):
/// a new reference to the same image, as a patched image would be.
pub fn image_by_digest(pod: &Value) -> Result<String, String> {
    pod["status"]["containerStatuses"][0]["imageID"]
        .as_str()
        .filter(|id| id.contains("@sha256:"))
        .map(str::to_string)
        .ok_or_else(|| format!("the container has no imageID by digest: {}", pod["status"]))
}

/// The kubelet's sysctls as they are now.
pub fn sysctls() -> BTreeMap<&'static str, String> {
    KUBELET_SYSCTLS
        .iter()
        .map(|name| {
            let value =
                std::fs::read_to_string(Path::new("/proc/sys").join(name)).unwrap_or_default();
            (*name, value.trim().to_string())
        })
        .collect()
}

/// The running node as node.go recorded it in `<workdir>/node/state`.
#[derive(Debug)]
pub struct NodeState {
    /// unshare's PID: its descendants are the node's processes.
    pub pid: u32,
    /// The kubelet's cgroup root, created in every hierarchy.
    pub cgroup_root: String,
    /// The node's PID and mount namespaces (`pid:[inode]`, `mnt:[inode]`).
    pub namespaces: Vec<String>,
}

/// One process: its parent, name, resident memory (KiB) and user.
#[derive(Clone, Debug)]
pub struct Process {
    /// Process ID.
    pub pid: u32,
    /// Parent process ID.
    pub ppid: u32,
    /// `comm`.
    pub name: String,
    /// VmRSS in KiB.
    pub rss_kib: u64,
    /// Real user ID.
    pub uid: u32,
}

impl NodeState {
    /// Read the state file of the node running in the cluster at `workdir`.
    pub fn read(workdir: &Path) -> Result<Self, String> {
        let path = workdir.join("node/state");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let field = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(&format!("{key}=")))
                .map(str::to_string)
                .ok_or_else(|| format!("{} has no {key}", path.display()))
        };
        let pid: u32 = field("pid")?.parse().map_err(|e| format!("pid: {e}"))?;
        let catatonit = processes()
            .into_iter()
            .find(|p| p.ppid == pid)
            .ok_or_else(|| format!("unshare ({pid}) has no child"))?;
        let namespaces = ["pid", "mnt"]
            .iter()
            .map(|ns| {
                std::fs::read_link(format!("/proc/{}/ns/{ns}", catatonit.pid))
                    .map(|link| link.display().to_string())
                    .map_err(|e| format!("namespace {ns} of {}: {e}", catatonit.pid))
            })
            .collect::<Result<_, _>>()?;
        Ok(NodeState {
            pid,
            cgroup_root: field("cgroupRoot")?,
            namespaces,
        })
    }

    /// The node's processes (unshare's descendants, containers included).
    pub fn processes(&self) -> Vec<Process> {
        let all = processes();
        let mut members = vec![self.pid];
        let mut found = Vec::new();
        while let Some(parent) = members.pop() {
            for process in all.iter().filter(|p| p.ppid == parent) {
                members.push(process.pid);
                found.push(process.clone());
            }
        }
        found
    }

    /// What teardown left: processes in the node's namespaces, its cgroups,
    /// and mounts of its tmpfs visible here.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for process in processes() {
            for kind in ["pid", "mnt"] {
                let link = std::fs::read_link(format!("/proc/{}/ns/{kind}", process.pid))
                    .map(|l| l.display().to_string())
                    .unwrap_or_default();
                if self.namespaces.contains(&link) {
                    left.push(format!(
                        "process {} ({}) in the node's {link}",
                        process.pid, process.name
                    ));
                }
            }
        }
        if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
            for hierarchy in hierarchies.flatten() {
                let dir = hierarchy
                    .path()
                    .join(self.cgroup_root.trim_start_matches('/'));
                if dir.exists() {
                    left.push(format!("cgroup {}", dir.display()));
                }
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        left.extend(
            mounts
                .lines()
                .filter(|line| line.contains(" e2e-node ") || line.contains("containerd"))
                .map(|line| format!("mount {line}")),
        );
        left
    }
}

/// Resident memory of `processes` by name: (count, KiB).
pub fn memory_by_name(processes: &[Process]) -> BTreeMap<String, (usize, u64)> {
    let mut by_name = BTreeMap::new();
    for process in processes {
        let entry = by_name.entry(process.name.clone()).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += process.rss_kib;
    }
    by_name
}

/// Every process of this PID namespace.
pub fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(key))
                    .map(str::trim)
            };
            let number = |key: &str| {
                field(key)?
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
            };
            Some(Process {
                pid,
                ppid: u32::try_from(number("PPid:")?).ok()?,
                name: field("Name:")?.to_string(),
                rss_kib: number("VmRSS:").unwrap_or(0),
                uid: u32::try_from(number("Uid:")?).ok()?,
            })
        })
        .collect()
}
