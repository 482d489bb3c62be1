//! A Memcached created or updated, judged step by step.

use serde_json::Value;

use crate::admission::decision::{Decision, FORBIDDEN_CODE, QUALIFIED_KIND, rejection};
use crate::admission::decode::{OldMemcached, decode};
use crate::admission::key_moves;
use crate::admission::operation_defaults;
use crate::admission::patch;
use crate::admission::pod_security_judgement::{EffectiveLevel, Judged, judge_pod_security};
use crate::admission::request::{Request, Settings};
use crate::admission::restart_warnings;
use crate::defaults::apply_defaults;
use crate::field::Path;
use crate::types::{MemcachedSpec, VERSIONS};
use crate::validation::{self, ObjectName};

/// A Memcached created or updated, step by step.
pub(super) fn review_memcached(request: Request, settings: &Settings) -> Decision {
    let mut spec = match decoded(&request) {
        Ok(spec) => spec,
        Err(refused) => return refused,
    };
    let original = spec.clone();
    let old = OldMemcached::of(&request);
    let mut warnings = Vec::new();
    if let Some(old) = &old {
        warnings.extend(operation_defaults::replicas_across_autoscaling(
            &mut spec, old,
        ));
    }
    // Their warnings only for a spec admitted.
    let created = request.operation == "CREATE";
    let warm_restart_warning = (settings.mutate)
        .then(|| operation_defaults::default_warm_restart(&mut spec, created, old.as_ref()))
        .flatten();
    let warm_image_warning =
        (old.as_ref()).and_then(|old| restart_warnings::warm_image_change(&spec, &old.spec));
    let (replicas, warm_restart) = (spec.replicas, spec.warm_restart.clone());

    let object_name = object_name(&request);
    let mut level = EffectiveLevel::of(&request, settings);
    let checked =
        validation::check_within_bounds_at(object_name, spec, &settings.options, level.level);
    warnings.extend(checked.warnings);
    if !checked.errors.is_empty() {
        return rejection(&request, &checked.errors, warnings);
    }
    warnings.extend(level.warning.take());
    // Like Pod Security admission, judged once the object is valid.
    let judged = Judged {
        completed: checked.spec,
        added: &checked.added,
        // The spec without what the level's defaulting added.
        plain: || {
            apply_defaults(MemcachedSpec {
                replicas,
                warm_restart: warm_restart.clone(),
                ..original.clone()
            })
        },
    };
    let spec = match judge_pod_security(&request, &level, judged, old.as_ref(), &mut warnings) {
        Ok(spec) => spec,
        Err(refusal) => {
            return Decision::Reject {
                message: format!(
                    "{QUALIFIED_KIND} {:?} is forbidden: {refusal}",
                    object_name.name
                ),
                code: FORBIDDEN_CODE,
                warnings,
            };
        }
    };
    warnings.extend(warm_restart_warning);
    warnings.extend(warm_image_warning);
    if let Some(old) = &old {
        // The spec the controller will render: the one admitted.
        let stored = (!settings.mutate).then(|| apply_defaults(original.clone()));
        let admitted = stored.as_ref().unwrap_or(&spec);
        warnings.extend(restart_warnings::cold_restart_warning(
            &request, old, admitted,
        ));
        let before = apply_defaults(old.spec.clone());
        warnings.extend(key_moves::key_move_warning(&before, admitted));
    }
    if !settings.mutate || *spec == original {
        return Decision::Accept { warnings };
    }
    match patch::defaulted_object(request.object, &original, spec.into_inner()) {
        Ok(object) => Decision::Mutate { object, warnings },
        Err(message) => Decision::bad_request(message),
    }
}

/// The request's spec, of a version this policy judges, its lists within
/// their size bounds: an oversized list is refused before anything walks or
/// copies it (defaulting adds no item to a list that has any).
fn decoded(request: &Request) -> Result<MemcachedSpec, Decision> {
    if !VERSIONS.contains(&request.version.as_str()) {
        return Err(Decision::bad_request(format!(
            "{QUALIFIED_KIND} version {:?} is not supported by this policy (supported: {})",
            request.version,
            VERSIONS.join(", ")
        )));
    }
    let spec = decode(&request.object, "object").map_err(Decision::bad_request)?;
    let sizes = validation::limits::validate_sizes(&spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return Err(rejection(request, &sizes, Vec::new()));
    }
    Ok(spec)
}

/// The object's name (or `generateName`) as submitted.
fn object_name(request: &Request) -> ObjectName<'_> {
    let metadata = |key: &str| {
        (request.object.get("metadata"))
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    };
    ObjectName {
        name: metadata("name").unwrap_or(&request.name),
        generate_name: metadata("generateName").unwrap_or_default(),
    }
}
