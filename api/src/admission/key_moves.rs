//! The warning of an UPDATE that moves keys: when a StatefulSet's replica
//! count changes, clients that hash keys over `status.serverList` ask
//! another pod for a share of them (rendezvous and ketama move only the keys
//! of the pods that join or leave), and say how they are carried; so for a
//! Deployment whose clients' hashing is known (they hash over its ready
//! pods).

use crate::defaults::Defaulted;
use crate::render::workload::replicas;

/// The warning of an UPDATE from `old` to `new` that changes the replicas
/// of a StatefulSet, or of a Deployment whose clients' hashing is known (not
/// to or from zero, not under autoscaling): the share of keys that move,
/// and whether they are copied (`spec.clientHashing`).
pub(super) fn key_move_warning(old: &Defaulted, new: &Defaulted) -> Option<String> {
    let (from, to) = (replicas(old)?, replicas(new)?);
    let stateful = old.stateful_set() && new.stateful_set();
    let hashed_deployment = !old.stateful_set() && !new.stateful_set() && new.hands_over_keys();
    if !(stateful || hashed_deployment) || from == to || from == 0 || to == 0 {
        return None;
    }
    let (more, fewer) = (from.max(to), from.min(to));
    let share = ((more - fewer) * 100 + more / 2) / more;
    let over = if stateful {
        "status.serverList"
    } else {
        "the ready pods"
    };
    let moving = format!(
        "spec.replicas {from} -> {to}: clients that hash keys over {over} will ask another pod for \
         about {share} % of them"
    );
    Some(match new.client_hashing.as_deref() {
        Some(hashing) => {
            let how = match (stateful, to > from) {
                (true, true) => {
                    "the new pods are added to status.serverList once these keys are copied to them"
                }
                (true, false) => {
                    "the leaving pods run until their keys are copied to the pods that keep them"
                }
                (false, true) => "the new pods turn ready once these keys are copied to them",
                (false, false) => {
                    "the leaving pods' keys are copied to the pods that keep them in their preStop delay"
                }
            };
            format!(
                "{moving}; {how} (spec.clientHashing: {hashing}; at most 60 s and 200,000 keys)"
            )
        }
        None => format!(
            "{moving}, which it does not hold: set spec.clientHashing (rendezvous: pymemcache's \
             HashClient; ketama: libmemcached) to have them copied first"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::apply_defaults;
    use serde_json::{Value, json};

    fn spec(value: Value) -> Defaulted {
        apply_defaults(serde_json::from_value(value).unwrap())
    }

    fn stateful(replicas: i32, hashing: Option<&str>) -> Defaulted {
        spec(json!({"workload": "StatefulSet", "replicas": replicas, "clientHashing": hashing}))
    }

    #[test]
    fn warns_of_the_keys_a_scaled_stateful_set_moves() {
        let rendezvous = Some("rendezvous");
        let cases = [
            (
                "scale up, copied",
                3,
                4,
                rendezvous,
                Some("about 25 % of them; the new pods are added"),
            ),
            (
                "scale down, copied",
                4,
                3,
                Some("ketama"),
                Some("about 25 % of them; the leaving pods run"),
            ),
            (
                "scale up, lost",
                2,
                3,
                None,
                Some("about 33 % of them, which it does not hold: set spec.clientHashing"),
            ),
            ("the same count", 3, 3, rendezvous, None),
            ("from zero", 0, 3, None, None),
            ("to zero", 3, 0, None, None),
        ];
        for (name, from, to, hashing, expected) in cases {
            let warning = key_move_warning(&stateful(from, hashing), &stateful(to, hashing));
            match expected {
                Some(part) => {
                    let warning = warning.expect(name);
                    let head = format!("spec.replicas {from} -> {to}: ");
                    assert!(warning.starts_with(&head), "{name}: {warning}");
                    assert!(warning.contains(part), "{name}: {warning}");
                }
                None => assert_eq!(warning, None, "{name}"),
            }
        }
    }

    #[test]
    fn warns_of_the_keys_a_deployment_whose_clients_hash_moves() {
        let deployment =
            |replicas| spec(json!({"replicas": replicas, "clientHashing": "rendezvous"}));
        let up = key_move_warning(&deployment(3), &deployment(4)).unwrap();
        assert!(
            up.starts_with("spec.replicas 3 -> 4: clients that hash keys over the ready pods will ask another pod for about 25 %"),
            "{up}"
        );
        assert!(up.contains("the new pods turn ready once"), "{up}");
        let down = key_move_warning(&deployment(4), &deployment(3)).unwrap();
        assert!(down.contains("in their preStop delay"), "{down}");
    }

    #[test]
    fn no_warning_where_no_server_list_is_rehashed() {
        let stateful = json!({"workload": "StatefulSet", "replicas": 3});
        let cases = [
            (
                "a Deployment without clientHashing",
                json!({"replicas": 3}),
                json!({"replicas": 4}),
            ),
            (
                "a switch of workload",
                stateful.clone(),
                json!({"replicas": 4}),
            ),
            (
                "autoscaling",
                json!({"workload": "StatefulSet", "autoscaling": {"enabled": true, "maxReplicas": 5}}),
                json!({"workload": "StatefulSet", "replicas": 4}),
            ),
        ];
        for (name, old, new) in cases {
            assert_eq!(key_move_warning(&spec(old), &spec(new)), None, "{name}");
        }
    }
}
