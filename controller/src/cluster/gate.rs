//! The readiness gate of a Deployment's pods whose keys are handed over
//! ([`KEYS_TAKEN_GATE`]): the pods whose readiness waits for it, and
//! setting it.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use memcached_api::render::containers::MEMCACHED_PORT;
use memcached_api::render::pod_template::KEYS_TAKEN_GATE;
use serde_json::json;

/// A pod whose readiness waits for the gate, by how far it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gated {
    /// Its containers are not ready yet.
    Starting(String),
    /// Its containers are ready and the gate is not set: its keys are to
    /// be copied to its memcached, at this address.
    Waiting(String, SocketAddr),
    /// The gate is set: the pod is ready, or soon (its endpoint may say so
    /// later still); its memcached at this address.
    Opened(String, SocketAddr),
}

/// The pods of `namespace` that `selector` selects whose readiness waits
/// for the gate (not deleted, not stopped).
pub async fn gated(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Gated>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods.list(&ListParams::default().labels(selector)).await?;
    Ok(listed.items.iter().filter_map(gated_pod).collect())
}

/// How far `pod` is, when its readiness waits for the gate.
fn gated_pod(pod: &Pod) -> Option<Gated> {
    let gated = (pod.spec.as_ref()?.readiness_gates.iter().flatten())
        .any(|g| g.condition_type == KEYS_TAKEN_GATE);
    let status = pod.status.as_ref()?;
    let set = |kind: &str| {
        (status.conditions.iter().flatten()).any(|c| c.type_ == kind && c.status == "True")
    };
    // Failed (evicted by the kubelet) or Succeeded: it serves no more.
    let stopped = matches!(status.phase.as_deref(), Some("Failed" | "Succeeded"));
    if !gated || stopped || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let name = pod.name_any();
    let address = || {
        let ip: IpAddr = status.pod_ip.as_deref()?.parse().ok()?;
        Some(SocketAddr::new(ip, MEMCACHED_PORT as u16))
    };
    Some(if set(KEYS_TAKEN_GATE) {
        Gated::Opened(name, address()?)
    } else if set("ContainersReady") {
        Gated::Waiting(name, address()?)
    } else {
        Gated::Starting(name)
    })
}

/// Set the gate of pod `name` in `namespace`, saying why (`message`): the
/// kubelet then reports it ready.
pub async fn open(
    client: &Client,
    namespace: &str,
    name: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    // A strategic merge: the conditions merge by type, the kubelet's kept.
    let condition = json!({
        "type": KEYS_TAKEN_GATE,
        "status": "True",
        "reason": "KeysTaken",
        "message": message,
        "lastTransitionTime": Time(Timestamp::now()),
    });
    let patch = json!({"status": {"conditions": [condition]}});
    let params = PatchParams::default();
    (pods
        .patch_status(name, &params, &Patch::Strategic(patch))
        .await)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn pod(gates: Value, conditions: Value, deleted: bool) -> Pod {
        let mut pod = json!({
            "metadata": {"name": "c-7d9f-x2x4q"},
            "spec": {"containers": [], "readinessGates": gates},
            "status": {"podIP": "10.0.0.7", "conditions": conditions},
        });
        if deleted {
            pod["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
        }
        serde_json::from_value(pod).unwrap()
    }

    fn evicted(mut pod: Pod) -> Pod {
        pod.status.get_or_insert_default().phase = Some("Failed".into());
        pod
    }

    #[test]
    fn a_gated_pod_starts_waits_for_its_keys_then_opens() {
        let gate = json!([{"conditionType": KEYS_TAKEN_GATE}]);
        let condition = |kind: &str, set: bool| json!({"type": kind, "status": if set { "True" } else { "False" }});
        let ready = condition("ContainersReady", true);
        let opened = condition(KEYS_TAKEN_GATE, true);
        let name = || "c-7d9f-x2x4q".to_string();
        let address = SocketAddr::from(([10, 0, 0, 7], 11211));
        let cases = [
            (
                "memcached starting",
                pod(
                    gate.clone(),
                    json!([condition("ContainersReady", false)]),
                    false,
                ),
                Some(Gated::Starting(name())),
            ),
            (
                "waiting for its keys",
                pod(gate.clone(), json!([ready]), false),
                Some(Gated::Waiting(name(), address)),
            ),
            (
                "its gate set, not ready yet",
                pod(gate.clone(), json!([ready, opened]), false),
                Some(Gated::Opened(name(), address)),
            ),
            (
                "ready",
                pod(
                    gate.clone(),
                    json!([ready, opened, condition("Ready", true)]),
                    false,
                ),
                Some(Gated::Opened(name(), address)),
            ),
            ("deleted", pod(gate.clone(), json!([ready]), true), None),
            (
                "evicted",
                evicted(pod(gate, json!([ready, opened]), false)),
                None,
            ),
            ("no gate", pod(json!([]), json!([ready]), false), None),
        ];
        for (case, pod, expected) in cases {
            assert_eq!(gated_pod(&pod), expected, "{case}");
        }
    }
}
