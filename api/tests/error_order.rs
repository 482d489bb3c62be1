//! The order a Memcached's errors are listed in, pinned: stage by stage (the
//! rules tying fields together, the CRD schema's bounds, what memcached or a
//! parser refuses, what the API server refuses in the objects the controller
//! builds), and within a stage by the part of the spec
//! (`memcached_api::validation::Part`), then as each validator finds them.
//! The rejection message lists them in this order.

use serde_json::json;
use test_support::spec::errors;

/// A spec with an error of every part and stage it can have.
fn everything_wrong() -> serde_json::Value {
    json!({
        "replicas": 65,
        "workload": "DaemonSet",
        "serverListConfigMap": "Servers_List",
        "image": "Memcached:1.6",
        "resources": {"limits": {"memory": "40Mi", "storage": "1Gi"}, "requests": {"cpu": "-1"}},
        "memcached": {"maxMemoryMB": 15, "threads": 0, "maxItemSize": "700k", "verbosity": 3,
            "extraArgs": ["-m", "1", "-o", "hot_lru_pct=90"]},
        "highAvailability": {
            "antiAffinityPreset": "medium",
            "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Never"}],
            "podDisruptionBudget": {"enabled": true, "minAvailable": "150%", "maxUnavailable": -1},
            "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 301, "terminationGracePeriodSeconds": 10}
        },
        "autoscaling": {"enabled": true, "minReplicas": 0,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}],
            "behavior": {"scaleUp": {"selectPolicy": "Sometimes"}}},
        "monitoring": {"enabled": true, "exporterImage": " e:1",
            "exporterResources": {"requests": {"cpu": "x"}},
            "serviceMonitor": {"interval": "soon", "scrapeTimeout": "10s", "additionalLabels": {"bad key": "v"}}},
        "security": {
            "sasl": {"enabled": true},
            "tls": {"enabled": true, "certificateSecretRef": {"name": ""}},
            "podSecurityContext": {"runAsUser": -1},
            "containerSecurityContext": {"procMount": "Other"}
        },
        "networkPolicy": {"enabled": true, "allowedSources": [{}]},
        "service": {"annotations": {"bad key": "v"}},
        "podLabels": {"bad key": "v", "app.kubernetes.io/name": "x"},
        "podAnnotations": {"bad key": "v"},
        "nodeSelector": {"bad key": "v"},
        "tolerations": [{"operator": "In"}]
    })
}

#[test]
fn errors_are_listed_by_stage_then_part_then_as_found() {
    assert_eq!(
        errors(everything_wrong()),
        [
            // Rule: fields tied together, part by part (resources, highAvailability, security, autoscaling)
            r#"spec.resources.limits.memory: Invalid value: "40Mi": memory limit must be at least 47Mi (maxMemoryMB=15Mi + 32Mi overhead)"#,
            r#"spec.highAvailability.podDisruptionBudget: Invalid value: "": minAvailable and maxUnavailable are mutually exclusive, specify only one"#,
            r#"spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: 10: terminationGracePeriodSeconds (10) must exceed preStopDelaySeconds (301)"#,
            r#"spec.security.sasl.credentialsSecretRef.name: Required value: credentialsSecretRef.name is required when SASL is enabled"#,
            r#"spec.security.tls.certificateSecretRef.name: Required value: certificateSecretRef.name is required when TLS is enabled"#,
            r#"spec.replicas: Invalid value: 65: spec.replicas and spec.autoscaling.enabled are mutually exclusive"#,
            r#"spec.autoscaling.maxReplicas: Required value: maxReplicas is required when autoscaling is enabled"#,
            // Schema: the CRD's bounds, part by part (replicas, workload, memcached, highAvailability, autoscaling, serverListConfigMap)
            r#"spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64"#,
            r#"spec.workload: Unsupported value: "DaemonSet": supported values: "Deployment", "StatefulSet""#,
            r#"spec.memcached.maxMemoryMB: Invalid value: 15: spec.memcached.maxMemoryMB in body should be greater than or equal to 16"#,
            r#"spec.memcached.threads: Invalid value: 0: spec.memcached.threads in body should be greater than or equal to 1"#,
            r#"spec.memcached.verbosity: Invalid value: 3: spec.memcached.verbosity in body should be less than or equal to 2"#,
            r#"spec.highAvailability.antiAffinityPreset: Unsupported value: "medium": supported values: "soft", "hard""#,
            r#"spec.highAvailability.gracefulShutdown.preStopDelaySeconds: Invalid value: 301: spec.highAvailability.gracefulShutdown.preStopDelaySeconds in body should be less than or equal to 300"#,
            r#"spec.autoscaling.minReplicas: Invalid value: 0: spec.autoscaling.minReplicas in body should be greater than or equal to 1"#,
            r#"spec.serverListConfigMap: Invalid value: "Servers_List": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            // Runtime: what memcached, Prometheus or a quantity parser refuses
            r#"spec.resources.requests.cpu: Invalid value: "-1": must be greater than or equal to 0"#,
            r#"spec.memcached.maxItemSize: Invalid value: "700k": memcached 1.6 needs an item size that is a multiple of its slab_chunk_max (512k), e.g. 512k, 1m, 1536k or 2m"#,
            r#"spec.memcached.extraArgs[0]: Forbidden: "-m" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#,
            r#"spec.memcached.extraArgs[2]: Invalid value: "-o hot_lru_pct=90": memcached exits on it: hot_lru_pct must be > 1 and < 80"#,
            r#"spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: "150%": must not be greater than 100%"#,
            r#"spec.highAvailability.podDisruptionBudget.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"#,
            r#"spec.monitoring.exporterResources.requests.cpu: Invalid value: "x": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#,
            r#"spec.monitoring.serviceMonitor.interval: Invalid value: "soon": must be a Prometheus duration such as 30s, 1m30s or 500ms"#,
            // Object: the API server, part by part (pod metadata and scheduling, topology spread, image, ...)
            r#"spec.podLabels: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            r#"spec.podLabels[app.kubernetes.io/name]: Forbidden: the operator sets this label on the pods (the Deployment's selector matches name, instance and managed-by; version comes from the image tag); remove it from podLabels"#,
            r#"spec.podAnnotations: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            r#"spec.nodeSelector: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            r#"spec.tolerations[0].operator: Invalid value: "In": operator must be Exists when `key` is empty, which means "match all values and all keys""#,
            r#"spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists""#,
            r#"spec.highAvailability.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"#,
            r#"spec.highAvailability.topologySpreadConstraints[0].topologyKey: Required value: can not be empty"#,
            r#"spec.highAvailability.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Never": supported values: "DoNotSchedule", "ScheduleAnyway""#,
            r#"spec.image: Invalid value: "Memcached:1.6": must be a valid image reference: [registry[:port]/]repository[:tag][@digest], with a lower-case repository path, a tag of at most 128 characters from [A-Za-z0-9_.-] and a digest such as sha256:<64 hex digits>"#,
            r#"spec.resources.limits[storage]: Invalid value: "storage": must be a standard resource for containers"#,
            r#"spec.monitoring.exporterImage: Invalid value: " e:1": must not have leading or trailing whitespace"#,
            r#"spec.monitoring.serviceMonitor.additionalLabels: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            r#"spec.security.podSecurityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"#,
            r#"spec.security.containerSecurityContext.procMount: Unsupported value: "Other": supported values: "Default", "Unmasked""#,
            r#"spec.autoscaling.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"#,
            r#"spec.autoscaling.behavior.scaleUp.selectPolicy: Unsupported value: "Sometimes": supported values: "Disabled", "Max", "Min""#,
            r#"spec.service.annotations: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"#,
            r#"spec.networkPolicy.allowedSources[0]: Required value: must specify a peer"#,
        ]
    );
}
