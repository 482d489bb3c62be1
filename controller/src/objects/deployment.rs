//! The Deployment running the pods (the default workload): pods get new
//! names and addresses on every rollout, which surges one pod at a time.

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memcached_api::{Defaulted, Memcached};

use memcached_api::render::workload::{self, Template};

use crate::objects::meta;

/// The Deployment for `mc`, with its defaulted `spec`.
pub fn build(
    mc: &Memcached,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> Deployment {
    let Template { mut metadata, pod } = workload::build(mc.into(), spec, secret_hash, auth_key);
    metadata.owner_references = meta::owner(mc);
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: workload::replicas(spec),
            selector: meta::selector(mc),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            template: pod,
            ..Default::default()
        }),
        ..Default::default()
    }
}
