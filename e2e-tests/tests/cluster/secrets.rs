//! TLS and authentication from Secrets: proven by the controller's stats, a rotated Secret
//! rolling the pods, a missing Secret reported until it exists.

use super::*;

pub(crate) fn secrets(env: &mut Env) -> Result<(), String> {
    let ns = "secrets";
    ensure_namespace(env, ns)?;
    let tls = pki::issue(&["cache.secrets.svc"])?;
    env.kubectl.apply(&tls_secret(ns, "cache-tls", &tls))?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:first-password\n"))?;
    let secure = json!({"security": {
        "tls": {"enabled": true, "certificateSecretRef": {"name": "cache-tls"}},
        "sasl": {"enabled": true, "credentialsSecretRef": {"name": "cache-auth"}},
    }});
    env.kubectl.apply(&memcached(ns, "cache", secure))?;
    wait_ready(env, ns, "cache", 1)?;
    // Stats over TLS with the password prove memcached got the TLS and -Y flags.
    wait_for("stats over TLS with authentication", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        if mc["status"]["memcachedVersion"].is_string() {
            Ok(())
        } else {
            Err(mc["status"].to_string())
        }
    })?;

    // Rotating the password rolls the pods; stats keep working with the new one.
    let before = pod_names(env, ns, "cache")?;
    env.kubectl
        .apply(&auth_secret(ns, "cache-auth", "operator:second-password\n"))?;
    // Well inside the 60 s periodic reconcile: the Secret watch must notice.
    wait_for(
        "pods replaced after the rotation",
        Duration::from_secs(30),
        || {
            let now = pod_names(env, ns, "cache")?;
            if !now.is_empty() && now.iter().all(|p| !before.contains(p)) {
                Ok(())
            } else {
                Err(format!("{before:?} -> {now:?}"))
            }
        },
    )?;
    wait_ready(env, ns, "cache", 1)?;
    let served = served_by(env, ns, "cache")?;
    touch(env, ns, "cache")?;
    wait_for("stats with the rotated password", SETTLE, || {
        let mc = get(env, ns, "cache")?;
        let ok =
            mc["status"]["memcachedVersion"].is_string() && served_by(env, ns, "cache")? == served;
        if ok {
            Ok(())
        } else {
            Err(mc["status"].to_string())
        }
    })?;

    // A missing Secret: Degraded/SecretNotFound, recovered once it exists.
    env.kubectl.apply(&memcached(
        ns,
        "waiting",
        json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "later"}}}}),
    ))?;
    wait_for("Degraded/SecretNotFound", SETTLE, || {
        let mc = get(env, ns, "waiting")?;
        match condition(&mc, "Degraded") {
            Some(c) if c["status"] == "True" && c["reason"] == "SecretNotFound" => Ok(()),
            other => Err(format!("Degraded: {other:?}")),
        }
    })?;
    env.kubectl
        .apply(&auth_secret(ns, "later", "operator:password\n"))?;
    let mc = wait_ready(env, ns, "waiting", 1)?;
    check(
        condition_status(&mc, "Degraded") == Some("False"),
        "Degraded did not clear",
    )
}
