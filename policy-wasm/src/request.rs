//! The waPC `validate` payload in, a Kubewarden ValidationResponse out.

use kubewarden_policy_sdk::response::ValidationResponse;
use memcached_api::admission::{self, Decision, NamespaceEnforce, REJECT_CODE, StoredMemcached};
use serde::Deserialize;

use crate::settings::Settings;
use crate::{memcached, namespace};

/// What policy-server sends: the AdmissionRequest and the policy settings.
#[derive(Deserialize)]
struct Payload {
    request: AdmissionRequest,
    #[serde(default)]
    settings: serde_json::Value,
}

/// The AdmissionRequest fields the decision reads, under the names the SDK's
/// `KubernetesAdmissionRequest` accepts. The others (uid, userInfo, options,
/// ...) are skipped unbuilt: the SDK type would allocate them on every call.
#[derive(Default, Deserialize)]
#[serde(default)]
struct AdmissionRequest {
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    #[serde(alias = "subResource")]
    sub_resource: String,
    name: String,
    namespace: String,
    operation: String,
    object: serde_json::Value,
    #[serde(alias = "oldObject")]
    old_object: serde_json::Value,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct GroupVersionKind {
    group: String,
    version: String,
    kind: String,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct GroupVersionResource {
    group: String,
    resource: String,
}

/// Judge one `validate` payload. Never fails: bad input is a rejection.
/// The namespace's Pod Security label, then the stored Memcached of a
/// scale-up, are read from the cluster only when they can change the
/// judgement.
pub fn evaluate(payload: &[u8]) -> ValidationResponse {
    evaluate_reading(payload, namespace::enforce_label, memcached::stored)
}

/// [`evaluate`], reading namespace labels with `enforce_label` (and stored
/// Memcacheds from the host, which outside WebAssembly answers none).
pub fn evaluate_with(
    payload: &[u8],
    enforce_label: impl FnOnce(&str) -> NamespaceEnforce,
) -> ValidationResponse {
    evaluate_reading(payload, enforce_label, memcached::stored)
}

/// [`evaluate`], reading namespace labels with `enforce_label` and the
/// Memcached `name` of `namespace` with `stored_memcached(namespace, name)`.
pub fn evaluate_reading(
    payload: &[u8],
    enforce_label: impl FnOnce(&str) -> NamespaceEnforce,
    stored_memcached: impl FnOnce(&str, &str) -> StoredMemcached,
) -> ValidationResponse {
    let decision = match decode(payload) {
        Ok((mut request, settings)) => {
            if admission::needs_namespace(&request, &settings) {
                request.namespace_enforce = enforce_label(&request.namespace);
            }
            if admission::needs_memcached(&request, &settings) {
                request.memcached = stored_memcached(&request.namespace, &request.name);
            }
            admission::review(request, &settings)
        }
        Err(message) => Decision::Reject {
            message,
            code: REJECT_CODE,
            warnings: Vec::new(),
        },
    };
    response(decision)
}

fn decode(payload: &[u8]) -> Result<(admission::Request, admission::Settings), String> {
    let payload: Payload = serde_json::from_slice(payload)
        .map_err(|e| format!("cannot decode the admission request: {e}"))?;
    let settings = Settings::from_value(payload.settings)?;
    let r = payload.request;
    let request = admission::Request {
        operation: r.operation,
        group: r.kind.group,
        version: r.kind.version,
        kind: r.kind.kind,
        resource_group: r.resource.group,
        resource: r.resource.resource,
        sub_resource: r.sub_resource,
        name: r.name,
        object: r.object,
        old_object: r.old_object,
        namespace: r.namespace,
        namespace_enforce: NamespaceEnforce::NotRead,
        memcached: StoredMemcached::NotRead,
    };
    Ok((request, settings))
}

fn response(decision: Decision) -> ValidationResponse {
    let (accepted, message, code, mutated_object, warnings) = match decision {
        Decision::Accept { warnings } => (true, None, None, None, warnings),
        Decision::Mutate { object, warnings } => (true, None, None, Some(object), warnings),
        Decision::Reject {
            message,
            code,
            warnings,
        } => (false, Some(message), Some(code), None, warnings),
    };
    ValidationResponse {
        accepted,
        message,
        code,
        mutated_object,
        audit_annotations: None,
        warnings: (!warnings.is_empty()).then_some(warnings),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(settings: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "request": {
                "operation": "CREATE", "namespace": "team-a", "name": "c",
                "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
                "resource": {"group": "memcached.c5c3.io", "resource": "memcacheds"},
                "object": {"metadata": {"name": "c"},
                           "spec": {"security": {"containerSecurityContext": {"runAsUser": 0}}}},
            },
            "settings": settings,
        }))
        .unwrap()
    }

    #[test]
    fn the_namespace_is_read_only_below_restricted() {
        let unexpected = |_: &str| -> NamespaceEnforce { panic!("no lookup at restricted") };
        let response = evaluate_with(&payload(json!({})), unexpected);
        assert!(!response.accepted);
        assert_eq!(response.code, Some(403));
    }

    #[test]
    fn the_namespace_label_tightens_the_settings_level() {
        let read = |label: &'static str| {
            move |namespace: &str| {
                assert_eq!(namespace, "team-a");
                NamespaceEnforce::Label(Some(label.to_string()))
            }
        };
        let settings = json!({"podSecurityLevel": "baseline"});
        assert!(evaluate_with(&payload(settings.clone()), read("baseline")).accepted);
        let response = evaluate_with(&payload(settings), read("restricted"));
        assert!(!response.accepted);
        let message = response.message.unwrap();
        assert!(
            message.contains("\"restricted:latest\" (enforced by namespace \"team-a\")"),
            "{message}"
        );
    }

    /// `kubectl scale` of the Memcached `c` of namespace `team-a` from 3 to `replicas`.
    fn scale_payload(replicas: i32, settings: serde_json::Value) -> Vec<u8> {
        let scale = |replicas: i32| {
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "c", "namespace": "team-a"}, "spec": {"replicas": replicas}})
        };
        serde_json::to_vec(&json!({
            "request": {
                "operation": "UPDATE", "namespace": "team-a", "name": "c", "subResource": "scale",
                "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "resource": {"group": "memcached.c5c3.io", "resource": "memcacheds"},
                "object": scale(replicas), "oldObject": scale(3),
            },
            "settings": settings,
        }))
        .unwrap()
    }

    #[test]
    fn a_scale_up_reads_the_namespace_then_the_memcached() {
        let restricted = |_: &str| NamespaceEnforce::Label(Some("restricted".to_string()));
        let stored = |namespace: &str, name: &str| {
            assert_eq!((namespace, name), ("team-a", "c"));
            StoredMemcached::Object(json!({"apiVersion": "memcached.c5c3.io/v1beta1",
                "kind": "Memcached", "metadata": {"name": "c", "namespace": "team-a"},
                "spec": {"replicas": 3, "security": {"containerSecurityContext": {"runAsUser": 0}}}}))
        };
        let baseline = json!({"podSecurityLevel": "baseline"});
        let response = evaluate_reading(&scale_payload(5, baseline.clone()), restricted, stored);
        assert!(!response.accepted);
        assert_eq!(response.code, Some(403));
        let message = response.message.unwrap();
        assert!(
            message.starts_with("Memcached.memcached.c5c3.io \"c\" is forbidden: violates PodSecurity \"restricted:latest\" (enforced by namespace \"team-a\"): "),
            "{message}"
        );
        let unexpected = |_: &str, _: &str| -> StoredMemcached { panic!("no Memcached read") };
        // Scaling down reads nothing at all.
        let nothing = |_: &str| -> NamespaceEnforce { panic!("no Namespace read") };
        assert!(
            evaluate_reading(&scale_payload(1, baseline.clone()), nothing, unexpected).accepted
        );
        // A namespace asking no more than the settings: no Memcached read.
        let unlabelled = |_: &str| NamespaceEnforce::Label(None);
        assert!(evaluate_reading(&scale_payload(5, baseline), unlabelled, unexpected).accepted);
        // At restricted nothing is read.
        assert!(evaluate_reading(&scale_payload(5, json!({})), nothing, unexpected).accepted);
    }
}
