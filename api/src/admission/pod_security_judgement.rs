//! The Pod Security judgement of the pods a Memcached makes, at the stricter
//! of the settings' level and its namespace's `enforce` label.

use crate::admission::decode::OldMemcached;
use crate::admission::decode::restart_trigger;
use crate::admission::request::NamespaceEnforce;
use crate::admission::request::{Request, Settings};
use crate::defaults::{Defaulted, apply_defaults};
use crate::field::Path;
use crate::pod_security::completion::Addition;
use crate::pod_security::{self, Level, Violation};
use crate::render::changes::{PodSource, pod_creating_change};

/// The Pod Security level a request is judged at: the stricter of the
/// settings' and its namespace's `enforce` label.
pub(super) struct EffectiveLevel {
    pub(super) level: Level,
    /// The namespace's label asks for more than the settings.
    enforced_by_namespace: bool,
    /// Why the namespace could not be read.
    pub(super) warning: Option<String>,
}

impl EffectiveLevel {
    pub(super) fn of(request: &Request, settings: &Settings) -> Self {
        let (namespace_level, warning) = match &request.namespace_enforce {
            NamespaceEnforce::NotRead | NamespaceEnforce::Label(None) => (Level::Privileged, None),
            NamespaceEnforce::Label(Some(label)) => (Level::from_label(label), None),
            NamespaceEnforce::Unreadable(why) => (
                Level::Restricted,
                Some(format!(
                    "the Pod Security label of namespace {:?} could not be read ({why}): judged at \"restricted\"",
                    request.namespace
                )),
            ),
        };
        let labelled = matches!(request.namespace_enforce, NamespaceEnforce::Label(Some(_)));
        EffectiveLevel {
            level: settings.pod_security.max(namespace_level),
            enforced_by_namespace: labelled && namespace_level > settings.pod_security,
            warning,
        }
    }
}

/// A valid spec, defaulted for the level, before Pod Security has its say.
pub(super) struct Judged<'a, F> {
    /// Defaulted and completed for the level.
    pub(super) completed: Defaulted,
    /// What the completion added.
    pub(super) added: &'a [Addition],
    /// Defaulted without the completion.
    pub(super) plain: F,
}

/// The spec to admit, or why the pods built from it violate the Pod
/// Security level that applies, in Pod Security admission's words with the
/// spec field of each violation.
///
/// Pod Security admission judges every new pod. An UPDATE that creates no
/// pod ([`pod_creating_change`]: scaling down, the PodDisruptionBudget, the
/// NetworkPolicy, ...) may keep the violations the stored object already
/// has, so a Memcached admitted before its namespace or the settings
/// tightened can still be scaled down and edited; the violations it keeps are
/// warned about. Such an update gets the spec without the level's completion
/// when the completion alone would roll the pods out. Any other update is
/// judged as a CREATE is.
pub(super) fn judge_pod_security<F: FnOnce() -> Defaulted>(
    request: &Request,
    level: &EffectiveLevel,
    judged: Judged<'_, F>,
    old: Option<&OldMemcached>,
    warnings: &mut Vec<String>,
) -> Result<Defaulted, String> {
    let Judged {
        completed,
        added,
        plain,
    } = judged;
    let path = Path::new("spec");
    let violations = pod_security::check(&completed, level.level, &path);
    let added_warning = || {
        let added: Vec<String> = added.iter().map(ToString::to_string).collect();
        format!(
            "set for PodSecurity \"{}:latest\", which the spec left unset: {}; set them to choose other values the level allows",
            level.level,
            added.join(", ")
        )
    };
    if violations.is_empty() && added.is_empty() {
        return Ok(completed);
    }
    if let Some(old) = old {
        let stored = apply_defaults(old.spec.clone());
        let before = PodSource {
            spec: &stored,
            restart_trigger: old.restart_trigger.as_deref(),
            running: old.running,
        };
        let trigger = restart_trigger(&request.object);
        let creates = |spec: &Defaulted| {
            let after = PodSource {
                spec,
                restart_trigger: trigger.as_deref(),
                running: None,
            };
            pod_creating_change(&before, &after)
        };
        let kept = pod_security::check(&stored, level.level, &path);
        let keeps = |violations: &[Violation]| violations.iter().all(|v| kept.contains(v));
        let kept_warning = |violations: &[Violation]| {
            format!(
                "existing violations of PodSecurity \"{}:latest\" kept by this update, which creates no pod: {}",
                level.level,
                joined(violations)
            )
        };
        let plain = (!added.is_empty()).then(plain);
        match creates(plain.as_ref().unwrap_or(&completed)) {
            // The user's changes create no pod: keep the pods' template, so
            // the level's completion is taken only when it changes nothing.
            None => {
                if creates(&completed).is_none() {
                    if !added.is_empty() {
                        warnings.push(added_warning());
                    }
                    if !violations.is_empty() {
                        warnings.push(kept_warning(&violations));
                    }
                    return Ok(completed);
                }
                if let Some(plain) = plain {
                    let remaining = pod_security::check(&plain, level.level, &path);
                    if keeps(&remaining) {
                        warnings.push(kept_warning(&remaining));
                        return Ok(plain);
                    }
                }
            }
            Some(field) if !violations.is_empty() && keeps(&violations) => {
                warnings.push(format!(
                    "this update changes {field}, which creates pods, and Pod Security admission judges every \
                     new pod: the violations the stored Memcached already has are refused too; fix them, or make \
                     only changes that create no pod (scaling down, the PodDisruptionBudget, the NetworkPolicy, ...)"
                ));
            }
            Some(_) => {}
        }
    }
    if violations.is_empty() {
        warnings.push(added_warning());
        return Ok(completed);
    }
    Err(format!(
        "violates PodSecurity \"{}:latest\"{}: {}",
        level.level,
        enforced_by(request, level),
        joined(&violations)
    ))
}

/// ` (enforced by namespace "<name>")` when the namespace's label set the level.
pub(super) fn enforced_by(request: &Request, level: &EffectiveLevel) -> String {
    if level.enforced_by_namespace {
        format!(" (enforced by namespace {:?})", request.namespace)
    } else {
        String::new()
    }
}

/// Violations as Pod Security admission lists them: comma-separated.
pub(super) fn joined(violations: &[pod_security::Violation]) -> String {
    let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
    details.join(", ")
}
