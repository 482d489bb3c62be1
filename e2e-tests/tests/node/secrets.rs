//! TLS and authentication from the Secret files the kubelet mounts, and the exporter sidecar.

use super::*;

/// With monitoring on, the pod runs the exporter beside memcached; its
/// metrics on the pod IP carry memcached's own numbers.
pub(crate) fn exporter_scraped(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 100;
    let name = "monitored";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["monitoring"] = json!({"enabled": true, "exporterImage": node::EXPORTER_IMAGE});
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let pod = pod_of(env, name)?;
    let statuses = pod["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(
        statuses.len() == 2 && statuses.iter().all(|s| s["ready"] == true),
        format!("container statuses {statuses:?}"),
    )?;
    let ip = pod_ip(&pod)?;
    fill(&ip, KEYS)?;
    let address = format!("{ip}:9150").parse().map_err(|e| format!("{e}"))?;
    let metrics = wait_for("the exporter's metrics", SETTLE, || {
        http::get(address, "/metrics")
    })?;
    let sample = |metric: &str| {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(metric)?.strip_prefix(' '))
            .unwrap_or_default()
            .to_string()
    };
    let (up, items) = (sample("memcached_up"), sample("memcached_current_items"));
    println!("     {ip}:9150/metrics: memcached_up {up}, memcached_current_items {items}");
    check(up == "1", format!("memcached_up {up:?}"))?;
    check(
        items == KEYS.to_string(),
        format!("memcached_current_items {items:?}, {KEYS} keys set"),
    )?;
    // The pod's security context applies to the sidecar too.
    let state = NodeState::read(&env.cluster.workdir)?;
    let exporters: Vec<_> = state
        .processes()
        .into_iter()
        .filter(|p| p.name == "memcached_expor")
        .collect();
    check(
        exporters.len() == 1 && exporters[0].uid == 11211,
        format!("exporter processes under the node: {exporters:?}"),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// TLS and `-Y` authentication from the Secret volumes the kubelet mounts
/// (group-readable through the pod's fsGroup): memcached starts, plain text
/// is refused, the controller reads stats over TLS with the password; a new
/// password in the Secret rolls the pod, and the controller reads on with it.
pub(crate) fn tls_and_auth(env: &mut Env) -> Result<(), String> {
    let name = "secure";
    ensure_namespace(env, NAMESPACE)?;
    let tls = pki::issue(&[&format!("{name}.{NAMESPACE}.svc")])?;
    let secrets = |password: &str| {
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
             "metadata": {"name": "secure-tls", "namespace": NAMESPACE},
             "stringData": {"tls.crt": tls.cert, "tls.key": tls.key, "ca.crt": tls.ca}},
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "secure-auth", "namespace": NAMESPACE},
             "stringData": {"auth": format!("app:{password}\n")}},
        ]})
        .to_string()
    };
    env.kubectl.apply(&secrets("first-password"))?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["security"] = json!({
        "sasl": {"enabled": true, "credentialsSecretRef": {"name": "secure-auth"}},
        "tls": {"enabled": true, "certificateSecretRef": {"name": "secure-tls"}},
    });
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    stats_read_by_controller(env, name)?;
    let before = pod_of(env, name)?;
    let pod_name = before["metadata"]["name"].as_str().unwrap_or_default();
    let listing = busybox(
        env,
        pod_name,
        &[
            "ls",
            "-lnL",
            "/etc/memcached/auth/auth",
            "/etc/memcached/tls/tls.key",
        ],
    );
    check(
        listing.success
            && listing.stdout.lines().count() == 2
            && listing
                .stdout
                .lines()
                .all(|l| l.split_whitespace().nth(3) == Some("11211")),
        format!(
            "the mounted Secret files (group 11211 from fsGroup):\n{}{}",
            listing.stdout, listing.stderr
        ),
    )?;
    check(
        stats(&pod_ip(&before)?).is_err(),
        "memcached answered plain text with TLS on",
    )?;
    env.kubectl.apply(&secrets("second-password"))?;
    let rotated = Instant::now();
    let after = wait_for("a new pod with the rotated password, Ready", SETTLE, || {
        let pods = serving(pods_of(env, name)?);
        match pods.as_slice() {
            [pod]
                if pod["metadata"]["uid"] != before["metadata"]["uid"]
                    && condition_status(pod, "Ready") == Some("True") =>
            {
                Ok(pod.clone())
            }
            _ => Err(format!("pods {:?}", summary(&pods))),
        }
    })?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let stats_after = stats_read_by_controller(env, name)?;
    println!(
        "     Secret files {:?}; new password: pod {} Ready {:.1}s after the rotation, \
         the controller reads stats with it (version {stats_after})",
        listing
            .stdout
            .lines()
            .map(|l| l.split_whitespace().take(4).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>(),
        after["metadata"]["name"],
        rotated.elapsed().as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// The controller's last stats read of `name`'s pods, which needs TLS and
/// the password: the memcached version it reports, once every pod answered.
pub(crate) fn stats_read_by_controller(env: &Env, name: &str) -> Result<String, String> {
    wait_for("the controller reading stats", SETTLE, || {
        let mc = env.kubectl.get(&["memcached", name, "-n", NAMESPACE])?;
        let status = &mc["status"];
        match status["memcachedVersion"].as_str() {
            Some(version) if condition_status(&mc, "Degraded") != Some("True") => {
                Ok(version.to_string())
            }
            _ => Err(format!("status {status}")),
        }
    })
}

/// A certificate renewed under the same CA, as cert-manager renews one (the
/// same Secret, a new `tls.crt` and `tls.key`): the controller has each pod's
/// running memcached load it (`refresh_certs`) once the kubelet wrote it into
/// the pod, with warm restarts on and off: the same pods and memcached
/// processes, 0 container restarts, every key served, the workloads' specs
/// untouched, the renewed certificate presented (seen by `openssl s_client`)
/// and a `CertificateReloaded` Event naming each pod.
pub(crate) fn certificate_renewed(env: &mut Env) -> Result<(), String> {
    const KEYS: usize = 200;
    const MEMCACHEDS: [(&str, bool); 2] = [("renew-warm", true), ("renew-cold", false)];
    ensure_namespace(env, NAMESPACE)?;
    let names: Vec<String> = (MEMCACHEDS.iter())
        .map(|(name, _)| format!("{name}.{NAMESPACE}.svc"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let [first, renewed]: [pki::Pki; 2] =
        (pki::issue_renewed(&names, 2)?.try_into()).map_err(|_| "two certificates".to_string())?;
    let secret = |pki: &pki::Pki| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": "renew-tls", "namespace": NAMESPACE},
               "stringData": {"tls.crt": pki.cert, "tls.key": pki.key, "ca.crt": pki.ca}})
        .to_string()
    };
    env.kubectl.apply(&secret(&first))?;
    env.kubectl.apply(&auth_secret(
        NAMESPACE,
        "renew-auth",
        "app:renew-password\n",
    ))?;
    for (name, warm) in MEMCACHEDS {
        let mut spec = node::scheduling();
        spec["replicas"] = json!(2);
        spec["warmRestart"] = json!({"enabled": warm});
        spec["security"] = json!({
            "sasl": {"enabled": true, "credentialsSecretRef": {"name": "renew-auth"}},
            "tls": {"enabled": true, "certificateSecretRef": {"name": "renew-tls"}},
        });
        env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    }
    let ca = env.cluster.workdir.join("renew-ca.crt");
    std::fs::write(&ca, &first.ca).map_err(|e| format!("{}: {e}", ca.display()))?;
    let fill: String = (0..KEYS)
        .map(|i| format!("set key-{i} 0 0 1 noreply\r\nx\r\n"))
        .collect();
    let mut before = Vec::new();
    for (name, _) in MEMCACHEDS {
        wait_ready(env, NAMESPACE, name, 2)?;
        stats_read_by_controller(env, name)?;
        for pod in pods_of(env, name)? {
            over_tls(&pod_ip(&pod)?, name, &ca, &fill)?;
            before.push((name, pod));
        }
    }
    let workloads = |env: &Env| -> Result<Vec<Value>, String> {
        (MEMCACHEDS.iter())
            .map(|(name, _)| {
                // Its generation moves with the Secret versions the controller
                // notes in its annotations (a Deployment counts those too).
                let workload = env.kubectl.get(&["deployment", name, "-n", NAMESPACE])?;
                Ok(workload["spec"].clone())
            })
            .collect()
    };
    let workloads_before = workloads(env)?;
    let pids_before = (before.iter())
        .map(|(name, pod)| Ok(over_tls(&pod_ip(pod)?, name, &ca, "")?.pid))
        .collect::<Result<Vec<_>, String>>()?;

    env.kubectl.apply(&secret(&renewed))?;
    let renewed_at = Instant::now();
    let renewed_leaf = pem_body(&renewed.cert);
    wait_for(
        "every pod presenting the renewed certificate",
        SETTLE * 2,
        || {
            let mut presented = Vec::new();
            for (name, pod) in &before {
                let session = over_tls(&pod_ip(pod)?, name, &ca, "")?;
                presented.push(pem_body(&session.certificate) == renewed_leaf);
            }
            (presented.iter().all(|p| *p))
                .then_some(())
                .ok_or_else(|| format!("renewed presented by pod: {presented:?}"))
        },
    )?;
    let took = renewed_at.elapsed();
    let mut after = Vec::new();
    let mut served = Vec::new();
    let mut pids_after = Vec::new();
    let get: String = (0..KEYS).map(|i| format!("get key-{i}\r\n")).collect();
    for (name, _) in MEMCACHEDS {
        for pod in pods_of(env, name)? {
            let session = over_tls(&pod_ip(&pod)?, name, &ca, &get)?;
            served.push(session.answers.matches("VALUE key-").count());
            pids_after.push(session.pid);
            after.push(pod);
        }
    }
    let before: Vec<Value> = before.into_iter().map(|(_, pod)| pod).collect();
    same_pods(&before, &after)?;
    let restarts = container_restarts(&after) - container_restarts(&before);
    check(restarts == 0, format!("{restarts} container restarts"))?;
    check(
        pids_after == pids_before,
        format!("memcached pids {pids_before:?}, then {pids_after:?}"),
    )?;
    check(
        served.iter().all(|n| *n == KEYS),
        format!("keys served per pod {served:?} of {KEYS}"),
    )?;
    let workloads_after = workloads(env)?;
    check(
        workloads_after == workloads_before,
        format!("the Deployments' specs changed: {workloads_before:?}\nthen {workloads_after:?}"),
    )?;
    let events = env.kubectl.get(&[
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        "reason=CertificateReloaded",
    ])?;
    let notes: Vec<&str> = (events["items"].as_array().into_iter().flatten())
        .filter_map(|e| e["message"].as_str())
        .collect();
    let unnamed: Vec<&str> = (after.iter())
        .map(pod_name)
        .filter(|pod| !notes.iter().any(|n| n.contains(&format!("pod {pod} "))))
        .collect();
    check(
        unnamed.is_empty(),
        format!("no CertificateReloaded Event for pods {unnamed:?}: {notes:?}"),
    )?;
    println!(
        "     the renewed certificate presented by all {} pods (warm restarts on and off) {:.1}s \
         after the Secret changed; 0 container restarts, the same memcached pids, {KEYS} keys \
         served by each, the Deployments' specs unchanged",
        after.len(),
        took.as_secs_f64()
    );
    for (name, _) in MEMCACHEDS {
        env.kubectl
            .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])?;
    }
    Ok(())
}

/// What `openssl s_client` saw of memcached at `ip` over TLS (verified
/// against `ca` as the Service of Memcached `name`), logged in as `app`.
struct TlsSession {
    /// The certificate the server presented, PEM.
    certificate: String,
    /// Its memcached's pid (`stats`).
    pid: String,
    /// What it answered to the commands sent.
    answers: String,
}

/// Log in, send `commands`, read `stats`, quit: over TLS with `openssl
/// s_client`, which prints the server's certificate, then memcached's answers.
fn over_tls(
    ip: &str,
    name: &str,
    ca: &std::path::Path,
    commands: &str,
) -> Result<TlsSession, String> {
    use std::io::Write;
    let host = format!("{name}.{NAMESPACE}.svc");
    let mut child = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("{ip}:11211"),
            "-servername",
            &host,
        ])
        .args([
            "-verify_hostname",
            &host,
            "-verify_return_error",
            "-ign_eof",
        ])
        .arg("-CAfile")
        .arg(ca)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("openssl s_client: {e}"))?;
    let login = "app renew-password";
    let input = format!(
        "set auth 0 0 {}\r\n{login}\r\n{commands}stats\r\nquit\r\n",
        login.len()
    );
    (child.stdin.take())
        .ok_or("openssl s_client: no stdin")?
        .write_all(input.as_bytes())
        .map_err(|e| format!("openssl s_client: {e}"))?;
    let output = child
        .wait_with_output()
        .map_err(|e| format!("openssl s_client: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let failed = || {
        format!(
            "openssl s_client to {ip} ({host}): {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        )
    };
    let begin = stdout
        .find("-----BEGIN CERTIFICATE-----")
        .ok_or_else(failed)?;
    let end = stdout[begin..]
        .find("-----END CERTIFICATE-----")
        .map(|e| begin + e + "-----END CERTIFICATE-----".len())
        .ok_or_else(failed)?;
    let answers = stdout[end..].to_string();
    if !answers.contains("STORED") {
        return Err(format!("not logged in: {}", failed()));
    }
    let pid = (answers.lines())
        .find_map(|l| l.trim_end().strip_prefix("STAT pid "))
        .ok_or_else(failed)?
        .to_string();
    Ok(TlsSession {
        certificate: stdout[begin..end].to_string(),
        pid,
        answers,
    })
}

/// A PEM certificate's base64 text, without its armour and line breaks.
fn pem_body(pem: &str) -> String {
    (pem.lines())
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .concat()
}
