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
pub mod limits;
mod memcached_config;
mod monitoring;
mod network;
mod options;
pub mod order;
mod pod;
mod resources;
mod schema;
mod security;
mod warnings;
mod workload;

use autoscaling::{Scaled, validate_autoscaling};
use high_availability::validate_high_availability;
use memcached_config::validate_memcached_config;
use monitoring::validate_monitoring;
use network::{validate_network_policies, validate_service};
use order::{Listing, Part};
use pod::{pod_shape, validate_pod_annotations, validate_pod_labels};
use resources::{MemoryFloor, validate_resources};
use security::validate_security;
use workload::{
    validate_client_hashing, validate_replicas, validate_server_list_config_map, validate_workload,
};

use crate::defaults::{Defaulted, apply_defaults};
use crate::extra_args::release::Judge;
use crate::field::{ErrorList, Path};
use crate::kubernetes::image::validate_image;
use crate::kubernetes::metadata::{self, validate_labels};
use crate::kubernetes::scheduling::validate_tolerations;
use crate::pod_security::Level;
use crate::pod_security::completion::{Addition, complete_for};
use crate::types::MemcachedSpec;

pub use options::{DEFAULT_MEMORY_OVERHEAD, ObjectName, Options};
pub use warnings::warnings;
pub use workload::MAX_STATEFUL_SET_NAME;

/// A spec through the one pipeline: defaulted, then validated and warned
/// about.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The defaulted spec.
    pub spec: Defaulted,
    /// What defaulting added to the security contexts for the Pod Security
    /// level (see [`apply_defaults_at`](crate::pod_security::completion::apply_defaults_at)).
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
/// `level` the pods must meet ([`apply_defaults_at`](crate::pod_security::completion::apply_defaults_at)).
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
    checked(spec, errors, level)
}

/// [`check_at`] for a spec [`limits::validate_sizes`] has found within its
/// bounds: they are not checked again (defaulting adds no item to a list
/// that has any).
pub fn check_within_bounds_at(
    object: ObjectName<'_>,
    spec: MemcachedSpec,
    options: &Options,
    level: Level,
) -> Checked {
    let spec = apply_defaults(spec);
    let errors = validate_named(object, &spec, options);
    checked(spec, errors, level)
}

/// `spec` with its `errors`, warned about and completed for `level`.
fn checked(spec: Defaulted, errors: ErrorList, level: Level) -> Checked {
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
    validate_named(object, spec, options)
}

/// [`validate_object`] but for the size bounds.
fn validate_named(object: ObjectName<'_>, spec: &Defaulted, options: &Options) -> ErrorList {
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

/// One validator per type of the spec, in the spec's order, each owning its
/// children's paths; where their errors are listed is [`order`]'s.
fn validate_spec(spec: &Defaulted, options: &Options) -> ErrorList {
    let path = Path::new("spec");
    let mut listing = Listing::default();
    listing.add(
        Part::Replicas,
        field(spec.replicas, |r| {
            validate_replicas(r, &path.child("replicas"))
        }),
    );
    listing.add(
        Part::Workload,
        field(spec.workload.as_deref(), |w| {
            validate_workload(w, &path.child("workload"))
        }),
    );
    listing.add(
        Part::ServerListConfigMap,
        field(spec.server_list_config_map.as_deref(), |n| {
            validate_server_list_config_map(n, &path.child("serverListConfigMap"))
        }),
    );
    listing.add(
        Part::ClientHashing,
        field(spec.client_hashing.as_deref(), |h| {
            validate_client_hashing(h, &path.child("clientHashing"))
        }),
    );
    listing.add(
        Part::Image,
        field(spec.image.as_deref(), |i| {
            validate_image(i, &path.child("image"))
        }),
    );
    let floor = MemoryFloor {
        max_memory_mb: spec.max_memory_mb(),
        options,
    };
    listing.add(
        Part::Resources,
        field(spec.resources.as_ref(), |r| {
            validate_resources(r, Some(&floor), &path.child("resources"))
        }),
    );
    listing.add(
        Part::Memcached,
        field(spec.memcached.as_ref(), |c| {
            let warm = spec.warm_restart_enabled();
            let judge = Judge::of(spec.image());
            validate_memcached_config(c, warm, &judge, &path.child("memcached"))
        }),
    );
    if let Some(ha) = &spec.high_availability {
        let ha_path = path.child("highAvailability");
        validate_high_availability(ha, spec.replicas, &ha_path, &mut listing);
    }
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
    listing.add(
        Part::Autoscaling,
        field(spec.autoscaling.as_ref(), |a| {
            validate_autoscaling(a, &scaled, &path.child("autoscaling"))
        }),
    );
    listing.add(
        Part::Monitoring,
        field(spec.monitoring.as_ref(), |m| {
            validate_monitoring(m, &path.child("monitoring"))
        }),
    );
    listing.add(
        Part::Security,
        field(spec.security.as_ref(), |s| {
            validate_security(s, &path.child("security"))
        }),
    );
    listing.add(Part::NetworkPolicy, validate_network_policies(spec, &path));
    listing.add(
        Part::Service,
        field(spec.service.as_ref(), |s| {
            validate_service(s, &path.child("service"))
        }),
    );
    listing.add(
        Part::PodLabels,
        field(spec.pod_labels.as_ref(), |l| {
            validate_pod_labels(l, &path.child("podLabels"))
        }),
    );
    listing.add(
        Part::PodAnnotations,
        field(spec.pod_annotations.as_ref(), |a| {
            let shape = pod_shape(spec, &path);
            validate_pod_annotations(a, &shape, spec, &path.child("podAnnotations"))
        }),
    );
    listing.add(
        Part::NodeSelector,
        field(spec.node_selector.as_ref(), |s| {
            validate_labels(s, &path.child("nodeSelector"))
        }),
    );
    listing.add(
        Part::Tolerations,
        field(spec.tolerations.as_deref(), |t| {
            validate_tolerations(t, &path.child("tolerations"))
        }),
    );
    listing.into_errors()
}

/// The errors of a field when it is set.
fn field<T>(value: Option<T>, validate: impl FnOnce(T) -> ErrorList) -> ErrorList {
    value.map(validate).unwrap_or_default()
}
