//! The CustomResourceDefinition: v1alpha1 (deprecated) and v1beta1 (storage)
//! served with identical schemas, bounds but no defaults (the policy
//! defaults), the status and scale subresources, and `status.conditions` as a
//! map keyed by `type` so server-side apply merges conditions one by one.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use memcached_api::Memcached;

/// What `kubectl` prints for every request to v1alpha1.
pub const V1ALPHA1_DEPRECATION: &str =
    "memcached.c5c3.io/v1alpha1 Memcached is deprecated; use memcached.c5c3.io/v1beta1";

/// The CRD as installed.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Memcached::crd();
    let mut storage = crd.spec.versions.remove(0);
    if let Some(conditions) = storage
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|root| property(root, "status"))
        .and_then(|status| property(status, "conditions"))
    {
        conditions.x_kubernetes_list_type = Some("map".into());
        conditions.x_kubernetes_list_map_keys = Some(vec!["type".into()]);
    }
    let mut alpha = storage.clone();
    alpha.name = "v1alpha1".into();
    alpha.storage = false;
    alpha.deprecated = Some(true);
    alpha.deprecation_warning = Some(V1ALPHA1_DEPRECATION.into());
    crd.spec.versions = vec![alpha, storage];
    crd
}

fn property<'a>(schema: &'a mut JSONSchemaProps, name: &str) -> Option<&'a mut JSONSchemaProps> {
    schema.properties.as_mut()?.get_mut(name)
}

/// The CRD as YAML, the content of `deploy/crd.yaml`.
pub fn crd_yaml() -> String {
    crate::commands::yaml::to_string(&crd()).unwrap_or_default()
}
