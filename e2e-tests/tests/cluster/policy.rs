//! The policy in policy-server: the artifact it pulled from the registry, monitor mode, a
//! namespace's Pod Security label read per request, and `kubectl scale` judged as an apply is.

use super::*;

/// policy-server downloaded the module from the registry into its download
/// directory, and it is the annotated policy byte for byte.
pub(crate) fn artifact_from_registry(env: &mut Env) -> Result<(), String> {
    let downloads = env.cluster.workdir.join("policies");
    let mut modules = Vec::new();
    let mut dirs = vec![downloads.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                modules.push(path);
            }
        }
    }
    let annotated = std::fs::read(e2e_tests::workspace_root().join("annotated-policy.wasm"))
        .map_err(|e| e.to_string())?;
    // Both policies load the same reference: one download.
    check(
        modules.len() == 1,
        format!("policy-server downloaded {modules:?}"),
    )?;
    let host = env
        .artifact
        .reference
        .trim_start_matches("registry://")
        .split('/')
        .next()
        .unwrap_or_default();
    check(
        modules[0].to_string_lossy().contains(host),
        format!("{} is not from {host}", modules[0].display()),
    )?;
    check(
        std::fs::read(&modules[0]).map_err(|e| e.to_string())? == annotated,
        format!(
            "{} differs from annotated-policy.wasm",
            modules[0].display()
        ),
    )
}

/// deploy/policy.yaml at `podSecurityLevel: baseline` alone in the
/// admission chain: policy-server reads each request's Namespace (Kubewarden's
/// context-aware lookup, as the ServiceAccount and RBAC of Kubewarden's own
/// chart). A Memcached running as root is refused where the namespace
/// enforces `restricted`, admitted where it enforces `privileged`, and
/// refused there once the label changes. The protect policy's webhook is
/// restored afterwards, whatever happened.
pub(crate) fn namespace_pod_security(env: &mut Env) -> Result<(), String> {
    let (strict, lenient) = ("psa-restricted", "psa-privileged");
    for (ns, level) in [(strict, "restricted"), (lenient, "privileged")] {
        ensure_namespace(env, ns)?;
        label_enforce(env, ns, level)?;
    }
    env.unregister(&env.protect)?;
    env.register(&env.namespaced)?;
    let result = judged_by_namespace(env, strict, lenient);
    let cleanup = env
        .unregister(&env.namespaced)
        .and_then(|()| env.register(&env.protect))
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup)
}

fn label_enforce(env: &Env, namespace: &str, level: &str) -> Result<(), String> {
    let label = format!("pod-security.kubernetes.io/enforce={level}");
    env.kubectl
        .ok(&["label", "namespace", namespace, &label, "--overwrite"])
        .map(drop)
}

fn judged_by_namespace(env: &Env, strict: &str, lenient: &str) -> Result<(), String> {
    let root = json!({"security": {"containerSecurityContext": {
        "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
    }}});
    let dry_run = |ns: &str| {
        env.kubectl.run(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&memcached(ns, "root", root.clone())),
        )
    };
    let refused_in = |ns: &str| {
        let outcome = dry_run(ns);
        let expected = [
            format!(
                "error when creating \"STDIN\": admission webhook \"{}\" denied the request: ",
                env.namespaced.webhook_name()
            ),
            format!(
                "Memcached.memcached.c5c3.io \"root\" is forbidden: violates PodSecurity \"restricted:latest\" \
                 (enforced by namespace \"{ns}\"): spec.security.containerSecurityContext.runAsNonRoot: "
            ),
            "spec.security.containerSecurityContext.runAsUser: runAsUser=0 (container \"memcached\" must not set runAsUser=0)"
                .to_string(),
        ];
        if !outcome.success && expected.iter().all(|part| outcome.stderr.contains(part)) {
            Ok(())
        } else {
            Err(format!(
                "not refused by the namespace's label: {}",
                outcome.stderr.trim()
            ))
        }
    };
    // Until kube-apiserver has swapped the webhooks, the protect policy may still answer.
    wait_for(
        "the namespaced policy alone",
        Duration::from_secs(30),
        || refused_in(strict),
    )?;
    wait_for(
        "a privileged namespace admits root",
        Duration::from_secs(30),
        || {
            let outcome = dry_run(lenient);
            if outcome.success {
                Ok(())
            } else {
                Err(outcome.stderr)
            }
        },
    )?;
    // Stored while the namespace allowed root, scaled after it was labelled:
    // the scale-up is judged as the apply would be, from the stored
    // Memcached policy-server reads; scaling down is not.
    env.kubectl
        .apply(&memcached(lenient, "root", root.clone()))?;
    let relabelled = Instant::now();
    label_enforce(env, lenient, "restricted")?;
    wait_for("the new label seen", Duration::from_secs(30), || {
        refused_in(lenient)
    })?;
    println!(
        "    a changed enforce label judged {:.1}s after kubectl label",
        relabelled.elapsed().as_secs_f64()
    );
    let scale = |replicas: &str| {
        env.kubectl.run(
            &["scale", "memcached", "root", "-n", lenient, replicas],
            None,
        )
    };
    let up = scale("--replicas=2");
    let expected = [
        "admission webhook".to_string(),
        format!(
            "Memcached.memcached.c5c3.io \"root\" is forbidden: violates PodSecurity \"restricted:latest\" \
             (enforced by namespace \"{lenient}\")"
        ),
        "runAsUser=0".to_string(),
    ];
    check(
        !up.success && expected.iter().all(|part| up.stderr.contains(part)),
        format!(
            "kubectl scale up in a namespace labelled since: {}{}",
            up.stdout, up.stderr
        ),
    )?;
    let down = scale("--replicas=0");
    check(down.success, format!("kubectl scale down: {}", down.stderr))?;
    println!("    kubectl scale up refused as the apply is, scale down admitted");
    env.kubectl
        .ok(&["delete", "memcached", "root", "-n", lenient, "--wait=true"])
        .map(drop)
}

/// `kubectl scale` writes `spec.replicas` through the `scale` subresource,
/// whose Scale tells the policy nothing about autoscaling: the CRD's CEL rule
/// on `spec` (`memcached_api::REPLICAS_WITH_AUTOSCALING_RULE`), which
/// kube-apiserver evaluates on the Memcached the scale update makes, refuses
/// it with the words the policy uses for the same spec. Without autoscaling
/// the same command scales.
pub(crate) fn scale_while_autoscaling(env: &mut Env) -> Result<(), String> {
    let ns = "scale-rule";
    ensure_namespace(env, ns)?;
    let autoscaled = json!({"resources": {"requests": {"cpu": "50m"}},
        "autoscaling": {"enabled": true, "minReplicas": 1, "maxReplicas": 3}});
    env.kubectl
        .apply(&memcached(ns, "autoscaled", autoscaled))?;
    env.kubectl
        .apply(&memcached(ns, "fixed", json!({"replicas": 1})))?;
    let result = scale_refused(env, ns);
    let cleanup = env
        .kubectl
        .ok(&["delete", "namespace", ns, "--wait=true"])
        .map(drop);
    result.and(cleanup)
}

fn scale_refused(env: &Env, ns: &str) -> Result<(), String> {
    let scale = |name: &str| {
        env.kubectl.run(
            &["scale", "memcached", name, "-n", ns, "--replicas=5"],
            None,
        )
    };
    let refused = scale("autoscaled");
    let expected = format!(
        "The Memcached \"autoscaled\" is invalid: spec.replicas: Invalid value: 5: {}",
        memcached_api::REPLICAS_WITH_AUTOSCALING
    );
    check(
        !refused.success && refused.stderr.contains(&expected),
        format!(
            "kubectl scale of an autoscaled Memcached: expected\n       {expected}\n     kubectl printed\n       {}{}",
            refused.stdout.trim(),
            refused.stderr.trim()
        ),
    )?;
    let stored = get(env, ns, "autoscaled")?;
    check(
        stored["spec"].get("replicas").is_none(),
        format!(
            "spec.replicas stored beside autoscaling: {}",
            stored["spec"]
        ),
    )?;
    let scaled = scale("fixed");
    check(
        scaled.success,
        format!(
            "kubectl scale without autoscaling: {}",
            scaled.stderr.trim()
        ),
    )?;
    let stored = get(env, ns, "fixed")?;
    check(
        stored["spec"]["replicas"] == 5,
        format!("scaled to {}", stored["spec"]["replicas"]),
    )
}

/// deploy/policy-audit.yaml alone in the admission chain: an invalid
/// Memcached is stored untouched, and policy-server logs the rejection it
/// would have sent. The protect policy's webhook is removed meanwhile (it
/// would refuse the object before the audit webhook saw it; validating
/// webhooks run after mutating ones) and restored afterwards, whatever happened.
pub(crate) fn audit_mode(env: &mut Env) -> Result<(), String> {
    let ns = "audit";
    ensure_namespace(env, ns)?;
    env.unregister(&env.protect)?;
    env.register(&env.audit)?;
    let result = audited(env, ns);
    let cleanup = env
        .kubectl
        .ok(&["delete", "memcached", "--all", "-n", ns, "--wait=true"])
        .and_then(|_| env.unregister(&env.audit))
        .and_then(|()| env.register(&env.protect))
        .and_then(|()| env.wait_for_protection());
    result.and(cleanup)
}

fn audited(env: &Env, ns: &str) -> Result<(), String> {
    let would_reject = |env: &Env| -> Result<usize, String> {
        Ok(env
            .policy_server
            .monitor_mode_evaluations()?
            .iter()
            .filter(|e| e.policy_id == env.audit.id() && e.namespace == ns && e.would_reject())
            .count())
    };
    // Schema-valid (validating webhooks run after the CRD's schema), refused by the policy.
    let fixture = fixtures()
        .into_iter()
        .find(|f| f.name == "seed-multiple-violations-v1beta1")
        .ok_or("fixture seed-multiple-violations-v1beta1 not found")?;
    check(!fixture.expected.accepted, "the fixture is not invalid")?;
    let mut object = fixture.review["request"]["object"].clone();
    object["metadata"]["namespace"] = json!(ns);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Until kube-apiserver has swapped the webhooks, dry runs are refused or unaudited.
    wait_for("the audit webhook alone", Duration::from_secs(30), || {
        let before = would_reject(env)?;
        let outcome = env.kubectl.run(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&object.to_string()),
        );
        if outcome.success && would_reject(env)? > before {
            Ok(())
        } else {
            Err(format!(
                "{} (no monitor-mode evaluation logged)",
                outcome.stderr.trim()
            ))
        }
    })?;
    let before = would_reject(env)?;
    env.kubectl.apply(&object.to_string())?;
    let stored = get(env, ns, &name)?;
    check(
        stored["spec"] == object["spec"],
        format!("the audit policy changed the spec: {}", stored["spec"]),
    )?;
    let reported: Vec<_> = env
        .policy_server
        .monitor_mode_evaluations()?
        .into_iter()
        .filter(|e| e.policy_id == env.audit.id() && e.namespace == ns && e.would_reject())
        .skip(before)
        .collect();
    // The message the protect policy would send, inside policy-server's
    // debug rendering of the response (quotes escaped).
    let message = fixture.expected.message(&name).replace('"', "\\\"");
    check(
        reported
            .first()
            .is_some_and(|e| e.response.contains(&message)),
        format!("policy-server logged {reported:?}, expected a would-be rejection with {message}"),
    )
}
