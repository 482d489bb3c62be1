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
//! place, which Pod Security admission does not judge again (it skips pod
//! updates that change only images); any pod the workload creates later gets
//! the new template, so it counts as creating pods here too.
//!
//! [`template_fields`] destructures every struct of the spec exhaustively:
//! a field added to one of them does not compile until it is classified.

use k8s_openapi::api::core::v1::ResourceRequirements;
use serde::Serialize;
use serde_json::Value;

use crate::field::Path;
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
    // Every field is an argument; maxMemoryMB also sizes the warm restart volume.
    let MemcachedConfig {
        max_memory_mb,
        max_connections,
        threads,
        max_item_size,
        verbosity,
        extra_args,
    } = memcached.clone().unwrap_or_default();
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
    vec![
        ("workload", json(workload)),
        ("image", json(image)),
        ("resources", json(resources)),
        ("memcached.maxMemoryMB", json(&max_memory_mb)),
        ("memcached.maxConnections", json(&max_connections)),
        ("memcached.threads", json(&threads)),
        ("memcached.maxItemSize", json(&max_item_size)),
        ("memcached.verbosity", json(&verbosity)),
        ("memcached.extraArgs", json(&extra_args)),
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
    ]
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
