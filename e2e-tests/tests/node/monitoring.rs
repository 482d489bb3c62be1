//! Monitoring the way users run it (issue 35): kube-prometheus-stack's
//! Prometheus Operator and Prometheus on the node
//! (`e2e_tests::harness::environment::prometheus`), the chart installed with monitoring
//! on, Memcacheds with `spec.monitoring` (one authenticated); Prometheus's
//! own API says what it scrapes, which alerts of
//! `deploy/prometheus/memcached-operator-rules.yaml` fire and resolve on real
//! data, and what each query of `deploy/grafana/memcached.json` returns.

use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use e2e_tests::harness::environment::prometheus::{self, Prometheus, describe, describe_target};
use e2e_tests::harness::scenarios::scenario::patch;
use e2e_tests::harness::{Kubectl, scenarios::objects};
use e2e_tests::workspace_root;

use super::*;

/// Where both releases of the chart run.
const OPERATORS: &str = "operator-monitoring";
/// The release that runs the controller.
const RELEASE: &str = "mon";
/// A second release whose scrape is refused until its certificate is set.
const SECOND: &str = "mon-second";
/// The namespace the second release watches: nothing is there.
const UNWATCHED: &str = "monitored-none";
/// The Memcacheds' namespace.
const CACHES: &str = "monitored";
/// A namespace whose ResourceQuota refuses every Deployment.
const QUOTA: &str = "monitored-quota";
/// The authenticated cache's user and password.
const USER: &str = "app";
const PASSWORD: &str = "monitored";
/// Connections held to one pod of the authenticated cache, of its 512.
const HELD: usize = 470;

/// The alerts that judge Memcacheds: the first release raises them, the second not again.
const INSTANCE_ALERTS: [&str; 8] = [
    "MemcachedNotReady",
    "MemcachedUnavailable",
    "MemcachedDegraded",
    "MemcachedInstanceNotAnswering",
    "MemcachedExporterDown",
    "MemcachedHitRatioLow",
    "MemcachedEvictionsRising",
    "MemcachedConnectionsNearLimit",
];

/// kube-prometheus-stack's Prometheus, set up as its users have it, and the
/// chart installed with monitoring on (one value, `prometheusLabels`, labels
/// for that Prometheus its ServiceMonitor and PrometheusRule and the
/// ServiceMonitor of every Memcached, whose specs name no label; Prometheus's
/// ServiceAccount bound to the metrics-reader ClusterRole) scrape every target the product creates: the
/// controller's replicas over TLS with Prometheus's token, each Memcached's
/// exporter through the ServiceMonitor the controller made. Every alert of
/// the rules file fires when its condition is made true on real data (an
/// authenticated cache hung, starved of hits, evicting and crowded; an
/// exporter stopped; a Memcached whose image does not exist; reconciles the
/// API server refuses; a second release whose scrape fails from the start;
/// the controller scaled to 0) and resolves once it is undone; every query of
/// the dashboard returns series, those of the controller's numbers for the
/// authenticated cache too.
pub(crate) fn monitored_by_prometheus(env: &mut Env) -> Result<(), String> {
    let started = Instant::now();
    let helm = stop_suite_controller(env)?;
    prometheus::install_crds(env)?;
    for namespace in [OPERATORS, CACHES, QUOTA, UNWATCHED] {
        ensure_namespace(env, namespace)?;
    }
    install_releases(env, &helm)?;
    env.kubectl.apply(&auth_secret(
        CACHES,
        "secure-auth",
        &format!("{USER}:{PASSWORD}\n"),
    ))?;
    let mut secure = cache(2);
    secure["security"] =
        json!({"sasl": {"enabled": true, "credentialsSecretRef": {"name": "secure-auth"}}});
    secure["memcached"] = json!({"maxMemoryMB": 16, "maxConnections": 512});
    env.kubectl.apply(&memcached(CACHES, "plain", cache(1)))?;
    env.kubectl.apply(&memcached(CACHES, "secure", secure))?;
    wait_ready(env, CACHES, "plain", 1)?;
    wait_ready(env, CACHES, "secure", 2)?;
    let monitors = env.kubectl.ok(&[
        "get",
        "servicemonitors,prometheusrules",
        "-A",
        "-l",
        &format!("{}={}", prometheus::SELECTOR.0, prometheus::SELECTOR.1),
        "-o",
        "name",
    ])?;
    println!(
        "     labelled for Prometheus: {}",
        monitors.split_whitespace().collect::<Vec<_>>().join(", ")
    );
    // The Memcacheds name no label: the chart's one value, prometheusLabels,
    // labels their ServiceMonitors through the controller.
    for name in ["plain", "secure"] {
        let labels =
            &env.kubectl.get(&["servicemonitor", name, "-n", CACHES])?["metadata"]["labels"];
        check(
            labels[prometheus::SELECTOR.0] == prometheus::SELECTOR.1,
            format!("ServiceMonitor {CACHES}/{name} lacks the chart's prometheusLabels: {labels}"),
        )?;
    }

    let prom = prometheus::install_stack(env)?;
    println!(
        "     Prometheus Ready {:.1}s after the scenario began",
        started.elapsed().as_secs_f64()
    );
    let late = Late::apply(env, prom)?;
    let targets = targets_up(&prom)?;
    rules_loaded(&prom)?;
    dashboard_answers(&prom)?;
    alerts_fire_and_resolve(env, &helm, &prom)?;
    numbers(&prom)?;
    operator_down(env, &prom)?;
    let (controller, exporter) = late.wait()?;
    println!(
        "     kubectl apply of a Memcached -> its first sample in Prometheus: {:.1}s from the \
         controller, {:.1}s from its exporter (a new ServiceMonitor reaches Prometheus through \
         the operator's config Secret, which the kubelet syncs into the pod)",
        controller.as_secs_f64(),
        exporter.as_secs_f64()
    );
    for target in targets {
        println!("     target {}", describe_target(&target));
    }

    helm.uninstall(RELEASE, OPERATORS)?;
    helm.uninstall(SECOND, OPERATORS)?;
    // The second release's certificate is the scenario's, not the chart's.
    env.kubectl.ok(&[
        "delete",
        "secret",
        "mon-second-metrics-ca",
        "mon-second-metrics-tls",
        "-n",
        OPERATORS,
        "--ignore-not-found",
    ])?;
    nothing_left(env, &[RELEASE, SECOND], OPERATORS)?;
    for namespace in [CACHES, QUOTA, UNWATCHED] {
        objects::delete_namespace(env, namespace)?;
    }
    prometheus::uninstall(env)
}

/// A Memcached spec on the real node, monitored by that Prometheus.
fn cache(replicas: i64) -> Value {
    let mut spec = node::scheduling();
    spec["replicas"] = json!(replicas);
    spec["monitoring"] = prometheus::monitoring();
    spec
}

/// `<release>-memcached-operator-metrics`: the job of a release's controller.
fn job(release: &str) -> String {
    format!("{release}-memcached-operator-metrics")
}

/// `helm install` of both releases with [`prometheus::chart_values`]. The
/// second watches an empty namespace, raises only the operator alerts (the
/// instance alerts are the first's), and its ServiceMonitor trusts a CA that
/// did not sign the controller's self-signed certificate: every scrape
/// fails, until `metrics.certSecret` gives it one that CA signed.
fn install_releases(env: &Env, helm: &Helm) -> Result<(), String> {
    let server = format!("{}.{OPERATORS}.svc", job(SECOND));
    let tls = pki::issue(&[&server])?;
    let secrets = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "mon-second-metrics-ca", "namespace": OPERATORS},
         "stringData": {"ca.crt": tls.ca}},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": "mon-second-metrics-tls", "namespace": OPERATORS},
         "stringData": {"tls.crt": tls.cert, "tls.key": tls.key}},
    ]});
    env.kubectl.apply(&secrets.to_string())?;
    let mut second = prometheus::chart_values();
    second["replicaCount"] = json!(1);
    second["watchNamespaces"] = json!([UNWATCHED]);
    second["metrics"]["serviceMonitor"]["tlsConfig"] = json!({
        "ca": {"secret": {"name": "mon-second-metrics-ca", "key": "ca.crt"}},
        "serverName": server,
    });
    for alert in INSTANCE_ALERTS {
        second["metrics"]["prometheusRule"]["alerts"][alert]["enabled"] = json!(false);
    }
    for (release, values) in [(RELEASE, prometheus::chart_values()), (SECOND, second)] {
        let path = env.cluster.workdir.join(format!("{release}-values.json"));
        std::fs::write(&path, values.to_string())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        helm.install(release, OPERATORS, &["-f", &path.to_string_lossy()])?;
    }
    let reader = env.kubectl.get(&[
        "clusterrolebinding",
        &format!("{RELEASE}-memcached-operator-metrics-reader"),
    ])?;
    check(
        reader["subjects"][0]["name"] == prometheus::SERVICE_ACCOUNT
            && reader["subjects"][0]["namespace"] == prometheus::NAMESPACE,
        format!("the metrics-reader binding: {}", reader["subjects"]),
    )
}

/// Every target of the product up in Prometheus's targets API: both
/// controller replicas over HTTPS (the chart's ServiceMonitor sends
/// Prometheus's token; the controller reviews it and asks whether it may
/// `get` /metrics, which both Prometheus's own ClusterRole, as
/// kube-prometheus-stack ships it, and the chart's metrics-reader binding
/// allow: the controller suite's secure /metrics scenario shows the role
/// alone suffices and that without either the answer is 403), each pod's exporter; the second release's replica down with the
/// TLS error. The product's targets.
fn targets_up(prom: &Prometheus) -> Result<Vec<Value>, String> {
    let started = Instant::now();
    let targets = wait_for("every target of the product up", SETTLE, || {
        let targets: Vec<Value> = (prom.targets()?.into_iter())
            .filter(|t| {
                t["labels"]["namespace"] == CACHES
                    || t["labels"]["job"] == job(RELEASE).as_str()
                    || t["labels"]["job"] == job(SECOND).as_str()
            })
            .collect();
        let up = |job: &str, count: usize, scheme: &str| {
            let of: Vec<&Value> = (targets.iter())
                .filter(|t| t["labels"]["job"] == job)
                .collect();
            of.len() == count
                && of.iter().all(|t| {
                    t["health"] == "up"
                        && (t["scrapeUrl"].as_str()).is_some_and(|u| u.starts_with(scheme))
                })
        };
        let refused = (targets.iter())
            .filter(|t| t["labels"]["job"] == job(SECOND).as_str())
            .all(|t| {
                t["health"] == "down"
                    && (t["lastError"].as_str()).is_some_and(|e| e.contains("certificate"))
            });
        let all = up(&job(RELEASE), 2, "https://")
            && up("plain", 1, "http://")
            && up("secure", 2, "http://")
            && refused
            && targets
                .iter()
                .any(|t| t["labels"]["job"] == job(SECOND).as_str());
        let lines: Vec<String> = targets.iter().map(describe_target).collect();
        all.then(|| targets.clone()).ok_or(lines.join("; "))
    })?;
    println!(
        "     {} targets of the product as expected {:.1}s after Prometheus was Ready: the \
         controller's 2 over HTTPS with Prometheus's token, 3 exporters; the second release's \
         refused (TLS)",
        targets.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(targets)
}

/// The alert names of the rules file.
fn rule_file_alerts() -> Result<Vec<String>, String> {
    let path = workspace_root().join("deploy/prometheus/memcached-operator-rules.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let rule: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((rule["spec"]["groups"].as_array().into_iter().flatten())
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect())
}

/// Prometheus loaded every alert of the rules file from the first release's
/// PrometheusRule, and the operator alerts from the second's.
fn rules_loaded(prom: &Prometheus) -> Result<(), String> {
    let alerts = rule_file_alerts()?;
    let loaded = prom.alert_rules()?;
    let missing: Vec<&String> = alerts.iter().filter(|a| !loaded.contains(a)).collect();
    check(
        missing.is_empty() && loaded.len() == alerts.len() * 2 - INSTANCE_ALERTS.len(),
        format!("alerting rules loaded: {loaded:?}; missing {missing:?}"),
    )
}

/// Every query of the dashboard with its variables as Grafana fills them:
/// `namespace` and `memcached` from their `label_values(...)` queries (All:
/// their allValue, `.*`; then the authenticated cache and the plain one),
/// `$__rate_interval` as Grafana computes it for a Prometheus whose scrape
/// interval is kube-prometheus-stack's 30 s: max(interval + 30s, 4 x 30s),
/// the interval being the panel's own when it sets one. All and the plain
/// cache: every query returns a series; the authenticated cache: every query
/// of the controller's numbers (the exporter's are empty: it cannot log in).
fn dashboard_answers(prom: &Prometheus) -> Result<(), String> {
    let path = workspace_root().join("deploy/grafana/memcached.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dashboard: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let variables = dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let variable = |name: &str| -> Result<(String, String), String> {
        let found = (variables.iter())
            .find(|v| v["name"] == name)
            .and_then(|v| v["query"]["query"].as_str())
            .ok_or_else(|| format!("the dashboard has no query variable {name}"))?;
        let inner = (found
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')')))
        .ok_or_else(|| format!("{name}: {found}"))?;
        let (matcher, label) = inner
            .rsplit_once(", ")
            .ok_or_else(|| format!("{name}: {found}"))?;
        Ok((matcher.to_string(), label.to_string()))
    };
    let (namespace_matcher, namespace_label) = variable("namespace")?;
    let (memcached_matcher, memcached_label) = variable("memcached")?;
    wait_for("the dashboard's variables list the caches", SETTLE, || {
        let namespaces = prom.label_values(&namespace_label, &namespace_matcher)?;
        let names = prom.label_values(
            &memcached_label,
            &memcached_matcher.replace("$namespace", CACHES),
        )?;
        check(
            namespaces.iter().any(|n| n == CACHES)
                && ["plain", "secure"]
                    .iter()
                    .all(|n| names.iter().any(|m| m == n)),
            format!("variables: namespace {namespaces:?}, memcached in {CACHES} {names:?}"),
        )
    })?;
    // A rate needs two samples of a counter in its window: the first
    // scrapes of a new pod's numbers are waited for.
    let started = Instant::now();
    let answered = wait_for("every dashboard query returns series", SETTLE, || {
        let mut answered = Vec::new();
        for (selection, namespace, memcached) in [
            ("All", ".*", ".*"),
            ("plain", CACHES, "plain"),
            ("secure (authenticated)", CACHES, "secure"),
        ] {
            let (count, empty) = empty_queries(prom, &dashboard, namespace, memcached)?;
            if !empty.is_empty() {
                return Err(format!(
                    "dashboard queries without a series ({selection}):\n     {}",
                    empty.join("\n     ")
                ));
            }
            answered.push(format!("{selection} {count}"));
        }
        Ok(answered)
    })?;
    println!(
        "     dashboard: every query returns series {:.1}s after the variables did (queries per \
         selection: {})",
        started.elapsed().as_secs_f64(),
        answered.join(", ")
    );
    Ok(())
}

/// How many queries the dashboard's panels make with its variables set to
/// `namespace` and `memcached`, and those that return no series (the
/// exporter's panels of the authenticated cache may: its exporter cannot
/// log in).
fn empty_queries(
    prom: &Prometheus,
    dashboard: &Value,
    namespace: &str,
    memcached: &str,
) -> Result<(usize, Vec<String>), String> {
    let seconds = |d: &str| -> u64 {
        let (n, unit) = d.split_at(d.len() - 1);
        n.parse::<u64>().unwrap_or(0) * if unit == "m" { 60 } else { 1 }
    };
    let mut empty = Vec::new();
    let mut count = 0;
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        let scrape = 30;
        let interval = panel["interval"]
            .as_str()
            .map_or(scrape, seconds)
            .max(scrape);
        let rate = (interval + scrape).max(4 * scrape);
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            let filled = expr
                .replace("$__rate_interval", &format!("{rate}s"))
                .replace("$namespace", namespace)
                .replace("$memcached", memcached);
            let series = prom.query(&filled)?;
            count += 1;
            let exporter = expr.contains("service=~\"$memcached\"");
            if series.is_empty() && !(exporter && memcached == "secure") {
                empty.push(format!("{} {}: {filled}", panel["title"], target["refId"]));
            }
        }
    }
    Ok((count, empty))
}

/// An alert the scenario looks for: its name and labels it carries.
struct Alert {
    name: &'static str,
    labels: Vec<(&'static str, String)>,
}

impl Alert {
    fn new(name: &'static str, labels: &[(&'static str, &str)]) -> Self {
        let labels = labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
        Alert { name, labels }
    }

    fn labels(&self) -> Vec<(&str, &str)> {
        self.labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    /// Pending or firing.
    fn is(&self, alert: &Value) -> bool {
        prometheus::is(alert, self.name, &self.labels())
    }

    fn firing(&self, alert: &Value) -> bool {
        prometheus::firing(alert, self.name, &self.labels())
    }
}

/// Prometheus's alerts about this scenario's namespaces: earlier scenarios
/// of the suite leave Memcacheds (some refused, so Degraded) that the
/// chart's controller, watching every namespace, reports too.
fn own_alerts(prom: &Prometheus) -> Result<Vec<Value>, String> {
    let own = [OPERATORS, CACHES, QUOTA, UNWATCHED];
    Ok((prom.alerts()?.into_iter())
        .filter(|a| (a["labels"]["namespace"].as_str()).is_some_and(|n| own.contains(&n)))
        .collect())
}

/// Poll Prometheus's alerts until every one of `expected` fires; none of
/// `never` may show (pending or firing), nor any other firing alert unless
/// `allowed`. How long after `since` each fired.
fn wait_firing(
    prom: &Prometheus,
    since: Instant,
    expected: &[Alert],
    never: &[Alert],
    allowed: &[Alert],
) -> Result<Vec<Duration>, String> {
    let mut fired: Vec<Option<Duration>> = vec![None; expected.len()];
    let mut others = BTreeSet::new();
    loop {
        let alerts = own_alerts(prom)?;
        if let Some(alert) = alerts.iter().find(|a| never.iter().any(|n| n.is(a))) {
            return Err(format!("{} showed", describe(alert)));
        }
        for (at, alert) in expected.iter().enumerate() {
            if fired[at].is_none() && alerts.iter().any(|a| alert.firing(a)) {
                fired[at] = Some(since.elapsed());
            }
        }
        others.extend(
            (alerts.iter())
                .filter(|a| a["state"] == "firing")
                .filter(|a| !expected.iter().chain(allowed).any(|e| e.is(a)))
                .map(describe),
        );
        if fired.iter().all(Option::is_some) {
            check(
                others.is_empty(),
                format!("alerts that should not fire: {others:?}"),
            )?;
            return Ok(fired.into_iter().flatten().collect());
        }
        if since.elapsed() > SETTLE * 2 {
            let missing: Vec<String> = (expected.iter().zip(&fired))
                .filter(|(_, f)| f.is_none())
                .map(|(e, _)| format!("{} {:?}", e.name, e.labels))
                .collect();
            let now: Vec<String> = alerts.iter().map(describe).collect();
            return Err(format!(
                "not firing after {}s: {missing:?}; alerts now: {now:?}",
                since.elapsed().as_secs()
            ));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Poll until Prometheus has no alert of the scenario's namespaces, pending or firing; none of
/// `never` may show meanwhile. How long after `since` each of `expected` was gone.
fn wait_resolved(
    prom: &Prometheus,
    since: Instant,
    expected: &[Alert],
    never: &[Alert],
) -> Result<Vec<Duration>, String> {
    let mut gone: Vec<Option<Duration>> = vec![None; expected.len()];
    loop {
        let alerts = own_alerts(prom)?;
        if let Some(alert) = alerts.iter().find(|a| never.iter().any(|n| n.is(a))) {
            return Err(format!("{} showed", describe(alert)));
        }
        for (at, alert) in expected.iter().enumerate() {
            if gone[at].is_none() && !alerts.iter().any(|a| alert.is(a)) {
                gone[at] = Some(since.elapsed());
            }
        }
        if alerts.is_empty() {
            return Ok(gone.into_iter().flatten().collect());
        }
        if since.elapsed() > SETTLE * 2 {
            let now: Vec<String> = alerts.iter().map(describe).collect();
            return Err(format!(
                "alerts left {}s after their causes were undone: {now:?}",
                since.elapsed().as_secs()
            ));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Each alert with when it fired and when it resolved, one line each.
fn report(expected: &[Alert], fired: &[Duration], resolved: &[Duration]) {
    for ((alert, fired), resolved) in expected.iter().zip(fired).zip(resolved) {
        let labels: Vec<String> = alert
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!(
            "     {} {{{}}}: firing {:.0}s after its cause, resolved {:.0}s after it was undone",
            alert.name,
            labels.join(", "),
            fired.as_secs_f64(),
            resolved.as_secs_f64()
        );
    }
}

/// Make every Memcached and operator alert's condition true at once, wait
/// for each to fire, undo them all, wait until none is left:
/// * the authenticated cache (2 pods): memcached hung in one (SIGSTOP: its
///   TCP probe passes), and in the other 470 of its 512 connections held,
///   a client logged in evicting (16 MB, 200 sets of 1 kB a second) and
///   missing (50 gets a second, no hit);
/// * the plain cache's exporter stopped (SIGSTOP);
/// * a Memcached whose image does not exist (no pod Ready);
/// * a Memcached in a namespace whose ResourceQuota refuses its Deployment:
///   every reconcile fails;
/// * the second release scraped with a CA that did not sign its certificate.
///
/// The controller reads stats at each reconcile (every 60 s for a Ready
/// cache): the authenticated and the refused Memcacheds are annotated every
/// 2 s meanwhile, so that its numbers follow within seconds, as the 30 s
/// windows of the chart's values here need.
fn alerts_fire_and_resolve(env: &Env, helm: &Helm, prom: &Prometheus) -> Result<(), String> {
    let pods = instance_objects(env, "pods", CACHES, "secure")?;
    let [hung, busy] = pods.as_slice() else {
        return Err(format!("secure has {} pods", pods.len()));
    };
    let plain = instance_objects(env, "pods", CACHES, "plain")?;
    let plain = plain.first().ok_or("plain has no pod")?;
    let (hung_name, busy_name, plain_name) = (
        pod_name(hung).to_string(),
        pod_name(busy).to_string(),
        pod_name(plain).to_string(),
    );
    let busy_ip = pod_ip(busy)?;

    let since = Instant::now();
    let stopped = [
        Stopped::signal(container_process(env, hung, "memcached", "memcached")?)?,
        Stopped::signal(container_process(
            env,
            plain,
            "exporter",
            "memcached_expor",
        )?)?,
    ];
    let held = (0..HELD)
        .map(|_| TcpStream::connect((busy_ip.as_str(), 11211)).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let (client, touching) = (Stop::new(), Stop::new());
    let driver = drive(busy_ip.clone(), client.0.clone());
    let mut down = node::scheduling();
    down["replicas"] = json!(1);
    down["image"] = json!("memcached:1.6-missing");
    env.kubectl.apply(&memcached(CACHES, "down", down))?;
    refuse_deployments(env)?;
    let mut refused = node::scheduling();
    refused["replicas"] = json!(0);
    env.kubectl.apply(&memcached(QUOTA, "refused", refused))?;
    let toucher = touch_every(
        env.kubectl.clone(),
        &[(CACHES, "secure"), (QUOTA, "refused")],
        touching.0.clone(),
    );

    let (mon, second) = (job(RELEASE), job(SECOND));
    let expected = [
        Alert::new(
            "MemcachedNotReady",
            &[("namespace", CACHES), ("name", "down")],
        ),
        Alert::new(
            "MemcachedUnavailable",
            &[("namespace", CACHES), ("name", "down")],
        ),
        Alert::new(
            "MemcachedDegraded",
            &[
                ("namespace", CACHES),
                ("name", "secure"),
                ("reason", "PodsNotAnswering"),
            ],
        ),
        Alert::new(
            "MemcachedDegraded",
            &[
                ("namespace", QUOTA),
                ("name", "refused"),
                ("reason", "ApplyFailed"),
            ],
        ),
        Alert::new(
            "MemcachedInstanceNotAnswering",
            &[
                ("namespace", CACHES),
                ("name", "secure"),
                ("pod", &hung_name),
            ],
        ),
        Alert::new(
            "MemcachedExporterDown",
            &[
                ("namespace", CACHES),
                ("service", "plain"),
                ("pod", &plain_name),
            ],
        ),
        Alert::new(
            "MemcachedHitRatioLow",
            &[("namespace", CACHES), ("name", "secure")],
        ),
        Alert::new(
            "MemcachedEvictionsRising",
            &[("namespace", CACHES), ("name", "secure")],
        ),
        Alert::new(
            "MemcachedConnectionsNearLimit",
            &[
                ("namespace", CACHES),
                ("name", "secure"),
                ("pod", &busy_name),
            ],
        ),
        Alert::new(
            "MemcachedOperatorReconcileErrors",
            &[("namespace", OPERATORS), ("job", &mon)],
        ),
        Alert::new(
            "MemcachedOperatorNotScraped",
            &[("namespace", OPERATORS), ("job", &second)],
        ),
    ];
    let never = [
        // Never scraped is no outage to page for.
        Alert::new("MemcachedOperatorDown", &[("job", &second)]),
        Alert::new("MemcachedOperatorNotScraped", &[("job", &mon)]),
        // The healthy pods: the other of the authenticated cache, the plain one.
        Alert::new("MemcachedInstanceNotAnswering", &[("pod", &busy_name)]),
        Alert::new("MemcachedInstanceNotAnswering", &[("name", "plain")]),
    ];
    // A Memcached without a pod may be Degraded too, for reasons of its own.
    // The late one, applied as Prometheus turned Ready, may still be starting
    // on a busy node: not Ready past the rules' 10 s `for`, it pages, rightly.
    let late = [("namespace", CACHES), ("name", "late")];
    let allowed = [
        Alert::new("MemcachedDegraded", &[("name", "down")]),
        Alert::new("MemcachedNotReady", &late),
        Alert::new("MemcachedUnavailable", &late),
        Alert::new(
            "MemcachedDegraded",
            &[late[0], late[1], ("reason", "ReplicasNotReady")],
        ),
    ];
    let fired = wait_firing(prom, since, &expected, &never, &allowed);

    // Undone, whatever happened.
    let undone = Instant::now();
    drop(stopped);
    drop(held);
    drop(client);
    let driven = driver
        .join()
        .map_err(|_| "the client thread panicked".to_string())?;
    let fired = fired?;
    let (sets, misses) = driven?;
    patch(env, CACHES, "down", json!({"spec": {"image": null}}))?;
    env.kubectl
        .ok(&["delete", "resourcequota", "deployments", "-n", QUOTA])?;
    let certificate = Instant::now();
    helm.run(&[
        "upgrade",
        SECOND,
        &Helm::chart().to_string_lossy(),
        "--namespace",
        OPERATORS,
        "--reuse-values",
        "--set",
        "metrics.certSecret=mon-second-metrics-tls",
        "--wait",
        "--timeout=120s",
    ])?;
    let upgraded = certificate.elapsed();
    let resolved = wait_resolved(prom, undone, &expected, &never[..2]);
    drop(touching);
    toucher
        .join()
        .map_err(|_| "the annotating thread panicked".to_string())?;
    let resolved = resolved?;
    println!(
        "     the authenticated cache's client: {sets} sets of 1 kB, {misses} gets missed; the \
         second release upgraded with its certificate in {:.1}s",
        upgraded.as_secs_f64()
    );
    report(&expected, &fired, &resolved);
    Ok(())
}

/// The ResourceQuota of [`QUOTA`] allowing no Deployment, with the status
/// kube-controller-manager's quota controller would write (the suite runs
/// none): the API server refuses the controller's Deployment.
fn refuse_deployments(env: &Env) -> Result<(), String> {
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "deployments", "namespace": QUOTA},
        "spec": {"hard": {"count/deployments.apps": "0"}}});
    env.kubectl.apply(&quota.to_string())?;
    let status = json!({"status": {"hard": {"count/deployments.apps": "0"},
        "used": {"count/deployments.apps": "0"}}});
    env.kubectl
        .ok(&[
            "patch",
            "resourcequota",
            "deployments",
            "-n",
            QUOTA,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ])
        .map(drop)
}

/// Annotate each of `memcacheds` (namespace, name) every 2 s until `stop`:
/// each change is a reconcile, and each reconcile a stats collection.
fn touch_every(
    kubectl: Kubectl,
    memcacheds: &[(&'static str, &'static str)],
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    let memcacheds = memcacheds.to_vec();
    std::thread::spawn(move || {
        let mut round = 0;
        while !stop.load(Ordering::Relaxed) {
            round += 1;
            let note = format!("e2e.c5c3.io/monitoring-round={round}");
            for (namespace, name) in &memcacheds {
                let args = [
                    "annotate",
                    "memcached",
                    name,
                    "-n",
                    namespace,
                    "--overwrite",
                    &note,
                ];
                let _ = kubectl.ok(&args);
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    })
}

/// A client logged in to the authenticated cache at `ip`: 20,000 values of
/// 1 kB first (more than its 16 MB), then every 100 ms 20 more and a get of 5
/// keys never set, until `stop`. The sets and the gets missed.
fn drive(ip: String, stop: Arc<AtomicBool>) -> JoinHandle<Result<(u64, u64), String>> {
    std::thread::spawn(move || {
        let mut session = Memcache::login(&ip, USER, PASSWORD)?;
        let value = "v".repeat(1000);
        let (mut sets, mut misses) = (0u64, 0u64);
        let mut set = |session: &mut Memcache, count: u64| -> Result<(), String> {
            let mut text = String::new();
            for _ in 0..count {
                text.push_str(&format!("set fill-{sets} 0 0 1000 noreply\r\n{value}\r\n"));
                sets += 1;
            }
            match session.reply(&(text + "mn\r\n"))?.as_str() {
                "MN" => Ok(()),
                other => Err(format!("answer to mn: {other:?}")),
            }
        };
        for _ in 0..10 {
            set(&mut session, 2_000)?;
        }
        while !stop.load(Ordering::Relaxed) {
            set(&mut session, 20)?;
            let keys: Vec<String> = (0..5).map(|i| format!("never-{misses}-{i}")).collect();
            session.command(&format!("get {}\r\n", keys.join(" ")), "END")?;
            misses += 5;
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok((sets, misses))
    })
}

/// A flag a thread polls to stop: raised when dropped, also on an early return.
struct Stop(Arc<AtomicBool>);

impl Stop {
    fn new() -> Self {
        Stop(Arc::new(AtomicBool::new(false)))
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A process stopped with SIGSTOP: SIGCONT when dropped.
struct Stopped(u32);

impl Stopped {
    fn signal(pid: u32) -> Result<Self, String> {
        kill("-STOP", pid)?;
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = kill("-CONT", self.0);
    }
}

fn kill(signal: &str, pid: u32) -> Result<(), String> {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    check(status.success(), format!("kill {signal} {pid}: {status}"))
}

/// The process named `name` (its comm) in container `container` of `pod`,
/// on the node: the one whose cgroup is named after the container's ID.
fn container_process(env: &Env, pod: &Value, container: &str, name: &str) -> Result<u32, String> {
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let id = (statuses.iter())
        .find(|s| s["name"] == container)
        .and_then(|s| s["containerID"].as_str()?.strip_prefix("containerd://"))
        .ok_or_else(|| format!("{} has no running {container}", pod_name(pod)))?
        .to_string();
    let in_container = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(&id))
    };
    (NodeState::read(&env.cluster.workdir)?
        .processes()
        .into_iter())
    .find(|p| p.name == name && in_container(p.pid))
    .map(|p| p.pid)
    .ok_or_else(|| format!("no {name} in {container} of {}", pod_name(pod)))
}

/// The controller scaled to 0: MemcachedOperatorDown fires for its release
/// (scraped before) and not for the second one, still scraped; scaled back,
/// it resolves.
fn operator_down(env: &Env, prom: &Prometheus) -> Result<(), String> {
    let deployment = format!("deployment/{RELEASE}-memcached-operator");
    let since = Instant::now();
    env.kubectl
        .ok(&["scale", &deployment, "-n", OPERATORS, "--replicas=0"])?;
    let (mon, second) = (job(RELEASE), job(SECOND));
    let expected = [Alert::new(
        "MemcachedOperatorDown",
        &[("namespace", OPERATORS), ("job", &mon)],
    )];
    let never = [
        Alert::new("MemcachedOperatorNotScraped", &[("job", &mon)]),
        Alert::new("MemcachedOperatorDown", &[("job", &second)]),
        Alert::new("MemcachedOperatorNotScraped", &[("job", &second)]),
    ];
    let fired = wait_firing(prom, since, &expected, &never, &[])?;
    let undone = Instant::now();
    env.kubectl
        .ok(&["scale", &deployment, "-n", OPERATORS, "--replicas=2"])?;
    let resolved = wait_resolved(prom, undone, &expected, &never)?;
    report(&expected, &fired, &resolved);
    Ok(())
}

/// What monitoring costs: the scrape durations of the controller's /metrics
/// and of the exporters (Prometheus's scrape_duration_seconds, over the last
/// 2 minutes), and the series per Memcached pod and per Memcached.
fn numbers(prom: &Prometheus) -> Result<(), String> {
    let window = "2m";
    for (what, selector) in [
        (
            "the controller's /metrics (HTTPS, token reviewed)",
            format!(r#"job="{}""#, job(RELEASE)),
        ),
        (
            "the plain cache's exporter",
            format!(r#"namespace="{CACHES}", service="plain""#),
        ),
        (
            "the authenticated cache's exporters",
            format!(r#"namespace="{CACHES}", service="secure""#),
        ),
    ] {
        let scrape = |function: &str| -> Result<Vec<String>, String> {
            let expr =
                format!("{function}_over_time(scrape_duration_seconds{{{selector}}}[{window}])");
            Ok((prom.query(&expr)?.iter())
                .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
                .map(|v| format!("{:.1}", v * 1000.0))
                .collect())
        };
        let samples = prom.query(&format!("scrape_samples_scraped{{{selector}}}"))?;
        let samples: Vec<&str> = samples
            .iter()
            .filter_map(|s| s["value"][1].as_str())
            .collect();
        println!(
            "     scrape of {what}: {} ms on average, {} ms at most per target over {window}; \
             {} samples a scrape",
            scrape("avg")?.join(" / "),
            scrape("max")?.join(" / "),
            samples.join(" / ")
        );
    }
    let per_pod = prom.value(&format!(
        r#"max(count by (pod) ({{__name__=~"memcached_operator_pod_.+", namespace="{CACHES}", name="secure"}}))"#
    ))?;
    let per_memcached = prom.value(&format!(
        r#"count({{__name__=~"memcached_operator_(condition|desired_replicas|ready_replicas)", namespace="{CACHES}", name="secure"}})"#
    ))?;
    let exporter = prom.value(&format!(
        r#"max(scrape_samples_scraped{{namespace="{CACHES}", service="plain"}})"#
    ))?;
    println!(
        "     series per Memcached pod: {per_pod} from the controller, {exporter} from its exporter \
         (samples a scrape); per Memcached {per_memcached} more from the controller (conditions, \
         replica counts)"
    );
    Ok(())
}

/// A Memcached applied once Prometheus runs, and the times to its first
/// samples in Prometheus, measured meanwhile.
struct Late {
    waiting: JoinHandle<Result<(Duration, Duration), String>>,
}

impl Late {
    fn apply(env: &Env, prom: Prometheus) -> Result<Self, String> {
        env.kubectl.apply(&memcached(CACHES, "late", cache(1)))?;
        let applied = Instant::now();
        let first = move |expr: String| {
            wait_for(&format!("a sample of {expr}"), SETTLE * 3, || {
                let found = !prom.query(&expr)?.is_empty();
                found
                    .then(|| applied.elapsed())
                    .ok_or_else(|| "none yet".to_string())
            })
        };
        let waiting = std::thread::spawn(move || {
            let controller = first(format!(
                r#"memcached_operator_ready_replicas{{namespace="{CACHES}", name="late"}}"#
            ))?;
            let exporter = first(format!(
                r#"memcached_up{{namespace="{CACHES}", service="late"}}"#
            ))?;
            Ok((controller, exporter))
        });
        Ok(Late { waiting })
    }

    fn wait(self) -> Result<(Duration, Duration), String> {
        self.waiting
            .join()
            .map_err(|_| "the thread measuring the late Memcached panicked".to_string())?
    }
}
