//! The readiness gate of a Deployment's pods whose keys are handed over
//! ([`KEYS_TAKEN_GATE`]): which pods wait for it, and setting it.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use memcached_api::render::containers::MEMCACHED_PORT;
use memcached_api::render::pod_template::KEYS_TAKEN_GATE;
use serde_json::json;

/// The pods of `namespace` that `selector` selects and that wait for the
/// gate: not deleted, their containers ready, the gate not set. By name,
/// with their memcached's address.
pub async fn waiting(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<(String, SocketAddr)>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods.list(&ListParams::default().labels(selector)).await?;
    Ok(listed.items.iter().filter_map(waits).collect())
}

/// `pod`'s name and memcached's address, when it waits for the gate.
fn waits(pod: &Pod) -> Option<(String, SocketAddr)> {
    let gated = (pod.spec.as_ref()?.readiness_gates.iter().flatten())
        .any(|g| g.condition_type == KEYS_TAKEN_GATE);
    let status = pod.status.as_ref()?;
    let set = |kind: &str| {
        (status.conditions.iter().flatten()).any(|c| c.type_ == kind && c.status == "True")
    };
    let waits = gated
        && pod.metadata.deletion_timestamp.is_none()
        && set("ContainersReady")
        && !set(KEYS_TAKEN_GATE);
    let ip: IpAddr = status.pod_ip.as_deref()?.parse().ok()?;
    waits.then(|| (pod.name_any(), SocketAddr::new(ip, MEMCACHED_PORT as u16)))
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

    #[test]
    fn a_pod_waits_for_its_gate_once_its_containers_are_ready() {
        let gate = json!([{"conditionType": KEYS_TAKEN_GATE}]);
        let ready = json!({"type": "ContainersReady", "status": "True"});
        let opened = json!({"type": KEYS_TAKEN_GATE, "status": "True"});
        let starting = json!({"type": "ContainersReady", "status": "False"});
        let address = SocketAddr::from(([10, 0, 0, 7], 11211));
        let cases = [
            ("waiting", pod(gate.clone(), json!([ready]), false), true),
            (
                "its gate set",
                pod(gate.clone(), json!([ready, opened]), false),
                false,
            ),
            (
                "memcached not ready yet",
                pod(gate.clone(), json!([starting]), false),
                false,
            ),
            ("deleted", pod(gate, json!([ready]), true), false),
            ("no gate", pod(json!([]), json!([ready]), false), false),
        ];
        for (case, pod, waiting) in cases {
            let expected = waiting.then(|| ("c-7d9f-x2x4q".to_string(), address));
            assert_eq!(waits(&pod), expected, "{case}");
        }
    }
}
