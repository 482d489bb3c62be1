//! The Helm chart on the node: published and signed, installed, helm test, watchNamespaces, uninstall.

use super::*;

/// The chart as a release publishes it (`deploy/helm/push-chart.sh`, what
/// `make push-chart` runs: pushed to the suite's registry, its digest signed
/// with a fresh cosign key; cosign verifies it under that key and refuses it
/// under another), installed from that registry by digest with its default
/// image, which the node pulls: the controller runs in its container (uid
/// 65532, read-only root filesystem) as the chart's ServiceAccount,
/// reconciles a Memcached on the node, and after `kubectl rollout restart` a
/// new pod holds the release's Lease and reconciles the next change; `helm
/// test` passes (its pod, of the controller's image, checks the Lease and
/// reconciles a Memcached) and leaves nothing; `helm uninstall` leaves
/// nothing either (the Lease and the hash-key Secret go with the
/// ServiceAccount that owns them).
pub(crate) fn chart_installed(env: &mut Env) -> Result<(), String> {
    let (release, namespace) = ("mo", "operator-node");
    let lease = format!("{release}-memcached-operator");
    let helm = stop_suite_controller(env)?;
    let published = publish_chart(env, &helm)?;
    let started = Instant::now();
    helm.install_reference(
        &published,
        release,
        namespace,
        &["--plain-http", "-f", &chart_values(env)?],
    )?;
    let installed = started.elapsed();
    let pods = controller_pods(env, release, namespace, 2)?;
    let state = NodeState::read(&env.cluster.workdir)?;
    let controllers: Vec<_> = state
        .processes()
        .into_iter()
        .filter(|p| p.name == "memcached-contr")
        .collect();
    check(
        controllers.len() == 2 && controllers.iter().all(|p| p.uid == 65532),
        format!("controller processes under the node: {controllers:?}"),
    )?;
    let container = &pods[0]["spec"]["containers"][0];
    check(
        container["image"] == format!("ghcr.io/{}:v0.5.0", node::CONTROLLER_REPOSITORY)
            && container["securityContext"]["readOnlyRootFilesystem"] == true,
        format!("controller container {container}"),
    )?;

    let name = "chart-cache";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    let applied = Instant::now();
    env.kubectl
        .apply(&memcached(NAMESPACE, name, spec.clone()))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let reconciled = applied.elapsed();
    let holder = lease_holder(env, namespace, &lease)?;
    check(
        pods.iter()
            .any(|p| p["metadata"]["name"] == holder.as_str()),
        format!("the Lease is held by {holder}, not a controller pod"),
    )?;

    let restarted = Instant::now();
    let deployment = format!("deployment/{release}-memcached-operator");
    env.kubectl
        .ok(&["rollout", "restart", &deployment, "-n", namespace])?;
    env.kubectl.ok(&[
        "rollout",
        "status",
        &deployment,
        "-n",
        namespace,
        "--timeout=120s",
    ])?;
    let new_pods = controller_pods(env, release, namespace, 2)?;
    let new_holder = wait_for("a new pod to hold the Lease", SETTLE, || {
        let holder = lease_holder(env, namespace, &lease)?;
        new_pods
            .iter()
            .any(|p| p["metadata"]["name"] == holder.as_str())
            .then_some(holder.clone())
            .ok_or(holder)
    })?;
    let handed_over = restarted.elapsed();
    spec["replicas"] = json!(2);
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 2)?;
    println!(
        "     2 controller pods Ready {:.1}s after helm install; {name} Ready {:.1}s after apply; \
         Lease {holder} -> {new_holder} {:.1}s after the rollout restart",
        installed.as_secs_f64(),
        reconciled.as_secs_f64(),
        handed_over.as_secs_f64()
    );
    helm_test_passes(env, &helm, release, namespace, Some(&lease))?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    helm.uninstall(release, namespace)?;
    nothing_left(env, &[release], namespace)
}

/// `watchNamespaces` mode (a Role per namespace, no cluster-wide access),
/// two releases in one namespace, each watching its own: a Memcached in a
/// watched namespace is reconciled, one elsewhere is not. The second
/// release given the first's Lease name (as both had by default before)
/// installs "successfully" and stands by for ever: its Memcached gets
/// nothing and its `helm test` fails, saying the Lease is another
/// installation's; with its own Lease (the default, its full name) it leads,
/// reconciles, and its `helm test` passes. Both uninstalled, nothing is left.
pub(crate) fn chart_watching_namespaces(env: &mut Env) -> Result<(), String> {
    let namespace = "operator-scoped";
    let (first, first_watched) = ("scoped", "real-node-watched");
    let (second, second_watched) = ("scoped-too", "real-node-watched-too");
    let helm = stop_suite_controller(env)?;
    for ns in [first_watched, second_watched, NAMESPACE] {
        ensure_namespace(env, ns)?;
    }
    let values = chart_values(env)?;
    let first_lease = format!("{first}-memcached-operator");
    helm.install(
        first,
        namespace,
        &[
            "-f",
            &values,
            "--set",
            &format!("watchNamespaces={{{first_watched}}},replicaCount=1"),
        ],
    )?;
    controller_pods(env, first, namespace, 1)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl
        .apply(&memcached(NAMESPACE, "unwatched", spec.clone()))?;
    env.kubectl
        .apply(&memcached(first_watched, "watched", spec.clone()))?;
    wait_ready(env, first_watched, "watched", 1)?;
    let unwatched = env
        .kubectl
        .get(&["memcached", "unwatched", "-n", NAMESPACE])?;
    let deployments = instance_objects(env, "deployments", NAMESPACE, "unwatched")?;
    check(
        unwatched["status"].is_null() && deployments.is_empty(),
        format!(
            "a Memcached outside watchNamespaces was reconciled: status {}, {} Deployment(s)",
            unwatched["status"],
            deployments.len()
        ),
    )?;
    helm_test_passes(env, &helm, first, namespace, Some(&first_lease))?;

    // The second release on the first's Lease: Ready, standing by, never leading.
    helm.install(
        second,
        namespace,
        &[
            "-f",
            &values,
            "--set",
            &format!(
                "watchNamespaces={{{second_watched}}},replicaCount=1,leaderElection.leaseName={first_lease}"
            ),
        ],
    )?;
    controller_pods(env, second, namespace, 1)?;
    env.kubectl
        .apply(&memcached(second_watched, "watched", spec.clone()))?;
    let refused = helm.test(second, namespace).err().unwrap_or_default();
    check(
        refused.contains(&format!(
            "the Lease {namespace}/{first_lease} is held by {first}-"
        )) && refused.contains("uses the same Lease name"),
        format!("helm test of a release that never leads: {refused}"),
    )?;
    let ignored = env
        .kubectl
        .get(&["memcached", "watched", "-n", second_watched])?;
    check(
        ignored["status"].is_null(),
        format!("the standing-by release reconciled: {}", ignored["status"]),
    )?;
    println!(
        "     on the first release's Lease, helm test fails: {}",
        refused
            .lines()
            .find(|l| l.contains("is held by"))
            .unwrap_or_default()
            .trim()
    );
    // Its own Lease (the default): it leads; the next helm test replaces the failed one's objects.
    helm.run(&[
        "upgrade",
        second,
        &Helm::chart().to_string_lossy(),
        "--namespace",
        namespace,
        "--reuse-values",
        "--set",
        "leaderElection.leaseName=",
        "--wait",
        "--timeout=120s",
    ])?;
    wait_ready(env, second_watched, "watched", 1)?;
    helm_test_passes(
        env,
        &helm,
        second,
        namespace,
        Some(&format!("{second}-memcached-operator")),
    )?;
    for (ns, name) in [
        (first_watched, "watched"),
        (second_watched, "watched"),
        (NAMESPACE, "unwatched"),
    ] {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", ns, "--wait=false"])?;
    }
    helm.uninstall(first, namespace)?;
    helm.uninstall(second, namespace)?;
    nothing_left(env, &[first, second], namespace)
}

/// `helm test --logs` of `release` passes: its pod checked that a Ready pod
/// of the release holds `lease` and that a Memcached got reconciled. The
/// test's ServiceAccount and Roles are gone afterwards; its finished pod
/// stays for its log, owned by the controller's ServiceAccount (so `helm
/// uninstall` takes it).
pub(crate) fn helm_test_passes(
    env: &Env,
    helm: &Helm,
    release: &str,
    namespace: &str,
    lease: Option<&str>,
) -> Result<(), String> {
    let started = Instant::now();
    let out = helm.test(release, namespace)?;
    check(
        out.contains("Succeeded")
            && !out.contains("Failed")
            && out.contains("ok: Memcached")
            && lease.is_none_or(|l| out.contains(&format!("holds the Lease {namespace}/{l}"))),
        format!("helm test {release}:\n{out}"),
    )?;
    let selector = format!("app.kubernetes.io/instance={release},app.kubernetes.io/component=test");
    let left = env.kubectl.ok(&[
        "get",
        "serviceaccounts,roles,rolebindings",
        "-A",
        "-l",
        &selector,
        "-o",
        "name",
    ])?;
    check(left.trim().is_empty(), format!("helm test left {left}"))?;
    let pod = env.kubectl.get(&[
        "pod",
        &format!("{release}-memcached-operator-test"),
        "-n",
        namespace,
    ])?;
    let owners = &pod["metadata"]["ownerReferences"];
    check(
        pod["status"]["phase"] == "Succeeded"
            && owners[0]["kind"] == "ServiceAccount"
            && owners[0]["name"] == format!("{release}-memcached-operator").as_str(),
        format!(
            "the test pod: phase {}, owners {owners}",
            pod["status"]["phase"]
        ),
    )?;
    let line = out
        .lines()
        .find(|l| l.starts_with("ok: Memcached"))
        .unwrap_or_default();
    println!(
        "     helm test {release} passed in {:.1}s: {line}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The chart pushed to the suite's registry with `deploy/helm/push-chart.sh`
/// and signed with a fresh key; cosign verifies the pushed digest under that
/// key, and refuses it under another. The immutable reference
/// (`oci://<registry>/charts/memcached-operator@sha256:...`).
pub(crate) fn publish_chart(env: &Env, helm: &Helm) -> Result<String, String> {
    let keys = env.cluster.workdir.join("chart-keys");
    // Fresh keys each time: cosign refuses to overwrite a key pair.
    let _ = std::fs::remove_dir_all(&keys);
    let (key, public) = helm::key_pair(&keys, "release")?;
    let (_, other) = helm::key_pair(&keys, "other")?;
    let repository = format!("oci://{}/charts", env.registry.address());
    let published = helm.push_chart(&Helm::chart(), &repository, Some(&key))?;
    check(
        published.starts_with(&format!("{repository}/memcached-operator@sha256:")),
        format!("push-chart.sh printed {published}"),
    )?;
    helm::verify_chart(&published, &public)?;
    let refused = helm::verify_chart(&published, &other);
    check(
        refused.is_err(),
        format!("cosign verified the chart under another key: {refused:?}"),
    )?;
    println!("     published {published}: cosign verifies it under the release key only");
    Ok(published)
}

/// Who holds the Lease `name` in `namespace`.
pub(crate) fn lease_holder(env: &Env, namespace: &str, name: &str) -> Result<String, String> {
    let lease = env.kubectl.get(&["lease", name, "-n", namespace])?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("the Lease {namespace}/{name} has no holder"))
}

/// After `helm uninstall` of `releases`: nothing of them is left in
/// `namespace` (only what Kubernetes puts in every namespace) or
/// cluster-wide (labelled with their instance).
pub(crate) fn nothing_left(env: &Env, releases: &[&str], namespace: &str) -> Result<(), String> {
    let started = Instant::now();
    wait_for("nothing of the releases left", SETTLE, || {
        let mut left: Vec<String> = env
            .kubectl
            .ok(&[
                "get",
                "pods,leases,secrets,serviceaccounts,configmaps,services,deployments,\
                 replicasets,poddisruptionbudgets,roles,rolebindings",
                "-n",
                namespace,
                "-o",
                "name",
            ])?
            .lines()
            .filter(|l| *l != "serviceaccount/default" && *l != "configmap/kube-root-ca.crt")
            .map(str::to_string)
            .collect();
        for release in releases {
            left.extend(
                env.kubectl
                    .ok(&[
                        "get",
                        "clusterroles,clusterrolebindings,validatingadmissionpolicies,\
                         validatingadmissionpolicybindings",
                        "-l",
                        &format!("app.kubernetes.io/instance={release}"),
                        "-o",
                        "name",
                    ])?
                    .lines()
                    .map(str::to_string),
            );
        }
        left.retain(|l| !l.is_empty());
        check(left.is_empty(), format!("left: {}", left.join(", ")))
    })?;
    println!(
        "     helm uninstall {}: nothing left in {namespace} or cluster-wide {:.1}s later",
        releases.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Stop the suite's own controller (it leads another Lease and would
/// reconcile too); helm for the chart scenarios.
pub(crate) fn stop_suite_controller(env: &mut Env) -> Result<Helm, String> {
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    Ok(Helm::new(&env.cluster.kubeconfig, &env.cluster.workdir))
}

/// A values file that puts the controller's pods on the real node.
pub(crate) fn chart_values(env: &Env) -> Result<String, String> {
    let path = env.cluster.workdir.join("real-node-values.json");
    let mut values = node::scheduling();
    // The suite's policies are deploy/policy.yaml's, applied when Kubewarden took over: the
    // chart's own would judge every Memcached a second time.
    values["policy"] = json!({"enabled": false});
    std::fs::write(&path, values.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.display().to_string())
}

/// The release's controller pods, `count` of them, each Ready on the real
/// node, none logging an error (`kubectl logs`: JSON lines, the chart's default).
pub(crate) fn controller_pods(
    env: &Env,
    release: &str,
    namespace: &str,
    count: usize,
) -> Result<Vec<Value>, String> {
    let selector = format!("app.kubernetes.io/instance={release}");
    let pods = wait_for(&format!("{count} Ready controller pods"), SETTLE, || {
        let pods = env
            .kubectl
            .get(&["pods", "-n", namespace, "-l", &selector])?;
        let pods: Vec<Value> = pods["items"].as_array().cloned().unwrap_or_default();
        let ready = pods.len() == count
            && pods.iter().all(|p| {
                condition_status(p, "Ready") == Some("True")
                    && p["metadata"]["deletionTimestamp"].is_null()
            });
        ready
            .then_some(pods.clone())
            .ok_or_else(|| format!("pods {:?}", summary(&pods)))
    })?;
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        check(
            pod["spec"]["nodeName"] == node::NAME,
            format!("controller pod {name} runs on {}", pod["spec"]["nodeName"]),
        )?;
        let log = env.kubectl.ok(&["logs", "-n", namespace, name])?;
        check(
            !log.is_empty()
                && log
                    .lines()
                    .all(|l| l.starts_with('{') && !l.contains("\"ERROR\"")),
            format!("controller {name} logged:\n{log}"),
        )?;
    }
    Ok(pods)
}

/// The README's path for a cluster that runs Kubewarden (its "Install on a
/// cluster"), its two commands as written there: `helm install` of the chart
/// as a release publishes it, the policy included, with no other value than
/// the node's scheduling (the chart comes from the suite's registry, where
/// `make push-chart` put the same chart, by digest), then `kubectl apply` of
/// the example it names (the file of this checkout, which its release tag
/// holds). On Kubewarden from its own charts (needs [`KUBEWARDEN`]), the
/// chart's ClusterAdmissionPolicy (the release's own policy artifact, the
/// PolicyServer `default`) turns active and alone judges Memcacheds (the
/// suite's deploy/policy.yaml is taken away meanwhile): the example runs,
/// the seed example with three errors is refused with each of its messages,
/// the minimal one is stored with every default the policy's fixture names
/// and its pod runs on the node. Uninstalled, the policy goes with the release.
pub(crate) fn chart_with_policy(env: &mut Env) -> Result<(), String> {
    let install = readme_command("helm install")?;
    let helm = stop_suite_controller(env)?;
    let suite_policy = env.protect.name.clone();
    env.kubectl.ok(&[
        "delete",
        "clusteradmissionpolicy",
        &suite_policy,
        "--wait=true",
    ])?;
    env.wait_for_no_protection()?;
    // The suite's own controller runs from the kubectl manifests, whose names
    // the README's release takes: they go first, as for a user moving from
    // those manifests to the chart, and come back after.
    env.delete_operator_rbac()?;
    if let Some(namespace) = after(&install, "-n") {
        env.kubectl.ok(&[
            "delete",
            "leases,secrets",
            "--all",
            "-n",
            namespace,
            "--wait=true",
        ])?;
    }
    let outcome = installed_policy_judges(env, &helm, &install);
    if let (Err(_), Some(release), Some(namespace)) =
        (&outcome, install.get(2), after(&install, "-n"))
    {
        let _ = helm.uninstall(release, namespace);
    }
    // Whatever happened: the suite's RBAC (and its controller's token) and
    // policy for the scenarios after.
    env.apply_operator_rbac()?;
    let path = e2e_tests::workspace_root().join("deploy/policy.yaml");
    env.kubectl.ok(&["apply", "-f", &path.to_string_lossy()])?;
    kubewarden_charts::wait_active(&env.kubectl, &suite_policy, Duration::from_secs(180))?;
    env.wait_for_protection()?;
    outcome
}

/// A command of the README's "Install on a cluster" section: the line that
/// starts with `start`, in words.
fn readme_command(start: &str) -> Result<Vec<String>, String> {
    let path = e2e_tests::workspace_root().join("README.md");
    let readme = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let section = readme.split("\n## Install on a cluster\n").nth(1);
    let section = section.and_then(|s| s.split("\n## ").next());
    (section.into_iter().flat_map(str::lines))
        .map(str::trim)
        .find(|line| line.starts_with(start))
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .ok_or_else(|| format!("README.md's \"Install on a cluster\" has no `{start} ...` line"))
}

/// The word after `flag` in `command`.
fn after<'a>(command: &'a [String], flag: &str) -> Option<&'a str> {
    let at = command.iter().position(|w| w == flag)?;
    command.get(at + 1).map(String::as_str)
}

/// [`chart_with_policy`]'s checks, the chart installed as `install` says.
fn installed_policy_judges(env: &Env, helm: &Helm, install: &[String]) -> Result<(), String> {
    let chart = std::fs::read_to_string(Helm::chart().join("Chart.yaml")).unwrap_or_default();
    let version = (chart.lines()).find_map(|l| l.strip_prefix("version: "));
    let (release, namespace) = match (install.get(2), after(install, "-n")) {
        (Some(release), Some(namespace))
            if install.get(3).map(String::as_str)
                == Some("oci://ghcr.io/c5c3/charts/memcached-operator")
                && after(install, "--version") == version =>
        {
            (release.as_str(), namespace)
        }
        _ => {
            return Err(format!(
                "README.md installs {install:?}, not the chart {version:?} of this checkout"
            ));
        }
    };
    let published = publish_chart(env, helm)?;
    let values = env.cluster.workdir.join("policy-values.json");
    std::fs::write(&values, node::scheduling().to_string())
        .map_err(|e| format!("{}: {e}", values.display()))?;
    let started = Instant::now();
    helm.install_reference(
        &published,
        release,
        namespace,
        &["--plain-http", "-f", &values.to_string_lossy()],
    )?;
    let instance = format!("app.kubernetes.io/instance={release}");
    let policies = env
        .kubectl
        .get(&["clusteradmissionpolicies", "-l", &instance])?;
    let installed = match policies["items"].as_array().map(Vec::as_slice) {
        Some([policy]) => policy.clone(),
        _ => return Err(format!("the release's policies: {}", policies["items"])),
    };
    let policy = installed["metadata"]["name"].as_str().unwrap_or_default();
    let active = kubewarden_charts::wait_active(&env.kubectl, policy, Duration::from_secs(180))?;
    let activated = started.elapsed();
    check(
        installed["spec"]["policyServer"] == "default"
            && installed["spec"]["module"] == env.protect.module(),
        format!(
            "the chart's policy (deploy/policy.yaml's module is {}): {}",
            env.protect.module(),
            installed["spec"]
        ),
    )?;
    controller_pods(env, release, namespace, 2)?;

    // The README's example, as it says.
    let apply = readme_command("kubectl apply")?;
    let url = apply.last().cloned().unwrap_or_default();
    let example_path = url
        .split_once(&format!("/v{}/", version.unwrap_or_default()))
        .map(|(_, path)| e2e_tests::workspace_root().join(path))
        .filter(|path| path.is_file())
        .ok_or_else(|| format!("README.md applies {url}, no file of this release"))?;
    let text = std::fs::read_to_string(&example_path)
        .map_err(|e| format!("{}: {e}", example_path.display()))?;
    let example: Value =
        serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", example_path.display()))?;
    let file = example_path.to_string_lossy();
    let mut local: Vec<&str> = apply.iter().skip(1).map(String::as_str).collect();
    local.pop();
    local.push(&file);
    env.kubectl.ok(&local)?;
    let example_name = example["metadata"]["name"].as_str().unwrap_or_default();
    let replicas = example["spec"]["replicas"].as_i64().unwrap_or(1);
    wait_ready(env, "default", example_name, replicas)?;
    env.kubectl.ok(&[
        "delete",
        "memcached",
        example_name,
        "-n",
        "default",
        "--wait=true",
    ])?;

    ensure_namespace(env, NAMESPACE)?;
    let fixture = |kind: &str, example: &str| -> Result<Value, String> {
        let path = e2e_tests::workspace_root()
            .join(format!("e2e-tests/fixtures/{kind}/{example}-v1beta1.json"));
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    };
    let example = |name: &str| -> Result<(Value, Value), String> {
        let mut object = fixture("requests", name)?["request"]["object"].clone();
        object["metadata"]["namespace"] = json!(NAMESPACE);
        Ok((object, fixture("expected", name)?))
    };

    let (violations, expected) = example("seed-multiple-violations")?;
    let refused = env
        .kubectl
        .run(&["apply", "-f", "-"], Some(&violations.to_string()));
    let webhook = format!("admission webhook \"clusterwide-{policy}.kubewarden.admission\" denied");
    let errors: Vec<&str> = (expected["errors"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    check(
        !refused.success
            && refused.stderr.contains(&webhook)
            && !errors.is_empty()
            && errors.iter().all(|e| refused.stderr.contains(e)),
        format!(
            "seed-multiple-violations: {}{} (expected {webhook} with {errors:?})",
            refused.stdout, refused.stderr
        ),
    )?;

    let (mut minimal, expected) = example("seed-minimal-cr-after-defaulting")?;
    let name = minimal["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    minimal["spec"] = node::scheduling();
    env.kubectl.apply(&minimal.to_string())?;
    let stored = env.kubectl.get(&["memcached", &name, "-n", NAMESPACE])?;
    let defaults = &expected["object"]["spec"];
    check(
        defaults.as_object().is_some_and(|d| !d.is_empty()) && holds(&stored["spec"], defaults),
        format!("stored {} without the defaults {defaults}", stored["spec"]),
    )?;
    wait_ready(env, NAMESPACE, &name, 1)?;
    let pods = instance_objects(env, "pods", NAMESPACE, &name)?;
    check(
        pods.len() == 1 && pods[0]["spec"]["nodeName"] == node::NAME,
        format!("{name}'s pods: {:?}", summary(&pods)),
    )?;
    println!(
        "     README's helm install: {policy} active {:.1}s after it ({:.1}s after it was \
         created); README's example {example_name} Ready with {replicas} replicas; \
         seed-multiple-violations refused with its {} messages; {name} stored with the defaults \
         and Ready on the node",
        activated.as_secs_f64(),
        active.as_secs_f64(),
        errors.len()
    );
    env.kubectl
        .ok(&["delete", "memcached", &name, "-n", NAMESPACE, "--wait=true"])?;
    helm.uninstall(release, namespace)?;
    nothing_left(env, &[release], namespace)?;
    let gone = env
        .kubectl
        .run(&["get", "clusteradmissionpolicy", policy], None);
    check(
        !gone.success && gone.stderr.contains("NotFound"),
        format!("the policy outlived its release: {}", gone.stdout),
    )
}

/// Every leaf of `want` is in `have`, at the same place.
fn holds(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(key, want)| have.get(key).is_some_and(|have| holds(have, want))),
        (have, want) => have == want,
    }
}
