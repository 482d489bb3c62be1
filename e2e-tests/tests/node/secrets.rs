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
