//! What the controller refuses and how it says so: an invalid spec stored
//! without the policy, a Memcached its types cannot read, a missing
//! namespace, an older CRD, render's strict validation.

use super::*;

/// The protect policy's webhook removed (the CRD alone, as when
/// policy-server is down under `failurePolicy: Ignore`): a Memcached the
/// policy would refuse is stored. The controller reports it on the object
/// (Degraded/InvalidSpec with the policy's own message, a Warning Event) and
/// creates nothing for it; the fixed spec converges. The webhook is restored
/// afterwards, whatever happened.
pub(crate) fn invalid_spec_without_the_policy(env: &mut Env) -> Result<(), String> {
    without_the_policy(env, "invalid", refused_until_fixed)
}

/// Run `scenario` in namespace `ns` with the protect policy's webhook
/// removed; the webhook is restored and the namespace deleted afterwards,
/// whatever happened.
pub(crate) fn without_the_policy(
    env: &mut Env,
    ns: &str,
    scenario: fn(&mut Env, &str) -> Result<(), String>,
) -> Result<(), String> {
    ensure_namespace(env, ns)?;
    env.unregister(&env.protect)?;
    let result = scenario(env, ns);
    let cleanup = env
        .register(&env.protect)
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup).and(delete_namespace(env, ns))
}

pub(crate) fn refused_until_fixed(env: &mut Env, ns: &str) -> Result<(), String> {
    // Schema-valid (the CRD bounds each field), but the limit cannot hold 512 MB.
    let spec = json!({
        "memcached": {"maxMemoryMB": 512},
        "resources": {"requests": {"memory": "96Mi"}, "limits": {"memory": "128Mi"}},
    });
    let expected = policy_message(ns, "cache", &spec)?;
    // kube-apiserver drops the webhook asynchronously.
    wait_for("the Memcached stored without the policy", SETTLE, || {
        env.kubectl.apply(&memcached(ns, "cache", spec.clone()))
    })?;
    let message = refused_visibly(env, ns, "cache")?;
    check(
        message == expected,
        format!("Degraded message {message:?}, the policy says {expected:?}"),
    )?;
    println!(
        "     {}",
        env.kubectl
            .ok(&["get", "memcached", "cache", "-n", ns, "-o", "wide"])?
            .trim_end()
            .replace('\n', "\n     ")
    );
    // The controller had its chance: a few reconciles later, still nothing.
    std::thread::sleep(Duration::from_secs(3));
    for kind in ["deployments", "statefulsets", "services", "configmaps"] {
        let managed = env.kubectl.get(&[
            kind,
            "-n",
            ns,
            "-l",
            "app.kubernetes.io/managed-by=memcached-operator",
        ])?;
        check(
            managed["items"].as_array().is_some_and(Vec::is_empty),
            format!("{kind} created for an invalid spec: {managed}"),
        )?;
    }

    let fixed = json!({
        "memcached": {"maxMemoryMB": 64},
        "resources": {"requests": {"memory": "96Mi"}, "limits": {"memory": "128Mi"}},
    });
    env.kubectl.apply(&memcached(ns, "cache", fixed))?;
    let mc = wait_ready(env, ns, "cache", 1)?;
    check(
        condition(&mc, "Degraded").is_some_and(|c| c["status"] == "False"),
        format!("still degraded once fixed: {}", mc["status"]),
    )?;
    // Without the policy nothing defaulted spec.image: the Image column
    // shows the image the controller runs.
    let wide = env
        .kubectl
        .ok(&["get", "memcached", "cache", "-n", ns, "-o", "wide"])?;
    println!("     {}", wide.trim_end().replace('\n', "\n     "));
    check(
        mc["status"]["image"] == memcached_api::defaults::IMAGE,
        format!("status.image {}", mc["status"]["image"]),
    )
}

/// The protect policy's webhook removed: a Memcached whose spec passes the
/// CRD's schema but not the controller's types (`minAvailable: 4294967296`
/// cannot be an int32) is stored, and the controller restarts, so its
/// first list holds that object. The controller is ready, reconciles every
/// other Memcached, reports the unreadable one on itself naming the field
/// (Degraded/InvalidSpec, a Warning Event), creates nothing for it, and
/// converges it once fixed.
pub(crate) fn unreadable_memcached(env: &mut Env) -> Result<(), String> {
    without_the_policy(env, "unreadable", reported_while_others_converge)
}

pub(crate) fn reported_while_others_converge(env: &mut Env, ns: &str) -> Result<(), String> {
    let pdb = |min_available: Value| json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": min_available}}});
    wait_for(
        "the unreadable Memcached stored without the policy",
        SETTLE,
        || {
            env.kubectl
                .apply(&memcached(ns, "unreadable", pdb(json!(4_294_967_296_u64))))
        },
    )?;
    if let Some(operator) = env.operator.take() {
        operator.stop();
    }
    let operator = env.start_operator("operator-unreadable")?;
    let ready = operator.wait_ready(SETTLE);
    env.operator = Some(operator);
    ready?;
    env.kubectl.apply(&memcached(ns, "healthy", json!({})))?;
    wait_ready(env, ns, "healthy", 1)?;

    let expected = r#"Memcached.memcached.c5c3.io "unreadable" cannot be read: spec.highAvailability.podDisruptionBudget.minAvailable: "#;
    let message = refused_visibly(env, ns, "unreadable")?;
    println!("     {message}");
    check(
        message.starts_with(expected),
        format!("Degraded message {message:?}, expected it to start with {expected:?}"),
    )?;
    let deployments = env.kubectl.get(&[
        "deployments",
        "-n",
        ns,
        "-l",
        "app.kubernetes.io/instance=unreadable",
    ])?;
    check(
        deployments["items"].as_array().is_some_and(Vec::is_empty),
        format!("a Deployment was created for an unreadable spec: {deployments}"),
    )?;

    let mut fixed = pdb(json!(1));
    fixed["replicas"] = json!(2);
    env.kubectl.apply(&memcached(ns, "unreadable", fixed))?;
    wait_ready(env, ns, "unreadable", 2).map(drop)
}

/// Started from a workstation against a cluster without its namespace, the
/// controller exits 1 saying what is missing and how to fix it, in one
/// line on stderr: no backtrace (even with `RUST_BACKTRACE=1`).
pub(crate) fn missing_namespace_in_one_line(env: &mut Env) -> Result<(), String> {
    let mut child = Command::new(&env.binaries.controller)
        .args([
            "run",
            "--lease-namespace",
            "nowhere",
            "--identity",
            "laptop",
        ])
        .args([
            "--metrics-secure=false",
            "--metrics-address",
            &free_address()?.to_string(),
        ])
        .args(["--health-address", &free_address()?.to_string()])
        // A developer's kubeconfig: may create Secrets anywhere.
        .env("KUBECONFIG", &env.cluster.kubeconfig)
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the controller: {e}"))?;
    let status = wait_for("the controller to exit", SETTLE, || {
        child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_string())
    });
    let _ = child.kill();
    let status = status?;
    let stderr = std::io::read_to_string(child.stderr.take().ok_or("no stderr")?)
        .map_err(|e| e.to_string())?;
    println!("     {}", stderr.trim_end());
    check(status.code() == Some(1), format!("exit status {status}"))?;
    check(
        stderr.lines().count() == 1
            && stderr.starts_with(
                r#"error: the controller's namespace "nowhere" does not exist: create it (kubectl create namespace nowhere)"#,
            ),
        format!("stderr is not the one-line explanation: {stderr:?}"),
    )
}

/// Wait until Memcached `ns/name` is Degraded/InvalidSpec (status.state
/// says so) with a Warning Event saying the same; the message.
pub(crate) fn refused_visibly(env: &Env, ns: &str, name: &str) -> Result<String, String> {
    let mc = wait_for(&format!("{name} Degraded InvalidSpec"), SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
        match condition(&mc, "Degraded") {
            Some(c) if c["status"] == "True" && c["reason"] == "InvalidSpec" => Ok(mc.clone()),
            other => Err(format!("Degraded {other:?}")),
        }
    })?;
    let message = condition(&mc, "Degraded")
        .and_then(|c| c["message"].as_str().map(str::to_string))
        .unwrap_or_default();
    check(
        mc["status"]["state"] == "Degraded: InvalidSpec",
        format!("status.state {}", mc["status"]["state"]),
    )?;
    let events = env.kubectl.get(&["events.events.k8s.io", "-n", ns])?;
    check(
        events["items"].as_array().into_iter().flatten().any(|e| {
            e["reason"] == "InvalidSpec"
                && e["type"] == "Warning"
                && e["regarding"]["name"] == name
                && e["note"] == message.as_str()
        }),
        format!("no InvalidSpec Warning Event saying {message:?}: {events}"),
    )?;
    Ok(message)
}

/// The CRD as an older release installed it (no `status.image`), as after
/// a `helm upgrade`, which never upgrades a chart's `crds/`: the controller
/// still converges and writes every status field the CRD declares. The
/// current CRD is applied again afterwards, whatever happened.
pub(crate) fn older_crd(env: &mut Env) -> Result<(), String> {
    let ns = "older-crd";
    ensure_namespace(env, ns)?;
    let image = "/schema/openAPIV3Schema/properties/status/properties/image";
    let remove: Vec<Value> = (0..2)
        .map(|v| json!({"op": "remove", "path": format!("/spec/versions/{v}{image}")}))
        .collect();
    let crd = "crd/memcacheds.memcached.c5c3.io";
    env.kubectl.ok(&[
        "patch",
        crd,
        "--type=json",
        "-p",
        &Value::Array(remove).to_string(),
    ])?;
    let result = (|| {
        env.kubectl.apply(&memcached(ns, "cache", json!({})))?;
        let mc = wait_ready(env, ns, "cache", 1)?;
        check(
            mc["status"]["image"].is_null() && mc["status"]["selector"].is_string(),
            format!("status {}", mc["status"]),
        )
    })();
    let crd_file = e2e_tests::workspace_root().join("deploy/crd.yaml");
    let restore = env
        .kubectl
        .ok(&["apply", "-f", &crd_file.to_string_lossy()])
        .map(drop);
    result.and(restore).and(delete_namespace(env, ns))
}

/// The real API server's strict field validation and `render` name the same
/// misspelt fields in the same words, and both refuse the object.
pub(crate) fn render_reports_unknown_fields_as_kubectl(env: &mut Env) -> Result<(), String> {
    let ns = "strict";
    ensure_namespace(env, ns)?;
    let manifest = memcached(
        ns,
        "cache",
        json!({"replica": 2, "memcached": {"maxMemoryMb": 64}}),
    );
    let args = ["apply", "--validate=strict", "--dry-run=server", "-f", "-"];
    let kubectl = env.kubectl.run(&args, Some(&manifest));
    println!("     kubectl: {}", kubectl.stderr.trim_end());
    let render = render(env, &manifest)?;
    println!(
        "     render: {}",
        render.stderr.trim_end().replace('\n', "\n     ")
    );
    check(!kubectl.success, "the API server stored unknown fields")?;
    check(!render.success, "render exited 0 on unknown fields")?;
    for field in [
        r#"unknown field "spec.replica""#,
        r#"unknown field "spec.memcached.maxMemoryMb""#,
    ] {
        check(
            kubectl.stderr.contains(field),
            format!("kubectl does not say {field}"),
        )?;
        check(
            render.stderr.contains(field),
            format!("render does not say {field}"),
        )?;
    }
    delete_namespace(env, ns)
}

/// `memcached-controller render -f -` of `manifest`.
pub(crate) fn render(env: &Env, manifest: &str) -> Result<Outcome, String> {
    let mut child = Command::new(&env.binaries.controller)
        .args(["render", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(manifest.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok(Outcome {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

/// The policy's rejection message for `spec` (defaulted as the policy does).
pub(crate) fn policy_message(ns: &str, name: &str, spec: &Value) -> Result<String, String> {
    let spec: MemcachedSpec = serde_json::from_value(spec.clone()).map_err(|e| e.to_string())?;
    let object = ObjectName {
        name,
        generate_name: "",
    };
    let checked = validation::check(object, spec, &Options::default());
    if checked.errors.is_empty() {
        return Err(format!(
            "the policy would admit {:?} in {ns}",
            *checked.spec
        ));
    }
    Ok(invalid_message(
        "Memcached.memcached.c5c3.io",
        name,
        &checked.errors,
    ))
}
