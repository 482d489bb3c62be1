//! Which updates of a Memcached create pods: the one classification of every
//! spec field, read from what the controller builds (`controller/src/objects/
//! {pod_template,args,deployment,stateful_set,intent}.rs`).
//!
//! The controller renders the pod template from the stored spec: a change of
//! a field that reaches it rolls the workload out, and every pod of a rollout
//! is new. So does a change of the workload's kind, and of the
//! `memcached.c5c3.io/restart-trigger` annotation, which the template
//! carries. More replicas, or autoscaler bounds that let the
//! HorizontalPodAutoscaler add pods, create pods without a rollout. Nothing
//! else does: the PodDisruptionBudget, the Service, the NetworkPolicy, the
//! ServiceMonitor, the server-list ConfigMap, scaling down, other metadata.
//!
//! An image change with warm restarts on is applied to the running pods in
//! place. Pod Security admission judges each such pod update again (an image
//! change is significant to it: `isSignificantPodUpdate` in
//! k8s.io/pod-security-admission) and skips the in-place updates that change
//! only the pod's annotations (new args, a Secret hash); any pod the workload
//! creates later gets the new template, so it counts as creating pods here too.
//!
//! [`template_fields`] destructures every struct of the spec exhaustively:
//! a field added to one of them does not compile until it is classified.
//!
//! [`restart`] says what an update does to the pods that run, for the
//! warning that tells `kubectl apply` before the cache is lost: nothing,
//! memcached restarted warm in its own pod (`controller/src/rollout/
//! in_place.rs`: warm restarts on before and after, and the template changes
//! only in memcached's image and args with the same memory geometry), or the
//! pods replaced, cold.

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde::Serialize;
use serde_json::Value;

use crate::extra_args::memory_file;
use crate::field::Path;
use crate::memcached_options::{SPEC_FIELDS, config_args};
use crate::types::{
    AutoscalingSpec, GracefulShutdownSpec, HighAvailabilitySpec, MemcachedConfig, MemcachedSpec,
    MonitoringSpec, NetworkPolicySpec, PdbSpec, SaslSpec, SecuritySpec, ServiceMonitorSpec,
    ServiceSpec, TlsSpec, WarmRestartSpec,
};

/// Annotation of a Memcached that the controller copies to the pod template
/// to force a rollout.
pub const RESTART_TRIGGER_ANNOTATION: &str = "memcached.c5c3.io/restart-trigger";

/// A Memcached as far as its pods go: the defaulted spec the controller
/// renders, and the restart trigger of its metadata.
#[derive(Clone, Copy, Debug)]
pub struct PodSource<'a> {
    /// The spec, defaulted as the controller defaults it.
    pub spec: &'a MemcachedSpec,
    /// The value of [`RESTART_TRIGGER_ANNOTATION`].
    pub restart_trigger: Option<&'a str>,
    /// The pods the workload runs now (`status.replicas`), when known.
    pub running: Option<i32>,
}

/// The first change from `old` to `new` that creates pods: the field that
/// makes it (`spec.memcached.maxMemoryMB`, `spec.replicas`, ...), or `None`
/// when the update creates none.
pub fn pod_creating_change(old: &PodSource<'_>, new: &PodSource<'_>) -> Option<Path> {
    if old.restart_trigger != new.restart_trigger {
        return Some(Path::new("metadata.annotations").key(RESTART_TRIGGER_ANNOTATION));
    }
    let before = template_fields(old.spec);
    let after = template_fields(new.spec);
    let changed = before
        .iter()
        .zip(&after)
        .find(|((_, a), (_, b))| a != b)
        .map(|(_, (field, _))| Path::new(&format!("spec.{field}")));
    changed.or_else(|| added_pods(old, new.spec))
}

/// Every input of the pod template, by field (under `spec`), as JSON: a
/// field that reaches the pods only in some cases (the exporter's image
/// only with monitoring on) counts only then.
fn template_fields(spec: &MemcachedSpec) -> Vec<(&'static str, Value)> {
    // Exhaustive, here and below: a new field must be classified.
    let MemcachedSpec {
        replicas: _,               // creates pods when raised: `added_pods`
        autoscaling: _,            // likewise (the HorizontalPodAutoscaler's bounds)
        workload,                  // another workload: every pod is new
        server_list_config_map: _, // a ConfigMap
        image,
        resources,
        memcached,
        high_availability,
        warm_restart,
        monitoring,
        security,
        network_policy: _, // a NetworkPolicy
        service: _,        // the Service
        pod_labels,
        pod_annotations,
        node_selector,
        tolerations,
        image_pull_secrets,
    } = spec;
    // Every field is an argument (one per row of the option table, and
    // extraArgs); maxMemoryMB also sizes the warm restart volume.
    let config = memcached.clone().unwrap_or_default();
    let high_availability = high_availability.clone();
    let present = high_availability.is_some();
    let HighAvailabilitySpec {
        anti_affinity_preset, // the pods' affinity, when highAvailability is present
        topology_spread_constraints,
        pod_disruption_budget, // a PodDisruptionBudget
        graceful_shutdown,
    } = high_availability.unwrap_or_default();
    let PdbSpec {
        enabled: _,
        min_available: _,
        max_unavailable: _,
    } = pod_disruption_budget.unwrap_or_default();
    let GracefulShutdownSpec {
        enabled: shutdown_enabled,
        pre_stop_delay_seconds, // the preStop hook, when enabled
        termination_grace_period_seconds,
    } = graceful_shutdown.unwrap_or_default();
    let WarmRestartSpec {
        enabled: warm_restart_enabled, // the command, a volume, the preStop hook
    } = warm_restart.clone().unwrap_or_default();
    let MonitoringSpec {
        enabled: monitoring_enabled, // the exporter container
        exporter_image,
        exporter_resources,
        service_monitor,
    } = monitoring.clone().unwrap_or_default();
    let ServiceMonitorSpec {
        additional_labels: _, // a ServiceMonitor
        interval: _,
        scrape_timeout: _,
    } = service_monitor.unwrap_or_default();
    let SecuritySpec {
        pod_security_context,
        container_security_context, // every container's
        sasl,
        tls,
        network_policy: _, // a NetworkPolicy
    } = security.clone().unwrap_or_default();
    let SaslSpec {
        enabled: sasl_enabled, // an argument and a Secret volume
        credentials_secret_ref,
    } = sasl.unwrap_or_default();
    let TlsSpec {
        enabled: tls_enabled, // arguments of both containers and a Secret volume
        certificate_secret_ref,
        enable_client_cert,
    } = tls.unwrap_or_default();
    let AutoscalingSpec {
        enabled: _,      // `added_pods`
        min_replicas: _, // `added_pods`
        max_replicas: _, // `added_pods`
        metrics: _,      // when the autoscaler scales within its bounds, not whether
        behavior: _,     // likewise
    } = spec.autoscaling.clone().unwrap_or_default();
    let NetworkPolicySpec {
        enabled: _,
        allowed_sources: _,
    } = spec.network_policy.clone().unwrap_or_default();
    let ServiceSpec { annotations: _ } = spec.service.clone().unwrap_or_default();

    let on = |enabled: Option<bool>| enabled == Some(true);
    let exporter: Option<(Option<String>, Option<ResourceRequirements>)> =
        on(monitoring_enabled).then_some((exporter_image, exporter_resources));
    let shutdown =
        on(shutdown_enabled).then_some((pre_stop_delay_seconds, termination_grace_period_seconds));
    let sasl = on(sasl_enabled).then_some(credentials_secret_ref);
    let tls = on(tls_enabled).then_some((certificate_secret_ref, enable_client_cert));
    let options = (SPEC_FIELDS.iter())
        .filter_map(|option| option.field)
        .map(|field| (field.key, json(&field.get(&config))));
    let mut fields = vec![
        ("workload", json(workload)),
        ("image", json(image)),
        ("resources", json(resources)),
    ];
    fields.extend(options);
    fields.extend([
        ("memcached.extraArgs", json(&config.extra_args)),
        (
            "highAvailability.antiAffinityPreset",
            json(&present.then_some(anti_affinity_preset)),
        ),
        (
            "highAvailability.topologySpreadConstraints",
            json(&topology_spread_constraints),
        ),
        ("highAvailability.gracefulShutdown", json(&shutdown)),
        ("warmRestart.enabled", json(&on(warm_restart_enabled))),
        ("monitoring", json(&exporter)),
        ("security.podSecurityContext", json(&pod_security_context)),
        (
            "security.containerSecurityContext",
            json(&container_security_context),
        ),
        ("security.sasl", json(&sasl)),
        ("security.tls", json(&tls)),
        ("podLabels", json(pod_labels)),
        ("podAnnotations", json(pod_annotations)),
        ("nodeSelector", json(node_selector)),
        ("tolerations", json(tolerations)),
        ("imagePullSecrets", json(image_pull_secrets)),
    ]);
    fields
}

fn json(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The field of `new` that lets the workload run more pods than `old` does:
/// more replicas than it runs, or autoscaler bounds that let the
/// HorizontalPodAutoscaler add some.
fn added_pods(old: &PodSource<'_>, new: &MemcachedSpec) -> Option<Path> {
    let spec = Path::new("spec");
    let bounds = |s: &MemcachedSpec| {
        let a = s.autoscaling.as_ref();
        (
            a.and_then(|a| a.min_replicas).unwrap_or(1),
            a.and_then(|a| a.max_replicas).unwrap_or(1),
        )
    };
    let replicas = |s: &MemcachedSpec| s.replicas.unwrap_or(crate::defaults::REPLICAS);
    let autoscaling = spec.child("autoscaling");
    match (old.spec.autoscaling_enabled(), new.autoscaling_enabled()) {
        (false, false) => (replicas(new) > replicas(old.spec)).then(|| spec.child("replicas")),
        // The autoscaler ran at least its minimum.
        (true, false) => {
            let running = old.running.unwrap_or(bounds(old.spec).0);
            (replicas(new) > running).then(|| spec.child("replicas"))
        }
        (false, true) => {
            (bounds(new).1 > replicas(old.spec)).then(|| autoscaling.child("maxReplicas"))
        }
        (true, true) => {
            let ((old_min, old_max), (min, max)) = (bounds(old.spec), bounds(new));
            if min > old_min {
                Some(autoscaling.child("minReplicas"))
            } else {
                (max > old_max).then(|| autoscaling.child("maxReplicas"))
            }
        }
    }
}

/// What an update does to the pods that run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// No running pod restarts. More replicas add new, empty pods: they
    /// restart nothing.
    None,
    /// Applied in place: memcached restarts in its own pod and restores its
    /// memory file.
    Warm,
    /// The pods restart cold.
    Cold(Cold),
}

/// An update that restarts the pods cold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cold {
    /// The field that forces it (`spec.memcached.maxMemoryMB`).
    pub field: Path,
    /// Why that field does.
    pub because: ColdBecause,
    /// The pods that restart: those running (`status.replicas`), else the
    /// old spec's, and no more than the new spec keeps.
    pub pods: i32,
}

/// Why an update restarts the pods cold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdBecause {
    /// memcached's memory geometry changes: a saved memory file restores
    /// only into the geometry it was saved from.
    Geometry,
    /// Warm restarts are turned on: the pods need the memory-backed volume.
    WarmRestartsOn,
    /// Warm restarts are turned off.
    WarmRestartsOff,
    /// Another kind of workload: all its pods start together, empty, and the
    /// old workload goes once they are ready.
    Workload,
    /// A change of the pods a running pod cannot take; `warm_restarts`:
    /// they are on before and after (else any change is one).
    NewPods {
        /// Warm restarts are on before and after.
        warm_restarts: bool,
    },
}

impl Cold {
    /// The warning `kubectl apply` shows; `None` when no pod runs.
    pub fn warning(&self) -> Option<String> {
        let loss = match self.pods {
            ..=0 => return None,
            1 => "1 pod restarts cold and loses the items it holds".to_string(),
            n => format!("{n} pods restart cold, one at a time, and lose the items they hold"),
        };
        let field = &self.field;
        Some(match self.because {
            ColdBecause::Geometry => format!(
                "{field} changes memcached's memory geometry, which a warm restart cannot keep: {loss}"
            ),
            ColdBecause::WarmRestartsOn => format!(
                "{field} turns warm restarts on, which needs new pods (a memory-backed volume for memcached's \
                 memory file): {loss}; later changes of memcached alone restart it warm"
            ),
            ColdBecause::Workload => format!(
                "{field} moves the cache to another kind of workload: its {} start together, empty, \
                 and the running ones are deleted once they are ready, so the whole cache starts cold \
                 at once",
                match self.pods {
                    1 => "1 pod".to_string(),
                    n => format!("{n} pods"),
                }
            ),
            ColdBecause::WarmRestartsOff => {
                format!("{field} turns warm restarts off, which needs new pods: {loss}")
            }
            ColdBecause::NewPods {
                warm_restarts: true,
            } => format!(
                "{field} changes the pods beyond memcached's image and arguments, which a warm restart \
                 cannot take, so they are replaced: {loss}"
            ),
            ColdBecause::NewPods {
                warm_restarts: false,
            } => format!(
                "{field} changes the pod template, so the pods are replaced: {loss}; with warm restarts \
                 (spec.warmRestart.enabled: true) a change of memcached alone (its image, threads, \
                 maxConnections, verbosity, extraArgs outside the memory geometry) would keep the cache"
            ),
        })
    }
}

/// What the update from `old` to `new` does to the pods that run: no
/// restart, a warm restart in place, or a cold restart and the field that
/// forces it. Warm takes warm restarts on before and after, and changes of
/// the memcached image, of `spec.memcached` (memcached's args) and of
/// `enableClientCert` without the exporter (an arg too) alone, with the
/// memory geometry unchanged; anything else that changes the pod template
/// replaces the pods.
pub fn restart(old: &PodSource<'_>, new: &PodSource<'_>) -> Restart {
    let warm = (
        old.spec.warm_restart_enabled(),
        new.spec.warm_restart_enabled(),
    );
    let cold = |field: Path, because| {
        Restart::Cold(Cold {
            field,
            because,
            pods: restarting_pods(old, new.spec),
        })
    };
    let new_pods = ColdBecause::NewPods {
        warm_restarts: warm == (true, true),
    };
    if old.restart_trigger != new.restart_trigger {
        let trigger = Path::new("metadata.annotations").key(RESTART_TRIGGER_ANNOTATION);
        return cold(trigger, new_pods);
    }
    if old.spec.stateful_set() != new.spec.stateful_set() {
        return cold(Path::new("spec.workload"), ColdBecause::Workload);
    }
    let before = template_fields(old.spec);
    let after = template_fields(new.spec);
    let changed: Vec<&'static str> = (before.iter().zip(&after))
        .filter(|((_, a), (_, b))| a != b)
        .map(|((field, _), _)| *field)
        .collect();
    let spec = |field: &str| Path::new(&format!("spec.{field}"));
    let Some(first) = changed.first() else {
        return Restart::None;
    };
    match warm {
        (false, true) => return cold(spec(WARM_RESTART), ColdBecause::WarmRestartsOn),
        (true, false) => return cold(spec(WARM_RESTART), ColdBecause::WarmRestartsOff),
        (false, false) => return cold(spec(first), new_pods),
        (true, true) => {}
    }
    let in_place = |field: &&str| {
        taken_in_place(field) || (*field == "security.tls" && tls_in_place(old.spec, new.spec))
    };
    if let Some(field) = changed.iter().find(|f| !in_place(f)) {
        return cold(spec(field), new_pods);
    }
    if memory_geometry(old.spec) != memory_geometry(new.spec) {
        // Only `spec.memcached` reaches the geometry.
        let field = changed.iter().find(|f| f.starts_with("memcached."));
        return cold(spec(field.unwrap_or(first)), ColdBecause::Geometry);
    }
    Restart::Warm
}

/// `spec.warmRestart.enabled`, under `spec`.
const WARM_RESTART: &str = "warmRestart.enabled";

/// A field of [`template_fields`] a running pod takes in place with warm
/// restarts on: the memcached image, and memcached's args, every field of
/// `spec.memcached` (the geometry among them is judged apart).
fn taken_in_place(field: &str) -> bool {
    field == "image" || field.starts_with("memcached.")
}

/// A change of TLS a running pod takes in place: on before and after with
/// the same Secret (the volume), so only memcached's args change; the
/// exporter, when on, would get new args and mounts.
fn tls_in_place(old: &MemcachedSpec, new: &MemcachedSpec) -> bool {
    let secret = |s: &MemcachedSpec| {
        let tls = s.security.as_ref().and_then(|s| s.tls.as_ref());
        tls.and_then(|t| t.certificate_secret_ref.clone())
    };
    old.tls_enabled()
        && new.tls_enabled()
        && secret(old) == secret(new)
        && !old.monitoring_enabled()
        && !new.monitoring_enabled()
}

/// The options of memcached's args from `spec.memcached` that decide
/// whether a saved memory file restores ([`memory_file::geometry`]). The
/// args the rest of the spec adds (the memory file's path, SASL, TLS) are
/// the same with warm restarts on before and after, or no geometry.
fn memory_geometry(spec: &MemcachedSpec) -> Vec<String> {
    let unset = MemcachedConfig::default();
    let config = spec.memcached.as_ref().unwrap_or(&unset);
    memory_file::geometry(&config_args(config))
}

/// The pods an update of `old` to `new` restarts: those running
/// (`status.replicas`) else the replicas of `old`'s spec (the autoscaler's
/// minimum when it owns them), no more than `new` keeps. Pods added by
/// scaling up start empty but restart nothing.
fn restarting_pods(old: &PodSource<'_>, new: &MemcachedSpec) -> i32 {
    let replicas = |s: &MemcachedSpec| s.replicas.unwrap_or(crate::defaults::REPLICAS);
    let running = old.running.unwrap_or_else(|| {
        if old.spec.autoscaling_enabled() {
            let autoscaling = old.spec.autoscaling.as_ref();
            autoscaling.and_then(|a| a.min_replicas).unwrap_or(1)
        } else {
            replicas(old.spec)
        }
    });
    if new.autoscaling_enabled() {
        let most = new.autoscaling.as_ref().and_then(|a| a.max_replicas);
        most.map_or(running, |most| running.min(most))
    } else {
        running.min(replicas(new))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apply_defaults;

    /// The field whose change from `old` to `new` creates pods, with `running`
    /// pods before.
    fn change(old: Value, new: Value, running: Option<i32>) -> Option<String> {
        let defaulted = |spec: Value| apply_defaults(serde_json::from_value(spec).unwrap());
        let (old, new) = (defaulted(old), defaulted(new));
        let source = |spec, running| PodSource {
            spec,
            restart_trigger: None,
            running,
        };
        pod_creating_change(&source(&old, running), &source(&new, None)).map(|p| p.to_string())
    }

    /// One named case per field: the spec before, after, and the field that
    /// creates pods (`None`: the update creates none).
    macro_rules! classified {
        ($($name:ident: $old:tt => $new:tt, $expected:expr;)*) => {$(
            #[test]
            fn $name() {
                let expected: Option<&str> = $expected;
                assert_eq!(change(json!($old), json!($new), None).as_deref(), expected);
            }
        )*};
    }

    classified! {
        nothing: {} => {}, None;
        replicas_up: {"replicas": 2} => {"replicas": 3}, Some("spec.replicas");
        replicas_down: {"replicas": 3} => {"replicas": 2}, None;
        replicas_from_the_default: {} => {"replicas": 2}, Some("spec.replicas");
        workload: {} => {"workload": "StatefulSet"}, Some("spec.workload");
        workload_default_spelled_out: {} => {"workload": "Deployment"}, None;
        server_list_config_map: {} => {"serverListConfigMap": "servers"}, None;
        image: {} => {"image": "memcached:1.6.39"}, Some("spec.image");
        image_default_spelled_out: {} => {"image": "memcached:1.6"}, None;
        resources: {} => {"resources": {"limits": {"memory": "1Gi"}}}, Some("spec.resources");
        max_memory: {} => {"memcached": {"maxMemoryMB": 128}}, Some("spec.memcached.maxMemoryMB");
        max_connections: {} => {"memcached": {"maxConnections": 10}}, Some("spec.memcached.maxConnections");
        threads: {} => {"memcached": {"threads": 2}}, Some("spec.memcached.threads");
        max_item_size: {} => {"memcached": {"maxItemSize": "2m"}}, Some("spec.memcached.maxItemSize");
        verbosity: {} => {"memcached": {"verbosity": 1}}, Some("spec.memcached.verbosity");
        extra_args: {} => {"memcached": {"extraArgs": ["-R", "30"]}}, Some("spec.memcached.extraArgs");
        high_availability_adds_affinity: {} => {"highAvailability": {}},
            Some("spec.highAvailability.antiAffinityPreset");
        anti_affinity_preset: {"highAvailability": {}} => {"highAvailability": {"antiAffinityPreset": "hard"}},
            Some("spec.highAvailability.antiAffinityPreset");
        topology_spread: {"highAvailability": {}} => {"highAvailability": {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}},
            Some("spec.highAvailability.topologySpreadConstraints");
        disruption_budget: {"highAvailability": {}} => {"highAvailability": {
            "podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}}, None;
        graceful_shutdown: {"highAvailability": {}} => {"highAvailability": {"gracefulShutdown": {"enabled": true}}},
            Some("spec.highAvailability.gracefulShutdown");
        graceful_shutdown_disabled: {"highAvailability": {}} => {"highAvailability": {
            "gracefulShutdown": {"preStopDelaySeconds": 5}}}, None;
        warm_restart: {} => {"warmRestart": {"enabled": true}}, Some("spec.warmRestart.enabled");
        warm_restart_disabled: {} => {"warmRestart": {"enabled": false}}, None;
        monitoring: {} => {"monitoring": {"enabled": true}}, Some("spec.monitoring");
        exporter_image: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true, "exporterImage": "e:2"}},
            Some("spec.monitoring");
        exporter_resources: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true,
            "exporterResources": {"requests": {"cpu": "10m"}}}}, Some("spec.monitoring");
        exporter_image_without_monitoring: {} => {"monitoring": {"exporterImage": "e:2"}}, None;
        service_monitor: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true,
            "serviceMonitor": {"interval": "1m", "additionalLabels": {"release": "p"}}}}, None;
        pod_security_context: {} => {"security": {"podSecurityContext": {"runAsUser": 1000}}},
            Some("spec.security.podSecurityContext");
        container_security_context: {} => {"security": {"containerSecurityContext": {}}},
            Some("spec.security.containerSecurityContext");
        sasl: {} => {"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "a"}}}},
            Some("spec.security.sasl");
        sasl_disabled: {} => {"security": {"sasl": {"credentialsSecretRef": {"name": "a"}}}}, None;
        tls: {} => {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}}},
            Some("spec.security.tls");
        tls_client_cert: {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}}} =>
            {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}, "enableClientCert": true}}},
            Some("spec.security.tls");
        network_policy: {} => {"networkPolicy": {"enabled": true}}, None;
        service: {} => {"service": {"annotations": {"a": "b"}}}, None;
        pod_labels: {} => {"podLabels": {"team": "a"}}, Some("spec.podLabels");
        pod_annotations: {} => {"podAnnotations": {"a": "b"}}, Some("spec.podAnnotations");
        node_selector: {} => {"nodeSelector": {"disk": "ssd"}}, Some("spec.nodeSelector");
        tolerations: {} => {"tolerations": [{"operator": "Exists"}]}, Some("spec.tolerations");
        image_pull_secrets: {} => {"imagePullSecrets": [{"name": "r"}]}, Some("spec.imagePullSecrets");
        enabling_autoscaling_above_the_replicas: {"replicas": 3} =>
            {"autoscaling": {"enabled": true, "maxReplicas": 5}}, Some("spec.autoscaling.maxReplicas");
        enabling_autoscaling_within_the_replicas: {"replicas": 3} =>
            {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 3}}, None;
        raising_max_replicas: {"autoscaling": {"enabled": true, "maxReplicas": 3}} =>
            {"autoscaling": {"enabled": true, "maxReplicas": 4}}, Some("spec.autoscaling.maxReplicas");
        raising_min_replicas: {"autoscaling": {"enabled": true, "maxReplicas": 3}} =>
            {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 3}}, Some("spec.autoscaling.minReplicas");
        lowering_the_bounds: {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 4}} =>
            {"autoscaling": {"enabled": true, "maxReplicas": 3}}, None;
        autoscaling_metrics: {"autoscaling": {"enabled": true, "maxReplicas": 3}} =>
            {"autoscaling": {"enabled": true, "maxReplicas": 3, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}}}},
            None;
        disabling_autoscaling_at_the_minimum: {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 9}} =>
            {"replicas": 2}, None;
        disabling_autoscaling_above_the_minimum: {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 9}} =>
            {"replicas": 3}, Some("spec.replicas");
    }

    #[test]
    fn disabling_autoscaling_adds_pods_only_beyond_those_it_ran() {
        let autoscaled = || json!({"autoscaling": {"enabled": true, "maxReplicas": 20}});
        assert_eq!(
            change(autoscaled(), json!({"replicas": 10}), Some(10)),
            None
        );
        assert_eq!(
            change(autoscaled(), json!({"replicas": 11}), Some(10)).as_deref(),
            Some("spec.replicas")
        );
    }

    #[test]
    fn the_restart_trigger_creates_pods() {
        let spec = apply_defaults(MemcachedSpec::default());
        let source = |restart_trigger| PodSource {
            spec: &spec,
            restart_trigger,
            running: None,
        };
        let restart = pod_creating_change(&source(None), &source(Some("2026-01-01")));
        assert_eq!(
            restart.map(|p| p.to_string()).as_deref(),
            Some("metadata.annotations[memcached.c5c3.io/restart-trigger]")
        );
        assert_eq!(
            pod_creating_change(&source(Some("1")), &source(Some("1"))),
            None
        );
    }
}

/// [`restart`]: the restart trigger, the pods counted and the warning's
/// words. The verdict of each kind of change is checked against the
/// controller's own in `controller/tests/cold_changes.rs`.
#[cfg(test)]
mod restarts {
    use serde_json::{Value, json};

    use super::*;
    use crate::apply_defaults;

    /// `spec` with warm restarts on.
    fn warm(mut spec: Value) -> Value {
        spec["warmRestart"] = json!({"enabled": true});
        spec
    }

    #[test]
    fn the_restart_trigger_restarts_cold_even_with_warm_restarts() {
        let spec = apply_defaults(serde_json::from_value(warm(json!({"replicas": 3}))).unwrap());
        let source = |restart_trigger| PodSource {
            spec: &spec,
            restart_trigger,
            running: Some(2),
        };
        let Restart::Cold(cold) = restart(&source(None), &source(Some("1"))) else {
            panic!("a restart is cold")
        };
        assert_eq!(
            cold.field.to_string(),
            "metadata.annotations[memcached.c5c3.io/restart-trigger]"
        );
        assert_eq!(cold.pods, 2);
    }

    /// The warning of `old` to `new` (3 replicas unless they say), `running`
    /// pods before.
    fn warning(old: Value, new: Value, running: Option<i32>) -> Option<String> {
        let defaulted = |mut spec: Value| {
            if spec.get("replicas").is_none() && spec.get("autoscaling").is_none() {
                spec["replicas"] = json!(3);
            }
            apply_defaults(serde_json::from_value(spec).unwrap())
        };
        let (old, new) = (defaulted(old), defaulted(new));
        let source = |spec, running| PodSource {
            spec,
            restart_trigger: None,
            running,
        };
        match restart(&source(&old, running), &source(&new, None)) {
            Restart::Cold(cold) => cold.warning(),
            _ => None,
        }
    }

    #[test]
    fn the_warning_counts_the_pods_that_run_else_the_replicas() {
        let bigger =
            |replicas: i32| json!({"replicas": replicas, "memcached": {"maxMemoryMB": 128}});
        let counted = |old: Value, new: Value, running| {
            let warning = warning(warm(old), warm(new), running)?;
            let (_, count) = warning.split_once("cannot keep: ").unwrap();
            let words: Vec<&str> = count.split(' ').take(2).collect();
            Some(words.join(" "))
        };
        let three = json!({"replicas": 3});
        assert_eq!(
            counted(three.clone(), bigger(3), Some(3)).as_deref(),
            Some("3 pods")
        );
        assert_eq!(
            counted(three.clone(), bigger(3), None).as_deref(),
            Some("3 pods")
        );
        assert_eq!(
            counted(three.clone(), bigger(3), Some(2)).as_deref(),
            Some("2 pods")
        );
        assert_eq!(
            counted(three.clone(), bigger(5), Some(3)).as_deref(),
            Some("3 pods"),
            "added pods restart nothing"
        );
        assert_eq!(
            counted(three.clone(), bigger(1), Some(3)).as_deref(),
            Some("1 pod")
        );
        assert_eq!(
            counted(three.clone(), bigger(3), Some(0)),
            None,
            "no pod runs"
        );
        assert_eq!(
            counted(json!({"replicas": 0}), bigger(0), None),
            None,
            "no pod"
        );
        let autoscaled =
            json!({"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 9}});
        let mut autoscaled_bigger = autoscaled.clone();
        autoscaled_bigger["memcached"] = json!({"maxMemoryMB": 128});
        assert_eq!(
            counted(autoscaled.clone(), autoscaled_bigger.clone(), Some(7)).as_deref(),
            Some("7 pods")
        );
        assert_eq!(
            counted(autoscaled.clone(), autoscaled_bigger.clone(), None).as_deref(),
            Some("2 pods")
        );
        // A lower maximum: the autoscaler scales down to it.
        autoscaled_bigger["autoscaling"]["maxReplicas"] = json!(5);
        assert_eq!(
            counted(autoscaled, autoscaled_bigger, Some(7)).as_deref(),
            Some("5 pods")
        );
    }

    #[test]
    fn the_warning_says_why_per_kind_of_field() {
        let running = Some(3);
        assert_eq!(
            warning(
                warm(json!({})),
                warm(json!({"memcached": {"maxMemoryMB": 128}})),
                running
            )
            .as_deref(),
            Some(
                "spec.memcached.maxMemoryMB changes memcached's memory geometry, which a warm restart cannot \
                 keep: 3 pods restart cold, one at a time, and lose the items they hold"
            )
        );
        assert_eq!(
            warning(json!({}), warm(json!({})), Some(1)).as_deref(),
            Some(
                "spec.warmRestart.enabled turns warm restarts on, which needs new pods (a memory-backed volume \
                 for memcached's memory file): 1 pod restarts cold and loses the items it holds; later changes \
                 of memcached alone restart it warm"
            )
        );
        assert_eq!(
            warning(warm(json!({})), json!({}), running).as_deref(),
            Some(
                "spec.warmRestart.enabled turns warm restarts off, which needs new pods: 3 pods restart cold, \
                 one at a time, and lose the items they hold"
            )
        );
        assert_eq!(
            warning(
                warm(json!({})),
                warm(json!({"resources": {"limits": {"memory": "1Gi"}}})),
                running
            )
            .as_deref(),
            Some(
                "spec.resources changes the pods beyond memcached's image and arguments, which a warm restart \
                 cannot take, so they are replaced: 3 pods restart cold, one at a time, and lose the items they \
                 hold"
            )
        );
        assert_eq!(
            warning(json!({}), json!({"memcached": {"threads": 2}}), running).as_deref(),
            Some(
                "spec.memcached.threads changes the pod template, so the pods are replaced: 3 pods restart \
                 cold, one at a time, and lose the items they hold; with warm restarts \
                 (spec.warmRestart.enabled: true) a change of memcached alone (its image, threads, \
                 maxConnections, verbosity, extraArgs outside the memory geometry) would keep the cache"
            )
        );
        assert_eq!(
            warning(json!({}), json!({"workload": "StatefulSet"}), running).as_deref(),
            Some(
                "spec.workload moves the cache to another kind of workload: its 3 pods start together, \
                 empty, and the running ones are deleted once they are ready, so the whole cache starts \
                 cold at once"
            )
        );
        for (old, new) in [
            (warm(json!({})), warm(json!({"memcached": {"threads": 2}}))),
            (warm(json!({"replicas": 3})), warm(json!({"replicas": 6}))),
            (json!({"replicas": 3}), json!({"replicas": 6})),
        ] {
            assert_eq!(warning(old, new, running), None, "warm or no restart");
        }
    }

    #[test]
    fn an_in_place_change_still_creates_pods_for_pod_security() {
        let defaulted = |spec: Value| apply_defaults(serde_json::from_value(spec).unwrap());
        let (old, new) = (
            defaulted(warm(json!({}))),
            defaulted(warm(json!({"image": "memcached:1.6.39"}))),
        );
        let source = |spec| PodSource {
            spec,
            restart_trigger: None,
            running: Some(3),
        };
        assert_eq!(restart(&source(&old), &source(&new)), Restart::Warm);
        assert_eq!(
            pod_creating_change(&source(&old), &source(&new))
                .map(|p| p.to_string())
                .as_deref(),
            Some("spec.image")
        );
    }
}
