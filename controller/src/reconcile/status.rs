//! The status a reconcile reports, computed purely from what it observed.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use memcached_api::MemcachedStatus;

use memcached_api::{Memcached, MemcachedSpec};

use crate::objects::workload::{Rollout, desired_replicas};
use crate::reconcile::context::{INVALID_SPEC, Problem};
use crate::rollout::in_place::Progress;
use crate::rollout::pacing::Warming;
use crate::stats::client::{ClusterStats, Unanswered};

/// What one reconcile saw.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Kind of the workload running the pods (`Deployment`, `StatefulSet`).
    pub workload: &'static str,
    /// Replicas the workload should run.
    pub desired: i32,
    /// Ready replicas.
    pub ready: i32,
    /// Replicas running the current pod template.
    pub updated: i32,
    /// The workload reports minimum availability.
    pub available: bool,
    /// Referenced Secrets that do not exist.
    pub missing_secrets: Vec<String>,
    /// The policy's message for a stored spec it would refuse (admitted
    /// without it): nothing was applied.
    pub invalid_spec: Option<String>,
    /// No workload of this Memcached's runs (refused before one was created).
    pub nothing_running: bool,
    /// Generation of the CR.
    pub generation: Option<i64>,
    /// Where clients connect (see [`crate::objects::server_list`]).
    pub server_list: Vec<String>,
    /// The list names every pod (StatefulSet): published whether or not the
    /// pods are ready, so clients are configured once.
    pub stable_names: bool,
    /// Both workload kinds run: `spec.workload` changed and the new one does
    /// not yet run every replica ready.
    pub switching: bool,
    /// What kept the reconcile from doing all it should (first one reported).
    pub problems: Vec<Problem>,
    /// The workload or Service of this name belongs to someone else:
    /// never Ready, no server list.
    pub foreign: bool,
    /// The pods' label selector as a string (`status.selector`).
    pub selector: String,
    /// The memcached image of the pod template (`status.image`).
    pub image: Option<String>,
    /// An image change being applied in place: what it has done.
    pub in_place: Option<Progress>,
    /// A StatefulSet rollout waiting for its last replaced pod to warm.
    pub warming: Option<Warming>,
    /// A scale held while keys are handed over: what it waits for.
    pub handover: Option<String>,
}

/// Degraded and Ready reason while ready pods accept connections but do not answer.
pub const NOT_ANSWERING: &str = "PodsNotAnswering";

/// Which pods accept connections but do not answer, and how.
fn not_answering(unanswered: &BTreeMap<SocketAddr, Unanswered>) -> String {
    let pods: Vec<String> = (unanswered.iter())
        .map(|(pod, how)| format!("{pod} ({how})"))
        .collect();
    format!(
        "{} ready pod(s) accept connections but do not answer stats: {}",
        pods.len(),
        pods.join(", ")
    )
}

/// Every desired pod ready as Kubernetes sees it, with its Secrets, and
/// this Memcached's own: the server list is published, and the Memcached is
/// `Ready` once every pod also answers (the one rule for both).
pub fn serving(seen: &Observed) -> bool {
    seen.desired > 0
        && seen.ready >= seen.desired
        && seen.missing_secrets.is_empty()
        && !seen.foreign
}

/// Scaled to zero with every Secret found and nothing of someone else's in
/// the way: no pod to wait for, and what could change it is watched.
pub fn at_rest(seen: &Observed) -> bool {
    seen.desired == 0 && seen.missing_secrets.is_empty() && !seen.foreign
}

/// The new status. `lastTransitionTime` moves only when a condition flips.
pub fn compute(
    previous: Option<&MemcachedStatus>,
    seen: &Observed,
    stats: &ClusterStats,
    now: &Time,
) -> MemcachedStatus {
    let serving = serving(seen);
    // ...and every one answers memcached's protocol.
    let ready = serving && stats.unanswered.is_empty();
    // Nothing is applied for an invalid spec: it makes no progress.
    let rolling = seen.invalid_spec.is_none()
        && (seen.switching
            || seen.in_place.is_some()
            || seen.warming.is_some()
            || seen.handover.is_some()
            || seen.updated < seen.desired
            || seen.ready < seen.desired);
    let (degraded, degraded_reason, degraded_message) = if let Some(errors) = &seen.invalid_spec {
        (true, INVALID_SPEC, errors.clone())
    } else if !seen.missing_secrets.is_empty() {
        (
            true,
            "SecretNotFound",
            format!("Secret(s) not found: {}", seen.missing_secrets.join(", ")),
        )
    } else if let Some(problem) = seen.problems.first() {
        (true, problem.reason, problem.message.clone())
    } else if !stats.unanswered.is_empty() {
        (true, NOT_ANSWERING, not_answering(&stats.unanswered))
    } else if seen.ready < seen.desired {
        (
            true,
            "ReplicasNotReady",
            format!("{} of {} replicas are ready", seen.ready, seen.desired),
        )
    } else {
        (
            false,
            "AllReplicasReady",
            "All replicas are ready".to_string(),
        )
    };
    let refused_alone = seen.invalid_spec.is_some() && seen.nothing_running;
    let ready_reason = if ready {
        "MemcachedReady"
    } else if refused_alone {
        INVALID_SPEC
    } else if seen.desired == 0 {
        "ScaledToZero"
    } else if !stats.unanswered.is_empty() {
        NOT_ANSWERING
    } else {
        "MemcachedNotReady"
    };
    let state = if degraded && degraded_reason != "ReplicasNotReady" {
        format!("Degraded: {degraded_reason}")
    } else {
        ready_reason.to_string()
    };
    let kind = seen.workload;
    let wanted = [
        condition(
            "Available",
            seen.available,
            &if refused_alone {
                INVALID_SPEC.to_string()
            } else if seen.available {
                format!("{kind}Available")
            } else {
                format!("{kind}Unavailable")
            },
            &if refused_alone {
                "nothing runs: the spec is invalid".to_string()
            } else if seen.available {
                format!("{kind} has minimum availability")
            } else {
                format!("{kind} does not have minimum availability")
            },
        ),
        condition(
            "Progressing",
            rolling,
            &if seen.invalid_spec.is_some() {
                INVALID_SPEC.to_string()
            } else if seen.in_place.is_some() {
                "RestartingInPlace".to_string()
            } else if seen.handover.is_some() {
                "HandingOverKeys".to_string()
            } else if rolling {
                "RolloutInProgress".to_string()
            } else {
                format!("{kind}Complete")
            },
            &seen
                .in_place
                .as_ref()
                .filter(|_| seen.invalid_spec.is_none())
                .map(Progress::message)
                .unwrap_or_else(|| {
                    if refused_alone {
                        return "nothing is applied while the spec is invalid".to_string();
                    } else if seen.invalid_spec.is_some() {
                        return format!(
                            "nothing is applied while the spec is invalid; the {kind} runs the last valid spec"
                        );
                    }
                    let waiting = match (&seen.warming, &seen.handover) {
                        (Some(w), _) => format!("; {}", w.message()),
                        (None, Some(handover)) => format!("; {handover}"),
                        (None, None) => String::new(),
                    };
                    format!(
                        "{} of {} replicas updated, {} ready{waiting}",
                        seen.updated, seen.desired, seen.ready
                    )
                }),
        ),
        condition("Degraded", degraded, degraded_reason, &degraded_message),
        condition(
            "Ready",
            ready,
            ready_reason,
            &if ready {
                format!("{} replicas serving", seen.ready)
            } else if refused_alone {
                "nothing runs: the spec is invalid".to_string()
            } else {
                format!("{} of {} replicas ready", seen.ready, seen.desired)
            },
        ),
    ];
    let old = previous
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let conditions = wanted
        .into_iter()
        .map(|mut c| {
            c.observed_generation = seen.generation;
            c.last_transition_time = match old.iter().find(|o| o.type_ == c.type_) {
                Some(o) if o.status == c.status => o.last_transition_time.clone(),
                _ => now.clone(),
            };
            c
        })
        .collect();
    MemcachedStatus {
        replicas: (!refused_alone).then_some(seen.desired),
        ready_replicas: (!refused_alone).then_some(seen.ready),
        ready: (!refused_alone).then(|| format!("{}/{}", seen.ready, seen.desired)),
        state: Some(state),
        selector: Some(seen.selector.clone()).filter(|s| !s.is_empty()),
        image: seen.image.clone(),
        rollout: match &seen.in_place {
            _ if seen.invalid_spec.is_some() => None,
            Some(progress) => Some(progress.summary()),
            None if seen.switching || seen.updated < seen.desired || seen.warming.is_some() => {
                let updated = seen.updated.min(seen.desired);
                Some(match &seen.warming {
                    Some(w) => format!("{updated}/{} updated, {}", seen.desired, w.summary()),
                    None => format!("{updated}/{} updated", seen.desired),
                })
            }
            None => seen.handover.clone(),
        },
        memcached_version: stats.version.clone(),
        current_connections: stats.current_connections,
        hit_ratio: stats.hit_ratio.clone(),
        observed_generation: seen.generation,
        server_list: (!seen.foreign
            && (serving || seen.stable_names)
            && !seen.server_list.is_empty())
        .then(|| seen.server_list.clone()),
        conditions: Some(conditions),
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(Default::default()),
        observed_generation: None,
    }
}

/// What converging found of the workload serving `mc` (of kind `workload`,
/// `rollout` as its status reports it), for the status.
pub(super) fn observe(
    mc: &Memcached,
    spec: &MemcachedSpec,
    workload: &'static str,
    rollout: Option<&Rollout>,
    missing: Vec<String>,
) -> Observed {
    let seen = rollout.copied().unwrap_or_default();
    Observed {
        workload,
        desired: desired_replicas(spec, rollout),
        ready: seen.ready,
        updated: seen.updated,
        available: seen.available,
        missing_secrets: missing,
        generation: mc.metadata.generation,
        selector: crate::objects::meta::selector_string(mc),
        image: spec.image.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn cond<'a>(s: &'a MemcachedStatus, t: &str) -> &'a Condition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    fn seen(desired: i32, ready: i32) -> Observed {
        Observed {
            desired,
            ready,
            updated: desired,
            available: ready > 0,
            workload: "Deployment",
            server_list: vec!["c.ns:11211".into()],
            generation: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn ready_only_when_all_desired_replicas_are_ready() {
        let s = compute(None, &seen(3, 3), &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(cond(&s, "Ready").reason, "MemcachedReady");
        assert_eq!(
            (s.ready.as_deref(), s.state.as_deref()),
            (Some("3/3"), Some("MemcachedReady"))
        );
        assert_eq!(s.server_list, Some(vec!["c.ns:11211".to_string()]));
        assert_eq!(
            (s.hit_ratio.as_ref(), s.current_connections),
            (None, None),
            "no stats read: no ratio, no connection count"
        );
        let s = compute(None, &seen(3, 2), &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Ready").status, "False");
        assert_eq!(cond(&s, "Degraded").reason, "ReplicasNotReady");
        assert_eq!(
            (s.ready.as_deref(), s.state.as_deref()),
            (Some("2/3"), Some("MemcachedNotReady"))
        );
        assert_eq!(s.server_list, None);
        let s = compute(None, &seen(0, 0), &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Ready").reason, "ScaledToZero");
    }

    #[test]
    fn a_rollout_shows_in_its_column_and_condition() {
        let none = compute(None, &seen(3, 3), &ClusterStats::default(), &at(1));
        assert_eq!(none.rollout, None);
        let mut rolling = seen(3, 3);
        rolling.updated = 1;
        let s = compute(None, &rolling, &ClusterStats::default(), &at(1));
        assert_eq!(s.rollout.as_deref(), Some("1/3 updated"));
        assert_eq!(cond(&s, "Progressing").reason, "RolloutInProgress");
        let mut in_place = seen(3, 3);
        in_place.in_place = Some(Progress {
            change: "memcached image memcached:1.6.39".into(),
            updated: 2,
            pods: 3,
            restarting: Some("c-1".into()),
            started: true,
            ..Default::default()
        });
        let s = compute(None, &in_place, &ClusterStats::default(), &at(1));
        assert_eq!(
            s.rollout.as_deref(),
            Some("in place 2/3, c-1 restarting warm")
        );
        let progressing = cond(&s, "Progressing");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("True", "RestartingInPlace")
        );
        assert_eq!(cond(&s, "Ready").status, "True", "the pods serve meanwhile");
        let mut paced = seen(3, 3);
        paced.updated = 1;
        paced.warming = Some(Warming {
            pod: "c-2".into(),
            now: Some(crate::stats::client::PodStats {
                items: 10,
                ..Default::default()
            }),
            peers: Some(crate::rollout::pacing::Peers {
                items: 1000,
                hit_ratio: None,
            }),
        });
        let s = compute(None, &paced, &ClusterStats::default(), &at(1));
        assert_eq!(
            s.rollout.as_deref(),
            Some("1/3 updated, c-2 warming, 10 of 500 items")
        );
        assert_eq!(
            cond(&s, "Progressing").message,
            "1 of 3 replicas updated, 3 ready; waiting for c-2 to warm (10 items, half the median pod's 1000 or half its memory wanted)"
        );
    }

    #[test]
    fn stable_names_are_listed_before_the_pods_are_ready() {
        let mut o = seen(2, 0);
        o.workload = "StatefulSet";
        o.stable_names = true;
        o.server_list = vec!["c-0.c.ns.svc:11211".into(), "c-1.c.ns.svc:11211".into()];
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        assert_eq!(s.server_list.as_ref(), Some(&o.server_list));
        assert_eq!(cond(&s, "Available").reason, "StatefulSetUnavailable");
        o.foreign = true;
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        assert_eq!(s.server_list, None, "someone else's StatefulSet");
    }

    #[test]
    fn an_invalid_spec_takes_precedence() {
        let mut o = seen(1, 1);
        o.missing_secrets = vec!["tls".into()];
        o.invalid_spec = Some("spec.replicas: Invalid value: 99".into());
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Degraded").reason, "InvalidSpec");
        assert_eq!(
            cond(&s, "Degraded").message,
            "spec.replicas: Invalid value: 99"
        );
        assert_eq!(s.state.as_deref(), Some("Degraded: InvalidSpec"));
        let progressing = cond(&s, "Progressing");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("False", "InvalidSpec")
        );
        assert_eq!(
            progressing.message,
            "nothing is applied while the spec is invalid; the Deployment runs the last valid spec"
        );
    }

    #[test]
    fn an_invalid_spec_refused_before_anything_ran_claims_no_replicas() {
        let mut o = seen(0, 0);
        o.invalid_spec = Some("spec.replicas: Invalid value: 99".into());
        o.nothing_running = true;
        o.available = false;
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        for type_ in ["Available", "Progressing", "Ready"] {
            let c = cond(&s, type_);
            assert_eq!(
                (c.status.as_str(), c.reason.as_str()),
                ("False", "InvalidSpec"),
                "{type_}: not ScaledToZero or DeploymentComplete"
            );
        }
        assert_eq!(
            cond(&s, "Ready").message,
            "nothing runs: the spec is invalid"
        );
        assert_eq!(
            (s.replicas, s.ready_replicas, s.ready.as_deref()),
            (None, None, None),
            "kubectl shows no replica count for what never ran"
        );
        assert_eq!(s.state.as_deref(), Some("Degraded: InvalidSpec"));
    }

    #[test]
    fn pods_that_do_not_answer_are_named_with_how_and_the_instance_is_not_ready() {
        let stats = ClusterStats {
            reachable: 1,
            unanswered: BTreeMap::from([
                ("10.0.0.7:11211".parse().unwrap(), Unanswered::Silent),
                ("10.0.0.8:11211".parse().unwrap(), Unanswered::Garbled),
            ]),
            ..Default::default()
        };
        let s = compute(None, &seen(2, 2), &stats, &at(1));
        assert_eq!(cond(&s, "Ready").status, "False");
        assert_eq!(cond(&s, "Ready").reason, NOT_ANSWERING);
        assert_eq!(cond(&s, "Degraded").reason, NOT_ANSWERING);
        assert_eq!(
            cond(&s, "Degraded").message,
            "2 ready pod(s) accept connections but do not answer stats: \
             10.0.0.7:11211 (no complete answer within 3s), 10.0.0.8:11211 (not memcached's stats answer)"
        );
        assert_eq!(s.state.as_deref(), Some("Degraded: PodsNotAnswering"));
        assert_eq!(
            s.server_list,
            Some(vec!["c.ns:11211".to_string()]),
            "clients keep their configuration"
        );
    }

    #[test]
    fn missing_secrets_take_precedence_over_replicas() {
        let mut o = seen(1, 0);
        o.missing_secrets = vec!["tls".into()];
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Degraded").reason, "SecretNotFound");
        assert!(cond(&s, "Degraded").message.contains("tls"));
        assert_eq!(cond(&s, "Ready").status, "False");
        assert_eq!(s.state.as_deref(), Some("Degraded: SecretNotFound"));
    }

    #[test]
    fn a_foreign_deployment_is_never_ready_and_problems_degrade() {
        let mut o = seen(1, 1);
        o.foreign = true;
        o.problems = vec![Problem {
            reason: "ResourceConflict",
            message: "a Deployment named c exists".into(),
        }];
        let s = compute(None, &o, &ClusterStats::default(), &at(1));
        assert_eq!(cond(&s, "Ready").status, "False");
        assert_eq!(s.server_list, None);
        assert_eq!(cond(&s, "Degraded").status, "True");
        assert_eq!(cond(&s, "Degraded").reason, "ResourceConflict");
    }

    #[test]
    fn transition_time_moves_only_on_flips() {
        let first = compute(None, &seen(1, 0), &ClusterStats::default(), &at(1));
        let same = compute(Some(&first), &seen(1, 0), &ClusterStats::default(), &at(2));
        assert_eq!(first, same);
        let flipped = compute(Some(&first), &seen(1, 1), &ClusterStats::default(), &at(3));
        assert_eq!(cond(&flipped, "Ready").last_transition_time, at(3));
        assert_eq!(cond(&flipped, "Available").last_transition_time, at(3));
        let stats = ClusterStats {
            current_connections: Some(7),
            hit_ratio: Some("0.50".into()),
            ..Default::default()
        };
        let later = compute(Some(&flipped), &seen(1, 1), &stats, &at(9));
        assert_eq!(cond(&later, "Ready").last_transition_time, at(3));
        assert_eq!(later.current_connections, Some(7));
    }
}
