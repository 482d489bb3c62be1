//! Kubewarden from its own charts on the real node, and a PolicyServer requiring the release key.

use super::*;

/// The release key required: a second PolicyServer verifies signatures
/// offline (`verificationConfig`, `sigstoreTrustConfig`). It loads the
/// artifact `deploy/push-policy.sh` signed (the one `deploy/policy.yaml`
/// names, signed where it lies); an unsigned copy added to it keeps its new
/// pods from starting, with policy-server's reason in their log, while the
/// signed policy stays active. Everything it created goes again. Needs
/// Kubewarden installed ([`KUBEWARDEN`]).
pub(crate) fn signature_required(env: &mut Env) -> Result<(), String> {
    let (server, key_map, trust_map) = ("verified", "memcached-release-key", "sigstore-trust");
    let outcome = verify_signatures(env, server, key_map, trust_map);
    // Whatever happened: the later scenarios run without this PolicyServer.
    for object in [
        "clusteradmissionpolicy/memcached-unsigned",
        "clusteradmissionpolicy/memcached-signed",
        &format!("policyserver/{server}"),
        &format!("configmap/{key_map}"),
        &format!("configmap/{trust_map}"),
    ] {
        env.kubectl.ok(&[
            "delete",
            object,
            "-n",
            KUBEWARDEN_NAMESPACE,
            "--ignore-not-found",
            "--wait=true",
        ])?;
    }
    outcome
}

/// [`signature_required`]'s checks, with PolicyServer `server` requiring the
/// key in ConfigMap `key_map`, verified with the trust config in `trust_map`.
pub(crate) fn verify_signatures(
    env: &Env,
    server: &str,
    key_map: &str,
    trust_map: &str,
) -> Result<(), String> {
    let release = signing::key_pair(&env.cluster.workdir.join("signing"), "release")?;
    let module = env.protect.module().to_string();
    let repository = kubewarden_charts::module_repository(&module)?;
    signing::push(env, &env.registry.url(repository), Some(&release))?;
    let unsigned_repository = repository.replacen(":", "-unsigned:", 1);
    signing::push(env, &env.registry.url(&unsigned_repository), None)?;
    let unsigned_module = module.replacen(repository, &unsigned_repository, 1);
    env.kubectl
        .apply(&signing::verification_config_map(key_map, &release.public)?)?;
    env.kubectl
        .apply(&signing::sigstore_trust_config_map(trust_map)?)?;
    let policy_server = kubewarden_charts::verifying_policy_server(
        server,
        kubewarden_charts::module_host(&module)?,
        key_map,
        trust_map,
    )?;
    // kubewarden-controller's webhook reads the ConfigMaps from its cache.
    wait_for("the PolicyServer admitted", SETTLE, || {
        env.kubectl.apply(&policy_server.to_string())
    })?;

    // kubewarden-controller's webhook, called through its Service, may
    // reset a connection while kube-proxy or its pod settles: asked again.
    let apply_policy = |policy: &serde_json::Value| {
        wait_for("kubewarden-controller admitting the policy", SETTLE, || {
            env.kubectl.apply(&policy.to_string())
        })
    };
    let signed = kubewarden_charts::protect_policy("memcached-signed", server, &module)?;
    apply_policy(&signed)?;
    let active =
        kubewarden_charts::wait_active(&env.kubectl, "memcached-signed", Duration::from_secs(180))?;
    let deployment = format!("deployment/policy-server-{server}");
    let log = env
        .kubectl
        .ok(&["logs", &deployment, "-n", KUBEWARDEN_NAMESPACE])?;
    check(
        log.contains("verified-signatures"),
        format!("policy-server-{server} loaded the policy without verifying it:\n{log}"),
    )?;

    let unsigned =
        kubewarden_charts::protect_policy("memcached-unsigned", server, &unsigned_module)?;
    apply_policy(&unsigned)?;
    // policy-server's own words for this policy and this reason
    // (policy_downloader.rs, policy-fetcher's verify/mod.rs).
    let refused = |line: &&str| {
        line.contains("policy cannot be verified")
            && line.contains("policy=\"clusterwide-memcached-unsigned\"")
            && line.contains("no signatures found for image")
    };
    let selector = format!("kubewarden/policy-server={server}");
    let refusal = wait_for(
        "a policy-server pod refusing the unsigned policy",
        Duration::from_secs(120),
        || {
            let pods = env
                .kubectl
                .get(&["pods", "-n", KUBEWARDEN_NAMESPACE, "-l", &selector])?;
            for pod in pods["items"].as_array().into_iter().flatten() {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                for previous in ["--previous=false", "--previous=true"] {
                    let outcome = env
                        .kubectl
                        .run(&["logs", name, "-n", KUBEWARDEN_NAMESPACE, previous], None);
                    if let Some(line) = outcome.stdout.lines().find(refused) {
                        return Ok(line.to_string());
                    }
                }
            }
            Err("no pod has said so yet".into())
        },
    )?;
    let status = |name: &str| -> Result<Value, String> {
        Ok(env.kubectl.get(&["clusteradmissionpolicy", name])?["status"].clone())
    };
    let unsigned_status = status("memcached-unsigned")?;
    check(
        unsigned_status["policyStatus"] != "active",
        format!("the unsigned policy is active: {unsigned_status}"),
    )?;
    let signed_status = status("memcached-signed")?;
    check(
        signed_status["policyStatus"] == "active",
        format!("the signed policy left active: {signed_status}"),
    )?;
    println!(
        "     signed policy active {:.1}s after kubectl apply; the unsigned one {}: {}",
        active.as_secs_f64(),
        unsigned_status["policyStatus"],
        refusal.chars().take(300).collect::<String>()
    );
    Ok(())
}

/// Kubewarden installed as its users install it. The suite's own
/// policy-server webhook goes first, so the scenarios after this one are
/// judged by the PolicyServer pod; Memcacheds created meanwhile, judged by
/// nothing, are what the audit scanner must report.
pub(crate) fn kubewarden_from_its_charts(env: &mut Env) -> Result<(), String> {
    let audited = AUDITED;
    let protect = env.protect.clone();
    env.unregister(&protect)?;
    env.wait_for_no_protection()?;
    ensure_namespace(env, audited)?;
    // Admitted by the CRD's schema, refused by the policy.
    let invalid = [
        ("capitals-in-image", "Memcached:1.6"),
        ("space-in-image", "memcached :1.6"),
    ];
    for (name, image) in invalid {
        env.kubectl
            .apply(&memcached(audited, name, json!({"image": image})))?;
    }
    // Stored as every Memcached created before warm restarts were defaulted:
    // without the field (scenario "warm restarts by default" judges it again).
    env.kubectl.apply(&memcached_as_written(
        audited,
        "valid",
        json!({"replicas": 1}),
    ))?;

    let took = env.kubewarden_takes_over().inspect_err(|_| {
        // The later scenarios need a policy judging their Memcacheds.
        if let Err(e) = env.register(&protect) {
            eprintln!("re-registering the suite's policy-server webhook: {e}");
        }
    })?;

    let webhook = env
        .kubectl
        .get(&["mutatingwebhookconfiguration", &protect.id()])?;
    let service = &webhook["webhooks"][0]["clientConfig"]["service"];
    check(
        service["namespace"] == KUBEWARDEN_NAMESPACE
            && service["name"] == format!("policy-server-{}", kubewarden_charts::POLICY_SERVER),
        format!("{} calls {service}", protect.id()),
    )?;
    let created = env.kubectl.run(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&memcached_as_written(audited, "defaulted", json!({}))),
    );
    let defaulted: Value =
        serde_json::from_str(&created.stdout).map_err(|e| format!("{e}: {}", created.stderr))?;
    check(
        defaulted["spec"]["image"] == "memcached:1.6"
            && defaulted["spec"]["warmRestart"]["enabled"] == true,
        format!(
            "not defaulted through the PolicyServer: {}",
            defaulted["spec"]
        ),
    )?;

    let scanned = kubewarden_charts::audit(&env.kubectl, "audit-now")?;
    let reports = kubewarden_charts::reports(&env.kubectl, audited)?;
    for (name, _) in invalid {
        let results = reports.get(name).cloned().unwrap_or_default();
        check(
            results
                .iter()
                .any(|r| r.policy == env.audit.id() && r.result == "fail"),
            format!("{name}'s report: {results:?}"),
        )?;
    }
    let valid = reports.get("valid").cloned().unwrap_or_default();
    check(
        !valid.is_empty() && valid.iter().all(|r| r.result == "pass"),
        format!("valid's report: {valid:?}"),
    )?;
    println!(
        "     Kubewarden {} installed and its PolicyServer Ready in {:.1}s; both policies active \
         {:.1}s after kubectl apply; audit of {} Memcacheds in {:.1}s",
        kubewarden_charts::VERSION,
        took.installed.as_secs_f64(),
        took.active.as_secs_f64(),
        reports.len(),
        scanned.as_secs_f64()
    );
    Ok(())
}
