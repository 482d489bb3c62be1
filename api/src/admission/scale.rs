//! The `scale` subresource: its replica count judged against the spec's
//! bounds, and a scale-up's new pods against the Pod Security level.

use serde::Deserialize;
use serde_json::Value;

use crate::admission::decision::{Decision, FORBIDDEN_CODE, QUALIFIED_KIND, rejection};
use crate::admission::decode::{decode, json_type, spec_path};
use crate::admission::memcached::review_memcached;
use crate::admission::pod_security_judgement::{EffectiveLevel, enforced_by, joined};
use crate::admission::request::{RESOURCE, Request, Settings, StoredMemcached};
use crate::defaults::{Defaulted, apply_defaults};
use crate::field::{ErrorList, Path};
use crate::pod_security;
use crate::types::{GROUP, KIND, MemcachedSpec, VERSIONS};
use crate::validation;

/// Group and kind of the object a `scale` subresource request carries.
pub(super) const SCALE_GROUP: &str = "autoscaling";

pub(super) const SCALE_KIND: &str = "Scale";

/// An update of `memcacheds/scale` (`kubectl scale`, a HorizontalPodAutoscaler)
/// carries an autoscaling/v1 Scale whose `spec.replicas` the API server writes
/// into the Memcached's `spec.replicas`: judged against the same bounds, with
/// the API server's wording for the Memcached. The Scale holds nothing else of
/// the object, not even whether autoscaling is enabled, so rules that tie the
/// replica count to other fields cannot be checked here.
///
/// A scale-up creates pods, which Pod Security admission judges: when the
/// namespace asks for more than the settings, the stored Memcached the caller
/// read ([`crate::admission::needs_memcached`]) is judged as `kubectl apply` of the same count
/// would be ([`judge_scale_up`]). Scaling down or to the same count creates no
/// pod and is never refused for Pod Security.
pub(super) fn review_scale(mut request: Request, settings: &Settings) -> Decision {
    let accept = || Decision::Accept {
        warnings: Vec::new(),
    };
    if !is_memcached_scale(&request) {
        return accept();
    }
    let replicas = match scale_replicas(&request.object) {
        Ok(replicas) => replicas,
        Err(message) => return Decision::bad_request(message),
    };
    let spec = apply_defaults(MemcachedSpec {
        replicas: Some(replicas),
        ..MemcachedSpec::default()
    });
    let replicas_path = spec_path("replicas");
    let errors: ErrorList = validation::validate(&spec, &settings.options)
        .into_iter()
        .filter(|e| e.field.to_string() == replicas_path)
        .collect();
    if !errors.is_empty() {
        return rejection(&request, &errors, Vec::new());
    }
    if !scale_up(&request) {
        return accept();
    }
    let level = EffectiveLevel::of(&request, settings);
    if level.level <= settings.pod_security {
        return accept();
    }
    match std::mem::take(&mut request.memcached) {
        StoredMemcached::NotRead => accept(),
        StoredMemcached::Object(stored) => {
            judge_scale_up(request, stored, replicas, &level, settings)
        }
        StoredMemcached::Unreadable(why) => Decision::Accept {
            warnings: level
                .warning
                .clone()
                .into_iter()
                .chain([unjudged_scale_up(&request, &level, &why)])
                .collect(),
        },
    }
}

/// The warning of a scale-up admitted without its Pod Security judgement:
/// the stored Memcached could not be read. Admitted rather than refused
/// (fail open): a cluster that did not grant the read would otherwise refuse
/// every scale-up of every HorizontalPodAutoscaler in such a namespace, while
/// Pod Security admission still refuses any pod that breaks the level.
fn unjudged_scale_up(request: &Request, level: &EffectiveLevel, why: &str) -> String {
    format!(
        "{QUALIFIED_KIND} {:?} could not be read ({why}): this scale-up was not judged against PodSecurity \
         \"{}:latest\"{}, and Pod Security admission refuses every new pod that violates it; grant Kubewarden's \
         policy-server's ServiceAccount get, list and watch on memcacheds.memcached.c5c3.io (the \
         memcached-operator chart does with policy.policyServerRBAC; with deploy/policy.yaml, add them to \
         kubewarden-defaults' policyServer.permissions)",
        request.name,
        level.level,
        enforced_by(request, level)
    )
}

/// A scale-up's Pod Security, judged as `kubectl apply` of the stored
/// Memcached with the new count would be: the same refusal, in the same
/// words (code 403). The Scale cannot carry what the apply's defaulting would
/// add for the level (the new pods are built from the stored spec as it is),
/// so a stored spec that meets the level only once completed is refused too,
/// with a warning that an apply completes it.
fn judge_scale_up(
    request: Request,
    stored: Value,
    replicas: i32,
    level: &EffectiveLevel,
    settings: &Settings,
) -> Decision {
    let Some(object) = stored.as_object() else {
        let why = format!("the host answered a {}, not an object", json_type(&stored));
        return Decision::Accept {
            warnings: vec![unjudged_scale_up(&request, level, &why)],
        };
    };
    let version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(_, version)| version)
        .filter(|version| VERSIONS.contains(version))
        .unwrap_or("v1beta1")
        .to_string();
    let mut scaled = stored.clone();
    match scaled.get_mut("spec") {
        Some(Value::Object(spec)) => {
            spec.insert("replicas".into(), replicas.into());
        }
        _ => scaled["spec"] = serde_json::json!({"replicas": replicas}),
    }
    let apply = Request {
        operation: "UPDATE".into(),
        group: GROUP.into(),
        version,
        kind: KIND.into(),
        resource_group: GROUP.into(),
        resource: RESOURCE.into(),
        sub_resource: String::new(),
        name: request.name.clone(),
        object: scaled,
        old_object: stored,
        namespace: request.namespace.clone(),
        namespace_enforce: request.namespace_enforce.clone(),
        memcached: StoredMemcached::NotRead,
    };
    let pods = decode(&apply.object, "object").map(apply_defaults);
    match (review_memcached(apply, settings), pods) {
        (
            refused @ Decision::Reject {
                code: FORBIDDEN_CODE,
                ..
            },
            _,
        ) => refused,
        // The apply is invalid for another reason (autoscaling enabled, which
        // the CRD's own rule refuses beside a count; a rule newer than the
        // object): left to the API server, as before the pods were judged.
        (Decision::Reject { .. }, _) | (_, Err(_)) => Decision::Accept {
            warnings: Vec::new(),
        },
        (Decision::Accept { .. } | Decision::Mutate { .. }, Ok(pods)) => {
            stored_pods_at(&request, &pods, level)
        }
    }
}

/// The scale-up of a Memcached whose apply is admitted: refused when the pods
/// built from the stored spec as it is (without the completion the apply
/// would add) violate the level.
fn stored_pods_at(request: &Request, pods: &Defaulted, level: &EffectiveLevel) -> Decision {
    let violations = pod_security::check(pods, level.level, &Path::new("spec"));
    if violations.is_empty() {
        return Decision::Accept {
            warnings: Vec::new(),
        };
    }
    Decision::Reject {
        message: format!(
            "{QUALIFIED_KIND} {:?} is forbidden: violates PodSecurity \"{}:latest\"{}: {}",
            request.name,
            level.level,
            enforced_by(request, level),
            joined(&violations)
        ),
        code: FORBIDDEN_CODE,
        warnings: level
            .warning
            .clone()
            .into_iter()
            .chain([format!(
                "the new pods are built from the stored Memcached, whose security contexts leave unset what \
                 PodSecurity \"{}:latest\" needs: an update through the policy (`kubectl apply`, settings' mutate \
                 on) sets them; then scale",
                level.level
            )])
            .collect(),
    }
}

/// Whether `request` addresses the `scale` subresource of a Memcached.
fn is_memcached_scale(request: &Request) -> bool {
    request.sub_resource == "scale"
        && request.resource_group == GROUP
        && request.resource == RESOURCE
        && request.group == SCALE_GROUP
        && request.kind == SCALE_KIND
}

/// Whether `request` updates a Memcached's Scale to more replicas than the
/// old Scale's: the only scale that creates pods.
pub(super) fn scale_up(request: &Request) -> bool {
    request.operation == "UPDATE"
        && is_memcached_scale(request)
        && matches!(
            (scale_replicas(&request.object), scale_replicas(&request.old_object)),
            (Ok(new), Ok(old)) if new > old
        )
}

/// `spec.replicas` of a Scale; absent means 0 (the API server omits a zero).
fn scale_replicas(object: &Value) -> Result<i32, String> {
    let Value::Object(map) = object else {
        return Err("the request's object is not a JSON object".to_string());
    };
    let replicas = match map.get("spec") {
        None | Some(Value::Null) => None,
        Some(Value::Object(spec)) => spec.get("replicas").filter(|r| !r.is_null()),
        Some(other) => {
            return Err(format!(
                "object cannot be decoded: spec: invalid type: {}, expected an object",
                json_type(other)
            ));
        }
    };
    replicas.map_or(Ok(0), |r| {
        i32::deserialize(r).map_err(|e| format!("object cannot be decoded: spec.replicas: {e}"))
    })
}
