//! The defaults that depend on the operation and the stored object, beside
//! those of every spec (`crate::defaults`): warm restarts on for what is
//! created from now on, and `replicas` across autoscaling turned on or off.

use crate::admission::decode::OldMemcached;
use crate::defaults::IMAGE;
use crate::extra_args::memory_file::ShortOfMemory;
use crate::kubernetes::image::repository_name;
use crate::types::{MemcachedConfig, MemcachedSpec, REPLICAS_BOUNDS};

/// Warm restarts are on by default for the Memcacheds created from now on,
/// and for no Memcached that exists: at CREATE an absent
/// `warmRestart.enabled` becomes true; at UPDATE it keeps the stored value,
/// so a manifest applied again without the field changes nothing, and a
/// Memcached created before this default (stored without it) runs on as it
/// does. A CREATE whose `maxMemoryMB` is below what memcached needs with its
/// memory file ([`ShortOfMemory`]) gets false instead, with a warning that
/// says why. The other warning: the default set for an image this policy
/// does not know to carry `sh`, which the warm-restart supervisor needs.
pub(super) fn default_warm_restart(
    spec: &mut MemcachedSpec,
    created: bool,
    old: Option<&OldMemcached>,
) -> Option<String> {
    if spec
        .warm_restart
        .as_ref()
        .is_some_and(|w| w.enabled.is_some())
    {
        return None;
    }
    let short = created
        .then(|| {
            ShortOfMemory::of(
                spec.memcached
                    .as_ref()
                    .unwrap_or(&MemcachedConfig::default()),
            )
        })
        .flatten();
    if let Some(short) = short {
        spec.warm_restart.get_or_insert_default().enabled = Some(false);
        return Some(format!(
            "spec.warmRestart.enabled defaulted to false: spec.memcached.maxMemoryMB is {}, and {}; set \
             maxMemoryMB to at least {} and spec.warmRestart.enabled: true for warm restarts",
            short.max_memory_mb,
            short.reason(),
            short.minimum_mb
        ));
    }
    let enabled = if created {
        true
    } else {
        old?.spec.warm_restart.as_ref()?.enabled?
    };
    spec.warm_restart.get_or_insert_default().enabled = Some(enabled);
    let image = spec.image.as_deref().unwrap_or(IMAGE);
    (created && repository_name(image) != "memcached").then(|| {
        format!(
            "spec.warmRestart.enabled defaulted to true: warm restarts run memcached under sh, which \
             spec.image {image:?} is not known to carry (the memcached images do); its pods fail to \
             start without it: set spec.warmRestart.enabled: false for an image without sh"
        )
    })
}

/// `spec.replicas` on an UPDATE that turns autoscaling on or off.
pub(super) fn replicas_across_autoscaling(
    spec: &mut MemcachedSpec,
    old: &OldMemcached,
) -> Option<String> {
    match (old.spec.autoscaling_enabled(), spec.autoscaling_enabled()) {
        (false, true) => release_replicas_to_autoscaler(spec, &old.spec),
        (true, false) => hold_replicas_of_autoscaler(spec, old),
        _ => None,
    }
}

/// On the UPDATE that enables autoscaling, a `replicas` carried over unchanged
/// from the old object (usually put there by defaulting) is dropped so a plain
/// `kubectl apply` works; a value changed in the same request stays an error.
fn release_replicas_to_autoscaler(spec: &mut MemcachedSpec, old: &MemcachedSpec) -> Option<String> {
    let replicas = spec.replicas?;
    if old.replicas != Some(replicas) {
        return None;
    }
    spec.replicas = None;
    Some(format!(
        "spec.replicas ({replicas}) was removed: autoscaling is now enabled and the HorizontalPodAutoscaler owns the replica count"
    ))
}

/// On the UPDATE that disables autoscaling, the workload keeps the scale the
/// autoscaler left rather than the default of 1 replica: an absent
/// `replicas` becomes the old `status.replicas` (or, without one, the old
/// `minReplicas`), with a warning; a `replicas` below `status.replicas` is
/// admitted with a warning counting the pods that will go.
fn hold_replicas_of_autoscaler(spec: &mut MemcachedSpec, old: &OldMemcached) -> Option<String> {
    let advice = "set spec.replicas to choose another count";
    if let Some(replicas) = spec.replicas {
        let running = old.running.filter(|r| replicas < *r)?;
        return Some(format!(
            "spec.replicas ({replicas}) is below the {running} replicas the HorizontalPodAutoscaler ran \
             (status.replicas): disabling autoscaling removes {} pods, and the keys they cache",
            running - replicas
        ));
    }
    let (scale, what) = match old.running {
        Some(running) => (
            running,
            format!("the HorizontalPodAutoscaler ran {running} replicas (status.replicas)"),
        ),
        None => {
            let min = old.spec.autoscaling.as_ref().and_then(|a| a.min_replicas);
            let min = min.unwrap_or(1);
            (
                min,
                format!(
                    "the autoscaler's minimum is {min} (spec.autoscaling.minReplicas; status.replicas is unset)"
                ),
            )
        }
    };
    let held = scale.clamp(0, *REPLICAS_BOUNDS.end());
    spec.replicas = Some(held);
    Some(if held < scale {
        format!(
            "spec.replicas set to {held}, its maximum, as autoscaling is now disabled: {what}, so {} pods will \
             go, and the keys they cache; {advice}",
            scale - held
        )
    } else {
        format!(
            "spec.replicas set to {held} as autoscaling is now disabled: {what}, and the default of 1 replica \
             applies only to a new Memcached; {advice}"
        )
    })
}
