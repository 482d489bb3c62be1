//! What the reconcile reads from either kind of workload (Deployment or
//! StatefulSet), so one code path converges both and switches between them.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::Resource;
use memcached_api::MemcachedSpec;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Workload annotation: the mark of the change being applied in place
/// ([`Change::mark`]; the key is from when that was the image alone). Set
/// and read by [`crate::rollout::in_place`]; here so that the cache can keep it.
///
/// [`Change::mark`]: crate::rollout::pod_change::Change::mark
pub const IN_PLACE_ANNOTATION: &str = "memcached.c5c3.io/in-place-image";

/// A workload's rollout as its status reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// `spec.replicas` as stored (set by the controller, or by the HPA).
    pub replicas: Option<i32>,
    /// Pods of any template.
    pub pods: i32,
    /// Ready pods.
    pub ready: i32,
    /// Pods running the current template.
    pub updated: i32,
    /// Minimum availability (Deployment's `Available` condition; every
    /// replica available for a StatefulSet).
    pub available: bool,
    /// The status describes the current generation.
    pub observed: bool,
}

impl Rollout {
    /// Every one of `desired` pods runs the current template and is ready,
    /// and no pod of an older template is left (a Deployment counts the old
    /// ReplicaSet's ready pods too).
    pub fn complete(&self, desired: i32) -> bool {
        self.observed
            && self.ready >= desired
            && self.updated >= desired
            && self.pods <= self.updated
    }
}

/// Replicas the workload should run: `spec.replicas`, or under autoscaling
/// what the HorizontalPodAutoscaler set on the workload.
pub fn desired_replicas(spec: &MemcachedSpec, rollout: Option<&Rollout>) -> i32 {
    if spec.autoscaling_enabled() {
        rollout.and_then(|r| r.replicas).unwrap_or(0)
    } else {
        spec.replicas.unwrap_or(0)
    }
}

/// Replicas a new workload starts with: `spec.replicas`, or under
/// autoscaling the HorizontalPodAutoscaler's lower bound (its default 1).
pub fn initial_replicas(spec: &MemcachedSpec) -> i32 {
    spec.replicas.unwrap_or_else(|| {
        spec.autoscaling
            .as_ref()
            .and_then(|a| a.min_replicas)
            .unwrap_or(1)
    })
}

/// A Deployment or a StatefulSet.
pub trait Workload:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Set `spec.replicas`.
    fn set_replicas(&mut self, replicas: i32);
    /// The rollout as the status reports it.
    fn rollout(&self) -> Rollout;
    /// Replace the pod template with an empty one (what the cache keeps).
    fn drop_template(&mut self);
    /// The pod template.
    fn template(&self) -> Option<&PodTemplateSpec>;
    /// Take the pod template (and what else [`Workload::drop_template`]
    /// drops) from `running`.
    fn keep_template_of(&mut self, running: Self);
}

fn observed(generation: Option<i64>, observed: Option<i64>) -> bool {
    observed >= generation
}

impl Workload for Deployment {
    fn set_replicas(&mut self, replicas: i32) {
        self.spec.get_or_insert_default().replicas = Some(replicas);
    }

    fn rollout(&self) -> Rollout {
        let status = self.status.clone().unwrap_or_default();
        Rollout {
            replicas: self.spec.as_ref().and_then(|s| s.replicas),
            pods: status.replicas.unwrap_or(0),
            ready: status.ready_replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            available: status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True"),
            observed: observed(self.metadata.generation, status.observed_generation),
        }
    }

    fn drop_template(&mut self) {
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn keep_template_of(&mut self, running: Self) {
        if let (Some(spec), Some(running)) = (&mut self.spec, running.spec) {
            spec.template = running.template;
        }
    }
}

impl Workload for StatefulSet {
    fn set_replicas(&mut self, replicas: i32) {
        self.spec.get_or_insert_default().replicas = Some(replicas);
    }

    fn rollout(&self) -> Rollout {
        let status = self.status.clone().unwrap_or_default();
        let replicas = self.spec.as_ref().and_then(|s| s.replicas);
        // A rolling update replaces one pod at a time without a surge: like a
        // Deployment's minimum availability, one pod may be missing.
        let wanted = replicas.unwrap_or(1);
        let minimum = if wanted > 1 { wanted - 1 } else { wanted };
        Rollout {
            replicas,
            pods: status.replicas,
            ready: status.ready_replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            available: status.available_replicas.unwrap_or(0) >= minimum,
            observed: observed(self.metadata.generation, status.observed_generation),
        }
    }

    fn drop_template(&mut self) {
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
            spec.volume_claim_templates = None;
        }
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn keep_template_of(&mut self, running: Self) {
        if let (Some(spec), Some(running)) = (&mut self.spec, running.spec) {
            spec.template = running.template;
            spec.volume_claim_templates = running.volume_claim_templates;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stateful_set_is_complete_when_every_pod_is_updated_and_ready() {
        let set = |generation: i64, observed: i64, ready: i32, updated: i32| -> StatefulSet {
            serde_json::from_value(json!({
                "metadata": {"name": "c", "generation": generation},
                "spec": {"replicas": 3, "selector": {}, "template": {}, "serviceName": "c"},
                "status": {"replicas": 3, "observedGeneration": observed, "readyReplicas": ready,
                    "updatedReplicas": updated, "availableReplicas": ready}
            }))
            .unwrap()
        };
        assert!(set(2, 2, 3, 3).rollout().complete(3));
        assert!(set(2, 2, 3, 3).rollout().available);
        assert!(
            !set(2, 1, 3, 3).rollout().complete(3),
            "status of an older generation"
        );
        assert!(
            !set(2, 2, 3, 2).rollout().complete(3),
            "a pod of the old template"
        );
        assert!(!set(2, 2, 2, 3).rollout().complete(3), "a pod not ready");
        assert!(
            set(2, 2, 2, 3).rollout().available,
            "one pod down in a rollout"
        );
        assert!(!set(2, 2, 1, 3).rollout().available);
        assert_eq!(set(2, 2, 3, 3).rollout().replicas, Some(3));
    }

    #[test]
    fn a_deployment_is_available_by_its_condition() {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "c", "generation": 1},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2,
                "conditions": [{"type": "Available", "status": "True"}]}
        }))
        .unwrap();
        let rollout = d.rollout();
        assert!(rollout.available && rollout.complete(2) && !rollout.complete(3));
        // Mid-rollout with maxSurge 1: the 2nd new pod exists, not ready; the
        // old ReplicaSet's pod still counts as ready.
        let mut surging = rollout;
        surging.pods = 3;
        assert!(!surging.complete(2), "an old pod is left");
    }
}
