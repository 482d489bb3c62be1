//! The shipped manifests against a real API server (`make e2e`, `--test
//! manifests`): every file of `deploy/` and the Helm chart rendered by real
//! helm (default values and `ci/all-values.yaml`) pass `kubectl apply
//! --dry-run=server` (schemas, defaulting, admission including the policy
//! webhook, RBAC escalation checks), and `kubectl` shows a live Memcached as
//! documented. Then the chart is installed for real (`helm install`) in four
//! renders, one at a time: the pod runtime runs the controller binary behind
//! the chart's pods, with the chart's args and env and authenticated as the
//! chart's ServiceAccount, so its RBAC and flags are what the controller gets.
//! Each install must start (readiness probes pass, no exit) and reconcile a
//! Memcached; with watchNamespaces, only in the watched namespaces; and its
//! uninstall must leave nothing. Two releases share a namespace, each
//! leading on its own Lease. Last (it replaces the CRD, and with it every
//! Memcached), the CRD Helm installed is upgraded with the commands the
//! chart documents.
//!
//! Kinds of other projects (the Prometheus Operator's ServiceMonitor and
//! PrometheusRule, Kubewarden's ClusterAdmissionPolicy) get stand-in CRDs that
//! accept any spec: their apiVersion, kind and metadata are checked, their
//! spec is not. Runs inside `e2e-tests/testbed/netns.sh`; `$HELM` is the helm binary
//! (default `target/tools/helm`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use e2e_tests::harness::environment::helm::Helm;
use e2e_tests::harness::scenarios::runner::{Scenario, run_scenarios};
use e2e_tests::harness::scenarios::scenario::{self, check};
use e2e_tests::harness::{Env, condition_status, wait_for};
use e2e_tests::workspace_root;
use serde_json::{Value, json};

mod chart;

const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "every file of deploy/ passes a server-side dry run",
        deploy_files,
    ),
    Scenario::new(
        "the Helm chart with default values passes a server-side dry run",
        chart_defaults,
    ),
    Scenario::new(
        "the Helm chart with every value set passes a server-side dry run",
        chart_all_values,
    ),
    Scenario::new(
        "kubectl get, -o wide, get all, explain, scale and the v1alpha1 warning",
        kubectl_ux,
    ),
    Scenario::new(
        "users bound to the built-in view and edit roles can read and write Memcacheds",
        aggregated_roles,
    ),
    Scenario::new(
        "helm install with default values: the controller starts and reconciles",
        chart_runs_defaults,
    ),
    Scenario::new(
        "helm install, typical values (nameOverride, monitoring): NetworkPolicies admit its pods",
        chart_runs_typical,
    ),
    Scenario::new(
        "helm install with watchNamespaces, no leader election: only those namespaces are reconciled",
        chart_runs_watching_namespaces,
    ),
    Scenario::new(
        "helm install with ci/all-values.yaml: the controller starts and reconciles",
        chart_runs_all_values,
    ),
    Scenario::new(
        "two releases in one namespace: each leads on its own Lease and reconciles; \
         uninstalled, each leaves nothing",
        chart::two_releases,
    ),
    Scenario::new(
        "the CRD Helm installed from crds/ is upgraded by the commands NOTES.txt and the chart README print",
        chart::crd_upgrade,
    ),
];

/// Stand-in CRDs for the foreign kinds: (group, kind, plural, scope).
const FOREIGN_KINDS: [(&str, &str, &str, &str); 3] = [
    (
        "monitoring.coreos.com",
        "ServiceMonitor",
        "servicemonitors",
        "Namespaced",
    ),
    (
        "monitoring.coreos.com",
        "PrometheusRule",
        "prometheusrules",
        "Namespaced",
    ),
    (
        "policies.kubewarden.io",
        "ClusterAdmissionPolicy",
        "clusteradmissionpolicies",
        "Cluster",
    ),
];

/// Namespaces the examples (`production`), the chart's values (`monitoring`: its
/// ServiceMonitor's) and the kubectl and built-in roles scenarios use.
const NAMESPACES: [&str; 7] = [
    "production",
    "ops",
    "team-a",
    "team-b",
    "monitoring",
    "kubectl-ux",
    "user-roles",
];

fn main() {
    e2e_tests::harness::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e-manifests");
    let started = Instant::now();
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    if let Err(e) = prepare(&env) {
        eprintln!("cannot prepare the end-to-end environment: {e}");
        std::process::exit(1);
    }
    println!(
        "environment ready in {:.1}s, logs in {}",
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    run_scenarios(env, SCENARIOS);
}

/// The namespaces and the stand-in CRDs.
fn prepare(env: &Env) -> Result<(), String> {
    for ns in NAMESPACES {
        env.kubectl.ok(&["create", "namespace", ns])?;
    }
    for (group, kind, plural, scope) in FOREIGN_KINDS {
        println!("     {kind}.{group}: stand-in CRD, its spec is not validated here");
        let name = format!("{plural}.{group}");
        env.kubectl
            .apply(&stand_in_crd(group, kind, plural, scope).to_string())?;
        env.kubectl.wait_established(&name)?;
    }
    Ok(())
}

/// `deploy/rbac-user-roles.yaml` applied for real: kube-controller-manager
/// aggregates it into the built-in roles, so a namespace user bound to `view`
/// (as Kubewarden's audit scanner is) reads Memcacheds and one bound to
/// `edit` also writes and scales them.
fn aggregated_roles(env: &mut Env) -> Result<(), String> {
    let ns = "user-roles";
    let roles = workspace_root().join("deploy/rbac-user-roles.yaml");
    env.kubectl.ok(&["apply", "-f", &roles.to_string_lossy()])?;
    for (user, role) in [("viewer", "view"), ("editor", "edit")] {
        env.kubectl.ok(&[
            "create",
            "rolebinding",
            user,
            "-n",
            ns,
            &format!("--clusterrole={role}"),
            &format!("--user={user}"),
        ])?;
    }
    // (user, verb, resource, allowed)
    let expected = [
        ("viewer", "get", "memcacheds", true),
        ("viewer", "watch", "memcacheds", true),
        ("viewer", "get", "memcacheds/status", true),
        ("viewer", "create", "memcacheds", false),
        ("viewer", "patch", "memcacheds/scale", false),
        ("editor", "get", "memcacheds", true),
        ("editor", "create", "memcacheds", true),
        ("editor", "delete", "memcacheds", true),
        ("editor", "patch", "memcacheds/scale", true),
        ("editor", "patch", "memcacheds/status", false),
    ];
    wait_for(
        "the built-in roles to aggregate the Memcached rules",
        Duration::from_secs(60),
        || {
            let wrong: Vec<String> = expected
                .iter()
                .filter_map(|(user, verb, resource, allowed)| {
                    let (plural, subresource) = resource.split_once('/').unwrap_or((resource, ""));
                    let answer = env.kubectl.run(
                        &[
                            "auth",
                            "can-i",
                            verb,
                            &format!("{plural}.memcached.c5c3.io"),
                            &format!("--subresource={subresource}"),
                            "-n",
                            ns,
                            &format!("--as={user}"),
                        ],
                        None,
                    );
                    let yes = answer.stdout.trim() == "yes";
                    (yes != *allowed)
                        .then(|| format!("{user} {verb} {resource}: {}", answer.stdout.trim()))
                })
                .collect();
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join(", "))
            }
        },
    )?;
    println!(
        "     view: get/list/watch Memcacheds; edit: also create, delete and scale; neither writes status"
    );
    Ok(())
}

fn stand_in_crd(group: &str, kind: &str, plural: &str, scope: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                }},
            }],
        },
    })
}

/// `kubectl apply --dry-run=server` of a manifest stream; the error names `what`.
fn dry_run(env: &Env, what: &str, manifest: &str) -> Result<String, String> {
    let outcome = env
        .kubectl
        .run(&["apply", "--dry-run=server", "-f", "-"], Some(manifest));
    if outcome.success {
        Ok(outcome.stdout)
    } else {
        Err(format!("{what}: {}", outcome.stderr.trim()))
    }
}

/// The YAML files of `dir`, sorted.
fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    Ok(files)
}

fn deploy_files(env: &mut Env) -> Result<(), String> {
    let deploy = workspace_root().join("deploy");
    let crd = deploy.join("crd.yaml");
    let mut files = vec![crd.clone()];
    for dir in ["", "examples", "prometheus"] {
        for file in yaml_files(&deploy.join(dir))? {
            // promtool's unit tests sit next to the PrometheusRule; they are no manifest.
            if file != crd && !file.to_string_lossy().ends_with(".test.yaml") {
                files.push(file);
            }
        }
    }
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file
            .strip_prefix(&deploy)
            .unwrap_or(file)
            .display()
            .to_string();
        match dry_run(env, &name, &text) {
            Ok(out) => println!("     {name}: {} objects", out.lines().count()),
            Err(e) => problems.push(e),
        }
    }
    check(problems.is_empty(), problems.join("\n     "))
}

/// `helm template` of the chart into namespace `ops`, for the API server's
/// Kubernetes version (Chart.yaml's kubeVersion refuses helm's default, 1.20).
fn helm_template(env: &Env, args: &[&str]) -> Result<String, String> {
    let version: Value = serde_json::from_str(&env.kubectl.ok(&["version", "-o", "json"])?)
        .map_err(|e| format!("kubectl version: {e}"))?;
    let server = version["serverVersion"]["gitVersion"]
        .as_str()
        .ok_or("kubectl version: no server version")?;
    let mut all = vec!["--kube-version", server];
    all.extend_from_slice(args);
    Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir).template("rel", "ops", &all)
}

/// The rendered chart holds the CRD exactly `count` times.
fn crds_rendered(what: &str, rendered: &str, count: usize) -> Result<(), String> {
    let found = rendered
        .split("\n---")
        .filter(|doc| doc.contains("\nkind: CustomResourceDefinition"))
        .count();
    check(
        found == count,
        format!("{what}: the CRD rendered {found} times, not {count}"),
    )
}

/// Dry-run a rendered chart; every document must come back.
fn dry_run_chart(env: &Env, what: &str, rendered: &str) -> Result<(), String> {
    let documents = rendered
        .split("\n---")
        .filter(|doc| doc.contains("\nkind: "))
        .count();
    let out = dry_run(env, what, rendered)?;
    print!(
        "{}",
        out.lines()
            .map(|l| format!("     {l}\n"))
            .collect::<String>()
    );
    check(
        out.lines().count() == documents,
        format!(
            "{what}: {documents} documents rendered, {} applied",
            out.lines().count()
        ),
    )
}

/// `helm test`'s hooks pass a server-side dry run too (apart from the
/// release: they exist only while `helm test` runs). Their ServiceAccount is
/// created for real first, as `helm test` creates it before the pod (a
/// pod's dry run looks its ServiceAccount up), and deleted after.
fn dry_run_tests(env: &Env, what: &str, args: &[&str]) -> Result<(), String> {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--show-only", "templates/tests/check.yaml"]);
    let rendered = helm_template(env, &all)?;
    let accounts: Vec<&str> = rendered
        .split("\n---")
        .filter(|doc| doc.contains("\nkind: ServiceAccount"))
        .collect();
    for account in &accounts {
        env.kubectl.apply(account)?;
    }
    let outcome = dry_run_chart(env, what, &rendered);
    for account in &accounts {
        env.kubectl.run(&["delete", "-f", "-"], Some(account));
    }
    outcome
}

fn chart_defaults(env: &mut Env) -> Result<(), String> {
    let rendered = helm_template(env, &["--include-crds", "--skip-tests"])?;
    crds_rendered("chart, default values, --include-crds", &rendered, 1)?;
    dry_run_chart(env, "chart, default values", &rendered)?;
    dry_run_tests(env, "chart, default values, helm test", &[])
}

/// With `--include-crds` (Argo CD's default): `crds.managed` renders the CRD
/// from templates/ and `crds.install=false` keeps crds/ out, so it comes once.
fn chart_all_values(env: &mut Env) -> Result<(), String> {
    let values = workspace_root().join("deploy/helm/memcached-operator/ci/all-values.yaml");
    let values = values.to_string_lossy();
    let rendered = helm_template(env, &["--include-crds", "--skip-tests", "-f", &values])?;
    crds_rendered("chart, ci/all-values.yaml, --include-crds", &rendered, 1)?;
    dry_run_chart(env, "chart, ci/all-values.yaml", &rendered)?;
    dry_run_tests(
        env,
        "chart, ci/all-values.yaml, helm test",
        &["-f", &values],
    )
}

fn chart_runs_defaults(env: &mut Env) -> Result<(), String> {
    chart::exit_error_is_seen(env)?;
    chart::runs(
        env,
        &chart::Release {
            name: "mo",
            namespace: "chart-defaults",
            args: &[],
            cache_namespace: "chart-defaults-caches",
            unwatched: None,
            metrics_namespaces: &["monitoring"],
            log_format: "json",
            adopts_crd: false,
        },
    )
}

fn chart_runs_typical(env: &mut Env) -> Result<(), String> {
    chart::runs(
        env,
        &chart::Release {
            name: "caching",
            namespace: "chart-typical",
            args: &[
                "--set",
                "nameOverride=cache-op,logFormat=text,metricsNamespaces={monitoring,cattle-monitoring-system},\
                 metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
            ],
            cache_namespace: "chart-typical-caches",
            unwatched: None,
            metrics_namespaces: &["monitoring", "cattle-monitoring-system"],
            log_format: "text",
            adopts_crd: false,
        },
    )
}

fn chart_runs_watching_namespaces(env: &mut Env) -> Result<(), String> {
    chart::runs(
        env,
        &chart::Release {
            name: "scoped",
            namespace: "chart-scoped",
            args: &[
                "--set",
                "watchNamespaces={chart-watched},leaderElection.enabled=false,replicaCount=1",
            ],
            cache_namespace: "chart-watched",
            unwatched: Some("chart-unwatched"),
            metrics_namespaces: &["monitoring"],
            log_format: "json",
            adopts_crd: false,
        },
    )
}

/// `ci/all-values.yaml` with the image the pod runtime runs (its registry and
/// mirror are examples); it watches team-a and team-b and manages the CRD
/// (crds.install=false: no `--skip-crds` needed). Its
/// `metrics.certSecret` is left out: the emulated pod runtime mounts no
/// Secret volume into the controller, so the mounted certificate (rendered,
/// checked by `check_chart.py`; read from a directory and re-read on renewal
/// in `controller/src/serve/metrics_tls.rs`'s tests) waits for the real node; the
/// controller then makes its own self-signed one, as without the value.
fn chart_runs_all_values(env: &mut Env) -> Result<(), String> {
    let values = workspace_root().join("deploy/helm/memcached-operator/ci/all-values.yaml");
    chart::runs(
        env,
        &chart::Release {
            name: "all-values",
            namespace: "chart-all-values",
            args: &[
                "-f",
                &values.to_string_lossy(),
                "--set",
                "image.repository=ghcr.io/c5c3/memcached-operator,global.imageRegistry=",
                "--set",
                "metrics.certSecret=",
            ],
            cache_namespace: "team-a",
            unwatched: None,
            metrics_namespaces: &["monitoring", "cattle-monitoring-system"],
            // logFormat: text, then extraArgs --log-format=json.
            log_format: "json",
            adopts_crd: true,
        },
    )
}

fn kubectl_ux(env: &mut Env) -> Result<(), String> {
    let ns = "kubectl-ux";
    let kubectl = &env.kubectl;
    kubectl.apply(
        &json!({
            "apiVersion": "memcached.c5c3.io/v1beta1",
            "kind": "Memcached",
            "metadata": {"name": "cache", "namespace": ns},
            "spec": {"replicas": 2},
        })
        .to_string(),
    )?;
    let ready = |replicas: i64| {
        wait_for(
            "a Ready Memcached with its version",
            Duration::from_secs(120),
            || {
                let mc = kubectl.get(&["memcached", "cache", "-n", ns])?;
                let done = condition_status(&mc, "Ready") == Some("True")
                    && mc["status"]["readyReplicas"] == replicas
                    && mc["status"]["memcachedVersion"].is_string();
                if done {
                    Ok(mc)
                } else {
                    Err(mc["status"].to_string())
                }
            },
        )
    };
    let mc = ready(2)?;
    let get = kubectl.ok(&["get", "memcached", "-n", ns])?;
    let wide = kubectl.ok(&["get", "memcached", "-n", ns, "-o", "wide"])?;
    println!("     $ kubectl get memcached -n {ns}\n{}", indent(&get));
    println!(
        "     $ kubectl get memcached -n {ns} -o wide\n{}",
        indent(&wide)
    );
    let header = |text: &str| {
        text.lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    check(
        header(&get) == "NAME REPLICAS READY STATUS HIT RATIO ROLLOUT AGE",
        format!("columns: {}", header(&get)),
    )?;
    check(
        header(&wide)
            == "NAME REPLICAS READY STATUS HIT RATIO ROLLOUT AGE IMAGE VERSION CONNECTIONS",
        format!("wide columns: {}", header(&wide)),
    )?;
    let version = mc["status"]["memcachedVersion"]
        .as_str()
        .unwrap_or_default();
    let row = wide.lines().nth(1).unwrap_or_default();
    check(
        row.starts_with("cache ")
            && row.contains(" 2/2 ")
            && row.contains(" MemcachedReady ")
            && row.contains(&format!(" {version} ")),
        format!("row: {row}"),
    )?;

    let all = kubectl.ok(&["get", "all", "-n", ns])?;
    check(
        all.contains("memcached.memcached.c5c3.io/cache"),
        format!("kubectl get all: {all}"),
    )?;

    // kubectl explain wraps descriptions: compare word by word.
    let explain = |path: &str| {
        kubectl
            .ok(&["explain", path])
            .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let explained = explain("memcached")?;
    check(
        explained.contains("A Memcached cluster: a Deployment"),
        format!("explain: {explained}"),
    )?;
    let field = explain("memcached.spec.memcached.maxMemoryMB")?;
    check(
        field.contains("16-65536; default 64"),
        format!("explain: {field}"),
    )?;

    let alpha = kubectl.run(
        &["get", "memcacheds.v1alpha1.memcached.c5c3.io", "-n", ns],
        None,
    );
    check(
        alpha.success
            && alpha
                .stderr
                .contains("deprecated; use memcached.c5c3.io/v1beta1"),
        format!("v1alpha1 warning: {}", alpha.stderr),
    )?;

    // The scale subresource carries the selector the controller writes.
    kubectl.ok(&["scale", "memcached/cache", "-n", ns, "--replicas=3"])?;
    let mc = ready(3)?;
    let scale = kubectl.ok(&[
        "get",
        "--raw",
        &format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{ns}/memcacheds/cache/scale"),
    ])?;
    let scale: Value = serde_json::from_str(&scale).map_err(|e| e.to_string())?;
    let selector = scale["status"]["selector"].as_str().unwrap_or_default();
    check(
        selector.contains("app.kubernetes.io/instance=cache") && scale["spec"]["replicas"] == 3,
        format!("scale: {scale}"),
    )?;
    let pods = kubectl.ok(&["get", "pods", "-n", ns, "-l", selector, "-o", "name"])?;
    check(
        pods.lines().count() == 3,
        format!("pods the selector matches: {pods}"),
    )?;
    check(
        mc["status"]["ready"] == "3/3",
        format!("status.ready {}", mc["status"]["ready"]),
    )
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("       {l}\n")).collect()
}
