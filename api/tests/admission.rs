use memcached_api::admission::{
    Decision, NamespaceEnforce, Request, Settings, needs_namespace, review,
};
use memcached_api::pod_security::Level;
use serde_json::{Value, json};

fn request(operation: &str, object: Value, old: Value) -> Request {
    Request {
        operation: operation.into(),
        group: "memcached.c5c3.io".into(),
        version: "v1beta1".into(),
        kind: "Memcached".into(),
        name: "my-cache".into(),
        object,
        old_object: old,
        ..Default::default()
    }
}

fn cr(spec: Value) -> Value {
    json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
        "metadata": {"name": "my-cache", "annotations": {"keep": "me"}}, "spec": spec})
}

fn create(spec: Value) -> Decision {
    review(
        request("CREATE", cr(spec), Value::Null),
        &Settings::default(),
    )
}

fn rejection(decision: Decision) -> (String, u16) {
    match decision {
        Decision::Reject { message, code, .. } => (message, code),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn mutates_with_defaults_and_keeps_everything_else() {
    let Decision::Mutate { object, warnings } =
        create(json!({"unmodelled": {"x": 1}, "memcached": {"maxMemoryMB": 128}}))
    else {
        panic!("expected a mutation")
    };
    assert!(warnings.is_empty());
    assert_eq!(object["metadata"]["annotations"]["keep"], "me");
    assert_eq!(object["spec"]["unmodelled"], json!({"x": 1}));
    assert_eq!(object["spec"]["memcached"]["maxMemoryMB"], 128);
    assert_eq!(object["spec"]["memcached"]["threads"], 4);
    assert_eq!(object["spec"]["replicas"], 1);
}

#[test]
fn adds_a_spec_when_there_is_none() {
    let mut object = cr(Value::Null);
    object.as_object_mut().unwrap().remove("spec");
    let Decision::Mutate { object, .. } =
        review(request("CREATE", object, Value::Null), &Settings::default())
    else {
        panic!("expected a mutation")
    };
    assert_eq!(object["spec"]["image"], "memcached:1.6");
}

#[test]
fn accepts_a_fully_specified_object_without_mutation() {
    let Decision::Mutate { object, .. } = create(json!({})) else {
        panic!()
    };
    let again = review(request("CREATE", object, Value::Null), &Settings::default());
    assert_eq!(again, Decision::Accept { warnings: vec![] });
}

#[test]
fn never_mutates_when_mutation_is_off() {
    let settings = Settings {
        mutate: false,
        ..Settings::default()
    };
    assert_eq!(
        review(request("CREATE", cr(json!({})), Value::Null), &settings),
        Decision::Accept { warnings: vec![] }
    );
    let bad = review(
        request("CREATE", cr(json!({"replicas": 99})), Value::Null),
        &settings,
    );
    assert_eq!(rejection(bad).1, 400);
}

#[test]
fn rejects_with_every_error_in_one_message() {
    let (message, code) = rejection(create(
        json!({"replicas": 3, "resources": {"limits": {"memory": "64Mi"}},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 3}}, "security": {"sasl": {"enabled": true}}}),
    ));
    assert_eq!(code, 400);
    assert_eq!(
        message,
        r#"Memcached.memcached.c5c3.io "my-cache" is invalid: [spec.resources.limits.memory: Invalid value: "64Mi": memory limit must be at least 96Mi (maxMemoryMB=64Mi + 32Mi overhead), spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: 3: minAvailable (3) must be less than replicas (3), spec.security.sasl.credentialsSecretRef.name: Required value: credentialsSecretRef.name is required when SASL is enabled]"#
    );
}

#[test]
fn always_accepts_delete_other_kinds_and_subresources() {
    let garbage = json!("not an object");
    assert_eq!(
        review(
            request("DELETE", garbage.clone(), garbage.clone()),
            &Settings::default()
        ),
        Decision::Accept { warnings: vec![] }
    );
    let mut pod = request("CREATE", garbage.clone(), Value::Null);
    pod.group = String::new();
    pod.kind = "Pod".into();
    assert_eq!(
        review(pod, &Settings::default()),
        Decision::Accept { warnings: vec![] }
    );
    let mut status = request("UPDATE", garbage, Value::Null);
    status.sub_resource = "status".into();
    assert_eq!(
        review(status, &Settings::default()),
        Decision::Accept { warnings: vec![] }
    );
}

#[test]
fn rejects_undecodable_objects_with_400() {
    let cases = [
        (json!([1, 2]), "the request's object is not a JSON object"),
        (
            json!({"kind": "Pod", "spec": {}}),
            "object.kind is \"Pod\", but this policy only judges Memcached.memcached.c5c3.io",
        ),
        (
            cr(json!("big")),
            "object cannot be decoded: spec: invalid type: string, expected an object",
        ),
        (
            cr(json!({"memcached": [64]})),
            "object cannot be decoded: spec.memcached: invalid type: array, expected an object",
        ),
        (
            cr(json!({"replicas": "three"})),
            "object cannot be decoded: spec.replicas: invalid type: string \"three\", expected i32",
        ),
        (
            cr(json!({"replicas": 3_000_000_000u64})),
            "object cannot be decoded: spec.replicas: invalid value: integer `3000000000`, expected i32",
        ),
        (
            cr(json!({"tolerations": [{"tolerationSeconds": 1e300}]})),
            "object cannot be decoded: spec.tolerations[0].tolerationSeconds",
        ),
    ];
    for (object, expected) in cases {
        let (message, code) = rejection(review(
            request("CREATE", object.clone(), Value::Null),
            &Settings::default(),
        ));
        assert!(message.starts_with(expected), "{object}: {message}");
        assert_eq!(code, 400);
    }
    let mut v1 = request("CREATE", cr(json!({})), Value::Null);
    v1.version = "v1".into();
    assert!(
        rejection(review(v1, &Settings::default()))
            .0
            .contains("not supported")
    );
}

#[test]
fn enabling_autoscaling_releases_replicas_carried_over_from_the_old_object() {
    let old = cr(json!({"replicas": 1, "resources": {"requests": {"cpu": "100m"}}}));
    let new = cr(
        json!({"replicas": 1, "resources": {"requests": {"cpu": "100m"}}, "autoscaling": {"enabled": true, "maxReplicas": 5}}),
    );
    let Decision::Mutate { object, warnings } = review(
        request("UPDATE", new.clone(), old.clone()),
        &Settings::default(),
    ) else {
        panic!("expected a mutation")
    };
    assert!(object["spec"].get("replicas").is_none());
    assert_eq!(
        object["spec"]["autoscaling"]["metrics"][0]["resource"]["name"],
        "cpu"
    );
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("spec.replicas (1) was removed"));

    let changed = cr(
        json!({"replicas": 3, "resources": {"requests": {"cpu": "100m"}}, "autoscaling": {"enabled": true, "maxReplicas": 5}}),
    );
    let (message, _) = rejection(review(
        request("UPDATE", changed, old),
        &Settings::default(),
    ));
    assert!(message.contains("spec.replicas and spec.autoscaling.enabled are mutually exclusive"));

    let (message, _) = rejection(review(
        request("CREATE", new, Value::Null),
        &Settings::default(),
    ));
    assert!(message.contains("mutually exclusive"));
}

#[test]
fn carries_warnings_on_acceptance() {
    let Decision::Mutate { warnings, .. } = create(
        json!({"monitoring": {"enabled": true}, "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "s"}}}}),
    ) else {
        panic!()
    };
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("the memcached exporter cannot authenticate"));
    assert!(warnings[1].contains("the SASL credentials cross the pod network in clear text"));
}

fn judged_in(spec: Value, level: Level, namespace: NamespaceEnforce) -> Decision {
    let mut request = request("CREATE", cr(spec), Value::Null);
    request.namespace = "team-a".into();
    request.namespace_enforce = namespace;
    let settings = Settings {
        pod_security: level,
        ..Settings::default()
    };
    review(request, &settings)
}

const PRIVILEGED: &str = r#"{"security": {"containerSecurityContext": {"privileged": true}}}"#;

#[test]
fn pod_security_refuses_with_403_in_pod_security_admissions_words() {
    let spec: Value = serde_json::from_str(PRIVILEGED).unwrap();
    let (message, code) = rejection(judged_in(spec, Level::Baseline, NamespaceEnforce::NotRead));
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "Memcached.memcached.c5c3.io \"my-cache\" is forbidden: violates PodSecurity \"baseline:latest\": \
         spec.security.containerSecurityContext.privileged: privileged (container \"memcached\" must not set \
         securityContext.privileged=true)"
    );
}

#[test]
fn the_stricter_of_the_settings_and_the_namespace_label_applies() {
    let spec: Value = serde_json::from_str(PRIVILEGED).unwrap();
    let label = |value: &str| NamespaceEnforce::Label(Some(value.into()));
    let admitted = |decision: &Decision| !matches!(decision, Decision::Reject { .. });
    assert!(admitted(&judged_in(
        spec.clone(),
        Level::Privileged,
        NamespaceEnforce::Label(None)
    )));
    assert!(admitted(&judged_in(
        spec.clone(),
        Level::Privileged,
        label("privileged")
    )));
    let (message, _) = rejection(judged_in(
        spec.clone(),
        Level::Privileged,
        label("baseline"),
    ));
    assert!(
        message.contains(
            "violates PodSecurity \"baseline:latest\" (enforced by namespace \"team-a\"): "
        ),
        "{message}"
    );
    // An unreadable label enforces restricted, as Pod Security admission reads it.
    let (message, _) = rejection(judged_in(spec.clone(), Level::Privileged, label("strict")));
    assert!(
        message.contains("\"restricted:latest\" (enforced by namespace \"team-a\")"),
        "{message}"
    );
    // A namespace asking for less than the settings changes nothing.
    let (message, _) = rejection(judged_in(spec, Level::Baseline, label("privileged")));
    assert!(
        message.contains("violates PodSecurity \"baseline:latest\": "),
        "{message}"
    );
}

#[test]
fn an_unreadable_namespace_is_judged_restricted_with_a_warning() {
    let unreadable = NamespaceEnforce::Unreadable("forbidden".into());
    let Decision::Reject {
        message, warnings, ..
    } = judged_in(
        json!({"security": {"containerSecurityContext": {}}}),
        Level::Privileged,
        unreadable.clone(),
    )
    else {
        panic!("an empty container context is not restricted")
    };
    assert!(message.contains("\"restricted:latest\": "), "{message}");
    let expected = "the Pod Security label of namespace \"team-a\" could not be read (forbidden): judged at \"restricted\"";
    assert_eq!(warnings, [expected]);
    match judged_in(json!({}), Level::Privileged, unreadable) {
        Decision::Mutate { warnings, .. } => assert_eq!(warnings, [expected]),
        other => panic!("the defaults meet restricted: {other:?}"),
    }
}

#[test]
fn pod_security_is_judged_only_once_the_object_is_valid() {
    let spec =
        json!({"replicas": -1, "security": {"containerSecurityContext": {"privileged": true}}});
    let (message, code) = rejection(create(spec));
    assert_eq!(code, 400);
    assert!(!message.contains("PodSecurity"), "{message}");
}

#[test]
fn the_namespace_is_needed_only_below_restricted_for_memcacheds() {
    let create = request("CREATE", cr(json!({})), Value::Null);
    let at = |level| Settings {
        pod_security: level,
        ..Settings::default()
    };
    assert!(!needs_namespace(&create, &Settings::default()));
    assert!(needs_namespace(&create, &at(Level::Baseline)));
    assert!(needs_namespace(&create, &at(Level::Privileged)));
    let mut scale = create.clone();
    scale.sub_resource = "scale".into();
    assert!(!needs_namespace(&scale, &at(Level::Baseline)));
    let mut delete = create;
    delete.operation = "DELETE".into();
    assert!(!needs_namespace(&delete, &at(Level::Baseline)));
}

#[test]
fn an_update_is_refused_only_for_violations_the_stored_object_lacks() {
    let privileged: Value = serde_json::from_str(PRIVILEGED).unwrap();
    let update = |spec: Value, old: Value| {
        review(request("UPDATE", cr(spec), cr(old)), &Settings::default())
    };
    // Scaling a Memcached admitted before the level tightened: admitted, with a warning.
    let mut scaled = privileged.clone();
    scaled["replicas"] = json!(3);
    let warnings = match update(scaled, privileged.clone()) {
        Decision::Mutate { warnings, .. } | Decision::Accept { warnings } => warnings,
        other => panic!("an update adding no violation is admitted: {other:?}"),
    };
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "existing violations of PodSecurity \"restricted:latest\" kept by this update: \
             spec.security.containerSecurityContext.privileged: privileged ("
        )),
        "{warnings:?}"
    );
    // A new violation is refused, listing every violation.
    let mut worse = privileged.clone();
    worse["security"]["containerSecurityContext"]["runAsUser"] = json!(0);
    let (message, code) = rejection(update(worse, privileged));
    assert_eq!(code, 403);
    assert!(message.contains("privileged ("), "{message}");
    assert!(message.contains("runAsUser=0"), "{message}");
    // A CREATE of the same object is refused.
    let (_, code) = rejection(create(serde_json::from_str(PRIVILEGED).unwrap()));
    assert_eq!(code, 403);
}
