//! The order a Memcached's errors are listed in, which the rejection message
//! keeps: stage by stage ([`Stage`](crate::field::Stage): the rules tying fields together, the CRD
//! schema's bounds, what memcached or a parser refuses, what the API server
//! refuses in the objects the controller builds), within a stage part by part
//! of the spec ([`Part`]), and within a part as its validator finds them. The
//! validators run as a tree, one per type of the spec; where they run does
//! not decide where their errors are listed. `api/tests/error_order.rs` pins
//! the order.

#[cfg(doc)]
use crate::field::Stage;
use crate::field::{ErrorList, FieldError};

/// The parts of a spec, in the order their errors are listed within a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// `spec.replicas`.
    Replicas,
    /// `spec.workload`.
    Workload,
    /// `spec.podLabels`.
    PodLabels,
    /// `spec.podAnnotations`.
    PodAnnotations,
    /// `spec.nodeSelector`.
    NodeSelector,
    /// `spec.tolerations`.
    Tolerations,
    /// `spec.highAvailability.topologySpreadConstraints`, listed with the
    /// pod's other scheduling fields.
    TopologySpread,
    /// `spec.image`.
    Image,
    /// `spec.resources`.
    Resources,
    /// `spec.memcached`.
    Memcached,
    /// The rest of `spec.highAvailability`: `antiAffinityPreset`,
    /// `podDisruptionBudget`, `gracefulShutdown`, in that order.
    HighAvailability,
    /// `spec.monitoring`.
    Monitoring,
    /// `spec.security`.
    Security,
    /// `spec.autoscaling`.
    Autoscaling,
    /// `spec.service`.
    Service,
    /// `spec.networkPolicy`.
    NetworkPolicy,
    /// `spec.serverListConfigMap`.
    ServerListConfigMap,
    /// `spec.clientHashing`.
    ClientHashing,
}

/// A spec's errors as its validators report them, each with its part.
#[derive(Debug, Default)]
pub struct Listing(Vec<(Part, FieldError)>);

impl Listing {
    /// Take `errors`, found in `part`.
    pub fn add(&mut self, part: Part, errors: ErrorList) {
        self.0.extend(errors.into_iter().map(|e| (part, e)));
    }

    /// Every error, in the order of this module: by stage, then [`Part`],
    /// then as found (the sort is stable).
    pub fn into_errors(self) -> ErrorList {
        let mut listed = self.0;
        listed.sort_by_key(|(part, e)| (e.stage, *part));
        listed.into_iter().map(|(_, e)| e).collect()
    }
}
