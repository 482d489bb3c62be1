//! `make demo`, second half: the whole product on a local control plane.
//! Kubewarden 1.35 is installed from its own charts on the real node and
//! `kubectl apply -f deploy/policy.yaml` makes the policy `active` there,
//! loaded from the OCI artifact in a local registry. Every seed example goes
//! through `kubectl apply` and that PolicyServer; the accepted ones are
//! reconciled by the controller into real objects with a real memcached
//! behind every pod of the kwok nodes; a Memcached on the real node
//! (kubelet and containerd) runs in real containers; last, the audit
//! scanner reports on what exists; then the controller moves to the Helm
//! chart with monitoring on, and kube-prometheus-stack's Prometheus shows
//! the product's targets up and an alert firing. Set `DEMO_KEEP=1` to keep
//! the cluster running afterwards (Ctrl-C stops it).

use std::time::Duration;

use e2e_tests::fixtures;
use e2e_tests::harness::environment::helm::Helm;
use e2e_tests::harness::environment::prometheus::{self, describe, describe_target};
use e2e_tests::harness::{
    Env, Kubectl, condition, condition_status, environment::kubewarden_charts, environment::node,
    environment::pki, scenarios::scenario, wait_for,
};
use serde_json::json;

const NAMESPACE: &str = "demo";

fn main() {
    if let Err(e) = demo() {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

/// Print a kubectl command line, run it, and print what it printed.
fn show(kubectl: &Kubectl, args: &[&str]) -> Result<(), String> {
    println!("\n$ kubectl {}", args.join(" "));
    print!("{}", kubectl.ok(args)?);
    Ok(())
}

/// `kubectl get memcached <name> -o jsonpath={<field>}`.
fn show_field(kubectl: &Kubectl, name: &str, field: &str) -> Result<(), String> {
    let path = format!("jsonpath={{{field}}}{{\"\\n\"}}");
    show(
        kubectl,
        &["get", "memcached", name, "-n", NAMESPACE, "-o", &path],
    )
}

fn demo() -> Result<(), String> {
    let workdir = std::env::temp_dir().join("memcached-demo");
    println!(
        "== starting a local control plane (etcd, kube-apiserver, controllers, scheduler, 6 kwok nodes in 3 zones) \
         and a real node (kubelet, containerd, kube-proxy, CoreDNS)"
    );
    let Some(mut env) = Env::start_with(&workdir, true)? else {
        return Ok(());
    };
    println!(
        "   ready in {:.1}s; kubeconfig {}",
        env.cluster.start_time.as_secs_f64(),
        env.cluster.kubeconfig.display()
    );
    let kubectl = &env.kubectl;
    kubectl.apply(
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            .to_string(),
    )?;
    kubewarden(&env)?;
    // prod-cache selects dedicated cache nodes, one per replica: label five of the six.
    show(
        kubectl,
        &[
            "label",
            "nodes",
            "kwok-node-0",
            "kwok-node-1",
            "kwok-node-2",
            "kwok-node-3",
            "kwok-node-4",
            "node-role.kubernetes.io/cache=",
        ],
    )?;

    println!(
        "\n== kubectl apply of every seed example (v1beta1), through Kubewarden's PolicyServer"
    );
    // The seed examples first (they share one name, so each accepted one is
    // deleted again), then the design doc's, which stay.
    let mut examples: Vec<_> = fixtures()
        .into_iter()
        .filter(|f| f.name.ends_with("-v1beta1"))
        .filter(|f| f.name.starts_with("seed-") || f.name.starts_with("design-"))
        .collect();
    examples.sort_by_key(|f| f.name.starts_with("design-"));
    for fixture in examples {
        let object = &fixture.review["request"]["object"];
        let mut object = object.clone();
        object["metadata"]["namespace"] = json!(NAMESPACE);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let outcome = kubectl.run(&["apply", "-f", "-"], Some(&object.to_string()));
        println!("\n-- {}", fixture.name);
        print!("{}{}", outcome.stdout, outcome.stderr);
        if outcome.success && fixture.name.starts_with("seed-") {
            let deleted = kubectl.run(&["delete", "memcached", &name, "-n", NAMESPACE], None);
            print!("{}{}", deleted.stdout, deleted.stderr);
        }
    }

    println!("\n== defaults the policy filled in");
    show_field(kubectl, "basic-cache", ".spec")?;

    println!(
        "\n== waiting for the controller (examples whose Secrets do not exist stay Degraded, \
         and so does legacy-cache, whose spec it refuses too)"
    );
    let _ = wait_for("the examples to settle", Duration::from_secs(60), || {
        let list = kubectl.get(&["memcached", "-n", NAMESPACE])?;
        let settled = list["items"].as_array().into_iter().flatten().all(|mc| {
            condition_status(mc, "Ready") == Some("True")
                || condition(mc, "Degraded").is_some_and(|c| {
                    c["reason"] == "SecretNotFound" || c["reason"] == "InvalidSpec"
                })
        });
        if settled {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    show(kubectl, &["get", "memcached", "-n", NAMESPACE])?;
    show(
        kubectl,
        &[
            "get",
            "deployments,services,poddisruptionbudgets,horizontalpodautoscalers,networkpolicies,pods",
            "-n",
            NAMESPACE,
        ],
    )?;
    println!("\n== live status, read from memcached's stats");
    show_field(kubectl, "basic-cache", ".status")?;

    println!(
        "\n== secure-cache waits for its Secrets; creating them (TLS from a fresh CA, -Y auth file)"
    );
    show(
        kubectl,
        &[
            "get",
            "memcached",
            "secure-cache",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={range .status.conditions[?(@.type==\"Degraded\")]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}",
        ],
    )?;
    let tls = pki::issue(&["secure-cache.demo.svc"])?;
    let secrets = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": "memcached-tls", "namespace": NAMESPACE},
         "stringData": {"tls.crt": tls.cert, "tls.key": tls.key, "ca.crt": tls.ca}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "memcached-sasl-credentials", "namespace": NAMESPACE},
         "stringData": {"auth": "app:demo-password\n"}},
    ]});
    print!("{}", kubectl.apply(&secrets.to_string())?);
    let _ = wait_for("secure-cache Ready", Duration::from_secs(60), || {
        let mc = kubectl.get(&["memcached", "secure-cache", "-n", NAMESPACE])?;
        if mc["status"]["readyReplicas"] == 3 && mc["status"]["memcachedVersion"].is_string() {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    println!("\n== secure-cache Ready: its stats are read over TLS, authenticated");
    show(
        kubectl,
        &["get", "memcached", "secure-cache", "-n", NAMESPACE],
    )?;

    real_node(&env)?;
    audit(&env)?;
    monitoring(&mut env)?;

    if std::env::var_os("DEMO_KEEP").is_some() {
        println!(
            "\ncluster kept running: KUBECONFIG={} {} get memcached -A   (Ctrl-C stops it)",
            env.cluster.kubeconfig.display(),
            env.binaries.kubectl.display()
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    Ok(())
}

/// Kubewarden from its own charts takes over admission from the suite's
/// policy-server; a Memcached the policy refuses is created just before,
/// for the audit to find.
fn kubewarden(env: &Env) -> Result<(), String> {
    let kubectl = &env.kubectl;
    env.unregister(&env.protect)?;
    env.wait_for_no_protection()?;
    println!("\n== before any policy: a Memcached the policy would refuse (capitals in its image)");
    print!(
        "{}",
        kubectl.apply(&scenario::memcached(
            NAMESPACE,
            "legacy-cache",
            json!({"image": "Memcached:1.6", "replicas": 0})
        ))?
    );
    println!(
        "\n== Kubewarden {} from its own charts (kubewarden-crds, kubewarden-controller, \
         kubewarden-defaults) on the real node; kubectl apply -f deploy/policy.yaml \
         deploy/policy-audit.yaml",
        kubewarden_charts::VERSION
    );
    let took = env.kubewarden_takes_over()?;
    println!(
        "   installed in {:.1}s; both policies active {:.1}s after kubectl apply",
        took.installed.as_secs_f64(),
        took.active.as_secs_f64()
    );
    show(kubectl, &["get", "clusteradmissionpolicies"])?;
    show(kubectl, &["get", "pods", "-n", "kubewarden", "-o", "wide"])
}

/// The audit scanner, run now as its CronJob would, and its reports.
fn audit(env: &Env) -> Result<(), String> {
    println!("\n== the audit scanner (a Job from its CronJob) reports on every Memcached");
    let took = kubewarden_charts::audit(&env.kubectl, "audit-demo")?;
    println!("   audit done in {:.1}s", took.as_secs_f64());
    show(
        &env.kubectl,
        &["get", "reports.openreports.io", "-n", NAMESPACE],
    )?;
    show(
        &env.kubectl,
        &[
            "get",
            "reports.openreports.io",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={range .items[?(@.summary.fail>0)]}{.scope.name}: {.results[*].message}{\"\\n\"}{end}",
        ],
    )
}

/// A Memcached steered to the real node: its pods in real containers, and
/// memcached's own log.
fn real_node(env: &Env) -> Result<(), String> {
    let kubectl = &env.kubectl;
    println!("\n== the real node beside the kwok nodes");
    show(kubectl, &["get", "nodes", "-o", "wide"])?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    // -vv: memcached logs its listener and every command (the controller's stats reads).
    spec["memcached"] = json!({"verbosity": 2});
    println!(
        "\n== node-cache: 3 replicas on the real node, with warm restarts as the policy defaults them"
    );
    print!(
        "{}",
        kubectl.apply(&scenario::memcached_as_written(
            NAMESPACE,
            "node-cache",
            spec
        ))?
    );
    scenario::wait_ready(env, NAMESPACE, "node-cache", 3)?;
    show_field(kubectl, "node-cache", ".spec.warmRestart")?;
    let selector = "app.kubernetes.io/instance=node-cache";
    show(
        kubectl,
        &["get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "wide"],
    )?;
    let pods = kubectl.get(&["pods", "-n", NAMESPACE, "-l", selector])?;
    let first = pods["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let logs = kubectl.ok(&["logs", "-n", NAMESPACE, &first, "-c", "memcached"])?;
    // -vv starts with one line per slab class; what follows is the server.
    println!(
        "\n$ kubectl logs -n {NAMESPACE} {first} -c memcached | grep -v '^slab class' | head -12"
    );
    for line in logs
        .lines()
        .filter(|l| !l.starts_with("slab class"))
        .take(12)
    {
        println!("{line}");
    }
    Ok(())
}

/// Prometheus Operator and Prometheus as kube-prometheus-stack runs them; the
/// controller handed over to the Helm chart with its ServiceMonitor and
/// PrometheusRule, and every Memcached's ServiceMonitor, labelled for that
/// Prometheus by one value, `prometheusLabels` (alerts' `for` shortened to
/// 10 s by the chart's values); a monitored Memcached; Prometheus's targets
/// of the product, and an alert firing for a Memcached whose image does not exist.
fn monitoring(env: &mut Env) -> Result<(), String> {
    const RELEASE: &str = "demo";
    const OPERATORS: &str = "memcached-operator-system";
    println!(
        "\n== monitoring: Prometheus Operator and Prometheus in namespace {}, as \
         kube-prometheus-stack has them; the controller now from the Helm chart with \
         metrics.serviceMonitor and metrics.prometheusRule on, prometheusLabels \
         release=kube-prometheus-stack",
        prometheus::NAMESPACE
    );
    prometheus::install_crds(env)?;
    let prom = prometheus::install_stack(env)?;
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let helm = Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir);
    let values = env.cluster.workdir.join("demo-monitoring-values.json");
    std::fs::write(&values, prometheus::chart_values().to_string())
        .map_err(|e| format!("{}: {e}", values.display()))?;
    helm.install(RELEASE, OPERATORS, &["-f", &values.to_string_lossy()])?;
    let kubectl = &env.kubectl;
    let mut spec = node::scheduling();
    spec["monitoring"] = prometheus::monitoring();
    print!(
        "{}",
        kubectl.apply(&scenario::memcached(
            NAMESPACE,
            "watched-cache",
            spec.clone()
        ))?
    );
    scenario::wait_ready(env, NAMESPACE, "watched-cache", 1)?;
    let job = format!("{RELEASE}-memcached-operator-metrics");
    let targets = wait_for(
        "the product's targets up in Prometheus",
        Duration::from_secs(120),
        || {
            let targets: Vec<_> = (prom.targets()?.into_iter())
                .filter(|t| {
                    t["labels"]["job"] == job.as_str() || t["labels"]["job"] == "watched-cache"
                })
                .collect();
            let up = |job: &str| {
                targets
                    .iter()
                    .any(|t| t["labels"]["job"] == job && t["health"] == "up")
            };
            let all_up = targets.iter().all(|t| t["health"] == "up");
            (up(&job) && up("watched-cache") && all_up)
                .then(|| targets.clone())
                .ok_or_else(|| format!("{targets:?}"))
        },
    )?;
    println!("\n$ curl http://prometheus:9090/api/v1/targets   (the product's)");
    for target in &targets {
        println!("{}", describe_target(target));
    }
    println!(
        "\n== broken-cache: an image that does not exist; MemcachedUnavailable fires (the chart's rule, on the \
         controller's own numbers)"
    );
    spec["image"] = json!("memcached:no-such-tag");
    print!(
        "{}",
        kubectl.apply(&scenario::memcached(NAMESPACE, "broken-cache", spec))?
    );
    let applied = std::time::Instant::now();
    let alert = wait_for(
        "MemcachedUnavailable firing",
        Duration::from_secs(120),
        || {
            (prom.alerts()?.into_iter())
                .find(|a| {
                    prometheus::firing(
                        a,
                        "MemcachedUnavailable",
                        &[("namespace", NAMESPACE), ("name", "broken-cache")],
                    )
                })
                .ok_or_else(|| "not yet".to_string())
        },
    )?;
    println!("\n$ curl http://prometheus:9090/api/v1/alerts");
    println!(
        "{}   ({:.0}s after kubectl apply)",
        describe(&alert),
        applied.elapsed().as_secs_f64()
    );
    Ok(())
}
