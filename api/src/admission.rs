//! The admission decision for one request: default, validate the defaulted
//! object, and answer accept, mutate or reject. Transport-free: the waPC glue
//! and the tests feed it decoded requests.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::apply_defaults;
use crate::field::invalid_message;
use crate::types::{GROUP, KIND, MemcachedSpec, SECTIONS, VERSIONS};
use crate::validation::{self, ObjectName, Options};

/// `Kind.group`, as Kubernetes prefixes invalid-object messages.
const QUALIFIED_KIND: &str = "Memcached.memcached.c5c3.io";
/// Code of every rejection: the request carries an object we cannot admit.
pub const REJECT_CODE: u16 = 400;

/// The parts of an AdmissionRequest the decision needs.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// Group of the request's kind.
    pub group: String,
    /// Version of the request's kind.
    pub version: String,
    /// The request's kind.
    pub kind: String,
    /// Subresource (`status`, `scale`), empty for the object itself.
    pub sub_resource: String,
    /// Name of the object in the request.
    pub name: String,
    /// The object as submitted.
    pub object: Value,
    /// The stored object (UPDATE).
    pub old_object: Value,
}

/// How to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Validation tunables.
    pub options: Options,
    /// Return the defaulted object; when false, judge it but never mutate.
    pub mutate: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            options: Options::default(),
            mutate: true,
        }
    }
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Admit unchanged.
    Accept {
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Admit with the defaulted object.
    Mutate {
        /// The whole object after defaulting.
        object: Value,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Refuse, listing every error.
    Reject {
        /// The message kubectl prints.
        message: String,
        /// HTTP status code.
        code: u16,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
}

impl Decision {
    fn bad_request(message: String) -> Self {
        Decision::Reject {
            message,
            code: REJECT_CODE,
            warnings: Vec::new(),
        }
    }
}

/// Judge one admission request.
pub fn review(request: &Request, settings: &Settings) -> Decision {
    let accept = Decision::Accept {
        warnings: Vec::new(),
    };
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE")
        || !request.sub_resource.is_empty()
    {
        return accept;
    }
    if request.group != GROUP || request.kind != KIND {
        return accept;
    }
    if !VERSIONS.contains(&request.version.as_str()) {
        return Decision::bad_request(format!(
            "{QUALIFIED_KIND} version {:?} is not supported by this policy (supported: {})",
            request.version,
            VERSIONS.join(", ")
        ));
    }
    let (object, mut spec) = match decode(&request.object, "object") {
        Ok(decoded) => decoded,
        Err(message) => return Decision::bad_request(message),
    };
    let original = spec.clone();
    apply_defaults(&mut spec);

    let mut warnings = Vec::new();
    if request.operation == "UPDATE" {
        let old = decode(&request.old_object, "oldObject")
            .ok()
            .map(|(_, old)| old);
        if let Some(warning) = release_replicas_to_autoscaler(&mut spec, old.as_ref()) {
            warnings.push(warning);
        }
    }
    warnings.extend(validation::warnings(&spec));

    let metadata = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    };
    let name = metadata("name").unwrap_or(&request.name);
    let object_name = ObjectName {
        name,
        generate_name: metadata("generateName").unwrap_or_default(),
    };
    let errors = validation::validate_object(object_name, &spec, &settings.options);
    if !errors.is_empty() {
        let message = invalid_message(QUALIFIED_KIND, name, &errors);
        return Decision::Reject {
            message,
            code: REJECT_CODE,
            warnings,
        };
    }
    if !settings.mutate || spec == original {
        return Decision::Accept { warnings };
    }
    match defaulted_object(object, &original, &spec) {
        Ok(object) => Decision::Mutate { object, warnings },
        Err(message) => Decision::bad_request(message),
    }
}

/// The object as a map and its spec, or why it cannot be read.
fn decode<'a>(
    object: &'a Value,
    what: &str,
) -> Result<(&'a Map<String, Value>, MemcachedSpec), String> {
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
    Ok((map, spec))
}

/// Decode a spec whose sections are all JSON objects.
fn decode_spec(spec: &Value) -> Result<MemcachedSpec, String> {
    let section_paths = std::iter::once("").chain(SECTIONS);
    for path in section_paths {
        let found = path
            .split('.')
            .filter(|p| !p.is_empty())
            .try_fold(spec, |v, key| v.get(key));
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
fn spec_path(path: &str) -> String {
    if path.is_empty() {
        "spec".to_string()
    } else {
        format!("spec.{path}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// On the UPDATE that enables autoscaling, a `replicas` carried over unchanged
/// from the old object (usually put there by defaulting) is dropped so a plain
/// `kubectl apply` works; a value changed in the same request stays an error.
fn release_replicas_to_autoscaler(
    spec: &mut MemcachedSpec,
    old: Option<&MemcachedSpec>,
) -> Option<String> {
    let old = old?;
    let replicas = spec.replicas?;
    if !spec.autoscaling_enabled() || old.autoscaling_enabled() || old.replicas != Some(replicas) {
        return None;
    }
    spec.replicas = None;
    Some(format!(
        "spec.replicas ({replicas}) was removed: autoscaling is now enabled and the HorizontalPodAutoscaler owns the replica count"
    ))
}

/// The submitted object with exactly the changes defaulting made to its spec;
/// everything else (metadata, status, unmodelled fields) is kept as sent.
fn defaulted_object(
    object: &Map<String, Value>,
    before: &MemcachedSpec,
    after: &MemcachedSpec,
) -> Result<Value, String> {
    let encode = |spec: &MemcachedSpec| match serde_json::to_value(spec) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err("the defaulted spec cannot be encoded".to_string()),
    };
    let (before, after) = (encode(before)?, encode(after)?);
    let mut object = object.clone();
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        *spec = Value::Object(Map::new());
    }
    if let Value::Object(spec) = spec {
        apply_changes(spec, &before, &after);
    }
    Ok(Value::Object(object))
}

/// Apply to `target` what changed from `before` to `after`.
fn apply_changes(
    target: &mut Map<String, Value>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) {
    for (key, new) in after {
        match (before.get(key), target.get_mut(key)) {
            (Some(old), _) if old == new => {}
            (Some(Value::Object(old)), Some(Value::Object(target))) if new.is_object() => {
                if let Value::Object(new) = new {
                    apply_changes(target, old, new);
                }
            }
            _ => {
                target.insert(key.clone(), new.clone());
            }
        }
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        target.remove(key);
    }
}
