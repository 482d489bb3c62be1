//! What the controller's credentials reach: the writes guard on its token,
//! the secure `/metrics` and who may scrape it.

use super::*;

/// Every scenario runs the controller under deploy/rbac-writes-guard.yaml,
/// so it never blocks the controller's own writes. Here its token tries
/// what RBAC alone would let it do: change, delete or create a Deployment
/// without the managed-by label. Each is refused with the policy's message;
/// a labelled one is created and deleted.
pub(crate) fn writes_only_its_own(env: &mut Env) -> Result<(), String> {
    let ns = "guard";
    ensure_namespace(env, ns)?;
    let deployment_of = deployment;
    let deployment = |name: &str, labels: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        .to_string()
    };
    env.kubectl
        .apply(&deployment("someone-elses", json!({"team": "web"})))?;
    let controller = Kubectl::new(&env.binaries.kubectl, &env.operator_kubeconfig);
    let refused = |args: &[&str], stdin: Option<&str>| -> Result<(), String> {
        let outcome = controller.run(args, stdin);
        check(
            !outcome.success
                && outcome
                    .stderr
                    .contains("writes only the objects it manages"),
            format!("kubectl {args:?} as the controller: {outcome:?}"),
        )
    };
    // The policy is compiled asynchronously after it is created.
    wait_for("the guard in force", SETTLE, || {
        refused(
            &["annotate", "deployment", "someone-elses", "-n", ns, "x=y"],
            None,
        )
    })?;
    refused(&["delete", "deployment", "someone-elses", "-n", ns], None)?;
    refused(
        &["apply", "-f", "-"],
        Some(&deployment("unlabelled", json!({}))),
    )?;
    let managed = json!({"app.kubernetes.io/managed-by": "memcached-operator"});
    // Labelled alone is not enough to create: a stolen token could make a
    // labelled Deployment anywhere (kube-system).
    refused(
        &["apply", "-f", "-"],
        Some(&deployment("labelled", managed.clone())),
    )?;
    // Created with a Memcached as its controller owner: the controller's own.
    env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
    wait_ready(env, ns, "cache", 1)?;
    let owner = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
    let mut own: Value =
        serde_json::from_str(&deployment("labelled", managed)).map_err(|e| e.to_string())?;
    own["metadata"]["ownerReferences"] = json!([{"apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached", "name": "cache", "uid": owner["metadata"]["uid"], "controller": true}]);
    let own = own.to_string();
    for args in [
        &["apply", "-f", "-"][..],
        &["delete", "deployment", "labelled", "-n", ns][..],
    ] {
        let outcome = controller.run(args, Some(&own));
        check(
            outcome.success,
            format!("kubectl {args:?} as the controller: {outcome:?}"),
        )?;
    }
    // Someone removes the label of a managed Deployment: the controller's
    // next apply puts it back (the object is still the Memcached's), instead
    // of being refused for good.
    env.kubectl.ok(&[
        "label",
        "deployment",
        "cache",
        "-n",
        ns,
        "app.kubernetes.io/managed-by-",
    ])?;
    touch(env, ns, "cache")?;
    wait_for("the label back, no ApplyFailed", SETTLE, || {
        let d = deployment_of(env, ns, "cache")?;
        let mc = env.kubectl.get(&["memcached", "cache", "-n", ns])?;
        let degraded = condition(&mc, "Degraded").cloned().unwrap_or_default();
        (d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "memcached-operator"
            && degraded["reason"] != "ApplyFailed")
            .then_some(())
            .ok_or_else(|| format!("labels {}, Degraded {degraded}", d["metadata"]["labels"]))
    })?;
    delete_namespace(env, ns)
}

/// A controller with the default `--metrics-secure`, authenticated as its
/// ServiceAccount with deploy/rbac-metrics-auth.yaml applied (a standby: the
/// Lease is the first controller's), scraped with `curl` over TLS by
/// ServiceAccount tokens the API server issued: the API server reviews each
/// token and RBAC decides. Prints the scrape latency when the controller
/// asks the API server (a new token) and when its decision is cached.
pub(crate) fn secure_metrics(env: &mut Env) -> Result<(), String> {
    let root = e2e_tests::workspace_root();
    let rbac = root.join("deploy/rbac-metrics-auth.yaml");
    env.kubectl.ok(&["apply", "-f", &rbac.to_string_lossy()])?;
    let ns = "scrapers";
    ensure_namespace(env, ns)?;
    let reader = metrics_reader_token(&env.kubectl, ns, "prometheus")?;
    env.kubectl
        .ok(&["create", "serviceaccount", "stranger", "-n", ns])?;
    let stranger = env.kubectl.ok(&["create", "token", "stranger", "-n", ns])?;
    let (metrics, health) = (free_address()?.to_string(), free_address()?.to_string());
    let log = env.cluster.workdir.join("metrics-secure.log");
    let log = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut controller = Command::new(&env.binaries.controller)
        .args(["run", "--leader-election", "--log-format", "text"])
        .args(["--lease-namespace", OPERATOR_NAMESPACE])
        .args(["--identity", "metrics-secure"])
        .args(["--metrics-address", &metrics, "--health-address", &health])
        .env("KUBECONFIG", &env.operator_kubeconfig)
        .stderr(log.try_clone().map_err(|e| e.to_string())?)
        .stdout(log)
        .spawn()
        .map_err(|e| e.to_string())?;
    let outcome = (|| {
        let url = format!("https://{metrics}/metrics");
        wait_for("the secure /metrics", Duration::from_secs(20), || {
            scrape(&url, None).map(drop)
        })?;
        let (status, body, _) = scrape(&url, Some(&reader))?;
        check(
            status == 200 && body.contains("memcached_operator_reconciles_total"),
            format!("the metrics reader got {status}: {body}"),
        )?;
        check(
            body.contains("process_resident_memory_bytes"),
            "no process metrics",
        )?;
        let (status, _, _) = scrape(&url, Some(stranger.trim()))?;
        check(
            status == 403,
            format!("a ServiceAccount without the role got {status}"),
        )?;
        let (status, _, _) = scrape(&url, None)?;
        check(status == 401, format!("no token got {status}"))?;
        let (status, _, _) = scrape(&url, Some("not-a-token"))?;
        check(status == 401, format!("an invalid token got {status}"))?;

        const SCRAPES: usize = 10;
        let mut uncached = Duration::ZERO;
        for _ in 0..SCRAPES {
            let fresh = metrics_reader_token(&env.kubectl, ns, "prometheus")?;
            uncached += scrape(&url, Some(&fresh))?.2;
        }
        let mut cached = Duration::ZERO;
        for _ in 0..SCRAPES {
            cached += scrape(&url, Some(&reader))?.2;
        }
        println!(
            "   secure /metrics, mean of {SCRAPES} scrapes (curl, new TLS connection each): \
             uncached (TokenReview + SubjectAccessReview) {:?}, cached {:?}",
            uncached / SCRAPES as u32,
            cached / SCRAPES as u32
        );
        Ok(())
    })();
    let _ = controller.kill();
    let _ = controller.wait();
    outcome
}
