//! Reading the request's objects: the spec, decoded with the path of what
//! does not decode, and what the decision reads beside it.

use serde::Deserialize;
use serde_json::Value;

use crate::admission::decision::QUALIFIED_KIND;
use crate::admission::request::Request;
use crate::render::RESTART_TRIGGER_ANNOTATION;
use crate::types::{GROUP, KIND, MemcachedSpec, SECTIONS};

/// The spec of an object, or why it cannot be read.
pub(super) fn decode(object: &Value, what: &str) -> Result<MemcachedSpec, String> {
    let Value::Object(map) = object else {
        return Err(format!("the request's {what} is not a JSON object"));
    };
    for (field, expected) in [("apiVersion", None), ("kind", Some(KIND))] {
        match map.get(field) {
            None => {}
            Some(Value::String(s))
                if field == "apiVersion" && s.split_once('/').is_some_and(|(g, _)| g == GROUP) => {}
            Some(Value::String(s)) if expected == Some(s.as_str()) => {}
            Some(other) => {
                return Err(format!(
                    "{what}.{field} is {other}, but this policy only judges {QUALIFIED_KIND}"
                ));
            }
        }
    }
    let spec = match map.get("spec") {
        None | Some(Value::Null) => MemcachedSpec::default(),
        Some(spec) => decode_spec(spec).map_err(|e| format!("{what} cannot be decoded: {e}"))?,
    };
    Ok(spec)
}

/// Decode a stored or requested spec; the error names the field
/// (`spec.podDisruptionBudget.minAvailable: invalid value: ...`).
pub fn decode_spec(spec: &Value) -> Result<MemcachedSpec, String> {
    // serde reads an array into a struct field by field: the spec and its
    // sections must be objects. Each section's parent is looked up once
    // (SECTIONS lists a parent before its children).
    let mut parent = ("", Some(spec));
    for path in std::iter::once("").chain(SECTIONS) {
        let found = match path.split_once('.') {
            _ if path.is_empty() => Some(spec),
            None => {
                parent = (path, spec.get(path));
                parent.1
            }
            Some((name, child)) if name == parent.0 => parent.1.and_then(|v| v.get(child)),
            Some((name, child)) => spec.get(name).and_then(|v| v.get(child)),
        };
        if let Some(value) = found.filter(|v| !v.is_object() && !v.is_null()) {
            return Err(format!(
                "{}: invalid type: {}, expected an object",
                spec_path(path),
                json_type(value)
            ));
        }
    }
    // Fast path; on error decode again, tracking the path for the message.
    MemcachedSpec::deserialize(spec).map_err(|_| {
        match serde_path_to_error::deserialize::<_, MemcachedSpec>(spec) {
            Err(e) => format!(
                "{}: {}",
                spec_path(e.path().to_string().trim_start_matches('.')),
                e.inner()
            ),
            Ok(_) => "spec cannot be decoded".to_string(),
        }
    })
}

/// `spec` or `spec.<path>`.
pub(super) fn spec_path(path: &str) -> String {
    if path.is_empty() {
        "spec".to_string()
    } else {
        format!("spec.{path}")
    }
}

pub(super) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `status.replicas` of an object, when it holds a count.
pub(super) fn status_replicas(object: &Value) -> Option<i32> {
    let replicas = object.get("status")?.get("replicas")?.as_i64()?;
    i32::try_from(replicas).ok().filter(|r| *r >= 0)
}

/// The restart trigger annotation of an object.
pub(super) fn restart_trigger(object: &Value) -> Option<String> {
    let annotations = object.get("metadata")?.get("annotations")?;
    annotations
        .get(RESTART_TRIGGER_ANNOTATION)?
        .as_str()
        .map(str::to_string)
}

/// The stored Memcached of an UPDATE (its `oldObject`), as far as the decision goes.
pub(super) struct OldMemcached {
    pub(super) spec: MemcachedSpec,
    /// `status.replicas`: the replicas its workload runs (the controller's
    /// record of the workload's desired replicas).
    pub(super) running: Option<i32>,
    /// Its [`crate::render::RESTART_TRIGGER_ANNOTATION`].
    pub(super) restart_trigger: Option<String>,
}

impl OldMemcached {
    /// The stored object of an UPDATE, when it decodes.
    pub(super) fn of(request: &Request) -> Option<Self> {
        (request.operation == "UPDATE")
            .then(|| decode(&request.old_object, "oldObject").ok())
            .flatten()
            .map(|spec| OldMemcached {
                spec,
                running: status_replicas(&request.old_object),
                restart_trigger: restart_trigger(&request.old_object),
            })
    }
}
