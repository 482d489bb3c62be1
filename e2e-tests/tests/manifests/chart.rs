//! The Helm chart installed for real: `helm install` on the e2e control
//! plane, whose pod runtime runs the controller binary behind every pod of
//! the operator's image with the pod's args and env, authenticated as the
//! pod's ServiceAccount. So the controller runs with exactly the chart's
//! RBAC and rendered flags; lint and server dry-run cannot see either.
//!
//! One release at a time, each in its own namespace and uninstalled before
//! the next: only one controller reconciles a given Memcached (two at once
//! only watching different namespaces, in [`two_releases`]). After each
//! uninstall nothing the release made is left: the controller's Lease and
//! hash-key Secret are owned by its ServiceAccount and go with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use e2e_tests::harness::environment::helm::Helm;
use e2e_tests::harness::scenarios::scenario::{check, ensure_namespace, memcached, wait_ready};
use e2e_tests::harness::{Env, condition_status, wait_for};
use e2e_tests::workspace_root;
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
        // The CRD exists and is not the release's: the chart says what to do
        // (not Helm's bare "invalid ownership metadata"), then it is done.
        let refused = helm
            .install(release.name, release.namespace, release.args)
            .err()
            .unwrap_or_default();
        check(
            refused.contains("exists and is not this release's")
                && refused.contains(&format!(
                    "meta.helm.sh/release-name={} meta.helm.sh/release-namespace={}",
                    release.name, release.namespace
                )),
            format!("crds.managed over an unowned CRD: {refused}"),
        )?;
        println!(
            "     crds.managed over the existing CRD: refused, naming the commands that hand it over"
        );
        adopt_crd(env, release)?;
    }
    let started = Instant::now();
    helm.install(release.name, release.namespace, release.args)?;
    let installed = started.elapsed();
    let pods = started_controllers(env, release)?;
    owned_by_the_release(env, release.namespace, &pods)?;

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
    nothing_left(env, release.name, release.namespace)?;
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
        if let Some(error) = exit_error(&log) {
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

/// The line a controller that stopped on an error printed last
/// (`controller/src/main.rs`: `error: <what is wrong>`).
pub fn exit_error(log: &str) -> Option<&str> {
    log.lines().find(|l| l.starts_with("error:"))
}

/// [`exit_error`] finds what a controller that cannot start really prints:
/// the controller binary started with a namespace it may not use exits 1,
/// and its output is read as a pod's log is.
pub fn exit_error_is_seen(env: &Env) -> Result<(), String> {
    let address = |what: &str| {
        e2e_tests::harness::clients::http::free_address().map(|a| format!("--{what}-address={a}"))
    };
    let out = Command::new(&env.binaries.controller)
        .args([
            "run",
            "--lease-namespace=no-such-namespace",
            "--metrics-secure=false",
            &address("metrics")?,
            &address("health")?,
        ])
        .env("KUBECONFIG", &env.operator_kubeconfig)
        .env_remove("POD_NAMESPACE")
        .output()
        .map_err(|e| format!("{}: {e}", env.binaries.controller.display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let error = exit_error(&log);
    check(
        out.status.code() == Some(1) && error.is_some(),
        format!(
            "a controller that cannot start: exit {:?}, log:\n{log}",
            out.status.code()
        ),
    )?;
    println!(
        "     a controller that cannot start is seen: {}",
        error.unwrap_or_default()
    );
    Ok(())
}

/// The ServiceAccount of the release's controller pods.
fn service_account(env: &Env, namespace: &str, pod: &Value) -> Result<Value, String> {
    let name = pod["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or("default");
    env.kubectl.get(&["serviceaccount", name, "-n", namespace])
}

/// The controller's own objects (its hash-key Secret, its Lease when it
/// elects a leader) are owned by its ServiceAccount, which the release owns:
/// uninstalling it deletes them too.
fn owned_by_the_release(env: &Env, namespace: &str, pods: &[Value]) -> Result<(), String> {
    let Some(pod) = pods.first() else {
        return Ok(());
    };
    let account = service_account(env, namespace, pod)?;
    let args = pod["spec"]["containers"][0]["args"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let flag = |name: &str| {
        args.iter()
            .filter_map(Value::as_str)
            .find_map(|a| a.strip_prefix(&format!("--{name}=")).map(str::to_string))
    };
    let mut objects = vec![(
        "secret",
        flag("hash-key-secret").ok_or("the controller gets no --hash-key-secret")?,
    )];
    if args.iter().any(|a| a == "--leader-election") {
        objects.push(("lease", flag("lease-name").ok_or("no --lease-name")?));
    }
    for (kind, name) in &objects {
        let object = wait_for(
            &format!("{kind} {namespace}/{name} owned by the ServiceAccount"),
            Duration::from_secs(30),
            || {
                let object = env.kubectl.get(&[kind, name, "-n", namespace])?;
                let owners = &object["metadata"]["ownerReferences"];
                let owned = owners.as_array().is_some_and(|o| {
                    o.iter().any(|o| {
                        o["kind"] == "ServiceAccount" && o["uid"] == account["metadata"]["uid"]
                    })
                });
                owned
                    .then_some(object.clone())
                    .ok_or(format!("owners {owners}"))
            },
        )?;
        drop(object);
    }
    println!(
        "     {} owned by ServiceAccount {}",
        objects
            .iter()
            .map(|(kind, name)| format!("{kind} {name}"))
            .collect::<Vec<_>>()
            .join(" and "),
        account["metadata"]["name"].as_str().unwrap_or_default()
    );
    Ok(())
}

/// After `helm uninstall`: nothing of the release is left, in its namespace
/// (no pod, Lease, Secret, ServiceAccount, Role, ConfigMap, Service; only
/// what Kubernetes puts in every namespace) or cluster-wide (labelled with
/// its instance). The garbage collector deletes the Lease and the Secret
/// once their owner, the ServiceAccount, is gone.
pub fn nothing_left(env: &Env, release: &str, namespace: &str) -> Result<(), String> {
    let started = Instant::now();
    wait_for(
        &format!("nothing of release {release} left"),
        Duration::from_secs(90),
        || {
            let names = env.kubectl.ok(&[
                "get",
                "pods,leases,secrets,serviceaccounts,configmaps,services,deployments,\
                 replicasets,poddisruptionbudgets,roles,rolebindings",
                "-n",
                namespace,
                "-o",
                "name",
            ])?;
            let cluster = env.kubectl.ok(&[
                "get",
                "clusterroles,clusterrolebindings,validatingadmissionpolicies,\
                 validatingadmissionpolicybindings",
                "-l",
                &format!("app.kubernetes.io/instance={release}"),
                "-o",
                "name",
            ])?;
            let left: Vec<&str> = names
                .lines()
                .chain(cluster.lines())
                .filter(|l| {
                    !l.is_empty()
                        && *l != "serviceaccount/default"
                        && *l != "configmap/kube-root-ca.crt"
                })
                .collect();
            check(left.is_empty(), format!("left: {}", left.join(", ")))
        },
    )?;
    println!(
        "     helm uninstall {release}: nothing left in {namespace} or cluster-wide {:.1}s later",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The Lease `name` in `namespace`: who holds it.
fn lease_holder(env: &Env, namespace: &str, name: &str) -> Result<String, String> {
    let lease = env.kubectl.get(&["lease", name, "-n", namespace])?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("the Lease {namespace}/{name} has no holder"))
}

/// Two releases in one namespace, with default values apart from the
/// namespace each watches: each holds its own Lease (the release's full
/// name) from one of its pods and reconciles its Memcached; each has its own
/// hash-key Secret. (With one Lease name for both, the second release's
/// pods stand by for ever and its Memcached is never reconciled.) Then one
/// is uninstalled: its Lease and Secret go, the other's stay and it still
/// reconciles; then the other, and the namespace is empty.
pub fn two_releases(env: &mut Env) -> Result<(), String> {
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let helm = Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir);
    let namespace = "chart-pair";
    let releases = [("pair-a", "chart-pair-a"), ("pair-b", "chart-pair-b")];
    for (release, watched) in releases {
        ensure_namespace(env, watched)?;
        helm.install(
            release,
            namespace,
            &[
                "--set",
                &format!("watchNamespaces={{{watched}}},replicaCount=1"),
            ],
        )?;
    }
    // What a user sees first: each release's Memcached reconciled (with one
    // Lease for both, the second's never is).
    for (_, watched) in releases {
        env.kubectl
            .apply(&memcached(watched, "cache", json!({"replicas": 1})))?;
    }
    for (_, watched) in releases {
        wait_ready(env, watched, "cache", 1)?;
    }
    for (release, watched) in releases {
        let lease = format!("{release}-memcached-operator");
        let holder = lease_holder(env, namespace, &lease)?;
        check(
            holder.starts_with(&format!("{release}-memcached-operator-")),
            format!("the Lease {lease} is held by {holder}, not a pod of {release}"),
        )?;
        env.kubectl.ok(&[
            "get",
            "secret",
            &format!("{release}-memcached-operator-hash-key"),
            "-n",
            namespace,
        ])?;
        println!("     {release}: {holder} holds Lease {lease}; {watched}/cache Ready");
    }
    let (gone, kept) = (releases[0], releases[1]);
    helm.uninstall(gone.0, namespace)?;
    wait_for(
        &format!("{}'s Lease and Secret to go", gone.0),
        Duration::from_secs(60),
        || {
            let left = env
                .kubectl
                .ok(&["get", "leases,secrets", "-n", namespace, "-o", "name"])?;
            check(
                !left.contains(gone.0) && left.contains(kept.0),
                format!("left: {left}"),
            )
        },
    )?;
    env.kubectl
        .apply(&memcached(kept.1, "cache", json!({"replicas": 2})))?;
    wait_ready(env, kept.1, "cache", 2)?;
    println!(
        "     {} uninstalled: its Lease and Secret went, {} kept its own and reconciles",
        gone.0, kept.0
    );
    for (_, watched) in releases {
        env.kubectl
            .ok(&["delete", "memcached", "cache", "-n", watched, "--wait=true"])?;
    }
    helm.uninstall(kept.0, namespace)?;
    nothing_left(env, kept.0, namespace)
}

/// The CRD helm installed from the chart's crds/ (Helm owns its fields,
/// field manager `helm`), then a newer chart's CRD applied over it with the
/// commands the chart documents: the `helm show crds | kubectl apply` line
/// of the release's NOTES (run as printed, against a newer chart pushed to
/// the suite's registry with `deploy/helm/push-chart.sh`), and the `kubectl
/// apply` line of the chart README on a source tree holding the newer CRD.
/// Each takes the fields over; without `--force-conflicts` kubectl refuses
/// them (a conflict with `helm`). The suite's CRD is back at the end.
pub fn crd_upgrade(env: &mut Env) -> Result<(), String> {
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let helm = Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir);
    let (release, namespace) = ("crd-upgrade", "chart-crd-upgrade");
    let work = env.cluster.workdir.join("crd-upgrade");
    let _ = std::fs::remove_dir_all(&work);
    // The next chart: its CRD changed in .spec.versions (every version's description).
    let next = work.join("next/memcached-operator");
    copy_dereferenced(&Helm::chart(), &next)?;
    let crd_path =
        next.join("charts/memcached-operator-crds/crds/memcacheds.memcached.c5c3.io.yaml");
    let crd = std::fs::read_to_string(&crd_path).map_err(|e| e.to_string())?;
    let chart_yaml =
        std::fs::read_to_string(Helm::chart().join("Chart.yaml")).map_err(|e| e.to_string())?;
    let version = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("version:"))
        .map(|v| v.trim().to_string())
        .ok_or("Chart.yaml has no version")?;
    let next_version = format!("{version}-next");
    let (from, to) = (
        "A Memcached cluster: a Deployment",
        "A Memcached cluster (the next chart): a Deployment",
    );
    check(
        crd.matches(from).count() >= 2,
        "the CRD's description changed",
    )?;
    let changed = crd.replace(from, to);
    std::fs::write(&crd_path, &changed).map_err(|e| e.to_string())?;
    // The next chart's version (its bundled CRD subchart keeps its own).
    let next_chart = next.join("Chart.yaml");
    std::fs::write(
        &next_chart,
        chart_yaml.replacen(
            &format!("\nversion: {version}\n"),
            &format!("\nversion: {next_version}\n"),
            1,
        ),
    )
    .map_err(|e| e.to_string())?;
    let registry = format!("oci://{}/charts", env.registry.address());
    let pushed = helm.push_chart(&next, &registry, None)?;
    println!("     the next chart (its CRD changed): {pushed}");

    // The command of NOTES.txt.
    let notes = fresh_helm_crd(env, &helm, release, namespace)?;
    let printed = notes
        .lines()
        .map(str::trim)
        .find(|l| l.contains("kubectl apply --server-side"))
        .ok_or_else(|| format!("NOTES print no kubectl apply --server-side:\n{notes}"))?
        .to_string();
    check(
        printed.contains("--force-conflicts") && !printed.contains('<'),
        format!("NOTES print: {printed}"),
    )?;
    refused_without_force(env, &changed)?;
    let line = printed
        .replace("oci://ghcr.io/c5c3/charts", &registry)
        .replace(
            &format!("--version {version}"),
            &format!("--version {next_version} --plain-http"),
        );
    check(
        line != printed,
        format!("no chart reference to replace in {printed}"),
    )?;
    run_documented(env, &helm, &work, &line)?;
    has_changed_crd(env, to)?;
    println!(
        "     NOTES' command, run against the next chart: the CRD is upgraded\n       $ {printed}"
    );
    helm.uninstall(release, namespace)?;

    // The command of the chart README, in a source tree with the next CRD.
    fresh_helm_crd(env, &helm, release, namespace)?;
    let readme =
        std::fs::read_to_string(Helm::chart().join("README.md")).map_err(|e| e.to_string())?;
    let section = readme
        .split("## Upgrading the CRD")
        .nth(1)
        .ok_or("the chart README has no \"Upgrading the CRD\" section")?;
    let documented = section
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("kubectl apply --server-side") && l.contains("deploy/"))
        .ok_or("the chart README documents no kubectl apply of deploy/'s CRD")?
        .to_string();
    let tree = work.join("source");
    let file = documented
        .split_whitespace()
        .find(|w| w.starts_with("deploy/"))
        .unwrap_or_default();
    std::fs::create_dir_all(tree.join(file).parent().unwrap_or(&tree))
        .map_err(|e| e.to_string())?;
    std::fs::write(tree.join(file), &changed).map_err(|e| e.to_string())?;
    run_documented(env, &helm, &tree, &documented)?;
    has_changed_crd(env, to)?;
    println!(
        "     the chart README's command, on a source tree: the CRD is upgraded\n       $ {documented}"
    );
    helm.uninstall(release, namespace)?;
    nothing_left(env, release, namespace)?;

    // The suite's CRD again.
    let original = workspace_root().join("deploy/crd.yaml");
    env.kubectl.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &original.to_string_lossy(),
    ])?;
    env.kubectl.wait_established("memcacheds.memcached.c5c3.io")
}

/// Delete the CRD (and so every Memcached), then `helm install` the chart
/// with no controller pod: Helm creates the CRD from crds/ and owns its
/// fields. The release's NOTES.
fn fresh_helm_crd(
    env: &Env,
    helm: &Helm,
    release: &str,
    namespace: &str,
) -> Result<String, String> {
    env.kubectl.ok(&[
        "delete",
        "crd",
        "memcacheds.memcached.c5c3.io",
        "--ignore-not-found",
        "--wait=true",
    ])?;
    let out = helm.install(release, namespace, &["--set", "replicaCount=0"])?;
    env.kubectl
        .wait_established("memcacheds.memcached.c5c3.io")?;
    let crd = env.kubectl.get(&[
        "crd",
        "memcacheds.memcached.c5c3.io",
        "--show-managed-fields",
    ])?;
    let managers: Vec<&str> = crd["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    check(
        managers.contains(&"helm"),
        format!("the CRD's field managers are {managers:?}, not helm"),
    )?;
    Ok(out
        .split_once("NOTES:")
        .map(|(_, notes)| notes.to_string())
        .unwrap_or(out))
}

/// What the chart used to document, `kubectl apply --server-side` without
/// `--force-conflicts`, is refused over the CRD Helm created.
fn refused_without_force(env: &Env, crd: &str) -> Result<(), String> {
    let outcome = env
        .kubectl
        .run(&["apply", "--server-side", "-f", "-"], Some(crd));
    check(
        !outcome.success
            && outcome.stderr.contains("conflict")
            && outcome.stderr.contains("\"helm\""),
        format!(
            "kubectl apply --server-side without --force-conflicts: {}{}",
            outcome.stdout, outcome.stderr
        ),
    )?;
    println!("     without --force-conflicts: refused, a conflict with the field manager \"helm\"");
    Ok(())
}

/// A documented command line, run by bash in `dir` as printed, with helm and
/// kubectl (the suite's) on PATH, talking to the suite's API server.
fn run_documented(env: &Env, helm: &Helm, dir: &Path, line: &str) -> Result<String, String> {
    let mut path = vec![
        env.binaries
            .kubectl
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        helm.bin()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    ];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = helm
        .environment("bash")
        .args(["-o", "pipefail", "-c", line])
        .current_dir(dir)
        .env(
            "PATH",
            std::env::join_paths(path).map_err(|e| e.to_string())?,
        )
        .output()
        .map_err(|e| format!("bash: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    check(out.status.success(), format!("$ {line}\n{text}"))?;
    Ok(text)
}

/// The CRD in the API server carries the newer chart's description.
fn has_changed_crd(env: &Env, description: &str) -> Result<(), String> {
    let crd = env.kubectl.get(&["crd", "memcacheds.memcached.c5c3.io"])?;
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(
        !versions.is_empty()
            && versions.iter().all(|v| {
                v["schema"]["openAPIV3Schema"]["description"]
                    .as_str()
                    .is_some_and(|d| d.contains(description))
            }),
        "the CRD was not upgraded",
    )
}

/// A copy of `from` at `to`, symlinks replaced by what they point at (as
/// `helm package` does).
fn copy_dereferenced(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let source: PathBuf = entry.path();
        let target = to.join(entry.file_name());
        // metadata() follows symlinks.
        let meta = std::fs::metadata(&source).map_err(|e| format!("{}: {e}", source.display()))?;
        if meta.is_dir() {
            copy_dereferenced(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| format!("{}: {e}", source.display()))?;
        }
    }
    Ok(())
}
