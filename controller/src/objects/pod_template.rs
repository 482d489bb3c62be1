//! The pod template (memcached and the exporter sidecar) and the metadata
//! shared by the Deployment and the StatefulSet that run it.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EmptyDirVolumeSource, ExecAction, KeyToPath, Lifecycle,
    LifecycleHandler, PodAffinityTerm, PodAntiAffinity, PodSpec, PodTemplateSpec, Probe,
    SecretVolumeSource, TCPSocketAction, TopologySpreadConstraint, Volume, VolumeMount,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::pod_changes::RESTART_TRIGGER_ANNOTATION;
use memcached_api::{Defaulted, Memcached, MemcachedSpec};

use crate::objects::args::{self, AUTH_DIR, AUTH_FILE, TLS_DIR, WARM_RESTART_DIR};
use crate::objects::intent::{self, TemplateStamp};
use crate::objects::labels::{
    self, MEMCACHED_CONTAINER, MEMCACHED_PORT, METRICS_PORT, SECRET_HASH_ANNOTATION,
};
use crate::objects::warm_start;

/// Volume of the authentication Secret.
pub const AUTH_VOLUME: &str = "auth";
/// Volume of the TLS Secret.
pub const TLS_VOLUME: &str = "tls";
/// Memory-backed volume holding memcached's memory file (warm restarts).
pub const WARM_RESTART_VOLUME: &str = "warm-restart";

/// What a workload of either kind is made of.
pub struct Template {
    /// The workload's metadata: name, labels (with the version), owner.
    pub metadata: ObjectMeta,
    /// The pods it runs.
    pub pod: PodTemplateSpec,
}

/// `spec.replicas`, unless the HorizontalPodAutoscaler owns the count.
pub fn replicas(spec: &MemcachedSpec) -> Option<i32> {
    if spec.autoscaling_enabled() {
        None
    } else {
        spec.replicas
    }
}

/// The workload metadata and pod template for `mc`, whose effective
/// (defaulted) spec is `spec`; `auth_key` is the key of the authentication
/// Secret that holds memcached's `-Y` file (see
/// [`crate::cluster::secrets::auth_key`]).
pub fn build(
    mc: &Memcached,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> Template {
    let mut meta = labels::object_meta(mc);
    let image = spec.image().to_string();
    let version = version_label(labels::image_tag(&image));
    meta.labels
        .get_or_insert_default()
        .insert(labels::VERSION_LABEL.into(), version.clone());

    let mut pod_labels = spec.pod_labels.clone().unwrap_or_default();
    pod_labels.extend(labels::selector_labels(mc));
    pod_labels.insert(labels::VERSION_LABEL.into(), version);

    let mut annotations = spec.pod_annotations.clone().unwrap_or_default();
    // With warm restarts the pod reads its args from here (see crate::objects::warm_start).
    if spec.warm_restart_enabled() {
        let args = warm_start::args_annotation(&args::memcached_args(spec));
        annotations.insert(warm_start::ARGS_ANNOTATION.into(), args);
        annotations.insert(labels::IMAGE_ANNOTATION.into(), image.clone());
    }
    if let Some(hash) = secret_hash {
        annotations.insert(SECRET_HASH_ANNOTATION.into(), hash.into());
    }
    if let Some(trigger) = mc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESTART_TRIGGER_ANNOTATION))
    {
        annotations.insert(RESTART_TRIGGER_ANNOTATION.into(), trigger.clone());
    }

    let mut containers = vec![memcached_container(spec, image)];
    if spec.monitoring_enabled() {
        containers.push(exporter_container(spec));
    }
    let ha = spec.high_availability.as_ref();
    let security = spec.security.as_ref();

    let pod = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers,
            security_context: security.and_then(|s| s.pod_security_context.clone()),
            termination_grace_period_seconds: spec
                .graceful_shutdown_seconds()
                .map(|(_, grace)| grace.into()),
            affinity: ha
                .and_then(|h| h.anti_affinity_preset.as_deref())
                .map(|p| anti_affinity(mc, spec, p)),
            topology_spread_constraints: ha
                .and_then(|h| h.topology_spread_constraints.clone())
                .map(|c| spread_these_pods(mc, spec, c)),
            node_selector: spec.node_selector.clone(),
            tolerations: spec.tolerations.clone(),
            image_pull_secrets: spec.image_pull_secrets.clone(),
            volumes: non_empty(volumes(spec, auth_key)),
            // memcached and its exporter never call the API server: no token.
            automount_service_account_token: Some(false),
            ..Default::default()
        }),
    };
    let stamp = TemplateStamp {
        intent: intent::intent(mc, secret_hash),
        template: intent::template_digest(&pod),
        base: Some(intent::base_digest(&pod)),
        spec: Some(intent::intent_spec(mc)),
    };
    stamp.annotate(meta.annotations.get_or_insert_default());
    Template {
        metadata: meta,
        pod,
    }
}

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
        command: warm.then(warm_start::command),
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
    let save = spec.warm_restart_enabled().then(warm_start::save_and_wait);
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
        name: labels::EXPORTER_CONTAINER.into(),
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

/// The Secret names the pods mount: (volume name, Secret name, mount path).
pub fn secret_mounts(spec: &MemcachedSpec) -> Vec<(&'static str, String, &'static str)> {
    let security = spec.security.as_ref();
    let mut mounts = Vec::new();
    if spec.sasl_enabled()
        && let Some(name) = security
            .and_then(|s| s.sasl.as_ref())
            .and_then(|s| s.credentials_secret_ref.as_ref())
    {
        mounts.push((AUTH_VOLUME, name.name.clone(), AUTH_DIR));
    }
    if spec.tls_enabled()
        && let Some(name) = security
            .and_then(|s| s.tls.as_ref())
            .and_then(|t| t.certificate_secret_ref.as_ref())
    {
        mounts.push((TLS_VOLUME, name.name.clone(), TLS_DIR));
    }
    mounts
}

/// The Secret volumes, then those of warm restarts. The authentication
/// Secret's `auth_key` is mounted as [`AUTH_FILE`], the file memcached reads;
/// the key `auth` is mounted as it is, with the Secret's other keys (as
/// before other keys were read: no pod changes).
fn volumes(spec: &Defaulted, auth_key: &str) -> Vec<Volume> {
    let mut volumes: Vec<Volume> = secret_mounts(spec)
        .into_iter()
        .map(|(volume, secret, _)| Volume {
            name: volume.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret),
                items: (volume == AUTH_VOLUME && auth_key != AUTH_FILE).then(|| {
                    vec![KeyToPath {
                        key: auth_key.into(),
                        path: AUTH_FILE.into(),
                        mode: None,
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    if spec.warm_restart_enabled() {
        volumes.push(warm_restart_volume(spec));
        volumes.push(warm_start::run_volume());
    }
    volumes
}

/// tmpfs for the memory file: `maxMemoryMB` (the file's size) plus 1Mi for
/// its `.meta` file. Its pages are memcached's item memory, charged to the
/// container once, as without warm restarts.
fn warm_restart_volume(spec: &Defaulted) -> Volume {
    let max_memory_mb = spec.max_memory_mb();
    Volume {
        name: WARM_RESTART_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity(format!("{}Mi", i64::from(max_memory_mb) + 1))),
        }),
        ..Default::default()
    }
}

/// memcached mounts every Secret and the warm restart volume; the exporter
/// only the TLS Secret, and only when it needs a client certificate.
fn volume_mounts(spec: &MemcachedSpec, memcached: bool) -> Vec<VolumeMount> {
    let mut mounts: Vec<VolumeMount> = secret_mounts(spec)
        .into_iter()
        .filter(|(volume, _, _)| {
            memcached || (*volume == TLS_VOLUME && args::client_cert_required(spec))
        })
        .map(|(volume, _, path)| VolumeMount {
            name: volume.into(),
            mount_path: path.into(),
            read_only: Some(true),
            ..Default::default()
        })
        .collect();
    if memcached && spec.warm_restart_enabled() {
        mounts.push(VolumeMount {
            name: WARM_RESTART_VOLUME.into(),
            mount_path: WARM_RESTART_DIR.into(),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: warm_start::RUN_VOLUME.into(),
            mount_path: warm_start::RUN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    mounts
}

/// Label the StatefulSet controller puts on each of its pods.
pub const STATEFUL_SET_POD_LABEL: &str = "statefulset.kubernetes.io/pod-name";

/// This Memcached's pods, for affinity and spread terms. In StatefulSet mode
/// only the StatefulSet's pods: while a switch from a Deployment runs both,
/// the new pods must not need nodes free of the old ones (with the `hard`
/// preset that would take twice the nodes).
fn instance_pods(mc: &Memcached, spec: &MemcachedSpec) -> LabelSelector {
    let mut match_labels = labels::selector_labels(mc);
    match_labels.remove("app.kubernetes.io/managed-by");
    LabelSelector {
        match_labels: Some(match_labels),
        match_expressions: spec.stateful_set().then(|| {
            vec![LabelSelectorRequirement {
                key: STATEFUL_SET_POD_LABEL.into(),
                operator: "Exists".into(),
                values: None,
            }]
        }),
    }
}

/// A spread constraint without a labelSelector matches no pod (the API
/// server warns so) and spreads nothing: give it this Memcached's pods.
fn spread_these_pods(
    mc: &Memcached,
    spec: &MemcachedSpec,
    mut constraints: Vec<TopologySpreadConstraint>,
) -> Vec<TopologySpreadConstraint> {
    for constraint in &mut constraints {
        constraint
            .label_selector
            .get_or_insert_with(|| instance_pods(mc, spec));
    }
    constraints
}

/// The anti-affinity preset that lets no two of the pods share a node.
pub const HARD_ANTI_AFFINITY: &str = "hard";

/// `spec` asks for [`HARD_ANTI_AFFINITY`].
pub fn hard_anti_affinity(spec: &MemcachedSpec) -> bool {
    let ha = spec.high_availability.as_ref();
    ha.and_then(|h| h.anti_affinity_preset.as_deref()) == Some(HARD_ANTI_AFFINITY)
}

fn anti_affinity(mc: &Memcached, spec: &MemcachedSpec, preset: &str) -> Affinity {
    let term = PodAffinityTerm {
        label_selector: Some(instance_pods(mc, spec)),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    let anti = if preset == HARD_ANTI_AFFINITY {
        PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        }
    } else {
        PodAntiAffinity {
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                WeightedPodAffinityTerm {
                    weight: 100,
                    pod_affinity_term: term,
                },
            ]),
            ..Default::default()
        }
    };
    Affinity {
        pod_anti_affinity: Some(anti),
        ..Default::default()
    }
}

/// A valid label value: at most 63 characters, alphanumeric at both ends.
fn version_label(tag: &str) -> String {
    let cut: String = tag.chars().take(63).collect();
    cut.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}
