//! The warning of an UPDATE that restarts the pods cold, at apply time
//! (`render::changes::restart`): in mutating and validating mode alike, only
//! when some pod runs, never for a warm change or one that restarts nothing.

use memcached_api::admission::{Decision, Request, Settings, review};
use serde_json::{Value, json};
use test_support::object::memcached;

/// An UPDATE of the Memcached `old` (its workload at `running` replicas)
/// to `spec`, judged with `settings`: its warnings.
fn warnings(spec: Value, old: Value, running: Option<i32>, settings: &Settings) -> Vec<String> {
    let cr = |spec: Value| memcached(spec).json();
    let mut old = cr(old);
    if let Some(running) = running {
        old["status"] = json!({"replicas": running});
    }
    let request = Request {
        operation: "UPDATE".into(),
        group: "memcached.c5c3.io".into(),
        version: "v1beta1".into(),
        kind: "Memcached".into(),
        name: "my-cache".into(),
        object: cr(spec),
        old_object: old,
        ..Default::default()
    };
    match review(request, settings) {
        Decision::Accept { warnings } | Decision::Mutate { warnings, .. } => warnings,
        other => panic!("expected an admission: {other:?}"),
    }
}

fn both_modes() -> [Settings; 2] {
    let validating = Settings {
        mutate: false,
        ..Settings::default()
    };
    [Settings::default(), validating]
}

/// `spec` with warm restarts on and 3 replicas.
fn warm(mut spec: Value) -> Value {
    spec["warmRestart"] = json!({"enabled": true});
    spec["replicas"] = json!(3);
    spec
}

#[test]
fn a_geometry_change_is_warned_about_in_both_modes() {
    for settings in both_modes() {
        let bigger = warm(json!({"memcached": {"maxMemoryMB": 128},
            "resources": {"limits": {"memory": "256Mi"}}}));
        let old = warm(json!({"resources": {"limits": {"memory": "256Mi"}}}));
        assert_eq!(
            warnings(bigger, old, Some(3), &settings),
            [
                "spec.memcached.maxMemoryMB changes memcached's memory geometry, which a warm restart cannot \
                 keep: 3 pods restart cold, one at a time, and lose the items they hold"
            ],
            "mutate: {}",
            settings.mutate
        );
    }
}

#[test]
fn without_warm_restarts_the_warning_says_they_would_keep_the_cache() {
    let threads = json!({"replicas": 2, "memcached": {"threads": 2}});
    for settings in both_modes() {
        let said = warnings(threads.clone(), json!({"replicas": 2}), None, &settings);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "spec.memcached.threads changes the pod template, so the pods are replaced: 2 pods restart cold"
            ) && said[0].contains("spec.warmRestart.enabled: true"),
            "{said:?}"
        );
    }
}

#[test]
fn turning_warm_restarts_off_is_warned_about() {
    let mut off = warm(json!({}));
    off["warmRestart"]["enabled"] = json!(false);
    assert_eq!(
        warnings(off, warm(json!({})), Some(3), &Settings::default()),
        [
            "spec.warmRestart.enabled turns warm restarts off, which needs new pods: 3 pods restart cold, one \
             at a time, and lose the items they hold"
        ]
    );
}

#[test]
fn warm_changes_and_changes_that_restart_nothing_say_nothing() {
    for settings in both_modes() {
        for (new, old) in [
            (warm(json!({"image": "memcached:1.6.39"})), warm(json!({}))),
            (
                warm(json!({"memcached": {"threads": 2, "verbosity": 1}})),
                warm(json!({})),
            ),
            (json!({"replicas": 5}), json!({"replicas": 3})),
            (json!({"replicas": 2}), json!({"replicas": 3})),
            (
                json!({"networkPolicy": {"enabled": true, "allowedSources": [{"podSelector": {}}]}}),
                json!({}),
            ),
        ] {
            assert_eq!(
                warnings(new.clone(), old, Some(3), &settings),
                Vec::<String>::new(),
                "{new}"
            );
        }
    }
}

#[test]
fn no_warning_when_no_pod_runs() {
    let bigger = json!({"replicas": 3, "memcached": {"maxMemoryMB": 128}});
    assert_eq!(
        warnings(
            bigger.clone(),
            json!({"replicas": 3}),
            Some(0),
            &Settings::default()
        ),
        Vec::<String>::new()
    );
    let stopped = json!({"replicas": 0, "memcached": {"maxMemoryMB": 128}});
    assert_eq!(
        warnings(stopped, json!({"replicas": 0}), None, &Settings::default()),
        Vec::<String>::new()
    );
}

#[test]
fn a_create_is_not_a_restart() {
    let request = Request {
        operation: "CREATE".into(),
        group: "memcached.c5c3.io".into(),
        version: "v1beta1".into(),
        kind: "Memcached".into(),
        name: "my-cache".into(),
        object: json!({"metadata": {"name": "my-cache"}, "spec": {"replicas": 3}}),
        ..Default::default()
    };
    let Decision::Mutate { warnings, .. } = review(request, &Settings::default()) else {
        panic!("expected a mutation")
    };
    assert_eq!(warnings, Vec::<String>::new());
}
