//! Which updates of a Memcached create pods, and what they do to the pods
//! that run, judged on the pod templates the controller renders before and
//! after ([`pod_template::pod`]): no field is classified by hand.
//!
//! A change of the rendered template rolls the workload out, and every pod
//! of a rollout is new. So does a change of the workload's kind. More
//! replicas, or autoscaler bounds that let the HorizontalPodAutoscaler add
//! pods, create pods without a rollout. Nothing else does: the
//! PodDisruptionBudget, the Service, the NetworkPolicy, the ServiceMonitor,
//! the server-list ConfigMap, scaling down, other metadata.
//!
//! An image change with warm restarts on is applied to the running pods in
//! place. Pod Security admission judges each such pod update again (an image
//! change is significant to it: `isSignificantPodUpdate` in
//! k8s.io/pod-security-admission) and skips the in-place updates that change
//! only the pod's annotations (new args, a Secret hash); any pod the workload
//! creates later gets the new template, so it counts as creating pods here too.
//!
//! [`restart`] says what an update does to the pods that run, for the
//! warning that tells `kubectl apply` before the cache is lost: nothing,
//! memcached restarted warm in its own pod (warm restarts on before and
//! after, and the templates' [`in_place::base`] the same: they differ only in
//! what a running pod takes in place), or the pods replaced, cold.
//!
//! The field a warning names is the first field of the spec (by its path)
//! whose change alone makes the difference ([`blame`]).

use std::collections::BTreeMap;

use crate::defaults::Defaulted;
use crate::field::Path;
use crate::render::args::AUTH_FILE;
use crate::render::in_place;
use crate::render::{Instance, RESTART_TRIGGER_ANNOTATION, blame, pod_template};
use crate::types::MemcachedSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A Memcached as far as its pods go: the defaulted spec the controller
/// renders, and the restart trigger of its metadata.
#[derive(Clone, Copy, Debug)]
pub struct PodSource<'a> {
    /// The spec, defaulted as the controller defaults it.
    pub spec: &'a Defaulted,
    /// The value of [`RESTART_TRIGGER_ANNOTATION`].
    pub restart_trigger: Option<&'a str>,
    /// The pods the workload runs now (`status.replicas`), when known.
    pub running: Option<i32>,
}

impl PodSource<'_> {
    /// The pod template the controller renders for this source (the
    /// Secrets' hash and key aside: neither is known at admission).
    fn template(&self) -> PodTemplateSpec {
        template_of(self.spec, self.restart_trigger)
    }
}

fn template_of(spec: &Defaulted, restart_trigger: Option<&str>) -> PodTemplateSpec {
    let metadata = ObjectMeta {
        annotations: restart_trigger
            .map(|t| BTreeMap::from([(RESTART_TRIGGER_ANNOTATION.to_string(), t.to_string())])),
        ..Default::default()
    };
    let instance = Instance {
        metadata: &metadata,
        spec,
    };
    pod_template::pod(instance, spec, None, AUTH_FILE)
}

/// The first field whose change from `old` to `new` alone renders a
/// template `same` refuses ([`blame::first_field`]), with that template.
fn blame(
    old: &PodSource<'_>,
    new: &PodSource<'_>,
    same: impl Fn(&PodTemplateSpec) -> bool,
) -> (Path, Option<PodTemplateSpec>) {
    let render = |spec: &Defaulted| template_of(spec, old.restart_trigger);
    blame::first_field(old.spec, new.spec, render, same)
}

/// The restart trigger's path, as a warning names it.
fn trigger_path() -> Path {
    Path::new("metadata.annotations").key(RESTART_TRIGGER_ANNOTATION)
}

/// The first change from `old` to `new` that creates pods: the field that
/// makes it (`spec.memcached.maxMemoryMB`, `spec.replicas`, ...), or `None`
/// when the update creates none.
pub fn pod_creating_change(old: &PodSource<'_>, new: &PodSource<'_>) -> Option<Path> {
    if old.restart_trigger != new.restart_trigger {
        return Some(trigger_path());
    }
    if old.spec.stateful_set() != new.spec.stateful_set() {
        return Some(Path::new("spec.workload"));
    }
    let before = old.template();
    if before != new.template() {
        return Some(blame(old, new, |t| t == &before).0);
    }
    added_pods(old, new.spec)
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
/// restart (the same rendered template), a warm restart in place (warm
/// restarts on before and after, and the templates differ only in what a
/// running pod takes in place, [`in_place::base`]: memcached's image, and
/// its args within the same memory geometry), or a cold restart and the
/// field that forces it.
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
        return cold(trigger_path(), new_pods);
    }
    if old.spec.stateful_set() != new.spec.stateful_set() {
        return cold(Path::new("spec.workload"), ColdBecause::Workload);
    }
    let (before, after) = (old.template(), new.template());
    if before == after {
        return Restart::None;
    }
    let warm_restart = || Path::new("spec.warmRestart.enabled");
    match warm {
        (false, true) => return cold(warm_restart(), ColdBecause::WarmRestartsOn),
        (true, false) => return cold(warm_restart(), ColdBecause::WarmRestartsOff),
        (false, false) => return cold(blame(old, new, |t| t == &before).0, new_pods),
        (true, true) => {}
    }
    let base = in_place::base(&before);
    if base == in_place::base(&after) {
        return Restart::Warm;
    }
    // The first change a running pod cannot take: beyond memcached's image
    // and args, or of their memory geometry.
    let (field, alone) = blame(old, new, |t| in_place::base(t) == base);
    let geometry = alone.is_some_and(|t| in_place::base(&t).geometry != base.geometry);
    cold(
        field,
        if geometry {
            ColdBecause::Geometry
        } else {
            new_pods
        },
    )
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
    use serde_json::{Value, json};

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
        client_hashing_gates_a_deployment_s_pods: {} => {"clientHashing": "ketama"}, Some("spec.clientHashing");
        client_hashing_of_a_stateful_set: {"workload": "StatefulSet"} => {"workload": "StatefulSet", "clientHashing": "ketama"}, None;
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
            Some("spec.highAvailability.gracefulShutdown.enabled");
        graceful_shutdown_disabled: {"highAvailability": {}} => {"highAvailability": {
            "gracefulShutdown": {"preStopDelaySeconds": 5}}}, None;
        warm_restart: {} => {"warmRestart": {"enabled": true}}, Some("spec.warmRestart.enabled");
        warm_restart_disabled: {} => {"warmRestart": {"enabled": false}}, None;
        monitoring: {} => {"monitoring": {"enabled": true}}, Some("spec.monitoring.enabled");
        exporter_image: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true, "exporterImage": "e:2"}},
            Some("spec.monitoring.exporterImage");
        exporter_resources: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true,
            "exporterResources": {"requests": {"cpu": "10m"}}}}, Some("spec.monitoring.exporterResources");
        exporter_image_without_monitoring: {} => {"monitoring": {"exporterImage": "e:2"}}, None;
        service_monitor: {"monitoring": {"enabled": true}} => {"monitoring": {"enabled": true,
            "serviceMonitor": {"interval": "1m", "additionalLabels": {"release": "p"}}}}, None;
        pod_security_context: {} => {"security": {"podSecurityContext": {"runAsUser": 1000}}},
            Some("spec.security.podSecurityContext");
        container_security_context: {} => {"security": {"containerSecurityContext": {}}},
            Some("spec.security.containerSecurityContext");
        sasl: {} => {"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "a"}}}},
            Some("spec.security.sasl.enabled");
        sasl_disabled: {} => {"security": {"sasl": {"credentialsSecretRef": {"name": "a"}}}}, None;
        tls: {} => {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}}},
            Some("spec.security.tls.enabled");
        tls_client_cert: {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}}} =>
            {"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}, "enableClientCert": true}}},
            Some("spec.security.tls.enableClientCert");
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
/// words.
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
