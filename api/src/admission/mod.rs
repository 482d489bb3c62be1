//! The admission decision for one request: default, validate the defaulted
//! object, and answer accept, mutate or reject; a `scale` subresource update
//! has its replica count judged, and a scale-up its new pods' Pod Security
//! (`scale`). Transport-free: the waPC glue and the tests feed it decoded
//! requests ([`Request`]), with what it read from the cluster
//! ([`needs_namespace`], [`needs_memcached`]).
//!
//! A Memcached is judged in steps (`memcached`): its spec decoded within its
//! size bounds (`decode`), the defaults that depend on the operation
//! (`operation_defaults`), validation and the defaults of every spec
//! ([`crate::validation`]), the Pod Security of its pods
//! (`pod_security_judgement`), warnings of what the running pods will do
//! (`restart_warnings`), and the answer: the object with what defaulting
//! filled (`patch`).

mod decision;
mod decode;
mod key_moves;
mod memcached;
mod operation_defaults;
mod patch;
mod pod_security_judgement;
mod request;
mod restart_warnings;
mod scale;

use crate::pod_security::Level;
use crate::types::{GROUP, KIND};
use pod_security_judgement::EffectiveLevel;
use scale::scale_up;

pub use decision::{Decision, FORBIDDEN_CODE, QUALIFIED_KIND, REJECT_CODE};
pub use decode::decode_spec;
pub use request::{NamespaceEnforce, RESOURCE, Request, Settings, StoredMemcached};

/// Judge one admission request. It is taken whole: a mutation edits its
/// object in place rather than a copy.
pub fn review(request: Request, settings: &Settings) -> Decision {
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE") {
        return Decision::accept();
    }
    match request.sub_resource.as_str() {
        "" if request.group == GROUP && request.kind == KIND => {
            memcached::review_memcached(request, settings)
        }
        "scale" => scale::review_scale(request, settings),
        _ => Decision::accept(),
    }
}

/// Whether judging `request` needs its namespace's Pod Security label: it
/// creates or updates a Memcached, or scales one up through the `scale`
/// subresource, and the settings' level is below the strictest (a label can
/// only make the judgement stricter).
pub fn needs_namespace(request: &Request, settings: &Settings) -> bool {
    settings.pod_security < Level::Restricted
        && matches!(request.operation.as_str(), "CREATE" | "UPDATE")
        && ((request.sub_resource.is_empty() && request.group == GROUP && request.kind == KIND)
            || scale_up(request))
}

/// Whether judging `request` needs the stored Memcached, once its namespace
/// was read ([`needs_namespace`]): a scale-up through the `scale`
/// subresource (more replicas than the old Scale's) whose namespace asks for
/// more than the settings' level. At `restricted` nothing is read: every
/// admitted Memcached already meets any level a namespace can ask for. A
/// namespace that could not be read counts as `restricted`, as [`review`]
/// judges an apply there.
pub fn needs_memcached(request: &Request, settings: &Settings) -> bool {
    settings.pod_security < Level::Restricted
        && scale_up(request)
        && EffectiveLevel::of(request, settings).level > settings.pod_security
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::scale::{SCALE_GROUP, SCALE_KIND};
    use super::*;

    fn scale_update(resource: &str, object: Value) -> Request {
        Request {
            operation: "UPDATE".into(),
            group: SCALE_GROUP.into(),
            version: "v1".into(),
            kind: SCALE_KIND.into(),
            resource_group: GROUP.into(),
            resource: resource.into(),
            sub_resource: "scale".into(),
            name: "my-cache".into(),
            object,
            ..Request::default()
        }
    }

    fn scale(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "my-cache"}, "spec": spec})
    }

    fn judge(request: Request) -> Decision {
        review(request, &Settings::default())
    }

    /// An oversized list is refused with its size error alone: nothing else
    /// of the spec is walked, not even the other rules it breaks.
    #[test]
    fn an_oversized_list_is_refused_before_anything_else() {
        let spec =
            json!({"replicas": 500, "tolerations": vec![json!({"operator": "Exists"}); 101]});
        let request = Request {
            operation: "CREATE".into(),
            group: GROUP.into(),
            version: "v1beta1".into(),
            kind: KIND.into(),
            resource_group: GROUP.into(),
            resource: RESOURCE.into(),
            sub_resource: String::new(),
            name: "my-cache".into(),
            object: json!({"metadata": {"name": "my-cache"}, "spec": spec}),
            ..Request::default()
        };
        assert_eq!(
            judge(request),
            Decision::bad_request(
                r#"Memcached.memcached.c5c3.io "my-cache" is invalid: spec.tolerations: Too many: 101: must have at most 100 items"#
                    .into()
            )
        );
    }

    #[test]
    fn scale_replicas_are_judged_against_the_spec_bounds() {
        let accept = Decision::Accept { warnings: vec![] };
        for ok in [
            json!({"replicas": 0}),
            json!({"replicas": 64}),
            json!({}),
            Value::Null,
        ] {
            assert_eq!(judge(scale_update(RESOURCE, scale(ok))), accept);
        }
        assert_eq!(
            judge(scale_update(RESOURCE, scale(json!({"replicas": 65})))),
            Decision::bad_request(
                r#"Memcached.memcached.c5c3.io "my-cache" is invalid: spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64"#
                    .into()
            )
        );
    }

    #[test]
    fn undecodable_scales_are_rejected_with_400() {
        for (object, expected) in [
            (json!([1]), "the request's object is not a JSON object"),
            (
                scale(json!(3)),
                "object cannot be decoded: spec: invalid type: number, expected an object",
            ),
            (
                scale(json!({"replicas": "3"})),
                "object cannot be decoded: spec.replicas: invalid type: string \"3\", expected i32",
            ),
            (
                scale(json!({"replicas": 2_147_483_648i64})),
                "object cannot be decoded: spec.replicas: invalid value: integer `2147483648`, expected i32",
            ),
        ] {
            assert_eq!(
                judge(scale_update(RESOURCE, object)),
                Decision::bad_request(expected.into())
            );
        }
    }

    #[test]
    fn other_resources_and_subresources_are_accepted_untouched() {
        let accept = Decision::Accept { warnings: vec![] };
        let too_many = scale(json!({"replicas": 500}));
        assert_eq!(judge(scale_update("deployments", too_many.clone())), accept);
        let mut status = scale_update(RESOURCE, too_many.clone());
        status.sub_resource = "status".into();
        assert_eq!(judge(status), accept);
        let mut not_a_scale = scale_update(RESOURCE, too_many);
        not_a_scale.kind = "Memcached".into();
        assert_eq!(judge(not_a_scale), accept);
    }
}
