//! How a change reaches running pods without emptying their caches. A
//! change warm restarts can take is applied to the pods in place
//! ([`in_place`] for a Deployment, [`stateful_in_place`] for a StatefulSet;
//! [`pod_change`]: what one pod is given, and whether it took it); any other
//! rollout is paced so that no more than one pod is cold at a time
//! ([`pacing`]; [`generations`]: what Deployment pacing reads of a rollout).
//! These patch and list pods and ReplicaSets themselves, called from a
//! reconcile.
//!
//! May use: `objects`, `cluster`, `stats`.

pub mod generations;
pub mod in_place;
pub mod pacing;
pub mod pod_change;
pub mod stateful_in_place;
