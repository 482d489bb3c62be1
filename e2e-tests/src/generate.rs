//! Random admission requests for property tests: mostly plausible Memcached
//! objects with values around every bound, sprinkled with wrong types, bad
//! quantities and other kinds. Deterministic for a given seed.

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

/// An integer near the bounds the schema cares about, or a wrong type.
fn int(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => json!(rng.pick(&[
            -1, 0, 1, 2, 3, 16, 63, 64, 65, 128, 129, 300, 301, 600, 601, 65536, 65537
        ])),
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
    maybe(rng, &mut s, "networkPolicy", 10, |r| {
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
    });
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
        json!({"sasl": {"enabled": enabled(r), "credentialsSecretRef": {"name": r.pick(&["", "auth"])}},
                "tls": {"enabled": enabled(r), "certificateSecretRef": {"name": r.pick(&["", "tls"])}},
                "containerSecurityContext": r.pick(&[json!({}), json!({"privileged": true}), json!({"runAsUser": 0})])})
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
        object(rng)
    };
    json!({"uid": "u", "operation": operation, "name": "c", "namespace": "n",
        "kind": {"group": group, "version": version, "kind": kind}, "object": new, "oldObject": old})
}
