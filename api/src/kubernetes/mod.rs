//! Ports of Kubernetes' own checks, with the API server's messages: what it
//! would refuse in the objects the controller builds from a Memcached (names,
//! labels and annotations, label selectors, tolerations and topology spread,
//! network policy peers, image references, resource requirements, security
//! contexts, the annotations it reads in a pod template, a
//! HorizontalPodAutoscaler's metrics and behavior). Each takes the Kubernetes
//! type and the field path it lies at, as `ValidateX(obj, fldPath)` does, and
//! knows nothing of the Memcached around it ([`crate::validation`] calls them).

pub mod autoscaling;
pub mod image;
pub mod metadata;
pub mod names;
pub mod network;
pub mod pod_annotations;
pub mod resources;
pub mod scheduling;
pub mod security_context;
pub mod selector;
