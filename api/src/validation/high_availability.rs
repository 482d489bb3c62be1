//! `spec.highAvailability`: the anti-affinity preset, topology spread, the
//! PodDisruptionBudget and graceful shutdown.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::order::{Listing, Part};
use super::schema::{one_of, within};
use crate::defaults;
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::scheduling::validate_topology_spread;
use crate::types::{
    ANTI_AFFINITY_PRESETS, GracefulShutdownSpec, HighAvailabilitySpec,
    PRE_STOP_DELAY_SECONDS_BOUNDS, PdbSpec, TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS,
};

/// Each part of `spec.highAvailability` when set (the PodDisruptionBudget when
/// enabled, for `replicas` pods); its topology spread constraints are listed
/// with the pod's scheduling ([`Part::TopologySpread`]).
pub fn validate_high_availability(
    ha: &HighAvailabilitySpec,
    replicas: Option<i32>,
    path: &Path,
    listing: &mut Listing,
) {
    if let Some(constraints) = ha.topology_spread_constraints.as_deref() {
        let spread =
            validate_topology_spread(constraints, &path.child("topologySpreadConstraints"));
        listing.add(Part::TopologySpread, spread);
    }
    let mut errors = ErrorList::new();
    if let Some(preset) = ha.anti_affinity_preset.as_deref() {
        errors.extend(one_of(
            preset,
            &ANTI_AFFINITY_PRESETS,
            path.child("antiAffinityPreset"),
        ));
    }
    let pdb = ha.pod_disruption_budget.as_ref();
    if let Some(pdb) = pdb.filter(|p| p.enabled == Some(true)) {
        errors.extend(validate_pod_disruption_budget(
            pdb,
            replicas,
            &path.child("podDisruptionBudget"),
        ));
    }
    if let Some(gs) = &ha.graceful_shutdown {
        errors.extend(validate_graceful_shutdown(
            gs,
            &path.child("gracefulShutdown"),
        ));
    }
    listing.add(Part::HighAvailability, errors);
}

/// An enabled PodDisruptionBudget that can be satisfied (REQ-002/003), with
/// values the API server accepts in one.
fn validate_pod_disruption_budget(pdb: &PdbSpec, replicas: Option<i32>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    match (&pdb.min_available, &pdb.max_unavailable) {
        (Some(_), Some(_)) => errors.push(FieldError::invalid(
            path.clone(),
            "",
            "minAvailable and maxUnavailable are mutually exclusive, specify only one",
        )),
        (None, None) => errors.push(FieldError::required(
            path.clone(),
            "one of minAvailable or maxUnavailable must be set when PDB is enabled",
        )),
        _ => {}
    }
    if let (Some(IntOrString::Int(min)), Some(replicas)) = (&pdb.min_available, replicas)
        && *min >= replicas
    {
        errors.push(FieldError::invalid(
            path.child("minAvailable"),
            *min,
            format!("minAvailable ({min}) must be less than replicas ({replicas})"),
        ));
    }
    let mut errors: ErrorList = errors.into_iter().map(|e| e.at(Stage::Rule)).collect();
    errors.extend(int_or_percent(
        pdb.min_available.as_ref(),
        path.child("minAvailable"),
    ));
    errors.extend(int_or_percent(
        pdb.max_unavailable.as_ref(),
        path.child("maxUnavailable"),
    ));
    errors
}

/// A non-negative integer or a percentage of 0-100, as for a PodDisruptionBudget.
fn int_or_percent(value: Option<&IntOrString>, path: Path) -> Option<FieldError> {
    let error = match value? {
        IntOrString::Int(n) if *n < 0 => {
            FieldError::invalid(path, *n, "must be greater than or equal to 0")
        }
        IntOrString::Int(_) => return None,
        IntOrString::String(s) => match s
            .strip_suffix('%')
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        {
            None => FieldError::invalid(
                path,
                s.as_str(),
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', \
                 regex used for validation is '[0-9]+%')",
            ),
            Some(digits) if digits.parse::<u64>().map_or(true, |p| p > 100) => {
                FieldError::invalid(path, s.as_str(), "must not be greater than 100%")
            }
            Some(_) => return None,
        },
    };
    Some(error.at(Stage::Runtime))
}

/// The schema's bounds of graceful shutdown and, when it is enabled, a grace
/// period that outlasts the preStop sleep (REQ-006).
fn validate_graceful_shutdown(gs: &GracefulShutdownSpec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let delay = gs
        .pre_stop_delay_seconds
        .unwrap_or(defaults::PRE_STOP_DELAY_SECONDS);
    let grace = gs
        .termination_grace_period_seconds
        .unwrap_or(defaults::TERMINATION_GRACE_PERIOD_SECONDS);
    if gs.enabled == Some(true) && grace <= delay {
        errors.push(
            FieldError::invalid(
                path.child("terminationGracePeriodSeconds"),
                grace,
                format!(
                    "terminationGracePeriodSeconds ({grace}) must exceed preStopDelaySeconds ({delay})"
                ),
            )
            .at(Stage::Rule),
        );
    }
    if let Some(delay) = gs.pre_stop_delay_seconds {
        errors.extend(within(
            delay,
            &PRE_STOP_DELAY_SECONDS_BOUNDS,
            path.child("preStopDelaySeconds"),
        ));
    }
    if let Some(grace) = gs.termination_grace_period_seconds {
        errors.extend(within(
            grace,
            &TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS,
            path.child("terminationGracePeriodSeconds"),
        ));
    }
    errors
}
