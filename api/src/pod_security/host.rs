//! The checks of what a pod shares with its node: host namespaces, host
//! ports, host paths and other volume types, probe and lifecycle hosts.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe, Volume};

use crate::pod_security::pod::{Pod, Violation, join_quote, named, pluralize, violation};

/// hostNamespaces: no host network, PID or IPC namespace.
pub(super) fn host_namespaces(p: &Pod) -> Option<Violation> {
    let spec = p.spec;
    let shared = [
        (spec.host_network, "hostNetwork=true"),
        (spec.host_pid, "hostPID=true"),
        (spec.host_ipc, "hostIPC=true"),
    ];
    let shared: Vec<&str> = (shared.iter())
        .filter(|(on, _)| *on == Some(true))
        .map(|(_, detail)| *detail)
        .collect();
    if shared.is_empty() {
        return None;
    }
    violation(p.spec_path.clone(), "host namespaces", shared.join(", "))
}

/// hostPathVolumes: none.
pub(super) fn host_path_volumes(p: &Pod) -> Option<Violation> {
    let host: Vec<&str> = (p.spec.volumes.iter().flatten())
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.as_str())
        .collect();
    if host.is_empty() {
        return None;
    }
    violation(
        p.spec_path.clone(),
        "hostPath volumes",
        named("volume", "volumes", &host),
    )
}

/// hostPorts: none.
pub(super) fn host_ports(p: &Pod) -> Option<Violation> {
    let host_ports = |c: &Container| -> Vec<i32> {
        let ports = c.ports.iter().flatten();
        ports
            .filter_map(|p| p.host_port)
            .filter(|p| *p != 0)
            .collect()
    };
    let bad: Vec<&str> = (p.containers())
        .filter(|c| !host_ports(c).is_empty())
        .map(|c| c.name.as_str())
        .collect();
    if bad.is_empty() {
        return None;
    }
    let ports: BTreeSet<String> = (p.containers())
        .flat_map(host_ports)
        .map(|port| port.to_string())
        .collect();
    let ports: Vec<String> = ports.into_iter().collect();
    violation(
        p.spec_path.clone(),
        "hostPort",
        format!(
            "{} {} {} {}",
            named("container", "containers", &bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// hostProbesAndHostLifecycle: probes and lifecycle handlers on the pod's own address.
pub(super) fn host_probes_and_lifecycle(p: &Pod) -> Option<Violation> {
    let probe = |probe: Option<&Probe>| {
        let http = probe
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.host.clone());
        let tcp = probe
            .and_then(|p| p.tcp_socket.as_ref())
            .and_then(|t| t.host.clone());
        [http, tcp]
    };
    let handler = |handler: Option<&LifecycleHandler>| {
        let http = handler
            .and_then(|h| h.http_get.as_ref())
            .and_then(|h| h.host.clone());
        let tcp = handler
            .and_then(|h| h.tcp_socket.as_ref())
            .and_then(|t| t.host.clone());
        [http, tcp]
    };
    let hosts = |c: &Container| -> Vec<String> {
        let lifecycle = c.lifecycle.as_ref();
        (probe(c.liveness_probe.as_ref()).into_iter())
            .chain(probe(c.readiness_probe.as_ref()))
            .chain(probe(c.startup_probe.as_ref()))
            .chain(handler(lifecycle.and_then(|l| l.post_start.as_ref())))
            .chain(handler(lifecycle.and_then(|l| l.pre_stop.as_ref())))
            .flatten()
            .filter(|host| !host.is_empty())
            .collect()
    };
    let bad: BTreeSet<&str> = (p.containers())
        .filter(|c| !hosts(c).is_empty())
        .map(|c| c.name.as_str())
        .collect();
    if bad.is_empty() {
        return None;
    }
    let forbidden: BTreeSet<String> = p.containers().flat_map(hosts).collect();
    let (bad, forbidden): (Vec<&str>, Vec<String>) =
        (bad.into_iter().collect(), forbidden.into_iter().collect());
    violation(
        p.spec_path.clone(),
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            named("container", "containers", &bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                forbidden.len()
            ),
            join_quote(&forbidden)
        ),
    )
}

/// restrictedVolumes: only the volume types that grant nothing on the node.
pub(super) fn restricted_volumes(p: &Pod) -> Option<Violation> {
    let bad: Vec<(&str, &str)> = (p.spec.volumes.iter().flatten())
        .filter_map(|v| restricted_type(v).map(|kind| (v.name.as_str(), kind)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad.iter().map(|(name, _)| *name).collect();
    let kinds: BTreeSet<&str> = bad.iter().map(|(_, kind)| *kind).collect();
    let kinds: Vec<&str> = kinds.into_iter().collect();
    violation(
        p.spec_path.clone(),
        "restricted volume types",
        format!(
            "{} {} {} {}",
            named("volume", "volumes", &names),
            pluralize("uses", "use", names.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                kinds.len()
            ),
            join_quote(&kinds)
        ),
    )
}

/// The type of a volume restricted refuses, `None` for the types it allows.
fn restricted_type(v: &Volume) -> Option<&'static str> {
    let allowed = [
        v.config_map.is_some(),
        v.csi.is_some(),
        v.downward_api.is_some(),
        v.empty_dir.is_some(),
        v.ephemeral.is_some(),
        v.image.is_some(),
        v.persistent_volume_claim.is_some(),
        v.projected.is_some(),
        v.secret.is_some(),
    ];
    if allowed.contains(&true) {
        return None;
    }
    let restricted = [
        (v.host_path.is_some(), "hostPath"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.nfs.is_some(), "nfs"),
        (v.iscsi.is_some(), "iscsi"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.rbd.is_some(), "rbd"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.cinder.is_some(), "cinder"),
        (v.cephfs.is_some(), "cephfs"),
        (v.flocker.is_some(), "flocker"),
        (v.fc.is_some(), "fc"),
        (v.azure_file.is_some(), "azureFile"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
    ];
    let kind = restricted
        .iter()
        .find(|(set, _)| *set)
        .map(|(_, kind)| *kind);
    Some(kind.unwrap_or("unknown"))
}
