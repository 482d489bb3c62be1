//! What is shown of each applied object: stored whole, Ready, its
//! NetworkPolicy and its authentication in force, or refused (for want of
//! room, or for the Go operator's own reason).

use super::*;

/// The file the Go operator refuses is refused by the policy's webhook with
/// the Go operator's reason (the memory limit below `maxMemoryMB` plus its
/// overhead), and nothing is stored.
pub(super) fn refused_for_its_reason(
    env: &Env,
    file: &GoFile,
    outcome: &Outcome,
) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for object in file.memcacheds() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let limit = object["spec"]["resources"]["limits"]["memory"]
            .as_str()
            .unwrap_or_default();
        let least = object["spec"]["memcached"]["maxMemoryMB"]
            .as_i64()
            .unwrap_or_default()
            + GO_OPERATOR_OVERHEAD_MI;
        let reason = format!(
            "admission webhook \"{}\" denied the request: Memcached.memcached.c5c3.io \"{name}\" is invalid: \
             spec.resources.limits.memory: Invalid value: \"{limit}\": memory limit must be at least {least}Mi",
            env.protect.webhook_name()
        );
        if outcome.success || !outcome.stderr.contains(&reason) {
            problems.push(format!(
                "{}: expected refused with\n       {reason}\n     kubectl printed\n       {}",
                file.name,
                outcome.stderr.trim()
            ));
        }
        if exists(env, &file.namespace, "memcached", name)? {
            problems.push(format!("{}: refused, yet {name} is stored", file.name));
        }
    }
    Ok(problems)
}

/// Wait until every one of `wanted` is Ready with the replicas its stored
/// spec asks for (`replicas`, else autoscaling's `minReplicas`), all at once.
pub(super) fn wait_all_ready(env: &Env, wanted: &[(&GoFile, &Value)]) -> Result<(), String> {
    let what = format!("{} of the Go operator's Memcacheds Ready", wanted.len());
    wait_for(&what, SETTLE, || {
        let listed = env.kubectl.get(&["memcacheds", "-A"])?;
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let not_ready: Vec<String> = (wanted.iter())
            .filter_map(|(file, object)| {
                let found = items.iter().find(|m| {
                    m["metadata"]["namespace"] == file.namespace.as_str()
                        && m["metadata"]["name"] == object["metadata"]["name"]
                });
                let status = found.map_or(Value::Null, |m| m["status"].clone());
                let ready = found.is_some_and(|mc| {
                    let spec = &mc["spec"];
                    let replicas = (spec["replicas"].as_i64())
                        .or(spec["autoscaling"]["minReplicas"].as_i64())
                        .unwrap_or(1);
                    condition(mc, "Ready").is_some_and(|c| c["status"] == "True")
                        && status["readyReplicas"] == replicas
                        && status["observedGeneration"] == mc["metadata"]["generation"]
                });
                (!ready).then(|| format!("{}: {}", file.name, status["conditions"]))
            })
            .collect();
        check(not_ready.is_empty(), not_ready.join("; "))
    })
}

/// Every field of the file's Memcacheds is stored as written, read back at
/// the file's version.
pub(super) fn stored_whole(env: &Env, file: &GoFile) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for object in file.memcacheds() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let version = object["apiVersion"].as_str().unwrap_or_default();
        let resource = format!(
            "memcacheds.{}.memcached.c5c3.io",
            version.rsplit('/').next().unwrap_or_default()
        );
        let stored = env.kubectl.get(&[&resource, name, "-n", &file.namespace])?;
        let mut lost = Vec::new();
        not_as_written(object, &stored, String::new(), &mut lost);
        if !lost.is_empty() {
            problems.push(format!(
                "{}: not stored as written: {}",
                file.name,
                lost.join(", ")
            ));
        }
    }
    Ok(problems)
}

/// The fields of `written` (scalars, empty lists and maps) whose value in
/// `stored` differs, with what was stored.
pub(super) fn not_as_written(written: &Value, stored: &Value, at: String, out: &mut Vec<String>) {
    match written {
        Value::Object(fields) if !fields.is_empty() => {
            for (key, value) in fields {
                not_as_written(value, &stored[key], format!("{at}.{key}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, value) in items.iter().enumerate() {
                not_as_written(value, &stored[i], format!("{at}[{i}]"), out);
            }
        }
        _ if written != stored => out.push(format!("{at} is {stored}, written {written}")),
        _ => {}
    }
}

/// The Memcached's NetworkPolicy exists, owned by it, when it enables one
/// (`spec.networkPolicy` or the Go operator's `spec.security.networkPolicy`,
/// about which the policy warned): memcached's port open to its
/// `allowedSources` (to everyone without them, as the Go operator's);
/// none when it does not.
pub(super) fn network_policy(
    env: &Env,
    file: &GoFile,
    name: &str,
    warnings: &str,
) -> Result<(), String> {
    let ns = &file.namespace;
    let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
    let spec = &mc["spec"];
    let wanted = spec
        .get("networkPolicy")
        .unwrap_or(&spec["security"]["networkPolicy"]);
    let present = exists(env, ns, "networkpolicy", name)?;
    if wanted["enabled"] != true {
        return check(!present, format!("a NetworkPolicy {name}, none enabled"));
    }
    if !spec["security"]["networkPolicy"].is_null() {
        check(
            warnings.contains("Warning: spec.security.networkPolicy is where the Go operator"),
            format!("kubectl printed no warning about spec.security.networkPolicy: {warnings}"),
        )?;
    }
    check(
        present,
        format!("no NetworkPolicy {name}, though {wanted} enables one"),
    )?;
    let policy = env.kubectl.get(&["networkpolicy", name, "-n", ns])?;
    check(
        owned_by(&policy, &mc),
        format!(
            "NetworkPolicy owners {}",
            policy["metadata"]["ownerReferences"]
        ),
    )?;
    let memcached_rule = (policy["spec"]["ingress"].as_array().into_iter().flatten())
        .find(|rule| rule["ports"][0]["port"] == 11211)
        .ok_or_else(|| {
            format!(
                "NetworkPolicy {name} has no rule for port 11211: {}",
                policy["spec"]
            )
        })?;
    let from = memcached_rule["from"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match wanted["allowedSources"]
        .as_array()
        .filter(|s| !s.is_empty())
    {
        None => check(
            from.is_empty(),
            format!("port 11211 open only to {from:?}, no allowedSources"),
        ),
        Some(sources) => check(
            sources.iter().all(|s| from.contains(s)),
            format!("port 11211 open to {from:?}, not to every one of {sources:?}"),
        ),
    }
}

/// memcached answers on every pod as its security asks: with TLS, to the
/// controller's stats over TLS and not in plain text; with authentication, no
/// command before `set auth` with the credentials, a wrong password
/// refused, the right one admitted; without either, to anyone.
pub(super) fn access(
    env: &Env,
    file: &GoFile,
    name: &str,
    credentials: &BTreeMap<(String, String), String>,
) -> Result<(), String> {
    let ns = &file.namespace;
    let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
    let security = &mc["spec"]["security"];
    if security["tls"]["enabled"] == true {
        // A refused handshake does not keep it from Ready: its version in
        // the status is memcached's answer to the controller over TLS.
        wait_for(&format!("{ns}/{name}: stats over TLS"), SETTLE, || {
            let status = env.kubectl.get(&["memcached", name, "-n", ns])?["status"].clone();
            check(status["memcachedVersion"].is_string(), status.to_string())
        })?;
        return each_pod(env, ns, name, |ip| {
            check(
                memcached_version(ip).is_err(),
                format!("{ip} answers in plain text with TLS on"),
            )
        });
    }
    if security["sasl"]["enabled"] != true {
        // Waited for: a memcached filling its memory file on a loaded
        // machine may take longer than one read's timeout.
        return wait_for(
            &format!("every pod of {ns}/{name} answering"),
            SETTLE,
            || each_pod(env, ns, name, |ip| memcached_version(ip).map(drop)),
        );
    }
    let secret = security["sasl"]["credentialsSecretRef"]["name"]
        .as_str()
        .unwrap_or_default();
    let (user, password) = credentials
        .get(&(ns.clone(), secret.to_string()))
        .and_then(|content| content.lines().next()?.split_once(':'))
        .ok_or_else(|| format!("Secret {secret}: no user:password line"))?;
    // Once the pods have the Secret as it is now (a fixed one rolls them).
    wait_for(
        &format!("every pod of {ns}/{name} admitting {user}"),
        SETTLE,
        || {
            each_pod(env, ns, name, |ip| {
                Memcache::login(ip, user, password).map(drop)
            })
        },
    )?;
    each_pod(env, ns, name, |ip| {
        let answer = Memcache::connect(ip)?.reply("get some-key\r\n")?;
        check(
            answer.starts_with("CLIENT_ERROR"),
            format!("{ip} answered an unauthenticated get with {answer:?}"),
        )?;
        check(
            Memcache::login(ip, user, &format!("{password}-wrong")).is_err(),
            format!("{ip} admitted a wrong password"),
        )?;
        let mut session = Memcache::login(ip, user, password)?;
        session.command("set migrated 0 0 3\r\nyes\r\n", "STORED")?;
        Ok(())
    })
}

/// `each` for the address of every running pod of `ns/name` (one at least).
pub(super) fn each_pod(
    env: &Env,
    ns: &str,
    name: &str,
    each: impl FnMut(&str) -> Result<(), String>,
) -> Result<(), String> {
    let ips = pod_ips(env, ns, name)?;
    check(!ips.is_empty(), format!("no running pod of {ns}/{name}"))?;
    ips.iter().map(String::as_str).try_for_each(each)
}

/// The pods of a Memcached the Go operator expects Degraded (an image no
/// node can pull) ask for that image as written.
pub(super) fn pods_ask_for(
    env: &Env,
    file: &GoFile,
    name: &str,
    object: &Value,
) -> Result<(), String> {
    let image = &object["spec"]["image"];
    wait_for(
        &format!("{}: a Deployment running {image}", file.name),
        SETTLE,
        || {
            let deployment = env
                .kubectl
                .get(&["deployment", name, "-n", &file.namespace])?;
            let containers = deployment["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let memcached = containers.iter().find(|c| c["name"] == "memcached");
            check(
                memcached.is_some_and(|c| &c["image"] == image),
                format!("containers {containers:?}"),
            )
        },
    )
}

/// A LimitRange of [`ROOM_MIB`] of memory per container in `namespace`.
pub(super) fn room_limit(namespace: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "LimitRange",
        "metadata": {"name": "test-bed-room", "namespace": namespace},
        "spec": {"limits": [{"type": "Container", "max": {"memory": format!("{ROOM_MIB}Mi")}}]},
    })
    .to_string()
}

/// A Memcached whose pods need more memory than the test bed's room: its
/// Deployment mounts its Secrets (of the credentials, the key the Go
/// operator reads), its pods are refused by the LimitRange, and it is not
/// Ready.
pub(super) fn no_room(env: &Env, file: &GoFile, name: &str) -> Result<(), String> {
    let ns = &file.namespace;
    wait_for(
        &format!("{ns}/{name}'s pods refused by the LimitRange"),
        SETTLE,
        || {
            let events = env.kubectl.get(&[
                "events",
                "-n",
                ns,
                "--field-selector",
                "reason=FailedCreate",
            ])?;
            let refused = (events["items"].as_array().into_iter().flatten()).any(|e| {
                e["involvedObject"]["name"]
                    .as_str()
                    .is_some_and(|o| o.starts_with(name))
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("maximum memory usage per Container"))
            });
            check(
                refused,
                format!("no FailedCreate event for {name} naming the LimitRange"),
            )
        },
    )?;
    let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
    check(
        condition(&mc, "Ready").is_some_and(|c| c["status"] == "False"),
        format!("Ready is not False: {}", mc["status"]["conditions"]),
    )?;
    let deployment = env.kubectl.get(&["deployment", name, "-n", ns])?;
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let security = &mc["spec"]["security"];
    // The TLS Secret whole; of the credentials, the key the Go operator reads.
    for (reference, key) in [
        (
            &security["tls"]["certificateSecretRef"]["name"],
            Value::Null,
        ),
        (
            &security["sasl"]["credentialsSecretRef"]["name"],
            json!("password-file"),
        ),
    ] {
        let Some(secret) = reference.as_str() else {
            continue;
        };
        check(
            volumes.iter().any(|v| {
                v["secret"]["secretName"] == secret && v["secret"]["items"][0]["key"] == key
            }),
            format!("no volume of Secret {secret} (key {key}): {volumes:?}"),
        )?;
    }
    Ok(())
}
