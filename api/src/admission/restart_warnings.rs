//! Warnings of what an UPDATE does to the running pods: a cold restart, and
//! warm restarts under an image not known to carry `sh`.

use crate::admission::decode::OldMemcached;
use crate::admission::decode::restart_trigger;
use crate::admission::request::Request;
use crate::defaults::{Defaulted, IMAGE, apply_defaults};
use crate::kubernetes::image::repository_name;
use crate::render::changes::{PodSource, Restart, restart};
use crate::types::MemcachedSpec;

/// The warning of an UPDATE that restarts the pods cold, before it happens:
/// the field that forces it and the pods that lose their cache
/// ([`restart`]); none when the pods restart warm, not at all, or none runs.
pub(super) fn cold_restart_warning(
    request: &Request,
    old: &OldMemcached,
    spec: &Defaulted,
) -> Option<String> {
    let stored = apply_defaults(old.spec.clone());
    let trigger = restart_trigger(&request.object);
    let before = PodSource {
        spec: &stored,
        restart_trigger: old.restart_trigger.as_deref(),
        running: old.running,
    };
    let after = PodSource {
        spec,
        restart_trigger: trigger.as_deref(),
        running: None,
    };
    match restart(&before, &after) {
        Restart::Cold(cold) => cold.warning(),
        Restart::None | Restart::Warm => None,
    }
}

/// An UPDATE after which warm restarts run an image this policy does not
/// know to carry `sh`, which the warm-restart supervisor needs: a new such
/// image, or warm restarts turned on under one. The warning says what its
/// pods will do.
pub(super) fn warm_image_change(spec: &MemcachedSpec, old: &MemcachedSpec) -> Option<String> {
    let image = spec.image.as_deref().unwrap_or(IMAGE);
    let old_image = old.image.as_deref().unwrap_or(IMAGE);
    let new = image != old_image || !old.warm_restart_enabled();
    (spec.warm_restart_enabled() && new && repository_name(image) != "memcached").then(|| {
        format!(
            "spec.image {image:?} is not known to carry sh, under which warm restarts run memcached (the \
             memcached images do): a pod that takes this change without it fails to start and holds the rest \
             of the change; set spec.warmRestart.enabled: false first for an image without sh"
        )
    })
}
