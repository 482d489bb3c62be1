//! Specs that are legal but risky: returned to the client as admission
//! warnings (kubectl prints them), never a reason to refuse.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::defaults::Defaulted;
use crate::extra_args::release;
use crate::types::MemcachedSpec;

/// Every warning for `spec`.
pub fn warnings(spec: &Defaulted) -> Vec<String> {
    let mut warnings = Vec::new();
    warnings.extend(pdb_blocks_evictions(spec));
    if spec.monitoring_enabled() && spec.sasl_enabled() {
        warnings.push(
            "spec.monitoring.enabled with spec.security.sasl.enabled: the memcached exporter cannot authenticate, \
             so it reports memcached_up 0 and none of memcached's numbers (the controller's memcached_operator_pod_* \
             metrics, which the alerts read, still cover this cache)"
                .to_string(),
        );
    }
    if spec.sasl_enabled() && !spec.tls_enabled() {
        warnings.push(
            "spec.security.sasl.enabled without spec.security.tls.enabled: the SASL credentials cross the pod \
             network in clear text; enable TLS to protect them"
                .to_string(),
        );
    }
    warnings.extend(network_policy_in_security(spec));
    warnings.extend(network_policy_open_to_all(spec));
    warnings.extend(privileged_container(spec));
    warnings.extend(hard_anti_affinity_surge(spec));
    warnings.extend(handover_without_pre_stop_delay(spec));
    let args = spec
        .memcached
        .as_ref()
        .and_then(|m| m.extra_args.as_deref());
    warnings.extend(release::warnings(spec.image(), args.unwrap_or_default()));
    warnings
}

/// The `hard` preset in Deployment mode: a rollout surges one pod, which the
/// required anti-affinity keeps off every node that runs one of the
/// Memcached's pods. With as many pods as schedulable nodes it stays Pending,
/// and the rollout (a changed spec, a rotated Secret) never finishes.
fn hard_anti_affinity_surge(spec: &MemcachedSpec) -> Option<String> {
    let ha = spec.high_availability.as_ref()?;
    (ha.anti_affinity_preset.as_deref() == Some("hard") && !spec.stateful_set()).then(|| {
        "spec.highAvailability.antiAffinityPreset hard with spec.workload Deployment: a rollout (a changed spec, \
         a rotated Secret) first adds one pod, which needs a node none of this Memcached's pods runs on; with as \
         many replicas as schedulable nodes it stays Pending and the rollout never finishes. Use spec.workload \
         StatefulSet (it replaces a pod without adding one) or antiAffinityPreset soft, or keep a node spare"
            .to_string()
    })
}

/// Keys handed over (`spec.clientHashing`) without a
/// preStop delay: a deleted or evicted pod's memcached stops at once, before
/// its keys can be copied to the pods clients will ask while it is away.
fn handover_without_pre_stop_delay(spec: &Defaulted) -> Option<String> {
    let delay = spec
        .graceful_shutdown_seconds()
        .map_or(0, |(delay, _)| delay);
    (spec.hands_over_keys() && delay == 0).then(|| {
        "spec.clientHashing without spec.highAvailability.gracefulShutdown.preStopDelaySeconds: a pod \
         deleted or evicted (a drain, an autoscaler's scale-down) stops at once, and its keys are lost \
         instead of handed over while it is away: a delay gives the copy time"
            .to_string()
    })
}

/// A minAvailable that the autoscaler's minimum scale cannot exceed.
fn pdb_blocks_evictions(spec: &MemcachedSpec) -> Option<String> {
    let min_available = match spec.enabled_pdb()?.min_available {
        Some(IntOrString::Int(n)) => n,
        _ => return None,
    };
    let autoscaling = spec
        .autoscaling
        .as_ref()
        .filter(|_| spec.autoscaling_enabled())?;
    let min_replicas = autoscaling.min_replicas.unwrap_or(1);
    (min_available >= min_replicas).then(|| {
        format!(
            "spec.highAvailability.podDisruptionBudget.minAvailable ({min_available}) >= \
             spec.autoscaling.minReplicas ({min_replicas}): no pod can be evicted while the autoscaler runs at minimum scale"
        )
    })
}

/// An enabled NetworkPolicy without sources: an ingress rule with no `from`
/// admits every source, so the policy restricts nothing. Named where it is
/// set (`spec.networkPolicy`, else the Go operator's `spec.security.networkPolicy`).
fn network_policy_open_to_all(spec: &MemcachedSpec) -> Option<String> {
    let np = spec
        .effective_network_policy()
        .filter(|n| n.enabled == Some(true))?;
    let at = if spec.network_policy.is_some() {
        "spec.networkPolicy"
    } else {
        GO_NETWORK_POLICY
    };
    np.allowed_sources
        .as_ref()
        .is_none_or(Vec::is_empty)
        .then(|| {
            format!(
                "{at}.enabled without {at}.allowedSources: the NetworkPolicy allows every \
             pod in every namespace to reach memcached; list allowedSources to restrict it"
            )
        })
}

/// `spec.security.networkPolicy`.
const GO_NETWORK_POLICY: &str = "spec.security.networkPolicy";

/// The network policy where the Go operator has it: admitted as it is and
/// honoured, but `spec.networkPolicy` is this API's place for it.
fn network_policy_in_security(spec: &MemcachedSpec) -> Option<String> {
    spec.security.as_ref()?.network_policy.as_ref()?;
    Some(format!(
        "{GO_NETWORK_POLICY} is where the Go operator (C5C3/memcached-operator) has the NetworkPolicy \
         settings: it is honoured as spec.networkPolicy, this API's place for them (see docs/migration.md)"
    ))
}

/// A container security context that grants privilege memcached never needs.
fn privileged_container(spec: &MemcachedSpec) -> Option<String> {
    let security = spec.security.as_ref()?;
    let context = security.container_security_context.as_ref();
    let mut grants = Vec::new();
    if context.and_then(|c| c.privileged) == Some(true) {
        grants.push("privileged: true".to_string());
    }
    let added = context
        .and_then(|c| c.capabilities.as_ref())
        .and_then(|c| c.add.as_deref())
        .unwrap_or_default();
    if !added.is_empty() {
        grants.push(format!("capabilities.add: [{}]", added.join(", ")));
    }
    if context.and_then(|c| c.allow_privilege_escalation) == Some(true) {
        grants.push("allowPrivilegeEscalation: true".to_string());
    }
    let run_as_user = context.and_then(|c| c.run_as_user).or_else(|| {
        security
            .pod_security_context
            .as_ref()
            .and_then(|p| p.run_as_user)
    });
    if run_as_user == Some(0) {
        grants.push("runAsUser: 0".to_string());
    }
    (!grants.is_empty()).then(|| {
        format!(
            "spec.security.containerSecurityContext grants privilege ({}): memcached needs none of it and runs \
             as UID 11211 with every capability dropped by default",
            grants.join(", ")
        )
    })
}
