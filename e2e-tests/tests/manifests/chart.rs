//! The Helm chart installed for real: `helm install` on the e2e control
//! plane, whose pod runtime runs the controller binary behind every pod of
//! the operator's image with the pod's args and env, authenticated as the
//! pod's ServiceAccount. So the controller runs with exactly the chart's
//! RBAC and rendered flags; lint and server dry-run cannot see either.
//!
//! One release at a time, each in its own namespace and uninstalled before
//! the next: only one controller reconciles a given Memcached.

use std::time::{Duration, Instant};

use e2e_tests::cluster::helm::Helm;
use e2e_tests::cluster::scenario::{check, ensure_namespace, memcached, wait_ready};
use e2e_tests::cluster::{Env, condition_status, wait_for};
use serde_json::{Value, json};

/// The CRD the chart manages with `crds.managed` (`ci/all-values.yaml`).
const CRD: &str = "customresourcedefinition/memcacheds.memcached.c5c3.io";

/// One install of the chart.
pub struct Release<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// helm values arguments.
    pub args: &'a [&'a str],
    /// Where its Memcached goes (a watched namespace when it watches some).
    pub cache_namespace: &'a str,
    /// A namespace it does not watch: a Memcached there stays untouched.
    pub unwatched: Option<&'a str>,
    /// The namespaces its Memcached NetworkPolicies admit to the exporter's port.
    pub metrics_namespaces: &'a [&'a str],
    /// The controller's log format after every flag: "json" or "text".
    pub log_format: &'a str,
    /// Adopt the CRD as the chart README says before installing (`crds.managed`).
    pub adopts_crd: bool,
}

/// Install `release`, check its controller started and reconciles a
/// Memcached whose NetworkPolicy admits the controller's pods, then
/// uninstall it.
pub fn runs(env: &mut Env, release: &Release) -> Result<(), String> {
    // The suite's own controller leads another Lease: it would reconcile too.
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let helm = Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir);
    for ns in std::iter::once(release.cache_namespace).chain(release.unwatched) {
        ensure_namespace(env, ns)?;
    }
    if let Some(ns) = release.unwatched {
        env.kubectl.apply(&memcached(ns, "untouched", json!({})))?;
    }
    if release.adopts_crd {
        adopt_crd(env, release)?;
    }
    let started = Instant::now();
    helm.install(release.name, release.namespace, release.args)?;
    let installed = started.elapsed();
    let pods = started_controllers(env, release)?;

    let ns = release.cache_namespace;
    let spec = json!({
        "replicas": 1,
        "monitoring": {"enabled": true},
        "networkPolicy": {
            "enabled": true,
            "allowedSources": [{"podSelector": {"matchLabels": {"app": "client"}}}],
        },
    });
    let started = Instant::now();
    env.kubectl.apply(&memcached(ns, "cache", spec))?;
    wait_ready(env, ns, "cache", 1)?;
    env.kubectl.ok(&["get", "deployment", "cache", "-n", ns])?;
    let reconciled = started.elapsed();
    admits_the_controller(env, release, &pods)?;
    if let Some(unwatched) = release.unwatched {
        untouched(env, unwatched)?;
    }
    println!(
        "     {} controller pod(s) Ready {:.1}s after helm install; {ns}/cache Ready {:.1}s after apply",
        pods.len(),
        installed.as_secs_f64(),
        reconciled.as_secs_f64()
    );

    helm.uninstall(release.name, release.namespace)?;
    wait_for(
        "the controller pods to stop",
        Duration::from_secs(60),
        || {
            let left = env
                .kubectl
                .ok(&["get", "pods", "-n", release.namespace, "-o", "name"])?;
            check(left.trim().is_empty(), format!("pods left: {left}"))
        },
    )?;
    if release.adopts_crd {
        // crds.keep: uninstalling must not delete the CRD (and every Memcached).
        env.kubectl.ok(&["get", CRD])?;
    }
    Ok(())
}

/// Hand the existing CRD to the release, as the chart README's upgrade
/// section tells existing installs to.
fn adopt_crd(env: &Env, release: &Release) -> Result<(), String> {
    env.kubectl.ok(&[
        "label",
        CRD,
        "--overwrite",
        "app.kubernetes.io/managed-by=Helm",
    ])?;
    env.kubectl.ok(&[
        "annotate",
        CRD,
        "--overwrite",
        &format!("meta.helm.sh/release-name={}", release.name),
        &format!("meta.helm.sh/release-namespace={}", release.namespace),
    ])?;
    Ok(())
}

/// The release's controller pods: as many as the Deployment wants, each
/// Ready (its readiness probe answers: the controller serves and its watches
/// synced), none of whose processes exited with an error, each logging in
/// `log_format` (the last `--log-format` wins). The pods, as JSON.
fn started_controllers(env: &Env, release: &Release) -> Result<Vec<Value>, String> {
    let deployments = env.kubectl.get(&["deployments", "-n", release.namespace])?;
    let deployment = deployments["items"]
        .as_array()
        .and_then(|items| items.first())
        .ok_or_else(|| format!("no Deployment in {}", release.namespace))?;
    let selector = selector_string(&deployment["spec"]["selector"]["matchLabels"]);
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1) as usize;
    let pods = env
        .kubectl
        .get(&["pods", "-n", release.namespace, "-l", &selector])?;
    let pods: Vec<Value> = pods["items"].as_array().cloned().unwrap_or_default();
    check(
        pods.len() == replicas
            && pods
                .iter()
                .all(|p| condition_status(p, "Ready") == Some("True")),
        format!(
            "{} of {replicas} controller pods, not all Ready",
            pods.len()
        ),
    )?;
    for pod in &pods {
        let log = controller_log(env, pod)?;
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(error) = log.lines().find(|l| l.starts_with("Error:")) {
            return Err(format!("controller {name} exited: {error}"));
        }
        let first = log
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        check(
            first.starts_with('{') == (release.log_format == "json"),
            format!(
                "controller {name} does not log {}: {first}",
                release.log_format
            ),
        )?;
    }
    Ok(pods)
}

/// What the pod runtime captured of a controller pod's output.
fn controller_log(env: &Env, pod: &Value) -> Result<String, String> {
    let meta = &pod["metadata"];
    let uid = meta["uid"].as_str().unwrap_or_default();
    let path = env
        .cluster
        .workdir
        .join("pods")
        .join(meta["namespace"].as_str().unwrap_or_default())
        .join(format!(
            "{}-{}",
            meta["name"].as_str().unwrap_or_default(),
            uid.get(..8).unwrap_or(uid)
        ))
        .join("controller.log");
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `k=v,...` of a matchLabels object.
fn selector_string(labels: &Value) -> String {
    labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The Memcached's NetworkPolicy admits, on memcached's port, the release's
/// namespace and labels every controller pod really carries (nameOverride
/// changes them), and on the exporter's port the configured namespaces.
fn admits_the_controller(env: &Env, release: &Release, pods: &[Value]) -> Result<(), String> {
    let policy = env
        .kubectl
        .get(&["networkpolicy", "cache", "-n", release.cache_namespace])?;
    let ingress = policy["spec"]["ingress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let namespace_of = |peer: &Value| {
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            .as_str()
            .map(str::to_string)
    };
    let peers = |rule: Option<&Value>| -> Vec<Value> {
        rule.and_then(|r| r["from"].as_array().cloned())
            .unwrap_or_default()
    };
    let operator = peers(ingress.first())
        .into_iter()
        .find(|p| namespace_of(p).as_deref() == Some(release.namespace))
        .ok_or_else(|| format!("no peer for namespace {}: {ingress:?}", release.namespace))?;
    let wanted = operator["podSelector"]["matchLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    check(
        !wanted.is_empty(),
        "the operator peer selects every pod of its namespace",
    )?;
    for pod in pods {
        let labels = &pod["metadata"]["labels"];
        check(
            wanted.iter().all(|(k, v)| &labels[k] == v),
            format!(
                "the NetworkPolicy admits {wanted:?}, pod {} has {labels}",
                pod["metadata"]["name"]
            ),
        )?;
    }
    let scrapers: Vec<String> = peers(ingress.get(1))
        .iter()
        .filter_map(namespace_of)
        .collect();
    check(
        scrapers == release.metrics_namespaces,
        format!(
            "metrics port admits {scrapers:?}, not {:?}",
            release.metrics_namespaces
        ),
    )?;
    println!(
        "     NetworkPolicy admits the controller pods by {}",
        selector_string(&Value::Object(wanted))
    );
    Ok(())
}

/// A Memcached in a namespace the controller does not watch: no status, no
/// objects made for it.
fn untouched(env: &Env, namespace: &str) -> Result<(), String> {
    let mc = env
        .kubectl
        .get(&["memcached", "untouched", "-n", namespace])?;
    check(
        mc["status"].is_null() && mc["metadata"]["finalizers"].is_null(),
        format!("{namespace}/untouched was reconciled: {}", mc["status"]),
    )?;
    let objects = env.kubectl.ok(&[
        "get",
        "deployments,statefulsets,services,networkpolicies",
        "-n",
        namespace,
        "-o",
        "name",
    ])?;
    check(
        objects.trim().is_empty(),
        format!("objects in the unwatched namespace {namespace}: {objects}"),
    )?;
    println!("     {namespace}/untouched (not watched): no status, no objects");
    Ok(())
}
