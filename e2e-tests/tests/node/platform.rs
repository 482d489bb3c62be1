//! The real node itself: Ready on containerd, pods in real containers, logs, DNS, StatefulSet names, restarts, graceful deletion, memory, a clean teardown.

use super::*;

pub(crate) fn node_ready(env: &mut Env) -> Result<(), String> {
    let real = env.kubectl.get(&["node", node::NAME])?;
    check(
        condition_status(&real, "Ready") == Some("True"),
        format!("{} is not Ready: {}", node::NAME, real["status"]),
    )?;
    let info = &real["status"]["nodeInfo"];
    let runtime = info["containerRuntimeVersion"].as_str().unwrap_or_default();
    check(
        runtime.starts_with("containerd://2."),
        format!("container runtime {runtime}"),
    )?;
    // The API server's own answer: `kubectl version` also parses the
    // client's version, which this kubectl (built from modules) lacks.
    let version: Value = serde_json::from_str(&env.kubectl.ok(&["get", "--raw", "/version"])?)
        .map_err(|e| e.to_string())?;
    let server = version["gitVersion"].as_str();
    check(
        info["kubeletVersion"].as_str() == server,
        format!(
            "kubelet {} against API server {server:?}",
            info["kubeletVersion"]
        ),
    )?;
    let taints = real["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check(
        taints
            .iter()
            .any(|t| t["key"] == node::TAINT && t["effect"] == "NoSchedule"),
        format!("taints {taints:?}"),
    )?;
    let nodes = env.kubectl.get(&["nodes", "-l", "type=kwok"])?;
    let kwok = nodes["items"].as_array().cloned().unwrap_or_default();
    check(
        !kwok.is_empty()
            && kwok
                .iter()
                .all(|n| condition_status(n, "Ready") == Some("True")),
        format!("{} kwok nodes, not all Ready", kwok.len()),
    )?;
    println!(
        "     {} {} ({runtime}, kubelet {}) beside {} kwok nodes",
        node::NAME,
        real["status"]["addresses"][0]["address"],
        info["kubeletVersion"],
        kwok.len()
    );
    Ok(())
}

pub(crate) fn pod_in_container(env: &mut Env) -> Result<(), String> {
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    // -vv: memcached logs its listeners and every command (kubectl logs).
    spec["memcached"] = json!({"verbosity": 2});
    let applied = Instant::now();
    env.kubectl.apply(&memcached(NAMESPACE, NAME, spec))?;
    wait_ready(env, NAMESPACE, NAME, 1)?;
    println!(
        "     apply -> Ready in {:.1}s",
        applied.elapsed().as_secs_f64()
    );
    let pod = the_pod(env)?;
    check(
        pod["spec"]["nodeName"] == node::NAME,
        format!("the pod runs on {}", pod["spec"]["nodeName"]),
    )?;
    let probe = &pod["spec"]["containers"][0]["readinessProbe"];
    check(
        probe["tcpSocket"]["port"] == "memcached",
        format!("readiness probe {probe}"),
    )?;
    let status = &pod["status"]["containerStatuses"][0];
    let id = status["containerID"].as_str().unwrap_or_default();
    check(
        id.starts_with("containerd://") && status["ready"] == true,
        format!("container status {status}"),
    )?;
    check(
        status["image"] == "docker.io/library/memcached:1.6"
            && status["imageID"]
                .as_str()
                .is_some_and(|i| i.contains("@sha256:")),
        format!("image {} ({})", status["image"], status["imageID"]),
    )?;
    // The container's process: memcached under the node, as uid 11211.
    let state = NodeState::read(&env.cluster.workdir)?;
    let processes = state.processes();
    let memcached: Vec<_> = processes.iter().filter(|p| p.name == "memcached").collect();
    check(
        memcached.len() == 1 && memcached[0].uid == 11211,
        format!("memcached processes under the node: {memcached:?}"),
    )
}

pub(crate) fn stats_and_logs(env: &mut Env) -> Result<(), String> {
    let ip = pod_ip(&the_pod(env)?)?;
    let stats = stats(&ip)?;
    // PID 1: memcached is its container's init (docker-entrypoint.sh execs it);
    // the release memcached:1.6 is on the node (today's, its image's label).
    let release = node::memcached_release(&env.binaries, "memcached")?;
    for (key, expected) in [("pid", "1"), ("version", release.as_str())] {
        check(
            stats.get(key).map(String::as_str) == Some(expected),
            format!("STAT {key} {:?}, expected {expected}", stats.get(key)),
        )?;
    }
    let pod = the_pod(env)?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let logs = wait_for("the stats connection in the logs", SETTLE, || {
        let logs = env
            .kubectl
            .ok(&["logs", "-n", NAMESPACE, name, "-c", "memcached"])?;
        if logs.contains("server listening") && logs.contains("stats") {
            Ok(logs)
        } else {
            Err(logs)
        }
    })?;
    println!(
        "     {ip}:11211 STAT pid 1, {} lines of logs",
        logs.lines().count()
    );
    Ok(())
}

pub(crate) fn cluster_dns(env: &mut Env) -> Result<(), String> {
    let pod = the_pod(env)?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let ip = pod_ip(&pod)?;
    let ready = ready_endpoints(env, NAMESPACE, NAME)?;
    check(
        ready.iter().any(|e| e["addresses"][0] == ip),
        format!("{NAME}'s ready endpoints {ready:?} lack {ip}"),
    )?;
    // The kubelet gives the pod CoreDNS and the search path that completes
    // `<svc>.<ns>.svc` to a cluster.local name (busybox's nslookup does not
    // search, so the completed names are asked).
    let resolv = busybox(env, name, &["cat", "/etc/resolv.conf"]);
    let resolv = resolv.stdout + &resolv.stderr;
    let search = format!("search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local");
    check(
        resolv.contains("nameserver 10.96.0.10") && resolv.contains(&search),
        format!("the pod's /etc/resolv.conf:\n{resolv}"),
    )?;
    for (query, answer) in [
        ("kubernetes.default.svc.cluster.local", "10.96.0.1"),
        (
            &format!("{NAME}.{NAMESPACE}.svc.cluster.local") as &str,
            ip.as_str(),
        ),
    ] {
        let out = busybox(env, name, &["nslookup", "-type=a", query]);
        let resolved = out
            .stdout
            .split("Name:")
            .skip(1)
            .any(|record| record.contains(&format!("Address: {answer}")));
        check(
            resolved,
            format!("nslookup {query} in the pod:\n{}{}", out.stdout, out.stderr),
        )?;
    }
    Ok(())
}

/// StatefulSet pods keep their names: every `<name>-<i>.<name>.<ns>.svc` of
/// `status.serverList` resolves through CoreDNS to that pod, also after the
/// pod is deleted and comes back (with a new IP, under the same name).
pub(crate) fn stateful_set_names(env: &mut Env) -> Result<(), String> {
    let name = "sharded";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(3);
    spec["workload"] = json!("StatefulSet");
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    let mc = wait_ready(env, NAMESPACE, name, 3)?;
    let servers: Vec<String> = (0..3)
        .map(|i| format!("{name}-{i}.{name}.{NAMESPACE}.svc:11211"))
        .collect();
    check(
        mc["status"]["serverList"] == json!(servers),
        format!("serverList {}", mc["status"]["serverList"]),
    )?;
    let resolved = |asker: &str| -> Result<(), String> {
        for i in 0..3 {
            let pod = env
                .kubectl
                .get(&["pod", &format!("{name}-{i}"), "-n", NAMESPACE])?;
            let ip = pod_ip(&pod)?;
            let host = format!("{name}-{i}.{name}.{NAMESPACE}.svc.cluster.local");
            wait_for(&format!("{host} -> {ip}"), Duration::from_secs(30), || {
                let out = busybox(env, asker, &["nslookup", "-type=a", &host]);
                check(
                    out.stdout
                        .split("Name:")
                        .skip(1)
                        .any(|r| r.contains(&format!("Address: {ip}"))),
                    format!("nslookup {host}:\n{}{}", out.stdout, out.stderr),
                )
            })?;
        }
        Ok(())
    };
    resolved(&format!("{name}-0"))?;
    let old = env
        .kubectl
        .get(&["pod", &format!("{name}-1"), "-n", NAMESPACE])?;
    env.kubectl.ok(&[
        "delete",
        "pod",
        &format!("{name}-1"),
        "-n",
        NAMESPACE,
        "--wait=true",
    ])?;
    let back = wait_for(&format!("{name}-1 back and Ready"), SETTLE, || {
        let pod = env
            .kubectl
            .get(&["pod", &format!("{name}-1"), "-n", NAMESPACE])?;
        (pod["metadata"]["uid"] != old["metadata"]["uid"]
            && condition_status(&pod, "Ready") == Some("True"))
        .then_some(pod.clone())
        .ok_or_else(|| "not yet".to_string())
    })?;
    resolved(&format!("{name}-0"))?;
    let mc = wait_ready(env, NAMESPACE, name, 3)?;
    check(
        mc["status"]["serverList"] == json!(servers),
        format!(
            "serverList after the pod came back {}",
            mc["status"]["serverList"]
        ),
    )?;
    println!(
        "     {servers:?} resolve to their pods; {name}-1 came back at {} (was {})",
        back["status"]["podIP"], old["status"]["podIP"]
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// SIGKILL to memcached inside its container (from the node's side): the
/// kubelet restarts the container in the same pod, which is Ready again.
pub(crate) fn killed_memcached_restarted(env: &mut Env) -> Result<(), String> {
    let name = "crashing";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let before = pod_of(env, name)?;
    let id = before["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.strip_prefix("containerd://"))
        .ok_or_else(|| format!("container status {}", before["status"]))?
        .to_string();
    // The container's processes are in a cgroup named after its ID.
    let state = NodeState::read(&env.cluster.workdir)?;
    let process = state
        .processes()
        .into_iter()
        .find(|p| {
            p.name == "memcached"
                && std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid))
                    .is_ok_and(|cgroups| cgroups.contains(&id))
        })
        .ok_or_else(|| format!("no memcached process in container {id}"))?;
    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &process.pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    check(
        status.success(),
        format!("kill -KILL {}: {status}", process.pid),
    )?;
    let after = wait_for("the container restarted and Ready", SETTLE, || {
        let pod = pod_of(env, name)?;
        let status = &pod["status"]["containerStatuses"][0];
        (status["restartCount"] == 1 && status["ready"] == true)
            .then_some(pod.clone())
            .ok_or_else(|| format!("pods {:?}", summary(std::slice::from_ref(&pod))))
    })?;
    let took = killed.elapsed();
    let last = &after["status"]["containerStatuses"][0]["lastState"]["terminated"];
    check(
        after["metadata"]["uid"] == before["metadata"]["uid"] && last["exitCode"] == 137,
        format!("the same pod, its last state {last}"),
    )?;
    let uptime = stats(&pod_ip(&after)?)?
        .get("uptime")
        .cloned()
        .unwrap_or_default();
    println!(
        "     memcached (pid {}) killed: restarted by the kubelet in the same pod, Ready {:.1}s later, uptime {uptime}s",
        process.pid,
        took.as_secs_f64()
    );
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

/// Deleting a pod with graceful shutdown on: its endpoint turns not ready at
/// once, memcached keeps answering during the preStop delay, and the pod is
/// gone after the delay, well before its grace period (memcached stops on
/// SIGTERM).
pub(crate) fn graceful_deletion(env: &mut Env) -> Result<(), String> {
    const DELAY: u64 = 5;
    const GRACE: u64 = 30;
    let name = "draining";
    ensure_namespace(env, NAMESPACE)?;
    let mut spec = node::scheduling();
    spec["replicas"] = json!(1);
    spec["highAvailability"] = json!({"gracefulShutdown": {
        "enabled": true, "preStopDelaySeconds": DELAY, "terminationGracePeriodSeconds": GRACE,
    }});
    env.kubectl.apply(&memcached(NAMESPACE, name, spec))?;
    wait_ready(env, NAMESPACE, name, 1)?;
    let pod = pod_of(env, name)?;
    let (pod_name, ip) = (
        pod["metadata"]["name"].as_str().unwrap_or_default(),
        pod_ip(&pod)?,
    );
    let deleted = Instant::now();
    env.kubectl
        .ok(&["delete", "pod", pod_name, "-n", NAMESPACE, "--wait=false"])?;
    wait_for("the endpoint not ready", Duration::from_secs(DELAY), || {
        let ready = ready_endpoints(env, NAMESPACE, name)?;
        check(
            !ready.iter().any(|e| e["addresses"][0] == ip.as_str()),
            format!("ready endpoints {ready:?}"),
        )
    })?;
    let unready = deleted.elapsed();
    let served = stats(&ip).map(|s| s.get("curr_connections").cloned());
    let served_at = deleted.elapsed();
    wait_for("the pod gone", Duration::from_secs(GRACE + 10), || {
        let left = env.kubectl.ok(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "--field-selector",
            &format!("metadata.name={pod_name}"),
            "-o",
            "name",
        ])?;
        check(left.trim().is_empty(), format!("still there: {left}"))
    })?;
    let gone = deleted.elapsed();
    println!(
        "     deleted: endpoint not ready after {:.1}s, stats answered at {:.1}s, pod gone after {:.1}s \
         (preStop {DELAY}s, grace period {GRACE}s)",
        unready.as_secs_f64(),
        served_at.as_secs_f64(),
        gone.as_secs_f64()
    );
    check(
        served.is_ok() || served_at >= Duration::from_secs(DELAY),
        format!(
            "memcached did not answer {:.1}s into its preStop delay: {served:?}",
            served_at.as_secs_f64()
        ),
    )?;
    check(
        gone >= Duration::from_secs(DELAY) && gone < Duration::from_secs(GRACE),
        format!("the pod went after {:.1}s", gone.as_secs_f64()),
    )?;
    env.kubectl
        .ok(&["delete", "memcached", name, "-n", NAMESPACE, "--wait=true"])
        .map(drop)
}

pub(crate) fn node_memory(env: &mut Env) -> Result<(), String> {
    let state = NodeState::read(&env.cluster.workdir)?;
    let by_name = node::memory_by_name(&state.processes());
    let total: u64 = by_name.values().map(|(_, kib)| kib).sum();
    for (name, (count, kib)) in &by_name {
        println!("     {name:<24} x{count} {:>6.1} MiB", *kib as f64 / 1024.0);
    }
    println!("     {:<24}    {:>6.1} MiB", "total", total as f64 / 1024.0);
    for daemon in ["kubelet", "containerd", "coredns", "kube-proxy"] {
        check(
            by_name.contains_key(daemon),
            format!("no {daemon} among the node's processes {by_name:?}"),
        )?;
    }
    Ok(())
}

pub(crate) fn teardown_clean(state: &NodeState) -> Result<(), String> {
    let left = state.leftovers();
    check(left.is_empty(), left.join("\n     "))
}

/// The host's sysctls now are `before`.
pub(crate) fn sysctls_restored(before: &BTreeMap<&'static str, String>) -> Result<(), String> {
    let now = node::sysctls();
    let changed: Vec<String> = (before.iter())
        .filter(|(name, value)| now.get(*name) != Some(value))
        .map(|(name, value)| format!("sysctl {name} {value} -> {:?}", now.get(name)))
        .collect();
    check(changed.is_empty(), changed.join("\n     "))
}
