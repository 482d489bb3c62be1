//! Validation of a defaulted object: every violation, in one list, one
//! validator per type with the path passed down.
//!
//! Order: the size bounds first (when one is exceeded nothing else is walked,
//! so hostile input stays cheap); then `metadata.name`; then the spec's, stage
//! by stage (see [`Stage`](crate::field::Stage)): the rules tying fields
//! together, the CRD schema's bounds, what memcached would refuse, and what
//! the API server would refuse in the objects the controller builds.

mod autoscaling;
mod high_availability;
mod image;
pub mod limits;
mod memcached_config;
mod metadata;
mod monitoring;
mod names;
mod network;
pub mod pod;
pub(crate) mod pod_annotations;
mod resources;
mod scheduling;
mod schema;
mod security;
mod selector;
mod warnings;
mod workload;

use autoscaling::{Scaled, validate_autoscaling};
use high_availability::{
    validate_anti_affinity_preset, validate_graceful_shutdown, validate_pod_disruption_budget,
};
use image::validate_image;
use memcached_config::validate_memcached_config;
use metadata::{validate_annotations, validate_labels};
use monitoring::validate_monitoring;
use network::validate_peers;
use pod::{pod_shape, validate_pod_annotations, validate_pod_labels};
use resources::{MemoryFloor, validate_resources};
use scheduling::{validate_tolerations, validate_topology_spread};
use security::validate_security;
use workload::{validate_replicas, validate_server_list_config_map, validate_workload};

use crate::defaults::{Addition, Defaulted, apply_defaults, complete_for};
use crate::field::{ErrorList, Path};
use crate::pod_security::Level;
use crate::quantity::Quantity;
use crate::types::MemcachedSpec;

pub use memcached_config::SLAB_CHUNK_MAX;
pub use warnings::warnings;
pub use workload::MAX_STATEFUL_SET_NAME;

/// Memory the container needs on top of the cache by default.
pub const DEFAULT_MEMORY_OVERHEAD: &str = "32Mi";

/// Tunables of validation (the policy's settings).
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Memory reserved on top of maxMemoryMB in the container limit.
    pub memory_overhead: Quantity,
    /// The overhead as the user wrote it, for messages.
    pub memory_overhead_text: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_overhead: Quantity::mebi(32),
            memory_overhead_text: DEFAULT_MEMORY_OVERHEAD.to_string(),
        }
    }
}

/// The name fields of the object's metadata.
#[derive(Clone, Copy, Debug, Default)]
pub struct ObjectName<'a> {
    /// `metadata.name` (empty when the API server generates it).
    pub name: &'a str,
    /// `metadata.generateName`.
    pub generate_name: &'a str,
}

/// A spec through the one pipeline: defaulted, then validated and warned
/// about.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The defaulted spec.
    pub spec: Defaulted,
    /// What defaulting added to the security contexts for the Pod Security
    /// level (see [`apply_defaults_at`]).
    pub added: Vec<Addition>,
    /// Every violation of the object with that spec.
    pub errors: ErrorList,
    /// What is admitted but probably not meant.
    pub warnings: Vec<String>,
}

/// Default `spec`, validate the object with it, and list its warnings: what
/// the policy, the controller and `render` each judge a Memcached by. No Pod
/// Security level is known here: the security contexts the user gave are
/// taken as they are ([`check_at`] completes them for a level).
pub fn check(object: ObjectName<'_>, spec: MemcachedSpec, options: &Options) -> Checked {
    check_at(object, spec, options, Level::Privileged)
}

/// [`check`] with the security contexts completed for the Pod Security
/// `level` the pods must meet ([`apply_defaults_at`]).
pub fn check_at(
    object: ObjectName<'_>,
    spec: MemcachedSpec,
    options: &Options,
    level: Level,
) -> Checked {
    let spec = apply_defaults(spec);
    // Validated before the completion, which adds only values the API server
    // accepts: the errors show the contexts as the user wrote them.
    let errors = validate_object(object, &spec, options);
    let warnings = warnings(&spec);
    let (spec, added) = complete_for(spec, level);
    Checked {
        spec,
        added,
        errors,
        warnings,
    }
}

/// Every violation of the object: its name, then its spec.
pub fn validate_object(object: ObjectName<'_>, spec: &Defaulted, options: &Options) -> ErrorList {
    let sizes = limits::validate_sizes(spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return sizes;
    }
    let metadata = Path::new("metadata");
    let mut errors = metadata::validate_name(object.name, object.generate_name, &metadata);
    if errors.is_empty() {
        errors.extend(workload::validate_name(object, spec, &metadata));
    }
    errors.extend(validate_spec(spec, options));
    errors
}

/// Every violation of `spec`.
pub fn validate(spec: &Defaulted, options: &Options) -> ErrorList {
    let sizes = limits::validate_sizes(spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return sizes;
    }
    validate_spec(spec, options)
}

/// One validator per field. Each lists its errors in field order; the list
/// is then sorted by [`Stage`](crate::field::Stage), stably, which keeps the
/// order the messages have always had: the fields are called here in an
/// order that agrees with it within every stage.
fn validate_spec(spec: &Defaulted, options: &Options) -> ErrorList {
    let path = Path::new("spec");
    let ha = spec.high_availability.as_ref();
    let ha_path = path.child("highAvailability");
    let floor = MemoryFloor {
        max_memory_mb: spec.max_memory_mb(),
        options,
    };
    let scaled = Scaled {
        replicas: spec.replicas,
        resources: spec.resources.as_ref(),
        exporter: spec.monitoring_enabled().then(|| {
            spec.monitoring
                .as_ref()
                .and_then(|m| m.exporter_resources.as_ref())
        }),
        spec_path: &path,
    };
    let mut errors = [
        field(spec.replicas, |r| {
            validate_replicas(r, &path.child("replicas"))
        }),
        field(spec.workload.as_deref(), |w| {
            validate_workload(w, &path.child("workload"))
        }),
        field(spec.pod_labels.as_ref(), |l| {
            validate_pod_labels(l, &path.child("podLabels"))
        }),
        field(spec.pod_annotations.as_ref(), |a| {
            validate_pod_annotations(a, &pod_shape(spec, &path), &path.child("podAnnotations"))
        }),
        field(spec.node_selector.as_ref(), |s| {
            validate_labels(s, &path.child("nodeSelector"))
        }),
        field(spec.tolerations.as_deref(), |t| {
            validate_tolerations(t, &path.child("tolerations"))
        }),
        field(
            ha.and_then(|h| h.topology_spread_constraints.as_deref()),
            |c| validate_topology_spread(c, &ha_path.child("topologySpreadConstraints")),
        ),
        field(spec.image.as_deref(), |i| {
            validate_image(i, &path.child("image"))
        }),
        field(spec.resources.as_ref(), |r| {
            validate_resources(r, Some(&floor), &path.child("resources"))
        }),
        field(spec.memcached.as_ref(), |c| {
            validate_memcached_config(c, &path.child("memcached"))
        }),
        field(ha.and_then(|h| h.anti_affinity_preset.as_deref()), |p| {
            validate_anti_affinity_preset(p, &ha_path.child("antiAffinityPreset"))
        }),
        field(spec.enabled_pdb(), |pdb| {
            validate_pod_disruption_budget(
                pdb,
                spec.replicas,
                &ha_path.child("podDisruptionBudget"),
            )
        }),
        field(ha.and_then(|h| h.graceful_shutdown.as_ref()), |gs| {
            validate_graceful_shutdown(gs, &ha_path.child("gracefulShutdown"))
        }),
        field(spec.monitoring.as_ref(), |m| {
            validate_monitoring(m, &path.child("monitoring"))
        }),
        field(spec.security.as_ref(), |s| {
            validate_security(s, &path.child("security"))
        }),
        field(spec.autoscaling.as_ref(), |a| {
            validate_autoscaling(a, &scaled, &path.child("autoscaling"))
        }),
        field(
            spec.service.as_ref().and_then(|s| s.annotations.as_ref()),
            |a| validate_annotations(a, &path.child("service").child("annotations")),
        ),
        field(
            spec.network_policy
                .as_ref()
                .and_then(|n| n.allowed_sources.as_deref()),
            |p| validate_peers(p, &path.child("networkPolicy").child("allowedSources")),
        ),
        field(spec.server_list_config_map.as_deref(), |n| {
            validate_server_list_config_map(n, &path.child("serverListConfigMap"))
        }),
    ]
    .concat();
    errors.sort_by_key(|e| e.stage);
    errors
}

/// The errors of a field when it is set.
fn field<T>(value: Option<T>, validate: impl FnOnce(T) -> ErrorList) -> ErrorList {
    value.map(validate).unwrap_or_default()
}
