//! What a running pod takes in place: with warm restarts its supervisor
//! reads memcached's args and the Secret hash from the pod's annotations,
//! and the kubelet restarts its memcached container on a new image, so a
//! change of those alone keeps the pod (and, within the same memory
//! geometry, its items).

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::extra_args::memory_file;
use crate::render::containers::MEMCACHED_CONTAINER;
use crate::render::labels::{IMAGE_ANNOTATION, SECRET_HASH_ANNOTATION, VERSION_LABEL};
use crate::render::warm_restart::ARGS_ANNOTATION;

/// A pod template without what a running pod takes in place: the memcached
/// container's image, the version label and image annotation that follow
/// it, the args annotation and the Secret hash annotation; with the memory
/// geometry of those args (a save restores only into the same geometry).
#[derive(Clone, Debug, PartialEq)]
pub struct Base {
    /// The template without those.
    pub template: PodTemplateSpec,
    /// [`memory_file::geometry`] of the args annotation.
    pub geometry: Vec<String>,
}

/// The [`Base`] of `template`.
pub fn base(template: &PodTemplateSpec) -> Base {
    let mut base = template.clone();
    let mut geometry = Vec::new();
    if let Some(metadata) = base.metadata.as_mut() {
        if let Some(labels) = metadata.labels.as_mut() {
            labels.remove(VERSION_LABEL);
        }
        if let Some(annotations) = metadata.annotations.as_mut() {
            annotations.remove(SECRET_HASH_ANNOTATION);
            annotations.remove(IMAGE_ANNOTATION);
            if let Some(args) = annotations.remove(ARGS_ANNOTATION) {
                let args: Vec<String> = args.lines().map(String::from).collect();
                geometry = memory_file::geometry(&args);
            }
        }
    }
    let containers = base.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for container in containers.filter(|c| c.name == MEMCACHED_CONTAINER) {
        container.image = None;
    }
    Base {
        template: base,
        geometry,
    }
}
