//! A pod template changes only when the user asks for it.
//!
//! For a cache every restarted pod is an empty cache, so pods must not
//! restart because this controller renders them differently (a new version,
//! another default): only because the user's intent changed. The workload's
//! metadata carries two stamps: a digest of the intent the running template
//! was rendered for (the stored spec but `replicas`, the Secrets' hash, the
//! `memcached.c5c3.io/restart-trigger` annotation) and a digest of that
//! template. A rendering that differs for the same intent is held: the
//! running template is applied again as it is, until the intent changes.
//!
//! A third stamp, the digest of the template without what a pod can take
//! in place (the memcached image and, with warm restarts, the args and the
//! Secret hash its supervisor reads from its annotations, see
//! [`crate::render::warm_restart`]) but with the memory geometry of those args, tells
//! a change warm restarts apply in place (the controller's `rollout::in_place`).
//!
//! The intent itself is stamped too ([`INTENT_SPEC_ANNOTATION`]): a change
//! the policy's own classification calls warm ([`changes::restart`],
//! the warning `kubectl apply` shows) is applied in place even when this
//! controller renders the rest of the template differently from the one
//! that rendered the running pods (a new supervisor, a new volume): those
//! reach the pods at their next restart, never by restarting them.
//!
//! The digests are SHA-256 of canonical JSON (object keys sorted), so they
//! are the same for every build of every version of the controller.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::defaults::apply_defaults;
use crate::render::Instance;
use crate::render::changes::{self, PodSource, Restart};
use crate::render::in_place::{Base, base};
use crate::types::MemcachedSpec;

/// Workload annotation: the digest of the intent its pod template was rendered for.
pub const INTENT_ANNOTATION: &str = "memcached.c5c3.io/intent";
/// Workload annotation: the digest of its pod template as rendered.
pub const TEMPLATE_ANNOTATION: &str = "memcached.c5c3.io/template-hash";
/// Workload annotation: the digest of its pod template without what a pod
/// takes in place ([`base_digest`]).
pub const BASE_ANNOTATION: &str = "memcached.c5c3.io/template-base-hash";
/// Workload annotation: what [`INTENT_ANNOTATION`] digests, but the
/// Secrets' hash ([`intent_spec`]), as JSON.
pub const INTENT_SPEC_ANNOTATION: &str = "memcached.c5c3.io/intent-spec";

/// The stamps of one pod template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateStamp {
    /// [`intent`] of the Memcached it was rendered for.
    pub intent: String,
    /// [`template_digest`] of the template.
    pub template: String,
    /// [`base_digest`] of the template (absent on workloads stamped
    /// before it existed).
    pub base: Option<String>,
    /// [`intent_spec`] of the Memcached (absent on workloads stamped before
    /// it existed).
    pub spec: Option<String>,
}

impl TemplateStamp {
    /// The stamp on a workload's metadata, if both parts are there.
    pub fn of(workload: &ObjectMeta) -> Option<Self> {
        Self::from_annotations(workload.annotations.as_ref()?)
    }

    /// The stamp in `annotations`, if both parts are there.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> Option<Self> {
        Some(TemplateStamp {
            intent: annotations.get(INTENT_ANNOTATION)?.clone(),
            template: annotations.get(TEMPLATE_ANNOTATION)?.clone(),
            base: annotations.get(BASE_ANNOTATION).cloned(),
            spec: annotations.get(INTENT_SPEC_ANNOTATION).cloned(),
        })
    }

    /// Write the stamp into `annotations`.
    pub fn annotate(self, annotations: &mut BTreeMap<String, String>) {
        annotations.insert(INTENT_ANNOTATION.into(), self.intent);
        annotations.insert(TEMPLATE_ANNOTATION.into(), self.template);
        if let Some(base) = self.base {
            annotations.insert(BASE_ANNOTATION.into(), base);
        }
        if let Some(spec) = self.spec {
            annotations.insert(INTENT_SPEC_ANNOTATION.into(), spec);
        }
    }

    /// True when this rendering must not replace the `running` one: it was
    /// rendered for the same intent, yet differs.
    pub fn held_by(&self, running: &TemplateStamp) -> bool {
        self.intent == running.intent && self.template != running.template
    }

    /// True when the user changed the intent and this template differs
    /// from the `running` one only in what a pod takes in place, or the
    /// change of the intent is one warm restarts take in place by the
    /// policy's classification ([`warm_change`]), whatever else this
    /// controller renders differently. The same intent rendered differently
    /// is held instead: a new default image of a new controller version
    /// restarts no pod.
    pub fn in_place_change(&self, running: &TemplateStamp) -> bool {
        let base = || self.base.is_some() && self.base == running.base;
        // Renders both templates: asked last, when nothing cheaper decides.
        let warm = || {
            (running.spec.as_deref().zip(self.spec.as_deref()))
                .is_some_and(|(old, new)| warm_change(old, new))
        };
        self.intent != running.intent && self.template != running.template && (base() || warm())
    }
}

/// What the user asked of a Memcached's pods but the Secrets' hash: its
/// stored spec without `replicas` and its restart trigger, as JSON.
pub fn intent_spec(mc: Instance<'_>) -> String {
    let spec = MemcachedSpec {
        replicas: None,
        ..mc.spec.clone()
    };
    json!({"spec": spec, "restartTrigger": mc.restart_trigger()}).to_string()
}

/// From intent `old` to `new` ([`intent_spec`]s), with warm restarts on
/// before and after, the running pods restart warm or not at all
/// ([`changes::restart`], what `kubectl apply` warns of): a change in
/// place. An intent that does not read is none.
pub fn warm_change(old: &str, new: &str) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Intent {
        spec: MemcachedSpec,
        restart_trigger: Option<String>,
    }
    let read = |text: &str| serde_json::from_str::<Intent>(text).ok();
    let (Some(old), Some(new)) = (read(old), read(new)) else {
        return false;
    };
    let (old_spec, new_spec) = (apply_defaults(old.spec), apply_defaults(new.spec));
    let before = PodSource {
        spec: &old_spec,
        restart_trigger: old.restart_trigger.as_deref(),
        running: None,
    };
    let after = PodSource {
        spec: &new_spec,
        restart_trigger: new.restart_trigger.as_deref(),
        running: None,
    };
    old_spec.warm_restart_enabled()
        && new_spec.warm_restart_enabled()
        && matches!(
            changes::restart(&before, &after),
            Restart::Warm | Restart::None
        )
}

/// The digest of what the user asked of `mc`'s pods: its stored spec without
/// `replicas` (scaling starts or stops pods, it restarts none), the digest
/// of the Secrets they mount, and the restart trigger.
pub fn intent(mc: Instance<'_>, secret_hash: Option<&str>) -> String {
    let spec = MemcachedSpec {
        replicas: None,
        ..mc.spec.clone()
    };
    let trigger = mc.restart_trigger();
    canonical_digest(&json!({"spec": spec, "secrets": secret_hash, "restartTrigger": trigger}))
}

/// The digest of a pod template.
pub fn template_digest(template: &PodTemplateSpec) -> String {
    canonical_digest(template)
}

/// The digest of a pod template's [`Base`].
pub fn base_digest(template: &PodTemplateSpec) -> String {
    let Base { template, geometry } = base(template);
    canonical_digest(&json!({"template": template, "memoryGeometry": geometry}))
}

/// SHA-256 of `value` as JSON with sorted object keys, first 16 bytes in hex.
fn canonical_digest(value: &impl Serialize) -> String {
    // A Value's maps are sorted: the same content gives the same bytes.
    let canonical = serde_json::to_value(value)
        .and_then(|v| serde_json::to_vec(&v))
        .unwrap_or_default();
    Sha256::digest(&canonical)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::render::RESTART_TRIGGER_ANNOTATION;
    use crate::render::labels::VERSION_LABEL;

    /// A Memcached named `c` with `spec` and restart `trigger`, as
    /// rendering reads it (leaked: a test's few bytes).
    fn memcached(spec: serde_json::Value, trigger: Option<&str>) -> Instance<'static> {
        let annotations = trigger.map(|t| json!({RESTART_TRIGGER_ANNOTATION: t}));
        let metadata = json!({"name": "c", "namespace": "ns", "annotations": annotations});
        Instance {
            metadata: Box::leak(Box::new(serde_json::from_value(metadata).unwrap())),
            spec: Box::leak(Box::new(serde_json::from_value(spec).unwrap())),
        }
    }

    #[test]
    fn the_intent_ignores_replicas_and_follows_spec_secrets_and_trigger() {
        let base = intent(memcached(json!({"replicas": 3}), None), Some("h"));
        let scaled = intent(memcached(json!({"replicas": 5}), None), Some("h"));
        assert_eq!(base, scaled, "scaling restarts no pod");
        for changed in [
            intent(
                memcached(json!({"replicas": 3, "image": "m:2"}), None),
                Some("h"),
            ),
            intent(memcached(json!({"replicas": 3}), None), Some("other")),
            intent(memcached(json!({"replicas": 3}), None), None),
            intent(memcached(json!({"replicas": 3}), Some("1")), Some("h")),
        ] {
            assert_ne!(base, changed);
        }
        assert_eq!(base.len(), 32);
    }

    #[test]
    fn a_different_rendering_is_held_only_for_the_same_intent() {
        let stamp = |intent: &str, template: &str| TemplateStamp {
            intent: intent.into(),
            template: template.into(),
            base: Some("b".into()),
            spec: Some("{}".into()),
        };
        let running = stamp("i", "t");
        assert!(stamp("i", "t2").held_by(&running), "controller's change");
        assert!(!stamp("i2", "t2").held_by(&running), "user's change");
        assert!(!stamp("i", "t").held_by(&running), "nothing to hold");
        let mut annotations = BTreeMap::new();
        running.clone().annotate(&mut annotations);
        assert_eq!(TemplateStamp::from_annotations(&annotations), Some(running));
    }

    #[test]
    fn a_change_of_the_memcached_image_alone_keeps_the_base() {
        let template = |memcached: &str, exporter: &str| -> PodTemplateSpec {
            let tag = memcached.rsplit(':').next();
            serde_json::from_value(
                json!({"metadata": {"labels": {VERSION_LABEL: tag}}, "spec": {"containers": [
                    {"name": "memcached", "image": memcached},
                    {"name": "exporter", "image": exporter},
                ]}}),
            )
            .unwrap()
        };
        let stamp = |t: &PodTemplateSpec, intent: &str| TemplateStamp {
            intent: intent.into(),
            template: template_digest(t),
            base: Some(base_digest(t)),
            spec: None,
        };
        let running = stamp(&template("memcached:1.6.38", "exporter:0.15"), "i");
        let bumped = stamp(&template("memcached:1.6.39", "exporter:0.15"), "i2");
        let exporter = stamp(&template("memcached:1.6.39", "exporter:0.16"), "i2");
        let new_default = stamp(&template("memcached:1.6.39", "exporter:0.15"), "i");
        assert!(bumped.in_place_change(&running));
        assert!(
            !new_default.in_place_change(&running),
            "a new controller's default image, the spec unchanged: held"
        );
        assert!(
            !exporter.in_place_change(&running),
            "the exporter's image too"
        );
        assert!(!running.in_place_change(&running), "no change");
        let unstamped = TemplateStamp {
            base: None,
            ..running
        };
        assert!(
            !bumped.in_place_change(&unstamped),
            "stamped by an older controller"
        );
    }

    /// The intent of a warm Memcached with `memcached` and `trigger`.
    fn warm(memcached_config: serde_json::Value, trigger: Option<&str>) -> String {
        let spec = json!({"warmRestart": {"enabled": true}, "memcached": memcached_config});
        intent_spec(memcached(spec, trigger))
    }

    #[test]
    fn warm_changes_are_the_policys_warm_changes() {
        let running = warm(json!({"threads": 4}), None);
        assert!(warm_change(&running, &warm(json!({"threads": 2}), None)));
        assert!(
            warm_change(&running, &running),
            "a rotation: the spec alone unchanged"
        );
        let image = intent_spec(memcached(
            json!({"warmRestart": {"enabled": true}, "memcached": {"threads": 4}, "image": "memcached:1.6.45"}),
            None,
        ));
        assert!(warm_change(&running, &image));
        for cold in [
            warm(json!({"threads": 4, "maxMemoryMB": 128}), None),
            warm(json!({"threads": 4}), Some("now")),
            intent_spec(memcached(json!({"memcached": {"threads": 2}}), None)),
            intent_spec(memcached(
                json!({"warmRestart": {"enabled": true}, "memcached": {"threads": 4},
                    "resources": {"limits": {"memory": "1Gi"}}}),
                None,
            )),
            "not json".to_string(),
        ] {
            assert!(!warm_change(&running, &cold), "{cold}");
        }
    }

    /// A controller upgrade that renders the rest of the template otherwise
    /// (another supervisor: another base), then a warm change: in place.
    #[test]
    fn a_warm_change_goes_in_place_whatever_else_a_new_controller_renders() {
        let stamp = |intent: &str, base: &str, spec: Option<String>| TemplateStamp {
            intent: intent.into(),
            template: format!("t-{intent}-{base}"),
            base: Some(base.into()),
            spec,
        };
        let running = stamp(
            "i",
            "old-supervisor",
            Some(warm(json!({"threads": 4}), None)),
        );
        let threads = stamp(
            "i2",
            "new-supervisor",
            Some(warm(json!({"threads": 2}), None)),
        );
        assert!(threads.in_place_change(&running));
        let memory = stamp(
            "i3",
            "new-supervisor",
            Some(warm(json!({"threads": 4, "maxMemoryMB": 128}), None)),
        );
        assert!(!memory.in_place_change(&running), "the geometry: cold");
        let unstamped = TemplateStamp {
            spec: None,
            ..running.clone()
        };
        assert!(
            !threads.in_place_change(&unstamped),
            "stamped before the intent was: the bases decide"
        );
        let same_intent = stamp("i", "new-supervisor", running.spec.clone());
        assert!(!same_intent.in_place_change(&running), "held, not changed");
        let mut annotations = BTreeMap::new();
        running.clone().annotate(&mut annotations);
        assert_eq!(TemplateStamp::from_annotations(&annotations), Some(running));
    }

    #[test]
    fn digests_do_not_depend_on_key_order() {
        let sorted = json!({"a": 1, "b": {"c": 2, "d": 3}});
        let unsorted: serde_json::Value =
            serde_json::from_str(r#"{"b": {"d": 3, "c": 2}, "a": 1}"#).unwrap();
        assert_eq!(canonical_digest(&sorted), canonical_digest(&unsorted));
        assert_ne!(
            canonical_digest(&sorted),
            canonical_digest(&json!({"a": 1}))
        );
    }
}
