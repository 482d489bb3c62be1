//! Random admission requests for property tests: mostly plausible Memcached
//! objects with values around every bound, sprinkled with wrong types, bad
//! quantities and other kinds. Deterministic for a given seed.

use std::collections::BTreeSet;
use std::ops::RangeInclusive;
use std::sync::LazyLock;

use memcached_api::memcached_options::{MAX_MEMORY_MB, SPEC_FIELDS, Schema, Setting};
use memcached_api::{
    MAX_MEMORY_MB_BOUNDS, PRE_STOP_DELAY_SECONDS_BOUNDS, REPLICAS_BOUNDS,
    TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS,
};
use serde_json::{Map, Value, json};

/// SplitMix64: small, fast, good enough to explore input space.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

const QUANTITIES: [&str; 16] = [
    "64Mi",
    "96Mi",
    "100M",
    "0.09375Gi",
    "1e8",
    "128974848",
    "1Gi",
    "250m",
    "1",
    "0",
    "-1Mi",
    "1.5",
    "abc",
    "1e2147483648",
    "9999999999999999999999Ei",
    "",
];
const STRINGS: [&str; 13] = [
    "soft", "hard", "medium", "1m", "2m", "33m", "512k", "0k", "30s", "", "700k", "1536k", "511k",
];
/// memcached arguments: managed and breaking flags in every spelling getopt
/// takes (bundles, glued values, long prefixes), harmless ones, operands,
/// `--`, and what memcached exits on.
const ARGS: [&str; 28] = [
    "-v",
    "-m",
    "64",
    "--port=1",
    "-o",
    "modern",
    "-vvS",
    "-vdm64",
    "--mem",
    "--memory-l=9",
    "--th",
    "--disable-c",
    "--ver",
    "-B",
    "binary",
    "ascii",
    "-oslab_reassign,ssl_key=/k",
    "--",
    "foo",
    "-x",
    "--lock",
    "-R",
    "-h",
    "--daemon",
    "--extended=modern,",
    "-Z",
    "-u",
    "-",
];
const IMAGES: [&str; 7] = [
    "memcached:1.6.28",
    "",
    " ",
    "Memcached:1.6",
    "registry.local:5000/cache/memcached:1.6",
    "a//b",
    "memcached:1.6 ",
];
const LABEL_KEYS: [&str; 7] = [
    "team",
    "app.kubernetes.io/instance",
    "example.com/tier",
    "bad key",
    "/x",
    "app.kubernetes.io/version",
    "a_b.c",
];
const LABEL_VALUES: [&str; 4] = ["a", "", "x y", "v-1"];

/// The integer bounds of the schema (`api/src/types.rs`): the memcached
/// options' (their rows) and the others.
fn bounds() -> impl Iterator<Item = &'static RangeInclusive<i32>> {
    let options = SPEC_FIELDS
        .iter()
        .filter_map(|option| match option.field?.schema {
            Schema::Range(bounds) => Some(bounds),
            Schema::Pattern(..) => None,
        });
    options.chain([
        &REPLICAS_BOUNDS,
        &PRE_STOP_DELAY_SECONDS_BOUNDS,
        &TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS,
    ])
}

/// Integers at the bounds the schema cares about, in order: each bound's
/// minimum, maximum and one above, a negative number, and one below the
/// replicas' maximum.
static NEAR_BOUNDS: LazyLock<Vec<i32>> = LazyLock::new(|| {
    let mut near: BTreeSet<i32> = bounds()
        .flat_map(|b| [*b.start(), *b.end(), *b.end() + 1])
        .collect();
    near.extend([-1, *REPLICAS_BOUNDS.end() - 1]);
    near.into_iter().collect()
});

/// An integer near the bounds the schema cares about, or a wrong type.
fn int(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!(rng.pick(&NEAR_BOUNDS)),
        1 => json!(i64::from(i32::MAX) + 1),
        2 => json!("7"),
        3 => json!(1.5),
        _ => json!(rng.below(20)),
    }
}

fn quantity_map(rng: &mut Rng) -> Value {
    let mut m = Map::new();
    for name in ["cpu", "memory"] {
        if rng.chance(60) {
            m.insert(name.into(), json!(rng.pick(&QUANTITIES)));
        }
    }
    Value::Object(m)
}

/// A list of `len` items from `item`, usually short, sometimes over its bound.
fn list(rng: &mut Rng, mut item: impl FnMut(&mut Rng) -> Value) -> Value {
    let len = match rng.below(50) {
        0 => 101,
        1 => 1001,
        n => n % 4,
    };
    Value::Array((0..len).map(|_| item(rng)).collect())
}

/// A labels-like map, sometimes over the 64/128-entry bounds.
fn string_map(rng: &mut Rng) -> Value {
    let mut m = Map::new();
    let len = if rng.chance(3) { 130 } else { rng.below(3) };
    for i in 0..len {
        let key = rng.pick(&LABEL_KEYS);
        let key = if len > 3 {
            format!("{key}{i}")
        } else {
            key.to_string()
        };
        m.insert(key, json!(rng.pick(&LABEL_VALUES)));
    }
    Value::Object(m)
}

fn maybe(
    rng: &mut Rng,
    m: &mut Map<String, Value>,
    key: &str,
    percent: u64,
    value: impl FnOnce(&mut Rng) -> Value,
) {
    if rng.chance(percent) {
        let v = value(rng);
        m.insert(key.into(), v);
    }
}

/// A `networkPolicy` (or `security.networkPolicy`) section.
fn network_policy(r: &mut Rng) -> Value {
    let mut m = Map::new();
    m.insert("enabled".into(), enabled(r));
    maybe(r, &mut m, "allowedSources", 60, |r| {
        list(r, |r| {
            r.pick(&[
                json!({"podSelector": {"matchLabels": {"app": "web"}}}),
                json!({}),
                json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}),
                json!({"ipBlock": {"cidr": "10.0.0.0/33"}}),
                json!({"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}),
            ])
        })
    });
    Value::Object(m)
}

fn enabled(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0 => json!("yes"),
        1..=4 => json!(false),
        _ => json!(true),
    }
}

/// A random `spec`.
pub fn spec(rng: &mut Rng) -> Value {
    let mut s = Map::new();
    maybe(rng, &mut s, "replicas", 50, int);
    maybe(rng, &mut s, "image", 20, |r| json!(r.pick(&IMAGES)));
    maybe(rng, &mut s, "podLabels", 10, string_map);
    maybe(rng, &mut s, "podAnnotations", 10, string_map);
    maybe(rng, &mut s, "nodeSelector", 10, string_map);
    maybe(rng, &mut s, "tolerations", 10, |r| {
        list(r, |r| {
            json!({"key": r.pick(&["", "k", "bad key"]), "operator": r.pick(&["Exists", "Equal", "In"]),
                "value": r.pick(&["", "v"]), "effect": r.pick(&["", "NoSchedule", "NoExecute", "Never"])})
        })
    });
    maybe(rng, &mut s, "networkPolicy", 10, network_policy);
    maybe(
        rng,
        &mut s,
        "resources",
        50,
        |r| json!({"limits": quantity_map(r), "requests": quantity_map(r)}),
    );
    maybe(rng, &mut s, "memcached", 60, |r| {
        let mut m = Map::new();
        for key in ["maxMemoryMB", "maxConnections", "threads", "verbosity"] {
            maybe(r, &mut m, key, 40, int);
        }
        maybe(r, &mut m, "maxItemSize", 30, |r| json!(r.pick(&STRINGS)));
        maybe(r, &mut m, "extraArgs", 20, |r| {
            if r.chance(2) {
                return json!(["x".repeat(4097)]);
            }
            list(r, |r| json!(r.pick(&ARGS)))
        });
        Value::Object(m)
    });
    maybe(rng, &mut s, "highAvailability", 40, |r| {
        let mut m = Map::new();
        maybe(r, &mut m, "antiAffinityPreset", 30, |r| {
            json!(r.pick(&STRINGS))
        });
        maybe(r, &mut m, "podDisruptionBudget", 50, |r| {
            let mut p = Map::new();
            p.insert("enabled".into(), enabled(r));
            maybe(r, &mut p, "minAvailable", 50, |r| {
                if r.chance(70) {
                    int(r)
                } else {
                    json!(r.pick(&["50%", "150%", "x"]))
                }
            });
            maybe(r, &mut p, "maxUnavailable", 30, |r| {
                json!(r.pick(&[json!(1), json!("25%")]))
            });
            Value::Object(p)
        });
        maybe(r, &mut m, "topologySpreadConstraints", 20, |r| {
            list(r, |r| {
                json!({"maxSkew": r.pick(&[0, 1]), "topologyKey": r.pick(&["zone", ""]),
                    "whenUnsatisfiable": r.pick(&["DoNotSchedule", "ScheduleAnyway", "Never"])})
            })
        });
        maybe(
            r,
            &mut m,
            "gracefulShutdown",
            40,
            |r| json!({"enabled": enabled(r), "preStopDelaySeconds": int(r), "terminationGracePeriodSeconds": int(r)}),
        );
        Value::Object(m)
    });
    maybe(rng, &mut s, "autoscaling", 30, |r| {
        let mut m = Map::new();
        m.insert("enabled".into(), enabled(r));
        maybe(r, &mut m, "minReplicas", 50, int);
        maybe(r, &mut m, "maxReplicas", 70, int);
        maybe(r, &mut m, "metrics", 20, |_| json!([]));
        Value::Object(m)
    });
    maybe(rng, &mut s, "monitoring", 30, |r| {
        let mut m = Map::new();
        m.insert("enabled".into(), enabled(r));
        maybe(
            r,
            &mut m,
            "exporterResources",
            30,
            |r| json!({"requests": quantity_map(r)}),
        );
        maybe(
            r,
            &mut m,
            "serviceMonitor",
            50,
            |r| json!({"interval": r.pick(&["30s", "1m", "5s", "soon"]), "scrapeTimeout": r.pick(&["10s", "1m", "x"])}),
        );
        Value::Object(m)
    });
    maybe(rng, &mut s, "security", 30, |r| {
        let mut security = json!({"sasl": {"enabled": enabled(r), "credentialsSecretRef": {"name": r.pick(&["", "auth"])}},
                "tls": {"enabled": enabled(r), "certificateSecretRef": {"name": r.pick(&["", "tls"])}},
                "containerSecurityContext": r.pick(&[json!({}), json!({"privileged": true}), json!({"runAsUser": 0})])});
        // The Go operator's place of networkPolicy, alone or beside it.
        if let Value::Object(m) = &mut security {
            maybe(r, m, "networkPolicy", 10, network_policy);
        }
        security
    });
    maybe(
        rng,
        &mut s,
        "unmodelled",
        10,
        |r| json!({"kept": r.below(100)}),
    );
    if rng.chance(3) {
        return json!(rng.pick(&[json!([]), json!("spec"), json!(3)]));
    }
    Value::Object(s)
}

/// A random AdmissionRequest (the `request` of an AdmissionReview).
pub fn request(rng: &mut Rng) -> Value {
    let operation = rng.pick(&["CREATE", "CREATE", "CREATE", "UPDATE", "UPDATE", "DELETE"]);
    let (group, version, kind) = match rng.below(20) {
        0 => ("", "v1", "Pod"),
        1 => ("memcached.c5c3.io", "v1", "Memcached"),
        n => (
            "memcached.c5c3.io",
            if n % 2 == 0 { "v1alpha1" } else { "v1beta1" },
            "Memcached",
        ),
    };
    let object = |rng: &mut Rng| {
        let metadata = match rng.below(20) {
            0 => json!({"name": "My.Cache", "namespace": "n"}),
            1 => json!({"name": "c".repeat(64), "namespace": "n"}),
            2 => json!({"generateName": rng.pick(&["cache-", "Cache-"]), "namespace": "n"}),
            _ => json!({"name": "c", "namespace": "n", "labels": {"a": "b"}}),
        };
        json!({"apiVersion": format!("{group}/{version}"), "kind": kind,
            "metadata": metadata, "spec": spec(rng)})
    };
    let new = object(rng);
    let old = if operation == "CREATE" {
        Value::Null
    } else {
        let mut old = object(rng);
        // The replicas its workload runs, which turning autoscaling off keeps.
        if old.is_object() && rng.chance(50) {
            old["status"] = json!({"replicas": int(rng)});
        }
        old
    };
    json!({"uid": "u", "operation": operation, "name": "c", "namespace": "n",
        "kind": {"group": group, "version": version, "kind": kind}, "object": new, "oldObject": old})
}

/// A spec with `value` at the dotted `path` (`"memcached.threads"`), the rest absent.
fn at(path: &str, value: Value) -> Value {
    path.rsplit('.')
        .fold(value, |inner, key| json!({ (key): inner }))
}

/// `path` set to each of `values`: one case each.
fn each(cases: &mut Vec<(String, Value)>, path: &str, values: Vec<Value>) {
    for (i, value) in values.into_iter().enumerate() {
        cases.push((format!("{path}#{i}"), at(path, value)));
    }
}

/// A spec with several fields, named.
fn with(cases: &mut Vec<(String, Value)>, name: &str, spec: Value) {
    cases.push((name.to_string(), spec));
}

/// Each end of `bounds` and just beyond it: `[-1, 0, 64, 65]` for `0..=64`.
fn edges(bounds: &RangeInclusive<i32>) -> Vec<Value> {
    let (low, high) = (*bounds.start(), *bounds.end());
    vec![json!(low - 1), json!(low), json!(high), json!(high + 1)]
}

/// Specs just inside and just outside every rule of the spec and of the
/// Kubernetes types it embeds, one field (or one combination) at a time,
/// each named by what it varies: the differential test's inputs.
pub fn boundary_specs() -> Vec<(String, Value)> {
    let mut c = Vec::new();
    each(&mut c, "replicas", edges(&REPLICAS_BOUNDS));
    each(
        &mut c,
        "workload",
        vec![
            json!("Deployment"),
            json!("StatefulSet"),
            json!("DaemonSet"),
        ],
    );
    each(
        &mut c,
        "clientHashing",
        vec![json!("rendezvous"), json!("ketama"), json!("crc32")],
    );
    each(
        &mut c,
        "serverListConfigMap",
        vec![
            json!("servers"),
            json!("Servers_List"),
            json!("s".repeat(253)),
            json!("s".repeat(254)),
        ],
    );
    each(
        &mut c,
        "image",
        vec![
            json!("memcached:1.6.28"),
            json!(" memcached"),
            json!("Memcached:1.6"),
            json!(format!("m:{}", "t".repeat(128))),
            json!(format!("m:{}", "t".repeat(129))),
            json!(""),
        ],
    );
    for field in SPEC_FIELDS.iter().filter_map(|option| option.field) {
        if let Schema::Range(range) = field.schema {
            each(&mut c, field.key, edges(range));
        }
    }
    each(
        &mut c,
        "memcached.maxItemSize",
        vec![
            json!("512k"),
            json!("511k"),
            json!("1536k"),
            json!("32m"),
            json!("33m"),
            json!("0k"),
            json!("1g"),
        ],
    );
    each(
        &mut c,
        "memcached.extraArgs",
        vec![
            json!(["-v"]),
            json!(["-m", "64"]),
            json!(["--lock-memory"]),
            json!(["-R", "30"]),
            json!(["-h"]),
            json!(["x".repeat(4096)]),
        ],
    );
    // The memory limit holds the cache plus the 32Mi overhead; requests at most limits.
    each(
        &mut c,
        "resources",
        vec![
            json!({"limits": {"memory": "96Mi"}}),
            json!({"limits": {"memory": "95Mi"}}),
            json!({"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}),
            json!({"requests": {"cpu": "1001m"}, "limits": {"cpu": "1"}}),
            json!({"requests": {"cpu": "-1"}}),
            json!({"requests": {"cpu": "0"}}),
            json!({"requests": {"storage": "1Gi"}}),
            json!({"requests": {"pods": "1"}}),
            json!({"requests": {"example.com/gpu": "1"}}),
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}),
            json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
            json!({"limits": {"example.com/gpu": "500m"}}),
            json!({"limits": {"example.com/gpu": "1"}}),
            json!({"limits": {"kubernetes.io/gpu": "500m"}}),
            json!({"limits": {"requests.example.com/gpu": "1"}}),
            json!({"limits": {"hugepages-2Mi": "4Mi", "memory": "128Mi"}, "requests": {"hugepages-2Mi": "4Mi"}}),
            json!({"limits": {"hugepages-2Mi": "3Mi", "memory": "128Mi"}}),
            json!({"limits": {"hugepages-2Mi": "2Mi"}}),
            json!({"requests": {"hugepages-2Mi": "2Mi", "cpu": "1"}}),
            json!({"limits": {"hugepages-1Gi": "1Gi", "cpu": "1"}}),
            json!({"limits": {"hugepages-x": "1", "cpu": "1"}}),
            json!({"claims": [{"name": "gpu"}]}),
            json!({"claims": [{"name": ""}]}),
            json!({"claims": []}),
        ],
    );
    each(
        &mut c,
        "highAvailability.antiAffinityPreset",
        vec![json!("soft"), json!("hard"), json!("medium")],
    );
    for pdb in [
        json!({"minAvailable": 0}),
        json!({"minAvailable": 1}),
        json!({"minAvailable": 2}),
        json!({"minAvailable": -1}),
        json!({"minAvailable": "0%"}),
        json!({"minAvailable": "100%"}),
        json!({"minAvailable": "101%"}),
        json!({"minAvailable": "x"}),
        json!({"maxUnavailable": 0}),
        json!({"maxUnavailable": "100%"}),
        json!({"maxUnavailable": 1, "minAvailable": 1}),
        json!({}),
    ] {
        let mut p = pdb;
        p["enabled"] = json!(true);
        with(
            &mut c,
            &format!("pdb {p}"),
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": p}}),
        );
    }
    let (delay_max, grace_max) = (
        *PRE_STOP_DELAY_SECONDS_BOUNDS.end(),
        *TERMINATION_GRACE_PERIOD_SECONDS_BOUNDS.end(),
    );
    for (delay, grace) in [
        (1, 2),
        (0, 30),
        (delay_max, delay_max + 1),
        (delay_max + 1, grace_max),
        (10, grace_max + 1),
        (10, 10),
        (10, 11),
    ] {
        with(
            &mut c,
            &format!("gracefulShutdown {delay}/{grace}"),
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": delay, "terminationGracePeriodSeconds": grace}}}),
        );
    }
    // The memory-backed volume sized from maxMemoryMB, at its bounds, with and without the preStop delay.
    let Some(Setting::Int(memory_default)) = MAX_MEMORY_MB.field.map(|f| f.default) else {
        unreachable!("maxMemoryMB is a number")
    };
    for (memory, graceful) in [
        (*MAX_MEMORY_MB_BOUNDS.start(), false),
        (*MAX_MEMORY_MB_BOUNDS.end(), true),
        (memory_default, true),
    ] {
        with(
            &mut c,
            &format!("warmRestart maxMemoryMB {memory} graceful {graceful}"),
            json!({"warmRestart": {"enabled": true}, "memcached": {"maxMemoryMB": memory},
                "highAvailability": {"gracefulShutdown": {"enabled": graceful}}}),
        );
    }
    let spread = |extra: Value| {
        let mut c = json!({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"});
        c.as_object_mut()
            .into_iter()
            .for_each(|o| o.extend(extra.as_object().cloned().unwrap_or_default()));
        c
    };
    each(
        &mut c,
        "highAvailability.topologySpreadConstraints",
        vec![
            json!([spread(json!({}))]),
            json!([spread(json!({"maxSkew": 0}))]),
            json!([spread(json!({"topologyKey": ""}))]),
            json!([spread(json!({"whenUnsatisfiable": "Never"}))]),
            json!([spread(json!({"minDomains": 0}))]),
            json!([spread(json!({"minDomains": 1}))]),
            json!([spread(
                json!({"minDomains": 1, "whenUnsatisfiable": "ScheduleAnyway"})
            )]),
            json!([spread(json!({"nodeAffinityPolicy": "Sometimes"}))]),
            json!([spread(json!({"matchLabelKeys": ["pod-template-hash"]}))]),
            json!([spread(
                json!({"matchLabelKeys": ["pod-template-hash"], "labelSelector": {"matchLabels": {"a": "b"}}})
            )]),
            json!([spread(json!({})), spread(json!({}))]),
            json!([spread(
                json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}})
            )]),
        ],
    );
    for autoscaling in [
        json!({"maxReplicas": 1}),
        json!({"maxReplicas": 0}),
        json!({"minReplicas": 0, "maxReplicas": 3}),
        json!({"minReplicas": 4, "maxReplicas": 3}),
        json!({}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 1}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Resource"}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Cpu", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "500m"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "0"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value", "value": "10"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "1", "averageValue": "1"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "web", "apiVersion": "v1"}, "metric": {"name": "rps"}, "target": {"type": "Value", "value": "1"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "web", "apiVersion": "a/b/c"}, "metric": {"name": "rps"}, "target": {"type": "Value", "value": "1"}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "memcached", "target": {"type": "Utilization", "averageUtilization": 60}}}]}),
        json!({"maxReplicas": 3, "metrics": [{"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "Memcached", "target": {"type": "Utilization", "averageUtilization": 60}}}]}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 3600}, "scaleDown": {"stabilizationWindowSeconds": 0}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 3601}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": -1}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"policies": []}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"selectPolicy": "Any"}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"selectPolicy": "Disabled", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 1800}]}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"policies": [{"type": "Percent", "value": 0, "periodSeconds": 0}]}}}),
        json!({"maxReplicas": 3, "behavior": {"scaleUp": {"policies": [{"type": "Nodes", "value": 1, "periodSeconds": 60}]}}}),
    ] {
        let mut a = autoscaling;
        a["enabled"] = json!(true);
        with(
            &mut c,
            &format!("autoscaling {a}"),
            json!({"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}, "autoscaling": a}),
        );
    }
    with(
        &mut c,
        "autoscaling with replicas",
        json!({"replicas": 2, "autoscaling": {"enabled": true, "maxReplicas": 3}, "resources": {"requests": {"cpu": "1"}}}),
    );
    for monitoring in [
        json!({"exporterImage": "prom/memcached-exporter:v0.15.4"}),
        json!({"exporterImage": "Exporter"}),
        json!({"exporterResources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
        json!({"exporterResources": {"limits": {"example.com/x": "1m"}}}),
        json!({"serviceMonitor": {"interval": "30s", "scrapeTimeout": "30s"}}),
        json!({"serviceMonitor": {"interval": "30s", "scrapeTimeout": "31s"}}),
        json!({"serviceMonitor": {"interval": "soon"}}),
        json!({"serviceMonitor": {"additionalLabels": {"release": "prometheus"}}}),
        json!({"serviceMonitor": {"additionalLabels": {"bad key": "x"}}}),
    ] {
        let mut m = monitoring;
        m["enabled"] = json!(true);
        with(&mut c, &format!("monitoring {m}"), json!({"monitoring": m}));
    }
    each(
        &mut c,
        "security.sasl",
        vec![
            json!({"enabled": true, "credentialsSecretRef": {"name": "auth"}}),
            json!({"enabled": true}),
            json!({"enabled": true, "credentialsSecretRef": {"name": ""}}),
        ],
    );
    each(
        &mut c,
        "security.tls",
        vec![
            json!({"enabled": true, "certificateSecretRef": {"name": "tls"}, "enableClientCert": true}),
            json!({"enabled": true}),
        ],
    );
    let max_id = i64::from(i32::MAX);
    each(
        &mut c,
        "security.podSecurityContext",
        vec![
            json!({}),
            json!({"runAsUser": 0}),
            json!({"runAsUser": -1}),
            json!({"runAsUser": max_id}),
            json!({"runAsUser": max_id + 1}),
            json!({"runAsGroup": -1}),
            json!({"fsGroup": max_id + 1}),
            json!({"supplementalGroups": [0, max_id]}),
            json!({"supplementalGroups": [-1]}),
            json!({"runAsNonRoot": true, "runAsUser": 1000}),
            json!({"sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]}),
            json!({"sysctls": [{"name": "bad name", "value": "1"}]}),
            json!({"sysctls": [{"name": "", "value": "1"}]}),
            json!({"sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "kernel.msgmax", "value": "2"}]}),
            json!({"sysctls": [{"name": "net/ipv4/ip_local_port_range", "value": "1024 65000"}]}),
            json!({"sysctls": [{"name": "a".repeat(254), "value": "1"}]}),
            json!({"seccompProfile": {"type": "RuntimeDefault"}}),
            json!({"seccompProfile": {"type": "Unconfined"}}),
            json!({"seccompProfile": {"type": "Localhost"}}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/m.json"}}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "/abs.json"}}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "../up.json"}}),
            json!({"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}}),
            json!({"seccompProfile": {"type": "Strict"}}),
            json!({"appArmorProfile": {"type": "Localhost"}}),
            json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "k8s-memcached"}}),
            json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": " p"}}),
            json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": ""}}),
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({"appArmorProfile": {"type": "Unconfined", "localhostProfile": "p"}}),
            json!({"appArmorProfile": {"type": "Strict"}}),
            json!({"fsGroupChangePolicy": "OnRootMismatch"}),
            json!({"fsGroupChangePolicy": "Sometimes"}),
            json!({"supplementalGroupsPolicy": "Strict"}),
            json!({"supplementalGroupsPolicy": "Sometimes"}),
            json!({"seLinuxChangePolicy": "MountOption"}),
            json!({"seLinuxChangePolicy": "Recursive"}),
            json!({"seLinuxChangePolicy": "Never"}),
            json!({"seLinuxOptions": {"level": "s0:c123,c456", "type": "container_t"}}),
            json!({"windowsOptions": {"hostProcess": true}}),
            json!({"windowsOptions": {"hostProcess": false}}),
            json!({"windowsOptions": {"runAsUserName": "ContainerUser"}}),
            json!({"windowsOptions": {"runAsUserName": r"a\b\c"}}),
            json!({"windowsOptions": {"runAsUserName": ""}}),
            json!({"windowsOptions": {"runAsUserName": "u".repeat(105)}}),
            json!({"windowsOptions": {"runAsUserName": r"NT AUTHORITY\NETWORK SERVICE"}}),
            json!({"windowsOptions": {"runAsUserName": r"bad:domain\user"}}),
            json!({"windowsOptions": {"runAsUserName": "..."}}),
            json!({"windowsOptions": {"gmsaCredentialSpecName": "gmsa"}}),
            json!({"windowsOptions": {"gmsaCredentialSpecName": "Gmsa"}}),
            json!({"windowsOptions": {"gmsaCredentialSpec": ""}}),
            json!({"runAsUser": 1000}),
            json!({"runAsNonRoot": true, "fsGroup": 65534}),
            json!({"runAsNonRoot": false}),
        ],
    );
    each(
        &mut c,
        "security.containerSecurityContext",
        vec![
            json!({}),
            json!({"privileged": true}),
            json!({"privileged": true, "allowPrivilegeEscalation": false}),
            json!({"privileged": true, "allowPrivilegeEscalation": true}),
            json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}),
            json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"]}}),
            json!({"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}),
            json!({"procMount": "Default"}),
            json!({"procMount": "Unmasked"}),
            json!({"procMount": "Sometimes"}),
            json!({"runAsUser": 0}),
            json!({"runAsUser": max_id + 1}),
            json!({"runAsGroup": -5}),
            json!({"runAsGroup": max_id}),
            json!({"readOnlyRootFilesystem": false}),
            json!({"seccompProfile": {"type": "Strict"}}),
            json!({"seccompProfile": {"type": ""}}),
            json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
            json!({"appArmorProfile": {"type": "RuntimeDefault"}}),
            json!({"appArmorProfile": {"type": ""}}),
            json!({"windowsOptions": {"hostProcess": true}}),
            json!({"seLinuxOptions": {"user": "system_u", "role": "system_r"}}),
        ],
    );
    // The Go operator's hardened Memcached (its test/e2e/security-contexts):
    // restricted but for the seccomp profile and a numeric user.
    with(
        &mut c,
        "hardened, seccomp and user unset",
        json!({"monitoring": {"enabled": true}, "security": {
            "podSecurityContext": {"runAsNonRoot": true, "fsGroup": 65534},
            "containerSecurityContext": {"runAsNonRoot": true, "readOnlyRootFilesystem": true,
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}}),
    );
    with(
        &mut c,
        "hostProcess differs",
        json!({"security": {"podSecurityContext": {"windowsOptions": {"hostProcess": false}}, "containerSecurityContext": {"windowsOptions": {"hostProcess": true}}}}),
    );
    let peers = |peers: Value| json!({"networkPolicy": {"enabled": true, "allowedSources": peers}});
    for list in [
        json!([{"podSelector": {"matchLabels": {"app": "web"}}}]),
        json!([{}]),
        json!([{"namespaceSelector": {}, "podSelector": {}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]),
        json!([{"ipBlock": {"cidr": "10.1.2.3/8"}}]),
        json!([{"ipBlock": {"cidr": "10.1.2.3/32"}}]),
        json!([{"ipBlock": {"cidr": "0.0.0.0/0"}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/33"}}]),
        json!([{"ipBlock": {"cidr": ""}}]),
        json!([{"ipBlock": {"cidr": "010.0.0.0/8"}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/08"}}]),
        json!([{"ipBlock": {"cidr": "2001:db8::/32"}}]),
        json!([{"ipBlock": {"cidr": "2001:db8::1/32"}}]),
        json!([{"ipBlock": {"cidr": "::ffff:10.0.0.0/104"}}]),
        json!([{"ipBlock": {"cidr": "::/0"}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.1/16"]}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.0.0/8"]}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["010.1.0.0/16"]}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.255.255.255/32"]}}]),
        json!([{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["2001:db8::/64"]}}]),
        json!([{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}]),
    ] {
        with(&mut c, &format!("allowedSources {list}"), peers(list));
    }
    // The Go operator's place of the same setting: alone, equal, different.
    let web = json!({"enabled": true, "allowedSources": [{"podSelector": {"matchLabels": {"app": "web"}}}]});
    with(
        &mut c,
        "security.networkPolicy alone",
        json!({"security": {"networkPolicy": web}}),
    );
    with(
        &mut c,
        "security.networkPolicy without sources",
        json!({"security": {"networkPolicy": {"enabled": true, "allowedSources": [{}]}}}),
    );
    with(
        &mut c,
        "networkPolicy in both places, equal",
        json!({"networkPolicy": web, "security": {"networkPolicy": web}}),
    );
    with(
        &mut c,
        "networkPolicy in both places, different",
        json!({"networkPolicy": {"enabled": false}, "security": {"networkPolicy": web}}),
    );
    let long_value = "v".repeat(63);
    each(
        &mut c,
        "podLabels",
        vec![
            json!({"team": "cache"}),
            json!({"bad key": "x"}),
            json!({"team": long_value}),
            json!({"team": format!("{long_value}v")}),
            json!({"app.kubernetes.io/instance": "x"}),
        ],
    );
    each(
        &mut c,
        "podAnnotations",
        vec![
            json!({"example.com/note": "x"}),
            json!({"Bad Key": "x"}),
            json!({"big": "a".repeat(256 * 1024 - 3)}),
            json!({"big": "a".repeat(256 * 1024)}),
            json!({"controller.kubernetes.io/pod-deletion-cost": "10"}),
            json!({"controller.kubernetes.io/pod-deletion-cost": "-2147483648"}),
            json!({"controller.kubernetes.io/pod-deletion-cost": "2147483648"}),
            json!({"controller.kubernetes.io/pod-deletion-cost": "+1"}),
            json!({"controller.kubernetes.io/pod-deletion-cost": "01"}),
            json!({"kubernetes.io/config.mirror": "x"}),
            json!({"scheduler.alpha.kubernetes.io/tolerations": "[{\"operator\": \"Exists\"}]"}),
            json!({"scheduler.alpha.kubernetes.io/tolerations": "[{\"key\": \"\", \"operator\": \"Equal\"}]"}),
            json!({"scheduler.alpha.kubernetes.io/tolerations": "not json"}),
            json!({"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}),
            json!({"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}),
            json!({"seccomp.security.alpha.kubernetes.io/pod": "bad"}),
            json!({"container.seccomp.security.alpha.kubernetes.io/memcached": "localhost/../p"}),
            json!({"container.apparmor.security.beta.kubernetes.io/memcached": "runtime/default"}),
            json!({"container.apparmor.security.beta.kubernetes.io/memcached": "bad"}),
            json!({"container.apparmor.security.beta.kubernetes.io/exporter": "runtime/default"}),
        ],
    );
    with(
        &mut c,
        "apparmor annotation differs from field",
        json!({"podAnnotations": {"container.apparmor.security.beta.kubernetes.io/memcached": "unconfined"}, "security": {"containerSecurityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}}),
    );
    with(
        &mut c,
        "seccomp container annotation differs from field",
        json!({"podAnnotations": {"container.seccomp.security.alpha.kubernetes.io/memcached": "unconfined"}, "security": {"containerSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}}),
    );
    each(
        &mut c,
        "nodeSelector",
        vec![
            json!({"kubernetes.io/os": "linux"}),
            json!({"bad key": "x"}),
            json!({"k": "bad value"}),
        ],
    );
    each(
        &mut c,
        "tolerations",
        vec![
            json!([{"operator": "Exists"}]),
            json!([{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]),
            json!([{"key": "", "operator": "Equal"}]),
            json!([{"key": "k", "operator": "In"}]),
            json!([{"key": "k", "operator": "Exists", "value": "v"}]),
            json!([{"key": "k", "effect": "Never"}]),
            json!([{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
            json!([{"key": "k", "effect": "NoExecute", "tolerationSeconds": 5}]),
        ],
    );
    each(
        &mut c,
        "imagePullSecrets",
        vec![json!([{"name": "regcred"}]), json!([{"name": ""}])],
    );
    each(
        &mut c,
        "service.annotations",
        vec![json!({"example.com/a": "b"}), json!({"bad key": "b"})],
    );
    c
}
