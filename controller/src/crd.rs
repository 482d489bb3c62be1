//! The CustomResourceDefinition: v1alpha1 and v1beta1 (storage) served with
//! identical schemas, bounds but no defaults (the policy defaults), and the
//! status and scale subresources.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use memcached_api::Memcached;

/// The CRD as installed.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = Memcached::crd();
    let storage = crd.spec.versions.remove(0);
    let mut alpha = storage.clone();
    alpha.name = "v1alpha1".into();
    alpha.storage = false;
    crd.spec.versions = vec![alpha, storage];
    crd
}

/// The CRD as YAML, the content of `deploy/crd.yaml`.
pub fn crd_yaml() -> String {
    serde_yaml::to_string(&crd()).unwrap_or_default()
}
