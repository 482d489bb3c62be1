//! `render -f cr.yaml`: every object the controller would apply for a CR,
//! without a cluster (like `helm template`).

use memcached_api::validation::{self, Options};
use memcached_api::{Memcached, apply_defaults};
use serde::{Deserialize, Serialize};

use crate::desired::Desired;

/// Render every Memcached document of `yaml` to multi-document YAML.
/// Validation errors and warnings are returned separately.
pub fn render(yaml: &str) -> Result<(String, Vec<String>), String> {
    let mut out = String::new();
    let mut notes = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value =
            serde_yaml::Value::deserialize(document).map_err(|e| format!("invalid YAML: {e}"))?;
        if value.is_null() {
            continue;
        }
        let mc: Memcached =
            serde_yaml::from_value(value).map_err(|e| format!("not a Memcached: {e}"))?;
        let mut spec = mc.spec.clone();
        apply_defaults(&mut spec);
        let name = mc.metadata.name.clone().unwrap_or_default();
        for e in validation::validate(&spec, &Options::default()) {
            notes.push(format!("{name}: error: {e}"));
        }
        notes.extend(
            validation::warnings(&spec)
                .into_iter()
                .map(|w| format!("{name}: warning: {w}")),
        );
        let desired = Desired::new(&mc, spec, None);
        push(&mut out, &desired.deployment)?;
        push(&mut out, &desired.service)?;
        if let Some(o) = &desired.pdb {
            push(&mut out, o)?;
        }
        if let Some(o) = &desired.hpa {
            push(&mut out, o)?;
        }
        if let Some(o) = &desired.network_policy {
            push(&mut out, o)?;
        }
        if let Some(o) = &desired.service_monitor {
            write(
                &mut out,
                &serde_json::to_value(o).map_err(|e| e.to_string())?,
            )?;
        }
    }
    Ok((out, notes))
}

fn push<T: Serialize + kube::Resource<DynamicType = ()>>(
    out: &mut String,
    object: &T,
) -> Result<(), String> {
    let mut value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), T::api_version(&()).into());
        map.insert("kind".into(), T::kind(&()).into());
    }
    write(out, &value)
}

fn write(out: &mut String, value: &serde_json::Value) -> Result<(), String> {
    out.push_str("---\n");
    out.push_str(&serde_yaml::to_string(value).map_err(|e| e.to_string())?);
    Ok(())
}
