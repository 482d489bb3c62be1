//! The waPC `validate` payload in, a Kubewarden ValidationResponse out.

use kubewarden_policy_sdk::response::ValidationResponse;
use memcached_api::admission::{self, Decision, REJECT_CODE};
use serde::Deserialize;

use crate::settings::Settings;

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
pub fn evaluate(payload: &[u8]) -> ValidationResponse {
    let decision = match decode(payload) {
        Ok((request, settings)) => admission::review(request, &settings),
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
