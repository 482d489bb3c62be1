//! The containers of a Memcached's pods: memcached, and the exporter
//! sidecar with monitoring on; their names, ports, probes and mounts.

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ExecAction, Lifecycle, LifecycleHandler, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::defaults::Defaulted;
use crate::render::args::{self, TLS_DIR};
use crate::render::volumes::{non_empty, volume_mounts};
use crate::render::warm_restart;
use crate::types::MemcachedSpec;

/// The memcached container's name in the pod template.
pub const MEMCACHED_CONTAINER: &str = "memcached";
/// The exporter sidecar's name (with monitoring on).
pub const EXPORTER_CONTAINER: &str = "exporter";
/// The names of the containers of `spec`'s pods, in the pod's order:
/// memcached, and the exporter with monitoring on.
pub fn names(spec: &MemcachedSpec) -> &'static [&'static str] {
    if spec.monitoring_enabled() {
        &[MEMCACHED_CONTAINER, EXPORTER_CONTAINER]
    } else {
        &[MEMCACHED_CONTAINER]
    }
}

/// The containers of `spec`'s pods ([`names`]), memcached running `image`.
pub(crate) fn containers(spec: &Defaulted, image: &str) -> Vec<Container> {
    let container = |name: &&str| match *name {
        MEMCACHED_CONTAINER => memcached_container(spec, image.to_string()),
        _ => exporter_container(spec),
    };
    names(spec).iter().map(container).collect()
}

/// Port memcached serves on.
pub const MEMCACHED_PORT: i32 = 11211;
/// Port the exporter sidecar serves metrics on.
pub const METRICS_PORT: i32 = 9150;

fn memcached_container(spec: &Defaulted, image: String) -> Container {
    let probe = |initial_delay, period| Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("memcached".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(period),
        ..Default::default()
    };
    let pre_stop = pre_stop_script(spec).map(|script| Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["/bin/sh".into(), "-c".into(), script]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    // With warm restarts a supervisor runs memcached with the args of the
    // pod's annotation, which can change without a new pod.
    let warm = spec.warm_restart_enabled();
    Container {
        name: MEMCACHED_CONTAINER.into(),
        image: Some(image),
        command: warm.then(warm_restart::command),
        args: (!warm).then(|| args::memcached_args(spec)),
        ports: Some(vec![port("memcached", MEMCACHED_PORT)]),
        liveness_probe: Some(probe(10, 10)),
        readiness_probe: Some(probe(5, 5)),
        resources: spec.resources.clone(),
        security_context: spec
            .security
            .as_ref()
            .and_then(|s| s.container_security_context.clone()),
        lifecycle: pre_stop,
        volume_mounts: non_empty(volume_mounts(spec, true)),
        ..Default::default()
    }
}

/// The preStop hook's shell script: the graceful shutdown delay (endpoints
/// drain while memcached still serves), then with warm restarts the save.
fn pre_stop_script(spec: &Defaulted) -> Option<String> {
    let delay = spec
        .graceful_shutdown_seconds()
        .map(|(delay, _)| format!("sleep {delay}"));
    let save = spec
        .warm_restart_enabled()
        .then(warm_restart::save_and_wait);
    match (delay, save) {
        (Some(delay), Some(save)) => Some(format!("{delay}; {save}")),
        (one, other) => one.or(other),
    }
}

/// The exporter scrapes memcached over localhost; with TLS on it speaks TLS
/// (and presents the server's own certificate when client certificates are required).
fn exporter_container(spec: &Defaulted) -> Container {
    let monitoring = spec.monitoring.clone().unwrap_or_default();
    let mut args = vec![format!("--memcached.address=localhost:{MEMCACHED_PORT}")];
    if spec.tls_enabled() {
        args.extend([
            "--memcached.tls.enable".into(),
            "--memcached.tls.insecure-skip-verify".into(),
        ]);
        if args::client_cert_required(spec) {
            args.extend([
                format!("--memcached.tls.cert-file={TLS_DIR}/{}", args::TLS_CERT_KEY),
                format!("--memcached.tls.key-file={TLS_DIR}/{}", args::TLS_KEY_KEY),
            ]);
        }
    }
    Container {
        name: EXPORTER_CONTAINER.into(),
        image: Some(spec.exporter_image().to_string()),
        args: Some(args),
        ports: Some(vec![port("metrics", METRICS_PORT)]),
        resources: monitoring.exporter_resources,
        security_context: spec
            .security
            .as_ref()
            .and_then(|s| s.container_security_context.clone()),
        volume_mounts: non_empty(volume_mounts(spec, false)),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}
