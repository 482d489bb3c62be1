//! The fields of a Memcached the API server would not keep: what
//! `kubectl apply --validate=strict` reports as `unknown field "spec.replica"`
//! (the server's pruning of fields its structural schema does not declare,
//! followed by strict decoding of `metadata` as an ObjectMeta).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// Fields at the root the API server handles itself, outside the schema.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The path of every field of `object` that `schema` (a CRD version's
/// `openAPIV3Schema`) does not declare, and of every unknown field of its
/// `metadata`, as the API server words them (`spec.tolerations[0].efect`).
pub fn unknown_fields(object: &Value, schema: &JSONSchemaProps) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(fields) = object.as_object() {
        for (key, value) in fields {
            if ROOT_FIELDS.contains(&key.as_str()) {
                continue;
            }
            match schema.properties.as_ref().and_then(|p| p.get(key)) {
                Some(property) => walk(value, property, key, &mut found),
                None => found.push(key.clone()),
            }
        }
    }
    found.extend(unknown_metadata(&object["metadata"]));
    found
}

fn walk(value: &Value, schema: &JSONSchemaProps, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            let preserve = schema.x_kubernetes_preserve_unknown_fields == Some(true);
            let additional = match &schema.additional_properties {
                Some(JSONSchemaPropsOrBool::Schema(s)) => Some(s.as_ref()),
                _ => None,
            };
            for (key, value) in fields {
                let child = format!("{path}.{key}");
                match schema
                    .properties
                    .as_ref()
                    .and_then(|p| p.get(key))
                    .or(additional)
                {
                    Some(property) => walk(value, property, &child, found),
                    None if preserve => {}
                    None => found.push(child),
                }
            }
        }
        Value::Array(items) => {
            let item = match &schema.items {
                Some(JSONSchemaPropsOrArray::Schema(s)) => Some(s.as_ref()),
                Some(JSONSchemaPropsOrArray::Schemas(s)) => s.first(),
                None => None,
            };
            if let Some(item) = item {
                for (i, value) in items.iter().enumerate() {
                    walk(value, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// Top-level `metadata` keys an ObjectMeta does not have.
fn unknown_metadata(metadata: &Value) -> Vec<String> {
    let Some(fields) = metadata.as_object() else {
        return Vec::new();
    };
    let known = serde_json::from_value::<ObjectMeta>(metadata.clone())
        .ok()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or_default();
    fields
        .iter()
        .filter(|(key, value)| !value.is_null() && known.get(key.as_str()).is_none())
        .map(|(key, _)| format!("metadata.{key}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> JSONSchemaProps {
        crate::commands::crd::crd().spec.versions[1]
            .schema
            .clone()
            .and_then(|s| s.open_api_v3_schema)
            .unwrap()
    }

    #[test]
    fn names_each_undeclared_field_with_its_path() {
        let object = json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "labels": {"a": "b"}, "lables": {"a": "b"}},
            "spec": {
                "replica": 3,
                "tolerations": [{"key": "k", "efect": "NoSchedule"}],
                "podLabels": {"any-key": "is a map entry"},
                "memcached": {"maxMemoryMB": 64, "maxMemory": 64},
            },
            "extra": true,
        });
        let mut found = unknown_fields(&object, &schema());
        found.sort();
        assert_eq!(
            found,
            [
                "extra",
                "metadata.lables",
                "spec.memcached.maxMemory",
                "spec.replica",
                "spec.tolerations[0].efect",
            ]
        );
    }

    #[test]
    fn a_declared_object_has_none() {
        let object = json!({
            "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
            "metadata": {"name": "c", "namespace": "n", "annotations": {"x": "y"}},
            "spec": {"replicas": 2, "resources": {"limits": {"memory": "1Gi"}}},
            "status": {"replicas": 2},
        });
        assert_eq!(unknown_fields(&object, &schema()), Vec::<String>::new());
    }
}
