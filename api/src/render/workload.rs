//! The metadata shared by the Deployment and the StatefulSet that run a
//! Memcached's pods, stamped ([`stamp`]), and the pods they run.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::defaults::Defaulted;
use crate::render::labels::{VERSION_LABEL, selector_labels, version_label};
use crate::render::stamp::{self, TemplateStamp};
use crate::render::{Instance, pod_template};
use crate::types::MemcachedSpec;

/// What a workload of either kind is made of.
pub struct Template {
    /// The workload's metadata: name, labels (with the version), owner.
    pub metadata: ObjectMeta,
    /// The pods it runs.
    pub pod: PodTemplateSpec,
}

/// `spec.replicas`, unless the HorizontalPodAutoscaler owns the count.
pub fn replicas(spec: &MemcachedSpec) -> Option<i32> {
    if spec.autoscaling_enabled() {
        None
    } else {
        spec.replicas
    }
}

/// The workload metadata (but its owner) and pod template for `mc`, whose
/// effective (defaulted) spec is `spec`, stamped ([`stamp`]); the arguments
/// as [`pod_template::pod`]'s.
pub fn build(
    mc: Instance<'_>,
    spec: &Defaulted,
    secret_hash: Option<&str>,
    auth_key: &str,
) -> Template {
    let mut labels = selector_labels(mc.name());
    labels.insert(VERSION_LABEL.into(), version_label(spec.image()));
    let pod = pod_template::pod(mc, spec, secret_hash, auth_key);
    let stamp = TemplateStamp {
        intent: stamp::intent(mc, secret_hash),
        template: stamp::template_digest(&pod),
        base: Some(stamp::base_digest(&pod)),
        spec: Some(stamp::intent_spec(mc)),
    };
    let mut annotations = BTreeMap::new();
    stamp.annotate(&mut annotations);
    let metadata = ObjectMeta {
        name: mc.metadata.name.clone(),
        namespace: mc.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    };
    Template { metadata, pod }
}
