//! The pod template: memcached and the exporter sidecar, their labels,
//! annotations, scheduling and volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodAffinityTerm, PodAntiAffinity, PodReadinessGate, PodSpec, PodTemplateSpec,
    TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::defaults::Defaulted;
use crate::render::containers::containers;
use crate::render::labels::{
    IMAGE_ANNOTATION, MANAGED_BY_LABEL, SECRET_HASH_ANNOTATION, STATEFUL_SET_POD_LABEL,
    VERSION_LABEL, selector_labels, version_label,
};
use crate::render::volumes::{non_empty, volumes};
use crate::render::{Instance, RESTART_TRIGGER_ANNOTATION, args, warm_restart};
use crate::types::MemcachedSpec;

/// The readiness gate of a Deployment's pods whose keys are handed over
/// (`spec.clientHashing`): the controller sets it once a new pod holds the
/// keys clients will ask it for, so it turns ready (and clients that hash
/// over the ready pods take it) only then.
pub const KEYS_TAKEN_GATE: &str = "memcached.c5c3.io/keys-taken";

/// The pod template for `mc`, whose effective (defaulted) spec is `spec`;
/// `secret_hash` digests the Secrets its pods mount, and `auth_key` is the
/// key of the authentication Secret that holds memcached's `-Y` file (the
/// controller reads both from the Secrets; the policy knows neither, and
/// neither decides anything it judges).
pub fn pod(
    mc: Instance<'_>,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> PodTemplateSpec {
    let mut labels = spec.pod_labels.clone().unwrap_or_default();
    labels.extend(selector_labels(mc.name()));
    labels.insert(VERSION_LABEL.into(), version_label(spec.image()));
    let annotations = annotations(mc, spec, secret_hash);
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(pod_spec(mc, spec, auth_key)),
    }
}

/// The pod template's spec ([`pod`]).
pub fn pod_spec(mc: Instance<'_>, spec: &Defaulted, auth_key: &str) -> PodSpec {
    let ha = spec.high_availability.as_ref();
    let security = spec.security.as_ref();
    PodSpec {
        containers: containers(spec, spec.image()),
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
        readiness_gates: (spec.hands_over_keys() && !spec.stateful_set()).then(|| {
            vec![PodReadinessGate {
                condition_type: KEYS_TAKEN_GATE.into(),
            }]
        }),
        // memcached and its exporter never call the API server: no token.
        automount_service_account_token: Some(false),
        ..Default::default()
    }
}

/// The pod template's annotations: the user's, and the operator's (with
/// warm restarts memcached's args and image, the Secrets' hash, the restart
/// trigger).
pub fn annotations(
    mc: Instance<'_>,
    spec: &Defaulted,
    secret_hash: Option<&str>,
) -> BTreeMap<String, String> {
    let mut annotations = spec.pod_annotations.clone().unwrap_or_default();
    // With warm restarts the pod reads its args from here (see warm_restart).
    if spec.warm_restart_enabled() {
        let args = warm_restart::args_annotation(&args::memcached_args(spec));
        annotations.insert(warm_restart::ARGS_ANNOTATION.into(), args);
        annotations.insert(IMAGE_ANNOTATION.into(), spec.image().to_string());
    }
    if let Some(hash) = secret_hash {
        annotations.insert(SECRET_HASH_ANNOTATION.into(), hash.into());
    }
    if let Some(trigger) = mc.restart_trigger() {
        annotations.insert(RESTART_TRIGGER_ANNOTATION.into(), trigger.into());
    }
    annotations
}

/// This Memcached's pods, for affinity and spread terms. In StatefulSet mode
/// only the StatefulSet's pods: while a switch from a Deployment runs both,
/// the new pods must not need nodes free of the old ones (with the `hard`
/// preset that would take twice the nodes).
fn instance_pods(mc: Instance<'_>, spec: &MemcachedSpec) -> LabelSelector {
    let mut match_labels = selector_labels(mc.name());
    match_labels.remove(MANAGED_BY_LABEL);
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
    mc: Instance<'_>,
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

fn anti_affinity(mc: Instance<'_>, spec: &MemcachedSpec, preset: &str) -> Affinity {
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
