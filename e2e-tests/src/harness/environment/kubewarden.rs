//! What kubewarden-controller derives from a `ClusterAdmissionPolicy`
//! (`deploy/policy.yaml`, `deploy/policy-audit.yaml`), read from the manifest
//! at run time: policy-server's `policies.yml` entry and the webhook
//! configuration pointing kube-apiserver at it.
//!
//! Mirrors kubewarden-controller: `api/policies/v1/clusteradmissionpolicy_types.go`
//! (`GetUniqueName`: `clusterwide-<name>`), `api/policies/v1/policy_types.go`
//! (CRD defaults: mode `protect`, timeoutSeconds 10),
//! `internal/controller/policyserver_controller_configmap.go` (`buildPoliciesMap`)
//! and `internal/controller/policy_subreconciler_webhook.go`
//! (`reconcileMutatingWebhookConfiguration` / `...ValidatingWebhookConfiguration`).

use std::path::Path;

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// The namespace kubewarden-controller deploys policy-server into; its
/// ClusterAdmissionPolicy webhooks never judge requests there.
pub const KUBEWARDEN_NAMESPACE: &str = "kubewarden";

/// One `ClusterAdmissionPolicy` manifest.
#[derive(Clone, Debug)]
pub struct ClusterAdmissionPolicy {
    /// `metadata.name`.
    pub name: String,
    spec: Value,
}

impl ClusterAdmissionPolicy {
    /// Read and check a manifest (YAML).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let manifest: Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("{} is not YAML: {e}", path.display()))?;
        if manifest["kind"] != "ClusterAdmissionPolicy" {
            return Err(format!(
                "{} is a {}, not a ClusterAdmissionPolicy",
                path.display(),
                manifest["kind"]
            ));
        }
        let name = manifest["metadata"]["name"]
            .as_str()
            .ok_or_else(|| format!("{} has no metadata.name", path.display()))?;
        if !manifest["spec"]["module"].is_string() || !manifest["spec"]["rules"].is_array() {
            return Err(format!(
                "{} needs spec.module and spec.rules",
                path.display()
            ));
        }
        Ok(ClusterAdmissionPolicy {
            name: name.to_string(),
            spec: manifest["spec"].clone(),
        })
    }

    /// This policy under another name, with `settings` merged over its own:
    /// what a user deploys beside it with other settings.
    pub fn variant(&self, name: &str, settings: &Value) -> Self {
        let mut spec = self.spec.clone();
        if let Some(overrides) = settings.as_object() {
            for (key, value) in overrides {
                spec["settings"][key] = value.clone();
            }
        }
        ClusterAdmissionPolicy {
            name: name.to_string(),
            spec,
        }
    }

    /// The policy id in `policies.yml` and in the webhook path (`GetUniqueName`).
    pub fn id(&self) -> String {
        format!("clusterwide-{}", self.name)
    }

    /// `spec.module` as written in the manifest.
    pub fn module(&self) -> &str {
        self.spec["module"].as_str().unwrap_or_default()
    }

    /// `spec.mode`, `protect` when absent (the CRD's default).
    pub fn mode(&self) -> &str {
        self.spec["mode"].as_str().unwrap_or("protect")
    }

    /// `spec.mutating`.
    pub fn mutating(&self) -> bool {
        self.spec["mutating"] == json!(true)
    }

    /// The webhook's name (`<id>.kubewarden.admission`), as kube-apiserver
    /// labels its metrics and prefixes its denials.
    pub fn webhook_name(&self) -> String {
        format!("{}.kubewarden.admission", self.id())
    }

    /// The `policies.yml` entry for this policy loaded from `module`
    /// (`policyServerConfigEntry.MarshalJSON`; a cluster-wide policy is
    /// granted every host capability, `hostCapabilitiesForPolicy`).
    pub fn policies_entry(&self, module: &str) -> Value {
        let mut entry = json!({
            "namespacedName": {"Namespace": "", "Name": self.name},
            "module": module,
            "policyMode": self.mode(),
            "allowedToMutate": self.mutating(),
            "hostCapabilities": ["*"],
        });
        for field in ["contextAwareResources", "settings", "message"] {
            if let Some(value) = self.spec.get(field).filter(|v| !v.is_null()) {
                entry[field] = value.clone();
            }
        }
        entry
    }

    /// The webhook configuration kubewarden-controller creates: mutating for
    /// a mutating policy, else validating. kubewarden-controller points it at
    /// the policy-server Service (`service` with `path: /validate/<id>`);
    /// outside a cluster there is no Service, so a `url` on `policy_server`
    /// (`https://host:port`) with the same path.
    pub fn webhook_configuration(&self, policy_server: &str, ca_pem: &str) -> Value {
        let id = self.id();
        let kind = if self.mutating() {
            "MutatingWebhookConfiguration"
        } else {
            "ValidatingWebhookConfiguration"
        };
        let mut webhook = json!({
            "name": self.webhook_name(),
            "clientConfig": {
                "url": format!("{policy_server}/validate/{id}"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
            },
            "rules": self.spec["rules"],
            "namespaceSelector": self.namespace_selector(),
            "sideEffects": self.spec.get("sideEffects").cloned().unwrap_or(json!("None")),
            "timeoutSeconds": self.spec.get("timeoutSeconds").cloned().unwrap_or(json!(10)),
            "admissionReviewVersions": ["v1"],
        });
        // Left to kube-apiserver's defaults when absent (Fail, Equivalent, everything).
        for field in [
            "failurePolicy",
            "matchPolicy",
            "objectSelector",
            "matchConditions",
        ] {
            if let Some(value) = self.spec.get(field).filter(|v| !v.is_null()) {
                webhook[field] = value.clone();
            }
        }
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {
                "name": id,
                "labels": {"app.kubernetes.io/part-of": "kubewarden", "kubewardenPolicyScope": "cluster"},
                "annotations": {"kubewardenPolicyName": self.name, "kubewardenPolicyNamespace": ""},
            },
            "webhooks": [webhook],
        })
    }

    /// Every namespace but kubewarden's own, and the policy's own selector's
    /// expressions (`namespaceSelector` for cluster-wide policies).
    fn namespace_selector(&self) -> Value {
        let mut expressions = vec![json!({
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": [KUBEWARDEN_NAMESPACE],
        })];
        if let Some(own) = self.spec["namespaceSelector"]["matchExpressions"].as_array() {
            expressions.extend(own.iter().cloned());
        }
        let mut selector = Map::new();
        selector.insert("matchExpressions".into(), Value::Array(expressions));
        Value::Object(selector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace_root;

    fn load(manifest: &str) -> ClusterAdmissionPolicy {
        ClusterAdmissionPolicy::load(&workspace_root().join(manifest)).expect(manifest)
    }

    #[test]
    fn the_protect_policy_becomes_a_mutating_webhook_on_its_own_path() {
        let policy = load("deploy/policy.yaml");
        assert_eq!(policy.id(), format!("clusterwide-{}", policy.name));
        let entry = policy.policies_entry("registry://127.0.0.1:5000/policies/memcached:v1");
        assert_eq!(
            entry["module"],
            "registry://127.0.0.1:5000/policies/memcached:v1"
        );
        assert_eq!(entry["policyMode"], "protect");
        assert_eq!(entry["allowedToMutate"], true);
        assert_eq!(entry["hostCapabilities"], json!(["*"]));
        assert_eq!(entry["settings"], policy.spec["settings"]);
        let config = policy.webhook_configuration("https://127.0.0.1:3443", "CA");
        assert_eq!(config["kind"], "MutatingWebhookConfiguration");
        assert_eq!(config["metadata"]["name"], policy.id());
        let webhook = &config["webhooks"][0];
        assert_eq!(
            webhook["name"],
            format!("{}.kubewarden.admission", policy.id())
        );
        assert_eq!(
            webhook["clientConfig"]["url"],
            format!("https://127.0.0.1:3443/validate/{}", policy.id())
        );
        assert_eq!(webhook["clientConfig"]["caBundle"], "Q0E=");
        for field in ["rules", "failurePolicy", "timeoutSeconds"] {
            assert_eq!(webhook[field], policy.spec[field], "{field}");
        }
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
    }

    #[test]
    fn a_variant_changes_only_its_name_and_the_settings_given() {
        let policy = load("deploy/policy.yaml");
        let variant = policy.variant("other", &json!({"podSecurityLevel": "baseline"}));
        assert_eq!(variant.id(), "clusterwide-other");
        let entry = variant.policies_entry("file:///policy.wasm");
        assert_eq!(entry["settings"]["podSecurityLevel"], "baseline");
        assert_eq!(
            entry["settings"]["memoryOverhead"],
            policy.spec["settings"]["memoryOverhead"]
        );
        assert_eq!(
            entry["contextAwareResources"],
            policy.spec["contextAwareResources"]
        );
        assert_eq!(variant.spec["rules"], policy.spec["rules"]);
    }

    #[test]
    fn the_audit_policy_only_validates_in_monitor_mode() {
        let policy = load("deploy/policy-audit.yaml");
        let entry = policy.policies_entry("file:///policy.wasm");
        assert_eq!(entry["policyMode"], "monitor");
        assert_eq!(entry["allowedToMutate"], false);
        let config = policy.webhook_configuration("https://127.0.0.1:3443", "CA");
        assert_eq!(config["kind"], "ValidatingWebhookConfiguration");
        let webhook = &config["webhooks"][0];
        // When the manifest has none: kube-apiserver's default (Fail), the CRD's (10 s).
        assert_eq!(
            webhook.get("failurePolicy"),
            policy.spec.get("failurePolicy")
        );
        let timeout = policy.spec.get("timeoutSeconds").cloned();
        assert_eq!(webhook["timeoutSeconds"], timeout.unwrap_or(json!(10)));
    }
}
