use memcached_api::admission::{
    Decision, NamespaceEnforce, Request, Settings, StoredMemcached, needs_memcached,
    needs_namespace, review,
};
use memcached_api::pod_security::Level;
use serde_json::{Value, json};
use test_support::object::memcached;

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
    memcached(spec).annotation("keep", "me").json()
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
        json!({"security": {"containerSecurityContext": {"runAsNonRoot": false}}}),
        Level::Privileged,
        unreadable.clone(),
    )
    else {
        panic!("runAsNonRoot: false is not restricted")
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

fn update(spec: Value, old: Value) -> Decision {
    review(request("UPDATE", cr(spec), cr(old)), &Settings::default())
}

fn warnings_of(decision: Decision) -> Vec<String> {
    match decision {
        Decision::Mutate { warnings, .. } | Decision::Accept { warnings } => warnings,
        other => panic!("expected an admission, got {other:?}"),
    }
}

/// A Memcached admitted before the level tightened: privileged, 3 replicas.
fn stored_privileged() -> Value {
    let mut privileged: Value = serde_json::from_str(PRIVILEGED).unwrap();
    privileged["replicas"] = json!(3);
    privileged["highAvailability"] = json!({"antiAffinityPreset": "soft"});
    privileged["monitoring"] = json!({"enabled": false});
    privileged["resources"] = json!({"requests": {"cpu": "100m"}});
    privileged
}

/// Updates that create no pod, named: they keep the stored object's
/// violations, with a warning.
macro_rules! creates_no_pod {
    ($($name:ident: $change:expr;)*) => {$(
        #[test]
        fn $name() {
            let mut spec = stored_privileged();
            let change: fn(&mut Value) = $change;
            change(&mut spec);
            let warnings = warnings_of(update(spec, stored_privileged()));
            assert!(
                warnings.iter().any(|w| w.starts_with(
                    "existing violations of PodSecurity \"restricted:latest\" kept by this update, which creates \
                     no pod: spec.security.containerSecurityContext.privileged: privileged ("
                )),
                "{warnings:?}"
            );
        }
    )*};
}

creates_no_pod! {
    unchanged_keeps_violations: |_| {};
    scaling_down_keeps_violations: |s| s["replicas"] = json!(1);
    a_disruption_budget_keeps_violations: |s| {
        s["highAvailability"]["podDisruptionBudget"] = json!({"enabled": true, "maxUnavailable": 1});
    };
    a_network_policy_keeps_violations: |s| {
        s["networkPolicy"] = json!({"enabled": true, "allowedSources": [{"podSelector": {}}]});
    };
    a_server_list_keeps_violations: |s| s["serverListConfigMap"] = json!("servers");
    service_annotations_keep_violations: |s| s["service"] = json!({"annotations": {"a": "b"}});
    exporter_settings_with_monitoring_off_keep_violations: |s| {
        s["monitoring"] = json!({"enabled": false, "exporterImage": "exporter:2", "serviceMonitor": {"interval": "1m"}});
    };
}

#[test]
fn a_new_violation_is_refused_listing_every_violation() {
    let mut worse = stored_privileged();
    worse["security"]["containerSecurityContext"]["runAsUser"] = json!(0);
    let (message, code) = rejection(update(worse, stored_privileged()));
    assert_eq!(code, 403);
    assert!(message.contains("privileged ("), "{message}");
    assert!(message.contains("runAsUser=0"), "{message}");
    let (_, code) = rejection(create(stored_privileged()));
    assert_eq!(code, 403);
}

/// Updates that create pods, each named by the field that makes it: judged
/// as the new pods will be, the stored object's violations included.
macro_rules! creates_pods {
    ($($name:ident: $field:literal => $change:expr;)*) => {$(
        #[test]
        fn $name() {
            let mut spec = stored_privileged();
            let change: fn(&mut Value) = $change;
            change(&mut spec);
            let decision = update(spec, stored_privileged());
            let Decision::Reject { message, code, warnings } = decision else {
                panic!("an update creating pods is judged like a CREATE: {decision:?}")
            };
            assert_eq!(code, 403);
            assert!(message.contains("privileged ("), "{message}");
            let expected = format!(
                "this update changes {}, which creates pods, and Pod Security admission judges every new pod: the \
                 violations the stored Memcached already has are refused too; fix them, or make only changes that \
                 create no pod (scaling down, the PodDisruptionBudget, the NetworkPolicy, ...)",
                $field
            );
            assert!(warnings.contains(&expected), "{warnings:?}");
        }
    )*};
}

creates_pods! {
    scaling_up_creates_pods: "spec.replicas" => |s| s["replicas"] = json!(4);
    raising_max_memory_creates_pods: "spec.memcached.maxMemoryMB" => |s| s["memcached"] = json!({"maxMemoryMB": 128});
    a_new_image_creates_pods: "spec.image" => |s| s["image"] = json!("memcached:1.6.39");
    pod_labels_create_pods: "spec.podLabels" => |s| s["podLabels"] = json!({"team": "cache"});
    tolerations_create_pods: "spec.tolerations" => |s| s["tolerations"] = json!([{"operator": "Exists"}]);
    graceful_shutdown_creates_pods: "spec.highAvailability.gracefulShutdown.enabled" => |s| {
        s["highAvailability"]["gracefulShutdown"] = json!({"enabled": true});
    };
    enabling_autoscaling_creates_pods: "spec.autoscaling.maxReplicas" => |s| {
        s.as_object_mut().unwrap().remove("replicas");
        s["autoscaling"] = json!({"enabled": true, "maxReplicas": 5});
    };
    switching_the_workload_creates_pods: "spec.workload" => |s| s["workload"] = json!("StatefulSet");
}

#[test]
fn the_restart_trigger_creates_pods() {
    let mut triggered = cr(stored_privileged());
    triggered["metadata"]["annotations"]["memcached.c5c3.io/restart-trigger"] = json!("1");
    let decision = review(
        request("UPDATE", triggered, cr(stored_privileged())),
        &Settings::default(),
    );
    let Decision::Reject { warnings, .. } = decision else {
        panic!("a restart creates pods: {decision:?}")
    };
    assert!(
        warnings[1].starts_with(
            "this update changes metadata.annotations[memcached.c5c3.io/restart-trigger], which creates pods"
        ),
        "{warnings:?}"
    );
}

/// The stored object of an autoscaled Memcached, its workload at `running`
/// replicas when given.
fn autoscaled(running: Option<i32>) -> Value {
    let mut old = cr(json!({"resources": {"requests": {"cpu": "100m"}},
        "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 20}}));
    if let Some(running) = running {
        old["status"] = json!({"replicas": running});
    }
    old
}

/// `autoscaling.enabled: false` with `replicas` (or none), from `old`: the
/// stored replicas and the warnings.
fn disable_autoscaling(replicas: Option<i32>, old: Value) -> (Value, Vec<String>) {
    let mut spec = json!({"resources": {"requests": {"cpu": "100m"}},
        "autoscaling": {"enabled": false, "minReplicas": 2, "maxReplicas": 20}});
    if let Some(replicas) = replicas {
        spec["replicas"] = json!(replicas);
    }
    match review(request("UPDATE", cr(spec), old), &Settings::default()) {
        Decision::Mutate { object, warnings } => (object["spec"]["replicas"].clone(), warnings),
        other => panic!("expected a mutation: {other:?}"),
    }
}

macro_rules! disabling_autoscaling {
    ($($name:ident: $replicas:expr, $old:expr => $stored:expr, $warning:expr;)*) => {$(
        #[test]
        fn $name() {
            let (stored, warnings) = disable_autoscaling($replicas, $old);
            assert_eq!(stored, json!($stored));
            let expected: Option<&str> = $warning;
            assert_eq!(warnings, expected.into_iter().map(String::from).collect::<Vec<_>>());
        }
    )*};
}

disabling_autoscaling! {
    disabling_autoscaling_keeps_the_scale_the_autoscaler_left: None, autoscaled(Some(10)) => 10, Some(
        "spec.replicas set to 10 as autoscaling is now disabled: the HorizontalPodAutoscaler ran 10 replicas \
         (status.replicas), and the default of 1 replica applies only to a new Memcached; set spec.replicas to \
         choose another count");
    disabling_autoscaling_without_a_status_keeps_the_minimum: None, autoscaled(None) => 2, Some(
        "spec.replicas set to 2 as autoscaling is now disabled: the autoscaler's minimum is 2 \
         (spec.autoscaling.minReplicas; status.replicas is unset), and the default of 1 replica applies only to a \
         new Memcached; set spec.replicas to choose another count");
    disabling_autoscaling_beyond_the_replica_bound_keeps_64: None, autoscaled(Some(100)) => 64, Some(
        "spec.replicas set to 64, its maximum, as autoscaling is now disabled: the HorizontalPodAutoscaler ran 100 \
         replicas (status.replicas), so 36 pods will go, and the keys they cache; set spec.replicas to choose \
         another count");
    disabling_autoscaling_to_fewer_replicas_counts_the_pods_that_go: Some(3), autoscaled(Some(10)) => 3, Some(
        "spec.replicas (3) is below the 10 replicas the HorizontalPodAutoscaler ran (status.replicas): disabling \
         autoscaling removes 7 pods, and the keys they cache");
    disabling_autoscaling_to_as_many_replicas_says_nothing: Some(10), autoscaled(Some(10)) => 10, None;
    disabling_autoscaling_to_more_replicas_says_nothing: Some(12), autoscaled(Some(10)) => 12, None;
}

#[test]
fn replicas_are_held_only_when_autoscaling_is_turned_off() {
    // Already off: the default applies as ever.
    let mut old = cr(json!({"replicas": 5}));
    old["status"] = json!({"replicas": 5});
    let (stored, warnings) = disable_autoscaling(None, old);
    assert_eq!(stored, json!(1));
    // The new resources replace the one pod left: warned before it happens.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "spec.resources changes the pod template, so the pods are replaced: 1 pod restarts cold"
        ),
        "{warnings:?}"
    );
    // Still on: no replicas.
    let spec = json!({"resources": {"requests": {"cpu": "100m"}},
        "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 20}});
    let Decision::Mutate { object, .. } = review(
        request("UPDATE", cr(spec), autoscaled(Some(10))),
        &Settings::default(),
    ) else {
        panic!("expected a mutation")
    };
    assert!(object["spec"].get("replicas").is_none());
}

/// The Go operator's own `security-contexts` end-to-end Memcached: hardened,
/// but leaving the seccomp profile and the user unset.
fn go_operator_hardened() -> Value {
    json!({"replicas": 1, "image": "memcached:1.6",
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
        "memcached": {"maxMemoryMB": 64, "threads": 4}, "monitoring": {"enabled": true},
        "security": {"podSecurityContext": {"runAsNonRoot": true, "fsGroup": 65534},
            "containerSecurityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}})
}

/// CREATEs of security contexts the user left incomplete, named, at a level:
/// the contexts stored and the warning, or the refusal.
macro_rules! completed_for_the_level {
    ($($name:ident: $spec:expr, $level:expr => $expected:expr;)*) => {$(
        #[test]
        fn $name() {
            let expected: Result<(Value, Option<&str>), &str> = $expected;
            let decision = judged_in($spec, $level, NamespaceEnforce::NotRead);
            match (decision, expected) {
                (Decision::Mutate { object, warnings }, Ok((security, warning))) => {
                    assert_eq!(object["spec"]["security"], security);
                    let warning: Vec<String> = warning.into_iter().map(String::from).collect();
                    assert_eq!(warnings, warning);
                }
                (Decision::Reject { message, code: 403, .. }, Err(violations)) => {
                    let level = $level;
                    assert_eq!(
                        message,
                        format!("Memcached.memcached.c5c3.io \"my-cache\" is forbidden: violates PodSecurity \
                                 \"{level}:latest\": {violations}")
                    );
                }
                (decision, expected) => panic!("{decision:?}, expected {expected:?}"),
            }
        }
    )*};
}

completed_for_the_level! {
    the_go_operators_hardened_memcached_is_completed: go_operator_hardened(), Level::Restricted => Ok((
        json!({"podSecurityContext": {"runAsNonRoot": true, "fsGroup": 65534, "runAsUser": 11211,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}),
        Some("set for PodSecurity \"restricted:latest\", which the spec left unset: \
              spec.security.podSecurityContext.runAsUser: 11211, \
              spec.security.podSecurityContext.seccompProfile.type: RuntimeDefault; set them to choose other \
              values the level allows")));
    a_user_alone_is_completed: json!({"security": {"podSecurityContext": {"runAsUser": 1000}}}), Level::Restricted => Ok((
        json!({"podSecurityContext": {"runAsUser": 1000, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]}}}),
        Some("set for PodSecurity \"restricted:latest\", which the spec left unset: \
              spec.security.podSecurityContext.runAsNonRoot: true, \
              spec.security.podSecurityContext.seccompProfile.type: RuntimeDefault; set them to choose other \
              values the level allows")));
    an_empty_container_context_is_completed: json!({"security": {"containerSecurityContext": {}}}), Level::Restricted => Ok((
        json!({"podSecurityContext": {"runAsNonRoot": true, "runAsUser": 11211, "runAsGroup": 11211, "fsGroup": 11211,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}),
        Some("set for PodSecurity \"restricted:latest\", which the spec left unset: \
              spec.security.containerSecurityContext.allowPrivilegeEscalation: false, \
              spec.security.containerSecurityContext.capabilities.drop: [ALL]; set them to choose other values \
              the level allows")));
    below_restricted_nothing_is_added: json!({"security": {"podSecurityContext": {"runAsUser": 1000}}}), Level::Baseline => Ok((
        json!({"podSecurityContext": {"runAsUser": 1000},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]}}}),
        None));
    a_value_the_level_forbids_is_refused_alone: json!({"security": {"podSecurityContext": {"runAsNonRoot": false}}}),
        Level::Restricted => Err("spec.security.podSecurityContext.runAsNonRoot: runAsNonRoot != true (pod must not \
            set securityContext.runAsNonRoot=false)");
    root_gets_no_run_as_non_root: json!({"security": {"podSecurityContext": {"runAsUser": 0}}}),
        Level::Restricted => Err("spec.security.podSecurityContext.runAsNonRoot: runAsNonRoot != true (pod or \
            container \"memcached\" must set securityContext.runAsNonRoot=true), \
            spec.security.podSecurityContext.runAsUser: runAsUser=0 (pod must not set runAsUser=0)");
    a_dropped_list_of_the_users_is_kept: json!({"security": {"containerSecurityContext": {"capabilities": {"drop": ["NET_RAW"]}}}}),
        Level::Restricted => Err("spec.security.containerSecurityContext.capabilities.drop: unrestricted capabilities \
            (container \"memcached\" must set securityContext.capabilities.drop=[\"ALL\"])");
    privilege_gets_no_allow_privilege_escalation: json!({"security": {"containerSecurityContext": {"privileged": true}}}),
        Level::Restricted => Err("spec.security.containerSecurityContext.privileged: privileged (container \
            \"memcached\" must not set securityContext.privileged=true), \
            spec.security.containerSecurityContext.allowPrivilegeEscalation: allowPrivilegeEscalation != false \
            (container \"memcached\" must set securityContext.allowPrivilegeEscalation=false)");
}

#[test]
fn the_completion_is_not_taken_when_it_alone_would_replace_the_pods() {
    // Stored before the completion existed, in a namespace now restricted.
    let old = json!({"replicas": 3, "security": {"podSecurityContext": {"runAsUser": 1000}}});
    let mut scaled_down = old.clone();
    scaled_down["replicas"] = json!(2);
    let warnings = warnings_of(update(scaled_down, old.clone()));
    assert_eq!(
        warnings,
        [
            "existing violations of PodSecurity \"restricted:latest\" kept by this update, which creates no pod: \
          spec.security.podSecurityContext.runAsNonRoot: runAsNonRoot != true (pod or container \"memcached\" \
          must set securityContext.runAsNonRoot=true), spec.security.podSecurityContext.seccompProfile: \
          seccompProfile (pod or container \"memcached\" must set securityContext.seccompProfile.type to \
          \"RuntimeDefault\" or \"Localhost\")"
        ]
    );
    // An update that replaces the pods anyway gets it.
    let mut bigger = old.clone();
    bigger["memcached"] = json!({"maxMemoryMB": 128});
    bigger["resources"] = json!({"limits": {"memory": "256Mi"}});
    let Decision::Mutate { object, warnings } = update(bigger, old) else {
        panic!("expected a mutation")
    };
    assert_eq!(
        object["spec"]["security"]["podSecurityContext"],
        json!({"runAsUser": 1000, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("set for PodSecurity"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].starts_with(
            "spec.memcached.maxMemoryMB changes the pod template, so the pods are replaced: 3 pods restart cold"
        ),
        "{warnings:?}"
    );
}

/// `spec.warmRestart` stored for a request, and its warnings.
fn warm_restart_stored(decision: Decision) -> (Value, Vec<String>) {
    match decision {
        Decision::Mutate { object, warnings } => (object["spec"]["warmRestart"].clone(), warnings),
        Decision::Accept { warnings } => (Value::Null, warnings),
        other => panic!("expected an admission, got {other:?}"),
    }
}

/// Warm restarts on by default for a new Memcached only, named: the operation
/// with the spec sent and (UPDATE) the one stored => `spec.warmRestart` stored.
macro_rules! warm_restart_default {
    ($($name:ident: $operation:expr, $spec:expr, $stored:expr => $expected:expr;)*) => {$(
        #[test]
        fn $name() {
            let old = if $operation == "UPDATE" { cr($stored) } else { Value::Null };
            let decision = review(request($operation, cr($spec), old), &Settings::default());
            let (stored, warnings) = warm_restart_stored(decision);
            assert_eq!(stored, $expected);
            assert!(warnings.is_empty(), "{warnings:?}");
        }
    )*};
}

warm_restart_default! {
    a_new_memcached_gets_warm_restarts: "CREATE", json!({}), Value::Null
        => json!({"enabled": true});
    a_new_memcached_with_an_empty_section_gets_them_too: "CREATE", json!({"warmRestart": {}}), Value::Null
        => json!({"enabled": true});
    a_new_memcached_may_opt_out: "CREATE", json!({"warmRestart": {"enabled": false}}), Value::Null
        => json!({"enabled": false});
    one_stored_before_the_default_stays_without: "UPDATE", json!({"replicas": 2}), json!({"replicas": 1})
        => Value::Null;
    one_stored_before_the_default_keeps_its_empty_section: "UPDATE", json!({"warmRestart": {}}), json!({})
        => json!({});
    an_update_without_the_field_keeps_it_on: "UPDATE", json!({"replicas": 2}),
        json!({"replicas": 1, "warmRestart": {"enabled": true}}) => json!({"enabled": true});
    an_update_without_the_field_keeps_it_off: "UPDATE", json!({"replicas": 2}),
        json!({"replicas": 1, "warmRestart": {"enabled": false}}) => json!({"enabled": false});
    a_new_memcached_may_ask_for_them: "CREATE", json!({"warmRestart": {"enabled": true}}), Value::Null
        => json!({"enabled": true});
}

warm_restart_default! {
    a_new_memcached_at_the_minimum_gets_warm_restarts: "CREATE", json!({"memcached": {"maxMemoryMB": 39}}),
        Value::Null => json!({"enabled": true});
    a_new_memcached_whose_geometry_needs_less_gets_them_at_16: "CREATE",
        json!({"memcached": {"maxMemoryMB": 16, "extraArgs": ["-f", "2"]}}), Value::Null => json!({"enabled": true});
    an_update_below_the_minimum_keeps_them_off: "UPDATE", json!({"memcached": {"maxMemoryMB": 16}}),
        json!({"warmRestart": {"enabled": false}, "memcached": {"maxMemoryMB": 16}}) => json!({"enabled": false});
}

/// The warning of a CREATE left without warm restarts: `maxMemoryMB`, the
/// minimum and memcached's words.
fn too_little_memory_warning(max_memory_mb: i32, minimum: i32) -> String {
    format!(
        "spec.warmRestart.enabled defaulted to false: spec.memcached.maxMemoryMB is {max_memory_mb}, and warm \
         restarts preallocate one 1 MB page per slab class: memcached needs at least {minimum} for this geometry \
         (spec.memcached.maxItemSize and the slab options of extraArgs) and exits with \"Error while \
         preallocating slab memory!\"; set maxMemoryMB to at least {minimum} and spec.warmRestart.enabled: true \
         for warm restarts"
    )
}

/// A new Memcached whose `maxMemoryMB` cannot hold a page per slab class
/// gets warm restarts off, with a warning, instead of pods that never start.
#[test]
fn a_new_memcached_below_the_minimum_gets_no_warm_restarts_and_a_warning() {
    for (spec, max_memory_mb, minimum) in [
        (json!({"memcached": {"maxMemoryMB": 32}}), 32, 39),
        (json!({"memcached": {"maxMemoryMB": 38}}), 38, 39),
        (json!({"memcached": {"maxMemoryMB": 16}}), 16, 39),
        (
            json!({"memcached": {"maxMemoryMB": 62, "extraArgs": ["--slab-growth-factor=1.1"]}}),
            62,
            63,
        ),
        // The sh warning is for warm restarts defaulted on; they are not.
        (
            json!({"image": "example.com/distroless-cache:1", "memcached": {"maxMemoryMB": 32}}),
            32,
            39,
        ),
    ] {
        let (stored, warnings) = warm_restart_stored(create(spec.clone()));
        assert_eq!(stored, json!({"enabled": false}), "{spec}");
        assert_eq!(
            warnings,
            [too_little_memory_warning(max_memory_mb, minimum)],
            "{spec}"
        );
    }
}

/// Warm restarts asked for, or kept on by an UPDATE, with a `maxMemoryMB`
/// below the minimum are refused on `spec.memcached.maxMemoryMB`.
#[test]
fn warm_restarts_below_the_minimum_are_refused() {
    let refusal = |max_memory_mb: i32, minimum: i32| {
        format!(
            "Memcached.memcached.c5c3.io \"my-cache\" is invalid: spec.memcached.maxMemoryMB: Invalid value: \
             {max_memory_mb}: warm restarts preallocate one 1 MB page per slab class: memcached needs at least \
             {minimum} for this geometry (spec.memcached.maxItemSize and the slab options of extraArgs) and exits \
             with \"Error while preallocating slab memory!\"; raise maxMemoryMB to {minimum} or set \
             spec.warmRestart.enabled: false"
        )
    };
    let warm = |memcached: Value| json!({"warmRestart": {"enabled": true}, "memcached": memcached});
    let explicit = create(warm(json!({"maxMemoryMB": 16})));
    assert_eq!(rejection(explicit), (refusal(16, 39), 400));
    let stored = warm(json!({"maxMemoryMB": 64}));
    let lowered = update(json!({"memcached": {"maxMemoryMB": 32}}), stored.clone());
    assert_eq!(rejection(lowered), (refusal(32, 39), 400));
    let regrown = update(
        json!({"memcached": {"maxMemoryMB": 48, "extraArgs": ["-f", "1.1"]}}),
        warm(json!({"maxMemoryMB": 48})),
    );
    assert_eq!(rejection(regrown), (refusal(48, 63), 400));
    // Turned off, or at the minimum, it is admitted.
    let off = update(
        json!({"warmRestart": {"enabled": false}, "memcached": {"maxMemoryMB": 16}}),
        stored.clone(),
    );
    assert!(!matches!(off, Decision::Reject { .. }), "{off:?}");
    let at_minimum = update(warm(json!({"maxMemoryMB": 39})), stored);
    assert!(
        !matches!(at_minimum, Decision::Reject { .. }),
        "{at_minimum:?}"
    );
}

#[test]
fn without_mutation_nothing_is_defaulted() {
    let settings = Settings {
        mutate: false,
        ..Settings::default()
    };
    let decision = review(request("CREATE", cr(json!({})), Value::Null), &settings);
    assert!(
        matches!(&decision, Decision::Accept { warnings } if warnings.is_empty()),
        "{decision:?}"
    );
}

/// An image the policy does not know to carry `sh` is warned about when the
/// default turned warm restarts on, not when the user chose them.
#[test]
fn an_image_not_known_to_carry_sh_is_warned_about_when_defaulted() {
    for image in [
        "memcached:1.6-alpine",
        "registry.example.com/team/memcached@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        let (_, warnings) = warm_restart_stored(create(json!({"image": image})));
        assert!(warnings.is_empty(), "{image}: {warnings:?}");
    }
    let (stored, warnings) =
        warm_restart_stored(create(json!({"image": "example.com/distroless-cache:1"})));
    assert_eq!(stored, json!({"enabled": true}));
    assert_eq!(
        warnings,
        [
            "spec.warmRestart.enabled defaulted to true: warm restarts run memcached under sh, which spec.image \
          \"example.com/distroless-cache:1\" is not known to carry (the memcached images do); its pods fail to \
          start without it: set spec.warmRestart.enabled: false for an image without sh"
        ]
    );
    // Nothing is stored for a spec refused: nothing to warn about.
    let refused = create(json!({"image": "example.com/distroless-cache:1", "replicas": -1}));
    assert!(
        matches!(&refused, Decision::Reject { warnings, .. } if warnings.is_empty()),
        "{refused:?}"
    );
    let chosen =
        json!({"image": "example.com/distroless-cache:1", "warmRestart": {"enabled": true}});
    assert!(warm_restart_stored(create(chosen)).1.is_empty());
}

/// An UPDATE after which warm restarts run an image not known to carry `sh`
/// (a new such image, or warm restarts turned on under one) is warned about;
/// the same image applied again, a memcached image, or warm restarts off
/// are not.
#[test]
fn an_update_to_an_image_not_known_to_carry_sh_under_warm_restarts_is_warned_about() {
    let distroless = "example.com/distroless-cache:1";
    let spec = |image: Option<&str>, warm: bool| {
        let mut spec = json!({"warmRestart": {"enabled": warm}});
        if let Some(image) = image {
            spec["image"] = json!(image);
        }
        spec
    };
    let warning = format!(
        "spec.image {distroless:?} is not known to carry sh, under which warm restarts run memcached (the \
         memcached images do): a pod that takes this change without it fails to start and holds the rest \
         of the change; set spec.warmRestart.enabled: false first for an image without sh"
    );
    let cases = [
        (
            "new image",
            spec(Some(distroless), true),
            spec(None, true),
            true,
        ),
        (
            "turned on under it",
            spec(Some(distroless), true),
            spec(Some(distroless), false),
            true,
        ),
        (
            "applied again",
            spec(Some(distroless), true),
            spec(Some(distroless), true),
            false,
        ),
        (
            "a memcached image",
            spec(Some("memcached:1.6.39"), true),
            spec(None, true),
            false,
        ),
        (
            "warm restarts off",
            spec(Some(distroless), false),
            spec(None, false),
            false,
        ),
    ];
    for (case, new, old, warned) in cases {
        let warnings = warnings_of(update(new, old));
        assert_eq!(warnings.contains(&warning), warned, "{case}: {warnings:?}");
    }
}

/// The pod template's annotations are limited as a whole: `podAnnotations`
/// must leave room for the ones the operator renders (warm restarts: the
/// args), counted on the rendered template.
#[test]
fn pod_annotations_leave_room_for_the_operators() {
    let big = |warm: bool| json!({"podAnnotations": {"big": "a".repeat(256 * 1024 - 3)}, "warmRestart": {"enabled": warm}});
    let (message, _) = rejection(create(big(true)));
    assert!(
        message.ends_with("spec.podAnnotations: Too long: may not be more than 262028 bytes"),
        "{message}"
    );
    assert!(matches!(create(big(false)), Decision::Mutate { .. }));
}

/// `kubectl scale` of the Memcached `my-cache` of namespace `team-a` from
/// `old` to `new` replicas, judged at `level` under the namespace label and
/// stored Memcached the caller read.
fn scaled(
    old: i32,
    new: i32,
    level: Level,
    namespace: NamespaceEnforce,
    memcached: StoredMemcached,
) -> (Request, Settings) {
    let scale = |replicas: i32| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "my-cache", "namespace": "team-a"}, "spec": {"replicas": replicas}})
    };
    let request = Request {
        operation: "UPDATE".into(),
        group: "autoscaling".into(),
        version: "v1".into(),
        kind: "Scale".into(),
        resource_group: "memcached.c5c3.io".into(),
        resource: "memcacheds".into(),
        sub_resource: "scale".into(),
        name: "my-cache".into(),
        object: scale(new),
        old_object: scale(old),
        namespace: "team-a".into(),
        namespace_enforce: namespace,
        memcached,
    };
    let settings = Settings {
        pod_security: level,
        ..Settings::default()
    };
    (request, settings)
}

/// A Memcached running as root, admitted at `baseline` before its namespace
/// was labelled `restricted`, as the cluster stores it.
fn stored_as_root(replicas: i32) -> Value {
    cr(json!({"replicas": replicas, "security": {"containerSecurityContext": {"runAsUser": 0}}}))
}

fn restricted_label() -> NamespaceEnforce {
    NamespaceEnforce::Label(Some("restricted".into()))
}

fn accepted_plainly() -> Decision {
    Decision::Accept { warnings: vec![] }
}

#[test]
fn a_scale_up_is_refused_with_the_message_of_the_same_apply() {
    let stored = StoredMemcached::Object(stored_as_root(3));
    let (scale, settings) = scaled(3, 5, Level::Baseline, restricted_label(), stored);
    assert!(needs_namespace(&scale, &settings));
    assert!(needs_memcached(&scale, &settings));
    let mut apply = request("UPDATE", stored_as_root(5), stored_as_root(3));
    apply.namespace = "team-a".into();
    apply.namespace_enforce = restricted_label();
    let applied = review(apply, &settings);
    let decision = review(scale, &settings);
    assert_eq!(decision, applied, "the scale is judged as the apply is");
    let (message, code) = rejection(decision);
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "Memcached.memcached.c5c3.io \"my-cache\" is forbidden: violates PodSecurity \"restricted:latest\" \
         (enforced by namespace \"team-a\"): spec.security.containerSecurityContext.runAsUser: runAsUser=0 \
         (container \"memcached\" must not set runAsUser=0)"
    );
}

#[test]
fn a_stored_spec_that_meets_the_level_only_once_completed_is_refused_a_scale_up() {
    // The apply would complete the container's context and be admitted; the
    // Scale cannot carry the completion, so the new pods would lack it.
    let stored =
        cr(json!({"replicas": 1, "security": {"containerSecurityContext": {"runAsUser": 1000}}}));
    let mut apply = request(
        "UPDATE",
        cr(json!({"replicas": 2, "security": {"containerSecurityContext": {"runAsUser": 1000}}})),
        stored.clone(),
    );
    apply.namespace = "team-a".into();
    apply.namespace_enforce = restricted_label();
    let (scale, settings) = scaled(
        1,
        2,
        Level::Baseline,
        restricted_label(),
        StoredMemcached::Object(stored),
    );
    assert!(matches!(review(apply, &settings), Decision::Mutate { .. }));
    let Decision::Reject {
        message,
        code,
        warnings,
    } = review(scale, &settings)
    else {
        panic!("the new pods would break restricted")
    };
    assert_eq!(code, 403);
    assert!(
        message.starts_with(
            "Memcached.memcached.c5c3.io \"my-cache\" is forbidden: violates PodSecurity \"restricted:latest\" \
             (enforced by namespace \"team-a\"): spec.security.containerSecurityContext.allowPrivilegeEscalation: "
        ),
        "{message}"
    );
    assert!(
        warnings[0].contains("an update through the policy (`kubectl apply`"),
        "{warnings:?}"
    );
}

#[test]
fn scaling_down_or_to_the_same_count_is_never_refused_for_pod_security() {
    for new in [3, 1, 0] {
        let stored = StoredMemcached::Object(stored_as_root(3));
        let (scale, settings) = scaled(3, new, Level::Baseline, restricted_label(), stored);
        assert!(!needs_namespace(&scale, &settings), "{new}");
        assert!(!needs_memcached(&scale, &settings), "{new}");
        assert_eq!(review(scale, &settings), accepted_plainly(), "{new}");
    }
}

#[test]
fn at_restricted_a_scale_up_reads_nothing() {
    let (scale, settings) = scaled(
        3,
        5,
        Level::Restricted,
        restricted_label(),
        StoredMemcached::NotRead,
    );
    assert!(!needs_namespace(&scale, &settings));
    assert!(!needs_memcached(&scale, &settings));
    assert_eq!(review(scale, &settings), accepted_plainly());
}

#[test]
fn a_namespace_asking_no_more_than_the_settings_reads_no_memcached() {
    for (level, label) in [
        (Level::Baseline, None),
        (Level::Baseline, Some("baseline")),
        (Level::Baseline, Some("privileged")),
        (Level::Privileged, Some("privileged")),
    ] {
        let namespace = NamespaceEnforce::Label(label.map(str::to_string));
        let (scale, settings) = scaled(3, 5, level, namespace, StoredMemcached::NotRead);
        assert!(needs_namespace(&scale, &settings), "{level} {label:?}");
        assert!(!needs_memcached(&scale, &settings), "{level} {label:?}");
        assert_eq!(
            review(scale, &settings),
            accepted_plainly(),
            "{level} {label:?}"
        );
    }
    // A namespace that could not be read is judged restricted, as for an apply.
    let unreadable = NamespaceEnforce::Unreadable("forbidden".into());
    let (scale, settings) = scaled(3, 5, Level::Baseline, unreadable, StoredMemcached::NotRead);
    assert!(needs_memcached(&scale, &settings));
}

#[test]
fn a_memcached_that_cannot_be_read_is_scaled_up_with_a_warning() {
    let why = "memcacheds.memcached.c5c3.io \"my-cache\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot get resource \"memcacheds\"";
    let unreadable = StoredMemcached::Unreadable(why.into());
    let (scale, settings) = scaled(3, 5, Level::Baseline, restricted_label(), unreadable);
    let Decision::Accept { warnings } = review(scale, &settings) else {
        panic!("an unreadable Memcached is admitted (fail open)")
    };
    assert_eq!(
        warnings,
        [format!(
            "Memcached.memcached.c5c3.io \"my-cache\" could not be read ({why}): this scale-up was not judged \
             against PodSecurity \"restricted:latest\" (enforced by namespace \"team-a\"), and Pod Security \
             admission refuses every new pod that violates it; grant Kubewarden's policy-server's ServiceAccount \
             get, list and watch on memcacheds.memcached.c5c3.io (the memcached-operator chart does with \
             policy.policyServerRBAC; with deploy/policy.yaml, add them to kubewarden-defaults' \
             policyServer.permissions)"
        )]
    );
}
