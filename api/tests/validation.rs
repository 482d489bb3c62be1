use memcached_api::quantity::Quantity;
use memcached_api::validate;
use memcached_api::validation::{Options, warnings};
use serde_json::json;
use test_support::spec::{defaulted, errors};

fn memory(limit: &str, mb: i32) -> Vec<String> {
    errors(json!({"memcached": {"maxMemoryMB": mb}, "resources": {"limits": {"memory": limit}}}))
}

#[test]
fn accepts_the_defaulted_empty_spec() {
    assert_eq!(errors(json!({})), Vec::<String>::new());
}

#[test]
fn rejects_memory_limit_below_cache_plus_overhead() {
    assert_eq!(
        memory("64Mi", 64),
        [
            r#"spec.resources.limits.memory: Invalid value: "64Mi": memory limit must be at least 96Mi (maxMemoryMB=64Mi + 32Mi overhead)"#
        ]
    );
    assert!(memory("96Mi", 64).is_empty());
    assert!(memory("0.09375Gi", 64).is_empty());
    assert!(memory("100663296", 64).is_empty());
    assert_eq!(memory("100663295", 64).len(), 1);
    assert_eq!(memory("100M", 64).len(), 1, "100M is less than 96Mi");
    assert!(memory("1e8", 16).is_empty());
    assert!(memory("320Mi", 256).is_empty());
    assert_eq!(memory("287Mi", 256).len(), 1);
}

#[test]
fn uses_the_configured_overhead() {
    let spec = defaulted(json!({"resources": {"limits": {"memory": "96Mi"}}}));
    let options = Options {
        memory_overhead: Quantity::parse("100M").unwrap(),
        memory_overhead_text: "100M".into(),
    };
    let errs: Vec<String> = validate(&spec, &options)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errs,
        [
            r#"spec.resources.limits.memory: Invalid value: "96Mi": memory limit must be at least 167108864 (maxMemoryMB=64Mi + 100M overhead)"#
        ]
    );
}

#[test]
fn reports_an_unparsable_quantity_as_its_own_error() {
    assert_eq!(
        memory("lots", 64),
        [
            r#"spec.resources.limits.memory: Invalid value: "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#
        ]
    );
    assert_eq!(
        errors(json!({"resources": {"requests": {"cpu": "-1"}}})),
        [r#"spec.resources.requests.cpu: Invalid value: "-1": must be greater than or equal to 0"#]
    );
    assert_eq!(
        errors(
            json!({"monitoring": {"exporterResources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}})
        ),
        [
            r#"spec.monitoring.exporterResources.requests.cpu: Invalid value: "2": must be less than or equal to cpu limit of 1"#
        ]
    );
}

#[test]
fn pdb_rules() {
    let pdb = |pdb: serde_json::Value, replicas: i32| {
        errors(json!({"replicas": replicas, "highAvailability": {"podDisruptionBudget": pdb}}))
    };
    assert_eq!(
        pdb(json!({"enabled": true, "minAvailable": 3}), 3),
        [
            "spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: 3: minAvailable (3) must be less than replicas (3)"
        ]
    );
    assert!(pdb(json!({"enabled": true, "minAvailable": 2}), 3).is_empty());
    assert!(pdb(json!({"enabled": true, "minAvailable": "50%"}), 1).is_empty());
    assert!(pdb(json!({"enabled": false, "minAvailable": 9}), 1).is_empty());
    assert_eq!(
        pdb(
            json!({"enabled": true, "minAvailable": 1, "maxUnavailable": 1}),
            3
        ),
        [
            r#"spec.highAvailability.podDisruptionBudget: Invalid value: "": minAvailable and maxUnavailable are mutually exclusive, specify only one"#
        ]
    );
    assert_eq!(
        pdb(json!({"enabled": true}), 3),
        [
            "spec.highAvailability.podDisruptionBudget: Required value: one of minAvailable or maxUnavailable must be set when PDB is enabled"
        ]
    );
    assert_eq!(
        pdb(json!({"enabled": true, "maxUnavailable": "150%"}), 3),
        [
            r#"spec.highAvailability.podDisruptionBudget.maxUnavailable: Invalid value: "150%": must not be greater than 100%"#
        ]
    );
    assert_eq!(
        pdb(json!({"enabled": true, "maxUnavailable": "half"}), 3).len(),
        1
    );
    assert_eq!(
        pdb(json!({"enabled": true, "maxUnavailable": -1}), 3),
        [
            "spec.highAvailability.podDisruptionBudget.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
}

#[test]
fn graceful_shutdown_needs_grace_beyond_the_delay() {
    let gs = |delay: i32, grace: i32| {
        errors(
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": delay, "terminationGracePeriodSeconds": grace}}}),
        )
    };
    assert_eq!(
        gs(10, 10),
        [
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: 10: terminationGracePeriodSeconds (10) must exceed preStopDelaySeconds (10)"
        ]
    );
    assert!(gs(10, 11).is_empty());
    assert!(errors(json!({"highAvailability": {"gracefulShutdown": {"enabled": false, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 10}}})).is_empty());
}

#[test]
fn enabled_sasl_and_tls_need_secret_names() {
    assert_eq!(
        errors(
            json!({"security": {"sasl": {"enabled": true}, "tls": {"enabled": true, "certificateSecretRef": {"name": ""}}}})
        ),
        [
            "spec.security.sasl.credentialsSecretRef.name: Required value: credentialsSecretRef.name is required when SASL is enabled",
            "spec.security.tls.certificateSecretRef.name: Required value: certificateSecretRef.name is required when TLS is enabled",
        ]
    );
    assert!(errors(json!({"security": {"sasl": {"enabled": false}, "tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}}})).is_empty());
}

#[test]
fn autoscaling_rules() {
    assert_eq!(
        errors(
            json!({"replicas": 3, "resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 10}})
        ),
        [
            "spec.replicas: Invalid value: 3: spec.replicas and spec.autoscaling.enabled are mutually exclusive"
        ]
    );
    assert_eq!(
        errors(
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "minReplicas": 10, "maxReplicas": 5}})
        ),
        [
            "spec.autoscaling.minReplicas: Invalid value: 10: minReplicas (10) must not exceed maxReplicas (5)"
        ]
    );
    assert!(errors(json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "minReplicas": 5, "maxReplicas": 5}})).is_empty());
    assert_eq!(
        errors(json!({"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 10}})),
        [
            "spec.resources.requests.cpu: Required value: resources.requests.cpu is required when using CPU utilization metrics"
        ]
    );
    assert_eq!(
        errors(json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true}})),
        [
            "spec.autoscaling.maxReplicas: Required value: maxReplicas is required when autoscaling is enabled"
        ]
    );
    assert_eq!(
        errors(
            json!({"resources": {"requests": {"cpu": "1"}}, "monitoring": {"enabled": true}, "autoscaling": {"enabled": true, "maxReplicas": 2}})
        ),
        [
            "spec.monitoring.exporterResources.requests.cpu: Required value: monitoring.exporterResources.requests.cpu is required when using CPU utilization metrics with monitoring enabled: the HPA needs a request on every container"
        ]
    );
    let avg_value = json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}});
    assert!(
        errors(json!({"autoscaling": {"enabled": true, "maxReplicas": 2, "metrics": [avg_value]}}))
            .is_empty()
    );
    assert!(errors(json!({"replicas": 3, "autoscaling": {"enabled": false, "minReplicas": 9, "maxReplicas": 1}})).is_empty());
}

#[test]
fn schema_bounds_at_their_edges() {
    let cases = [
        (
            json!({"replicas": -1}),
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            json!({"replicas": 65}),
            "spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64",
        ),
        (
            json!({"memcached": {"maxMemoryMB": 15}}),
            "spec.memcached.maxMemoryMB: Invalid value: 15: spec.memcached.maxMemoryMB in body should be greater than or equal to 16",
        ),
        (
            json!({"memcached": {"maxMemoryMB": 65537}}),
            "spec.memcached.maxMemoryMB: Invalid value: 65537: spec.memcached.maxMemoryMB in body should be less than or equal to 65536",
        ),
        (
            json!({"memcached": {"maxConnections": 0}}),
            "spec.memcached.maxConnections: Invalid value: 0: spec.memcached.maxConnections in body should be greater than or equal to 1",
        ),
        (
            json!({"memcached": {"maxConnections": 65537}}),
            "spec.memcached.maxConnections: Invalid value: 65537: spec.memcached.maxConnections in body should be less than or equal to 65536",
        ),
        (
            json!({"memcached": {"threads": 0}}),
            "spec.memcached.threads: Invalid value: 0: spec.memcached.threads in body should be greater than or equal to 1",
        ),
        (
            json!({"memcached": {"threads": 129}}),
            "spec.memcached.threads: Invalid value: 129: spec.memcached.threads in body should be less than or equal to 128",
        ),
        (
            json!({"memcached": {"maxItemSize": "2g"}}),
            r#"spec.memcached.maxItemSize: Invalid value: "2g": spec.memcached.maxItemSize in body should match '^[0-9]+(k|m)$'"#,
        ),
        (
            json!({"memcached": {"verbosity": 3}}),
            "spec.memcached.verbosity: Invalid value: 3: spec.memcached.verbosity in body should be less than or equal to 2",
        ),
        (
            json!({"memcached": {"verbosity": -1}}),
            "spec.memcached.verbosity: Invalid value: -1: spec.memcached.verbosity in body should be greater than or equal to 0",
        ),
        (
            json!({"highAvailability": {"antiAffinityPreset": "medium"}}),
            r#"spec.highAvailability.antiAffinityPreset: Unsupported value: "medium": supported values: "soft", "hard""#,
        ),
        (
            json!({"highAvailability": {"gracefulShutdown": {"preStopDelaySeconds": 0}}}),
            "spec.highAvailability.gracefulShutdown.preStopDelaySeconds: Invalid value: 0: spec.highAvailability.gracefulShutdown.preStopDelaySeconds in body should be greater than or equal to 1",
        ),
        (
            json!({"highAvailability": {"gracefulShutdown": {"preStopDelaySeconds": 301, "terminationGracePeriodSeconds": 600}}}),
            "spec.highAvailability.gracefulShutdown.preStopDelaySeconds: Invalid value: 301: spec.highAvailability.gracefulShutdown.preStopDelaySeconds in body should be less than or equal to 300",
        ),
        (
            json!({"highAvailability": {"gracefulShutdown": {"terminationGracePeriodSeconds": 601}}}),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: 601: spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds in body should be less than or equal to 600",
        ),
        (
            json!({"autoscaling": {"minReplicas": 0, "maxReplicas": 1}}),
            "spec.autoscaling.minReplicas: Invalid value: 0: spec.autoscaling.minReplicas in body should be greater than or equal to 1",
        ),
        (
            json!({"autoscaling": {"maxReplicas": 0}}),
            "spec.autoscaling.maxReplicas: Invalid value: 0: spec.autoscaling.maxReplicas in body should be greater than or equal to 1",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(errors(input.clone()), [expected], "{input}");
    }
    let edges = json!({"replicas": 64, "memcached": {"maxMemoryMB": 65536, "maxConnections": 65536, "threads": 128, "verbosity": 2, "maxItemSize": "512k"},
        "highAvailability": {"antiAffinityPreset": "hard", "gracefulShutdown": {"preStopDelaySeconds": 300, "terminationGracePeriodSeconds": 600}},
        "autoscaling": {"minReplicas": 1, "maxReplicas": 1}});
    assert!(errors(edges).is_empty());
    let low = json!({"replicas": 0, "memcached": {"maxMemoryMB": 16, "maxConnections": 1, "threads": 1, "verbosity": 0},
        "highAvailability": {"gracefulShutdown": {"preStopDelaySeconds": 1, "terminationGracePeriodSeconds": 1}}});
    assert!(errors(low).is_empty());
}

/// With warm restarts memcached preallocates a 1 MB page per slab class:
/// `maxMemoryMB` below their count is refused (the controller judges a
/// stored Memcached so too); without them, or once memcached would exit on
/// something else first, it is not.
#[test]
fn warm_restarts_need_a_page_per_slab_class() {
    let spec = |warm: bool, memcached: serde_json::Value| json!({"warmRestart": {"enabled": warm}, "memcached": memcached});
    let refused = |mb: i32, minimum: i32| {
        format!(
            "spec.memcached.maxMemoryMB: Invalid value: {mb}: warm restarts preallocate one 1 MB page per slab \
             class: memcached needs at least {minimum} for this geometry (spec.memcached.maxItemSize and the \
             slab options of extraArgs) and exits with \"Error while preallocating slab memory!\"; raise \
             maxMemoryMB to {minimum} or set spec.warmRestart.enabled: false"
        )
    };
    let cases = [
        (spec(true, json!({"maxMemoryMB": 16})), vec![refused(16, 39)]),
        (spec(true, json!({"maxMemoryMB": 38})), vec![refused(38, 39)]),
        (spec(true, json!({"maxMemoryMB": 39})), vec![]),
        (spec(false, json!({"maxMemoryMB": 16})), vec![]),
        (
            spec(true, json!({"maxMemoryMB": 62, "extraArgs": ["-f1.1"]})),
            vec![refused(62, 63)],
        ),
        (
            spec(true, json!({"maxMemoryMB": 13, "extraArgs": ["-f", "2"]})),
            vec!["spec.memcached.maxMemoryMB: Invalid value: 13: spec.memcached.maxMemoryMB in body should \
                  be greater than or equal to 16"
                .to_string()],
        ),
        (spec(true, json!({"maxMemoryMB": 16, "extraArgs": ["-f", "2"]})), vec![]),
        (
            spec(true, json!({"maxMemoryMB": 16, "extraArgs": ["-f", "1"]})),
            vec![r#"spec.memcached.extraArgs[0]: Invalid value: "-f 1": memcached exits on it: Factor must be greater than 1"#
                .to_string()],
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(errors(input.clone()), expected, "{input}");
    }
}

#[test]
fn forbids_managed_flags_in_extra_args_and_empty_images() {
    assert_eq!(
        errors(
            json!({"image": " ", "memcached": {"extraArgs": ["-v", "--port=1"]}, "monitoring": {"exporterImage": ""}})
        ),
        [
            r#"spec.memcached.extraArgs[1]: Forbidden: "--port=1" sets -p/--port, which the operator manages: the port is fixed at 11211 for the probes, Service and NetworkPolicy"#,
            "spec.image: Required value: must not be empty",
            "spec.monitoring.exporterImage: Required value: must not be empty",
        ]
    );
}

#[test]
fn service_monitor_durations() {
    let sm = |sm: serde_json::Value| {
        errors(json!({"monitoring": {"enabled": true, "serviceMonitor": sm}}))
    };
    assert!(sm(json!({})).is_empty());
    assert!(sm(json!({"interval": "1m", "scrapeTimeout": "1m"})).is_empty());
    assert_eq!(
        sm(json!({"interval": "30s", "scrapeTimeout": "31s"})),
        [
            r#"spec.monitoring.serviceMonitor.scrapeTimeout: Invalid value: "31s": scrapeTimeout must not exceed interval (30s)"#
        ]
    );
    assert_eq!(
        sm(json!({"interval": "30 seconds"})),
        [
            r#"spec.monitoring.serviceMonitor.interval: Invalid value: "30 seconds": must be a Prometheus duration such as 30s, 1m30s or 500ms"#
        ]
    );
}

#[test]
fn aggregates_in_the_seed_order() {
    let errs = errors(
        json!({"replicas": 3, "memcached": {"maxMemoryMB": 64}, "resources": {"limits": {"memory": "64Mi"}},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 3}}, "security": {"sasl": {"enabled": true}}}),
    );
    let fields: Vec<&str> = errs.iter().map(|e| e.split(':').next().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "spec.resources.limits.memory",
            "spec.highAvailability.podDisruptionBudget.minAvailable",
            "spec.security.sasl.credentialsSecretRef.name"
        ]
    );
}

#[test]
fn warns_about_risky_but_legal_specs() {
    let w = warnings(&defaulted(
        json!({"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 4},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 2}}}),
    ));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("minAvailable (2) >= spec.autoscaling.minReplicas (2)"),
        "{w:?}"
    );
    let w = warnings(&defaulted(
        json!({"autoscaling": {"enabled": true, "minReplicas": 3, "maxReplicas": 4},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 2}}}),
    ));
    assert!(w.is_empty());
    let w = warnings(&defaulted(
        json!({"monitoring": {"enabled": true}, "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "s"}}}}),
    ));
    assert_eq!(w.len(), 2);
    assert!(w[0].contains("exporter cannot authenticate"));
}

/// `-L` preallocates a page per slab class as the memory file does: below
/// the geometry's minimum it is refused on `maxMemoryMB`, warm restarts or not.
#[test]
fn large_pages_need_the_preallocation_minimum() {
    let cold = |mb: i32, args: &[&str]| {
        errors(json!({"warmRestart": {"enabled": false},
            "memcached": {"maxMemoryMB": mb, "extraArgs": args}}))
    };
    for spelling in [&["-L"][..], &["--enable-largepages"], &["-vL"]] {
        let refused = cold(38, spelling);
        assert_eq!(refused.len(), 1, "{spelling:?}: {refused:?}");
        assert!(
            refused[0].starts_with(
                "spec.memcached.maxMemoryMB: Invalid value: 38: extraArgs -L preallocates"
            ) && refused[0].contains("raise maxMemoryMB to 39 or leave -L out"),
            "{refused:?}"
        );
        assert_eq!(cold(39, spelling), Vec::<String>::new(), "{spelling:?}");
    }
    // Another geometry, another minimum; no -L, no minimum.
    assert_eq!(cold(62, &["-L", "-f", "1.1"]).len(), 1);
    assert_eq!(cold(63, &["-L", "-f", "1.1"]), Vec::<String>::new());
    assert_eq!(cold(16, &["-f", "1.1"]), Vec::<String>::new());
}

/// `spec.image` says which release `extraArgs` are judged against: a
/// setting 1.6.18's image lacks is refused there and admitted on the
/// floating default with a warning naming the release that added it.
#[test]
fn extra_args_are_judged_by_the_release_of_the_image() {
    let spec =
        |image: &str| json!({"image": image, "memcached": {"extraArgs": ["-o", "proxy_uring"]}});
    assert_eq!(
        errors(spec("memcached:1.6.18-alpine")),
        [
            r#"spec.memcached.extraArgs[0]: Invalid value: "-o": -o proxy_uring is in memcached from 1.6.38 on, and spec.image memcached:1.6.18-alpine runs 1.6.18: memcached exits on it: Illegal suboption "proxy_uring""#
        ]
    );
    assert_eq!(errors(spec("memcached:1.6.38")), Vec::<String>::new());
    assert_eq!(errors(spec("memcached:1.6")), Vec::<String>::new());
    assert_eq!(
        warnings(&defaulted(spec("memcached:1.6"))),
        [
            "spec.memcached.extraArgs[0]: -o proxy_uring is in memcached from 1.6.38 on, and spec.image memcached:1.6 \
             names no release: a node whose memcached:1.6 is an older 1.6 exits on it; pin memcached:1.6.38 or later \
             (memcached:1.6.45)"
        ]
    );
    assert_eq!(
        warnings(&defaulted(spec("memcached:1.6.38"))),
        Vec::<String>::new()
    );
}
