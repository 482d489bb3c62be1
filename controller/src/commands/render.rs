//! `render -f cr.yaml`: every object the controller would apply for a CR,
//! without a cluster (like `helm template`). A CR the API server or the
//! policy would refuse renders nothing: every error is reported, one a line,
//! in their own words (unknown fields as `kubectl apply --validate=strict`
//! reports them, the rest as the policy's validation words them).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use kube::Resource;
use memcached_api::validation::{self, ObjectName, Options};
use memcached_api::{Defaulted, Memcached};
use serde::Serialize;
use serde_json::Value;

use crate::commands::unknown_fields::unknown_fields;
use crate::objects::desired::{Desired, Workload};
use crate::objects::server_list;
use crate::objects::workload::initial_replicas;
use memcached_api::render::args::AUTH_FILE;

/// Render every Memcached document of `yaml` to multi-document YAML, with
/// the policy's warnings. `Err`: every error of every document, one a line
/// (`<name>: error: <message>`) after a heading, and the warnings after them.
pub fn render(yaml: &str) -> Result<(String, Vec<String>), String> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| format!("invalid YAML: {e}"))?;
    let mut out = String::new();
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        let unknown = match schema_of(&document) {
            Some(schema) => unknown_fields(&document, &schema),
            None => Vec::new(),
        };
        let mc: Memcached =
            serde_json::from_value(document).map_err(|e| format!("not a Memcached: {e}"))?;
        let name = mc.metadata.name.clone().unwrap_or_default();
        let object = ObjectName {
            name: &name,
            generate_name: mc.metadata.generate_name.as_deref().unwrap_or_default(),
        };
        let checked = validation::check(object, mc.spec.clone(), &Options::default());
        let refused = unknown
            .iter()
            .map(|field| format!("{name}: error: unknown field {field:?}"))
            .chain(checked.errors.iter().map(|e| format!("{name}: error: {e}")))
            .collect::<Vec<_>>();
        warnings.extend(
            checked
                .warnings
                .into_iter()
                .map(|w| format!("{name}: warning: {w}")),
        );
        let spec = checked.spec;
        if !refused.is_empty() {
            errors.extend(refused);
            continue;
        }
        out.push_str(&objects(&mc, &spec)?);
    }
    if errors.is_empty() {
        Ok((out, warnings))
    } else {
        errors.extend(warnings);
        Err(format!("refused, nothing rendered:\n{}", errors.join("\n")))
    }
}

/// The CRD schema of the document's version (`None`: a version the CRD does
/// not serve, left to decoding).
fn schema_of(document: &Value) -> Option<JSONSchemaProps> {
    let api_version = document["apiVersion"].as_str()?;
    let version = api_version.strip_prefix(&format!("{}/", Memcached::group(&())))?;
    crate::commands::crd::crd()
        .spec
        .versions
        .into_iter()
        .find(|v| v.name == version)?
        .schema?
        .open_api_v3_schema
}

/// Every object the controller would apply for `mc` with its defaulted
/// `spec`, as multi-document YAML, whether or not the spec is valid (render
/// checks first; the differential test also renders what the policy refuses,
/// to find rules stricter than the API server).
pub fn objects(mc: &Memcached, spec: &Defaulted) -> Result<String, String> {
    let mut out = String::new();
    let desired = Desired::new(mc, spec, None, AUTH_FILE, &Default::default());
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
    let servers = server_list::build(mc, spec.stateful_set(), initial_replicas(spec));
    write_optional(&mut out, &server_list::config_map(mc, spec, &servers))?;
    Ok(out)
}

/// Append one YAML document (k8s-openapi and dynamic objects carry their apiVersion and kind).
fn write<T: Serialize>(out: &mut String, object: &T) -> Result<(), String> {
    out.push_str("---\n");
    out.push_str(&crate::commands::yaml::to_string(object)?);
    Ok(())
}

fn write_optional<T: Serialize>(out: &mut String, object: &Option<T>) -> Result<(), String> {
    object.as_ref().map_or(Ok(()), |o| write(out, o))
}
