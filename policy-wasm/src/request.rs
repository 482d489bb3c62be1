//! The waPC `validate` payload in, a Kubewarden ValidationResponse out.

use kubewarden_policy_sdk::request::KubernetesAdmissionRequest;
use kubewarden_policy_sdk::response::ValidationResponse;
use memcached_api::admission::{self, Decision, REJECT_CODE};
use serde::Deserialize;

use crate::settings::Settings;

/// What policy-server sends: the AdmissionRequest and the policy settings.
#[derive(Deserialize)]
struct Payload {
    request: KubernetesAdmissionRequest,
    #[serde(default)]
    settings: serde_json::Value,
}

/// Judge one `validate` payload. Never fails: bad input is a rejection.
pub fn evaluate(payload: &[u8]) -> ValidationResponse {
    let decision = match decode(payload) {
        Ok((request, settings)) => admission::review(&request, &settings),
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
