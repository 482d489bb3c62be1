//! The admission policy's restart classification
//! (`memcached_api::pod_changes::restart`, which warns at `kubectl apply`
//! when an update restarts the pods cold) against what this controller
//! does with the same update: the pod templates it renders before and after
//! (`objects::pod_template::build`), and whether it applies the change in
//! place (`reconcile`: warm restarts on, and `TemplateStamp::in_place_change`
//! of the two renderings, as `rollout::in_place` and
//! `rollout::stateful_in_place` start it).
//!
//! Per case: the policy says "warm" exactly when the controller applies the
//! change in place, which is exactly when the templates differ only in what
//! `rollout::pod_change::Change` holds (the memcached image, the version
//! label, the args and Secret hash annotations; the new template is the old
//! one with the new `Change::patch` applied) with the same memory geometry;
//! "none" exactly when the templates are the same and so is the workload's
//! kind; "cold" otherwise.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use memcached_api::extra_args::memory_file;
use memcached_api::pod_changes::{PodSource, RESTART_TRIGGER_ANNOTATION, Restart, restart};
use memcached_api::{Memcached, apply_defaults};
use memcached_controller::objects::intent::TemplateStamp;
use memcached_controller::objects::pod_template::{self, Template};
use memcached_controller::objects::warm_start::ARGS_ANNOTATION;
use memcached_controller::rollout::pod_change::Change;
use serde_json::{Map, Value, json};
use test_support::object;

/// The Secret hash the controller stamps (unchanged across the update).
const SECRET_HASH: &str = "0123456789abcdef";

/// A Memcached of `spec`, with the restart trigger `trigger`.
fn memcached(spec: &Value, trigger: Option<&str>) -> Memcached {
    let object = object::memcached(spec.clone())
        .name("c")
        .namespace("ns")
        .uid("u-1");
    match trigger {
        Some(trigger) => object.annotation(RESTART_TRIGGER_ANNOTATION, trigger),
        None => object,
    }
    .typed()
}

/// The workload metadata and pod template the controller renders for `mc`.
fn render(mc: &Memcached) -> Template {
    pod_template::build(
        mc,
        &apply_defaults(mc.spec.clone()),
        Some(SECRET_HASH),
        "auth",
    )
}

/// The restart trigger of `mc`.
fn trigger(mc: &Memcached) -> Option<&str> {
    let annotations = mc.metadata.annotations.as_ref()?;
    annotations
        .get(RESTART_TRIGGER_ANNOTATION)
        .map(String::as_str)
}

/// The policy's verdict: `none`, `warm` or `cold <field>: <why>`.
fn policy(old: &Memcached, new: &Memcached) -> String {
    let (before, after) = (
        apply_defaults(old.spec.clone()),
        apply_defaults(new.spec.clone()),
    );
    let old = PodSource {
        spec: &before,
        restart_trigger: trigger(old),
        running: Some(3),
    };
    let new = PodSource {
        spec: &after,
        restart_trigger: trigger(new),
        running: None,
    };
    match restart(&old, &new) {
        Restart::None => "none".into(),
        Restart::Warm => "warm".into(),
        Restart::Cold(cold) => format!("cold {}: {:?}", cold.field, cold.because),
    }
}

/// `template` with `change` applied as the controller patches a running
/// pod's: its labels and annotations set (or removed, null), the memcached
/// container's image replaced.
fn patched(template: &PodTemplateSpec, change: &Change) -> Value {
    let mut template = serde_json::to_value(template).unwrap();
    let patch = change.patch();
    for part in ["labels", "annotations"] {
        let Value::Object(entries) = &patch["metadata"][part] else {
            continue;
        };
        let map = template["metadata"]
            .as_object_mut()
            .unwrap()
            .entry(part)
            .or_insert_with(|| Value::Object(Map::new()));
        let map = map.as_object_mut().unwrap();
        for (key, value) in entries {
            match value {
                Value::Null => map.remove(key),
                value => map.insert(key.clone(), value.clone()),
            };
        }
    }
    let image = &patch["spec"]["containers"][0];
    let containers = template["spec"]["containers"].as_array_mut().unwrap();
    for container in containers.iter_mut() {
        if container["name"] == image["name"] {
            container["image"] = image["image"].clone();
        }
    }
    normalized(template)
}

/// A template's JSON with empty label and annotation maps dropped.
fn normalized(mut template: Value) -> Value {
    if let Some(metadata) = template["metadata"].as_object_mut() {
        metadata.retain(|_, v| v.as_object().is_none_or(|m| !m.is_empty()));
    }
    template
}

/// The controller's verdict, `none`, `warm` or `cold`, after checking that
/// its in-place decision is the "differs only in `Change`" rule.
fn controller(old: &Memcached, new: &Memcached) -> String {
    let (before, after) = (render(old), render(new));
    // Another kind of workload: its pods are all new, and the old kind's
    // are deleted once they run.
    if old.spec.stateful_set() != new.spec.stateful_set() {
        return "cold".into();
    }
    if before.pod == after.pod {
        return "none".into();
    }
    let stamp = |t: &Template| {
        TemplateStamp::from_annotations(t.metadata.annotations.as_ref().unwrap()).unwrap()
    };
    // `reconcile` tries a change in place only with warm restarts on.
    let warm_restarts = apply_defaults(new.spec.clone()).warm_restart_enabled();
    let in_place = warm_restarts && stamp(&after).in_place_change(&stamp(&before));
    let change = Change::of(&after.pod).unwrap();
    let only_change = patched(&before.pod, &change)
        == normalized(serde_json::to_value(&after.pod).unwrap())
        && Change::of(&before.pod).unwrap() != change;
    // In place exactly when only the `Change` differs, with warm restarts
    // and the same memory geometry.
    let same_geometry = geometry(&before.pod) == geometry(&after.pod);
    assert_eq!(
        in_place,
        warm_restarts && only_change && same_geometry,
        "in place: warm restarts {warm_restarts}, only the change {only_change}, same geometry {same_geometry}"
    );
    if in_place { "warm" } else { "cold" }.into()
}

/// The memory geometry of the args a template's pods run with warm
/// restarts (its args annotation).
fn geometry(template: &PodTemplateSpec) -> Option<Vec<String>> {
    let annotations = template.metadata.as_ref()?.annotations.as_ref()?;
    let args: Vec<String> = annotations
        .get(ARGS_ANNOTATION)?
        .lines()
        .map(String::from)
        .collect();
    Some(memory_file::geometry(&args))
}

/// `spec` with warm restarts on.
fn warm(mut spec: Value) -> Value {
    spec["warmRestart"] = json!({"enabled": true});
    spec
}

fn sasl(secret: &str) -> Value {
    json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": secret}}}})
}

fn tls(secret: &str, client_certificates: bool, exporter: bool) -> Value {
    json!({"monitoring": {"enabled": exporter}, "security": {"tls": {"enabled": true,
        "certificateSecretRef": {"name": secret}, "enableClientCert": client_certificates}}})
}

/// One named case per update: the spec before and after (3 replicas unless
/// they say), and the field the policy names when cold, with why.
macro_rules! cases {
    ($($name:ident: $old:expr => $new:expr, $expected:literal;)*) => {$(
        #[test]
        fn $name() {
            let with_replicas = |mut spec: Value| {
                if spec.get("replicas").is_none() {
                    spec["replicas"] = json!(3);
                }
                spec
            };
            let (old, new) = (
                memcached(&with_replicas($old), None),
                memcached(&with_replicas($new), None),
            );
            check(&old, &new, $expected);
        }
    )*};
}

/// The policy says `expected`, and the controller does the same.
fn check(old: &Memcached, new: &Memcached, expected: &str) {
    let said = policy(old, new);
    assert_eq!(said, expected, "the policy's verdict");
    let verdict = said.split(' ').next().unwrap();
    assert_eq!(controller(old, new), verdict, "the controller's verdict");
}

cases! {
    nothing: warm(json!({})) => warm(json!({})), "none";
    replicas_up: warm(json!({})) => warm(json!({"replicas": 5})), "none";
    replicas_down: warm(json!({})) => warm(json!({"replicas": 2})), "none";
    replicas_up_without_warm_restarts: json!({}) => json!({"replicas": 5}), "none";
    the_network_policy: warm(json!({})) => warm(json!({"networkPolicy": {"enabled": true}})), "none";
    a_disruption_budget: warm(json!({"highAvailability": {}})) => warm(json!({"highAvailability": {
        "podDisruptionBudget": {"enabled": true, "maxUnavailable": 1}}})), "none";
    image: warm(json!({})) => warm(json!({"image": "memcached:1.6.39"})), "warm";
    threads: warm(json!({})) => warm(json!({"memcached": {"threads": 2}})), "warm";
    max_connections: warm(json!({})) => warm(json!({"memcached": {"maxConnections": 4096}})), "warm";
    verbosity: warm(json!({})) => warm(json!({"memcached": {"verbosity": 2}})), "warm";
    image_and_threads: warm(json!({})) =>
        warm(json!({"image": "memcached:1.6.39", "memcached": {"threads": 2}})), "warm";
    extra_args_outside_the_geometry: warm(json!({})) =>
        warm(json!({"memcached": {"extraArgs": ["-o", "modern"]}})), "warm";
    extra_args_lru_crawler: warm(json!({"memcached": {"extraArgs": ["-o", "modern"]}})) =>
        warm(json!({"memcached": {"extraArgs": ["-o", "modern,lru_crawler"]}})), "warm";
    extra_args_growth_factor: warm(json!({})) => warm(json!({"memcached": {"extraArgs": ["-f", "1.5"]}})),
        "cold spec.memcached.extraArgs: Geometry";
    extra_args_slab_reassign: warm(json!({"memcached": {"extraArgs": ["-o", "modern"]}})) =>
        warm(json!({"memcached": {"extraArgs": ["-o", "modern,no_slab_reassign"]}})),
        "cold spec.memcached.extraArgs: Geometry";
    extra_args_cas: warm(json!({})) => warm(json!({"memcached": {"extraArgs": ["-C"]}})),
        "cold spec.memcached.extraArgs: Geometry";
    max_memory: warm(json!({})) => warm(json!({"memcached": {"maxMemoryMB": 128}})),
        "cold spec.memcached.maxMemoryMB: Geometry";
    max_item_size: warm(json!({})) => warm(json!({"memcached": {"maxItemSize": "2m"}})),
        "cold spec.memcached.maxItemSize: Geometry";
    max_memory_with_threads: warm(json!({})) => warm(json!({"memcached": {"threads": 2, "maxMemoryMB": 128}})),
        "cold spec.memcached.maxMemoryMB: Geometry";
    warm_restarts_off: warm(json!({})) => json!({}), "cold spec.warmRestart.enabled: WarmRestartsOff";
    warm_restarts_off_with_threads: warm(json!({})) => json!({"memcached": {"threads": 2}}),
        "cold spec.warmRestart.enabled: WarmRestartsOff";
    warm_restarts_on: json!({}) => warm(json!({})), "cold spec.warmRestart.enabled: WarmRestartsOn";
    resources: warm(json!({})) => warm(json!({"resources": {"limits": {"memory": "1Gi"}}})), "cold spec.resources: NewPods { warm_restarts: true }";
    image_and_resources: warm(json!({})) =>
        warm(json!({"image": "memcached:1.6.39", "resources": {"limits": {"memory": "1Gi"}}})),
        "cold spec.resources: NewPods { warm_restarts: true }";
    workload: warm(json!({})) => warm(json!({"workload": "StatefulSet"})), "cold spec.workload: Workload";
    image_in_a_stateful_set: warm(json!({"workload": "StatefulSet"})) =>
        warm(json!({"workload": "StatefulSet", "image": "memcached:1.6.39"})), "warm";
    pod_annotations: warm(json!({})) => warm(json!({"podAnnotations": {"a": "b"}})), "cold spec.podAnnotations: NewPods { warm_restarts: true }";
    pod_labels: warm(json!({})) => warm(json!({"podLabels": {"team": "a"}})), "cold spec.podLabels: NewPods { warm_restarts: true }";
    node_selector: warm(json!({})) => warm(json!({"nodeSelector": {"disk": "ssd"}})), "cold spec.nodeSelector: NewPods { warm_restarts: true }";
    tolerations: warm(json!({})) => warm(json!({"tolerations": [{"operator": "Exists"}]})), "cold spec.tolerations: NewPods { warm_restarts: true }";
    anti_affinity: warm(json!({})) => warm(json!({"highAvailability": {"antiAffinityPreset": "hard"}})),
        "cold spec.highAvailability.antiAffinityPreset: NewPods { warm_restarts: true }";
    graceful_shutdown: warm(json!({"highAvailability": {}})) =>
        warm(json!({"highAvailability": {"gracefulShutdown": {"enabled": true}}})),
        "cold spec.highAvailability.gracefulShutdown: NewPods { warm_restarts: true }";
    exporter: warm(json!({})) => warm(json!({"monitoring": {"enabled": true}})), "cold spec.monitoring: NewPods { warm_restarts: true }";
    security_context: warm(json!({})) => warm(json!({"security": {"podSecurityContext": {"runAsUser": 1000}}})),
        "cold spec.security.podSecurityContext: NewPods { warm_restarts: true }";
    sasl_on: warm(json!({})) => warm(sasl("a")), "cold spec.security.sasl: NewPods { warm_restarts: true }";
    sasl_secret_name: warm(sasl("a")) => warm(sasl("b")), "cold spec.security.sasl: NewPods { warm_restarts: true }";
    tls_on: warm(json!({})) => warm(tls("t", false, false)), "cold spec.security.tls: NewPods { warm_restarts: true }";
    tls_secret_name: warm(tls("t", false, false)) => warm(tls("u", false, false)), "cold spec.security.tls: NewPods { warm_restarts: true }";
    tls_client_certificates: warm(tls("t", false, false)) => warm(tls("t", true, false)), "warm";
    tls_client_certificates_with_the_exporter: warm(tls("t", false, true)) => warm(tls("t", true, true)),
        "cold spec.security.tls: NewPods { warm_restarts: true }";
    threads_without_warm_restarts: json!({}) => json!({"memcached": {"threads": 2}}),
        "cold spec.memcached.threads: NewPods { warm_restarts: false }";
    image_without_warm_restarts: json!({}) => json!({"image": "memcached:1.6.39"}), "cold spec.image: NewPods { warm_restarts: false }";
}

#[test]
fn the_restart_trigger_restarts_cold_even_with_warm_restarts() {
    let spec = warm(json!({"replicas": 3}));
    check(
        &memcached(&spec, None),
        &memcached(&spec, Some("2026-01-01")),
        "cold metadata.annotations[memcached.c5c3.io/restart-trigger]: NewPods { warm_restarts: true }",
    );
}
