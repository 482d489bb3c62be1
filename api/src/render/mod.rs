//! The pods of a Memcached, rendered: the pod template the controller
//! applies, the stamps on its workload, memcached's command line and the
//! warm-restart supervisor. Pure functions the policy and the controller
//! both call, so the policy judges the pod the controller will run (Pod
//! Security, warm or cold) and never a model of it.
//!
//! * [`workload`]: the workload's metadata, stamped, and its pods:
//!   [`pod_template`], around
//!   [`containers`] (memcached and the exporter, their names and ports),
//!   [`args`] (memcached's command line and the files it reads) and
//!   [`warm_restart`] (the supervisor that restarts memcached in its pod),
//!   and [`volumes`] (the Secrets and the memory file's volume).
//! * [`stamp`]: the digests on a workload that tell the user's change from
//!   a new rendering, and a change a running pod takes in place
//!   ([`in_place`]).
//! * [`changes`]: what an update does to the pods, judged on the rendered
//!   templates before and after, naming the field that does it ([`blame`]).
//! * [`labels`]: the labels and annotations the pods carry.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::types::MemcachedSpec;

pub mod args;
pub mod blame;
pub mod changes;
pub mod containers;
pub mod in_place;
pub mod labels;
pub mod pod_template;
pub mod stamp;
pub mod volumes;
pub mod warm_restart;
pub mod workload;

/// Annotation of a Memcached that the controller copies to the pod template
/// to force a rollout.
pub const RESTART_TRIGGER_ANNOTATION: &str = "memcached.c5c3.io/restart-trigger";

/// A Memcached as rendering reads it: its metadata (name, namespace, the
/// restart trigger) and its spec as stored.
#[derive(Clone, Copy, Debug)]
pub struct Instance<'a> {
    /// The Memcached's metadata.
    pub metadata: &'a ObjectMeta,
    /// Its spec: as stored where the workload's stamps digest it, defaulted
    /// where only the pod is rendered (admission judging a spec).
    pub spec: &'a MemcachedSpec,
}

impl<'a> Instance<'a> {
    /// The Memcached's name (empty before the API server names it).
    pub fn name(&self) -> &'a str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Its [`RESTART_TRIGGER_ANNOTATION`].
    pub fn restart_trigger(&self) -> Option<&'a str> {
        let annotations = self.metadata.annotations.as_ref()?;
        annotations
            .get(RESTART_TRIGGER_ANNOTATION)
            .map(String::as_str)
    }
}

#[cfg(feature = "kube")]
impl<'a> From<&'a crate::types::Memcached> for Instance<'a> {
    fn from(mc: &'a crate::types::Memcached) -> Self {
        Instance {
            metadata: &mc.metadata,
            spec: &mc.spec,
        }
    }
}
