//! Hostile input through the real policy.wasm: always an answer, never a trap.

use e2e_tests::Policy;
use serde_json::{Value, json};
use test_support::object::memcached;

fn request(object: Value) -> Value {
    json!({"uid": "1", "operation": "CREATE", "name": "my-cache", "namespace": "default",
        "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
        "resource": {"group": "memcached.c5c3.io", "version": "v1beta1", "resource": "memcacheds"},
        "object": object})
}

fn cr(spec: Value) -> Value {
    memcached(spec).json()
}

fn assert_rejected(answer: &Value, fragment: &str) {
    assert_eq!(answer["accepted"], false, "{answer}");
    assert_eq!(answer["code"], 400, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(fragment),
        "{fragment:?} not in {message:?}"
    );
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!(1), |inner, _| json!({"a": inner}))
}

#[test]
fn rejects_hostile_payloads_with_400_and_a_clear_message() {
    let policy = Policy::load().unwrap();
    let raw: [(&[u8], &str); 4] = [
        (b"\x00\xffnot json", "cannot decode the admission request"),
        (b"[1, 2, 3]", "cannot decode the admission request"),
        (b"", "cannot decode the admission request: EOF"),
        (
            br#"{"request": {"operation": "CREATE"}, "settings": {"memoryOverhead": "x"}}"#,
            "invalid settings",
        ),
    ];
    for (payload, fragment) in raw {
        assert_rejected(&policy.call_raw("validate", payload).unwrap(), fragment);
    }

    let huge = "9".repeat(1 << 20);
    let cases = [
        (
            json!("a string"),
            "the request's object is not a JSON object",
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            "object.apiVersion is \"v1\"",
        ),
        (
            json!({"kind": "Deployment", "spec": {}}),
            "object.kind is \"Deployment\"",
        ),
        (
            cr(json!([1])),
            "spec: invalid type: array, expected an object",
        ),
        (
            cr(json!({"memcached": "big"})),
            "spec.memcached: invalid type: string, expected an object",
        ),
        (
            cr(json!({"replicas": 2_147_483_648i64})),
            "spec.replicas: invalid value: integer `2147483648`, expected i32",
        ),
        (
            cr(json!({"replicas": 1.5})),
            "spec.replicas: invalid type: floating point `1.5`, expected i32",
        ),
        (
            cr(
                json!({"security": {"podSecurityContext": {"runAsUser": 18_446_744_073_709_551_615u64}}}),
            ),
            "spec.security.podSecurityContext.runAsUser",
        ),
        (
            cr(json!({"resources": {"limits": {"memory": "12 parsecs"}}})),
            "spec.resources.limits.memory: Invalid value: \"12 parsecs\": quantities must match",
        ),
        (
            cr(json!({"resources": {"limits": {"memory": huge}}})),
            "quantity has more than 100 significant digits",
        ),
        (
            cr(json!({"memcached": {"maxItemSize": "k".repeat(1 << 20)}})),
            "...(1048576 bytes)",
        ),
        (
            cr(json!({"image": "x".repeat(1 << 20)})),
            "spec.image: Too long: may not be more than 512 bytes",
        ),
        (
            cr(json!({"memcached": {"extraArgs": vec!["-m"; 200_000]}})),
            "spec.memcached.extraArgs: Too many: 200000: must have at most 100 items",
        ),
    ];
    for (object, fragment) in cases {
        assert_rejected(
            &policy.validate(&request(object), &json!({})).unwrap(),
            fragment,
        );
    }

    let deep = cr(json!({"unmodelled": nested(200)}));
    let answer = policy
        .call_raw(
            "validate",
            json!({"request": request(deep), "settings": {}})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
    assert_rejected(&answer, "recursion limit exceeded");
}

#[test]
fn keeps_deep_unmodelled_fields_it_can_read() {
    let policy = Policy::load().unwrap();
    let object = cr(json!({"unmodelled": nested(100)}));
    let answer = policy.validate(&request(object), &json!({})).unwrap();
    assert_eq!(answer["accepted"], true, "{answer}");
    assert_eq!(answer["mutated_object"]["spec"]["unmodelled"], nested(100));
}

#[test]
fn a_huge_quantity_is_capped_not_a_crash() {
    let policy = Policy::load().unwrap();
    let answer = policy
        .validate(
            &request(cr(
                json!({"resources": {"limits": {"memory": "1e2147483647"}}}),
            )),
            &json!({}),
        )
        .unwrap();
    assert_eq!(answer["accepted"], true, "{answer}");
    let answer = policy
        .validate(
            &request(cr(
                json!({"resources": {"limits": {"memory": "1e2147483648"}}}),
            )),
            &json!({}),
        )
        .unwrap();
    assert_rejected(&answer, "quantities must match");
}

/// Turning autoscaling off reads the stored object's `status.replicas`: a
/// status of any shape gives a replica count within the schema's bounds.
#[test]
fn a_hostile_status_holds_sane_replicas() {
    let policy = Policy::load().unwrap();
    let spec = |enabled: bool| {
        json!({"resources": {"requests": {"cpu": "1"}},
            "autoscaling": {"enabled": enabled, "minReplicas": 3, "maxReplicas": 100}})
    };
    for (status, held) in [
        (json!({"replicas": "10"}), 3),
        (json!({"replicas": -5}), 3),
        (json!({"replicas": 2_147_483_648i64}), 3),
        (json!({"replicas": 1.5}), 3),
        (json!({"replicas": null}), 3),
        (json!([1]), 3),
        (json!("status"), 3),
        (json!({"replicas": 100}), 64),
        (json!({"replicas": 0}), 0),
    ] {
        let mut old = cr(spec(true));
        old["status"] = status.clone();
        let mut update = request(cr(spec(false)));
        update["operation"] = json!("UPDATE");
        update["oldObject"] = old;
        let answer = policy.validate(&update, &json!({})).unwrap();
        assert_eq!(answer["accepted"], true, "{status}: {answer}");
        assert_eq!(
            answer["mutated_object"]["spec"]["replicas"], held,
            "{status}: {answer}"
        );
    }
}
