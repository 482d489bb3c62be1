//! `render -f cr.yaml`: every object the controller would apply for a CR,
//! without a cluster (like `helm template`).

use memcached_api::validation::{self, ObjectName, Options};
use memcached_api::{Memcached, apply_defaults};
use serde::{Deserialize, Serialize};

use crate::desired::{Desired, Workload};
use crate::server_list;
use crate::workload::initial_replicas;

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
        let object = ObjectName {
            name: &name,
            generate_name: mc.metadata.generate_name.as_deref().unwrap_or_default(),
        };
        for e in validation::validate_object(object, &spec, &Options::default()) {
            notes.push(format!("{name}: error: {e}"));
        }
        notes.extend(
            validation::warnings(&spec)
                .into_iter()
                .map(|w| format!("{name}: warning: {w}")),
        );
        let desired = Desired::new(&mc, spec.clone(), None, &Default::default());
        match &desired.workload {
            Workload::Deployment(d) => write(&mut out, d)?,
            Workload::StatefulSet(s) => write(&mut out, s)?,
        }
        write(&mut out, &desired.service)?;
        write_optional(&mut out, &desired.pdb)?;
        write_optional(&mut out, &desired.hpa)?;
        write_optional(&mut out, &desired.network_policy)?;
        write_optional(&mut out, &desired.service_monitor)?;
        // Under autoscaling the list follows the HPA; it starts at minReplicas.
        let servers = server_list::build(&mc, spec.stateful_set(), initial_replicas(&spec));
        write_optional(&mut out, &server_list::config_map(&mc, &spec, &servers))?;
    }
    Ok((out, notes))
}

/// Append one YAML document (k8s-openapi and dynamic objects carry their apiVersion and kind).
fn write<T: Serialize>(out: &mut String, object: &T) -> Result<(), String> {
    out.push_str("---\n");
    out.push_str(&serde_yaml::to_string(object).map_err(|e| e.to_string())?);
    Ok(())
}

fn write_optional<T: Serialize>(out: &mut String, object: &Option<T>) -> Result<(), String> {
    object.as_ref().map_or(Ok(()), |o| write(out, o))
}
