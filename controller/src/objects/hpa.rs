//! The HorizontalPodAutoscaler, when autoscaling is enabled. It scales the
//! workload (Deployment or StatefulSet), which then carries no replicas of
//! its own.

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use memcached_api::{Memcached, MemcachedSpec};

use crate::objects::meta;

/// The HorizontalPodAutoscaler for `mc`, or `None` when autoscaling is off.
pub fn build(mc: &Memcached, spec: &MemcachedSpec) -> Option<HorizontalPodAutoscaler> {
    let autoscaling = spec
        .autoscaling
        .as_ref()
        .filter(|_| spec.autoscaling_enabled())?;
    Some(HorizontalPodAutoscaler {
        metadata: meta::object_meta(mc),
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: if spec.stateful_set() {
                    "StatefulSet"
                } else {
                    "Deployment"
                }
                .into(),
                name: meta::name(mc).into(),
            },
            min_replicas: autoscaling.min_replicas,
            max_replicas: autoscaling.max_replicas.unwrap_or(1),
            metrics: autoscaling.metrics.clone(),
            behavior: autoscaling.behavior.clone(),
        }),
        ..Default::default()
    })
}
