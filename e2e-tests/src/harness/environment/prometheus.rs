//! Prometheus the way kube-prometheus-stack users run it, on the real node:
//! Prometheus Operator v0.93.1 and Prometheus 3.13.5 from the images and CRDs
//! `e2e-tests/testbed/local-cluster/images/prometheus.sh` builds (`target/e2e/prometheus`), pushed
//! to the suite's registry under their upstream names, and the manifests of
//! `e2e-tests/testbed/local-cluster/prometheus/kube-prometheus-stack.yaml` (namespace
//! `monitoring`; a Prometheus selecting ServiceMonitors and PrometheusRules
//! labelled `release: kube-prometheus-stack` in every namespace). Then
//! Prometheus's own HTTP API: what it scrapes, which alerts fire, what a
//! query returns. The Helm chart's values that turn the product's monitoring
//! on for that Prometheus are here too, shared by the node suite and the demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::clients::http;
use crate::harness::environment::node;
use crate::harness::{Env, wait_for};
use crate::workspace_root;

/// Where Prometheus and its operator run.
pub const NAMESPACE: &str = "monitoring";
/// The label kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules by.
pub const SELECTOR: (&str, &str) = ("release", "kube-prometheus-stack");
/// The ServiceAccount Prometheus scrapes with.
pub const SERVICE_ACCOUNT: &str = "kube-prometheus-stack-prometheus";
/// Prometheus's pod (the operator's StatefulSet `prometheus-<name>`).
pub const POD: &str = "prometheus-kube-prometheus-stack-prometheus-0";
/// How often the product's targets are scraped and its rules evaluated here.
pub const INTERVAL: &str = "5s";

/// The images (tag in `target/e2e/prometheus/images`, name in the registry:
/// ghcr.io's and docker.io's, which the node mirrors).
const IMAGES: [(&str, &str); 3] = [
    (
        "prometheus-operator",
        "prometheus-operator/prometheus-operator:v0.93.1",
    ),
    (
        "prometheus-config-reloader",
        "prometheus-operator/prometheus-config-reloader:v0.93.1",
    ),
    ("prometheus", "prom/prometheus:v3.13.5"),
];

/// The manifests a kube-prometheus-stack user has.
pub fn stack_manifest() -> PathBuf {
    workspace_root().join("e2e-tests/testbed/local-cluster/prometheus/kube-prometheus-stack.yaml")
}

/// What `prometheus.sh` built: the OCI layout and `crds.yaml`.
fn built(env: &Env) -> PathBuf {
    env.binaries.node.join("prometheus")
}

/// The operator's CRDs, as `operator crds` wrote them.
pub fn crds(env: &Env) -> PathBuf {
    built(env).join("crds.yaml")
}

/// Push the images to the suite's registry, and apply the operator's CRDs
/// server-side (too large for kubectl's last-applied annotation) until they
/// are established: what the product's ServiceMonitors and PrometheusRules need.
pub fn install_crds(env: &Env) -> Result<(), String> {
    let layout = built(env).join("images");
    for (tag, name) in IMAGES {
        let source = format!("oci:{}:{tag}", layout.display());
        let target = format!("docker://{}/{name}", env.registry.address());
        let out = Command::new("skopeo")
            .args([
                "copy",
                "--quiet",
                "--insecure-policy",
                "--dest-tls-verify=false",
            ])
            .args([&source, &target])
            .output()
            .map_err(|e| format!("cannot run skopeo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "skopeo copy {source}: {} (build the images with `make target/e2e/prometheus/images/index.json`)",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let crds = crds(env);
    env.kubectl.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &crds.to_string_lossy(),
    ])?;
    for kind in ["servicemonitors", "prometheusrules", "prometheuses"] {
        env.kubectl
            .wait_established(&format!("{kind}.monitoring.coreos.com"))?;
    }
    Ok(())
}

/// `kubectl apply -f` of [`stack_manifest`]; returns once Prometheus is
/// Ready and answers, with its API.
pub fn install_stack(env: &Env) -> Result<Prometheus, String> {
    env.kubectl
        .ok(&["apply", "-f", &stack_manifest().to_string_lossy()])?;
    let address = wait_for("Prometheus's pod Ready", Duration::from_secs(180), || {
        let pod = env.kubectl.get(&["pod", POD, "-n", NAMESPACE])?;
        let ready = crate::harness::condition_status(&pod, "Ready") == Some("True");
        match pod["status"]["podIP"].as_str() {
            Some(ip) if ready => format!("{ip}:9090")
                .parse::<SocketAddr>()
                .map_err(|e| e.to_string()),
            _ => Err(format!("status {}", pod["status"])),
        }
    })?;
    let prometheus = Prometheus { address };
    wait_for("Prometheus ready", Duration::from_secs(60), || {
        http::get(address, "/-/ready").map(drop)
    })?;
    Ok(prometheus)
}

/// Delete what [`install_stack`] and [`install_crds`] created (not waiting
/// for the CRDs' objects to go).
pub fn uninstall(env: &Env) -> Result<(), String> {
    env.kubectl.ok(&[
        "delete",
        "-f",
        &stack_manifest().to_string_lossy(),
        "--ignore-not-found",
        "--wait=true",
    ])?;
    env.kubectl
        .ok(&[
            "delete",
            "-f",
            &crds(env).to_string_lossy(),
            "--ignore-not-found",
            "--wait=false",
        ])
        .map(drop)
}

/// The chart's values that turn monitoring on for that Prometheus, as its
/// users set them: one value, `prometheusLabels`, labels for it the chart's
/// ServiceMonitor and PrometheusRule and every Memcached's ServiceMonitor the
/// controller creates; Prometheus's ServiceAccount bound to the metrics-reader ClusterRole
/// (`metrics.readerSubjects`); short timings through the chart's own values
/// (scrapes and rule evaluations every [`INTERVAL`], each alert's `for` 10 s,
/// rate windows of 30 s); the controller on the real node.
pub fn chart_values() -> Value {
    let timing = json!({"for": "10s"});
    let windowed = json!({"for": "10s", "window": "30s"});
    let mut values = node::scheduling();
    // deploy/policy.yaml judges Memcacheds already (Kubewarden took over): not the chart's too.
    values["policy"] = json!({"enabled": false});
    values["prometheusLabels"] = json!({SELECTOR.0: SELECTOR.1});
    values["metrics"] = json!({
        "readerSubjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
        "serviceMonitor": {
            "enabled": true,
            "interval": INTERVAL,
            "scrapeTimeout": "4s",
        },
        "prometheusRule": {
            "enabled": true,
            "interval": INTERVAL,
            "alerts": {
                "MemcachedNotReady": timing,
                "MemcachedUnavailable": timing,
                "MemcachedDegraded": timing,
                "MemcachedInstanceNotAnswering": timing,
                "MemcachedExporterDown": timing,
                "MemcachedHitRatioLow": windowed,
                "MemcachedEvictionsRising": windowed,
                "MemcachedConnectionsNearLimit": timing,
                "MemcachedOperatorReconcileErrors": windowed,
                "MemcachedOperatorDown": timing,
                "MemcachedOperatorNotScraped": timing,
            },
        },
    });
    values
}

/// `spec.monitoring` of a Memcached on the real node, scraped every
/// [`INTERVAL`]. It names no label: a controller installed with
/// [`chart_values`] labels its ServiceMonitor for that Prometheus.
pub fn monitoring() -> Value {
    json!({
        "enabled": true,
        "exporterImage": node::EXPORTER_IMAGE,
        "serviceMonitor": {
            "interval": INTERVAL,
            "scrapeTimeout": "4s",
        },
    })
}

/// Prometheus's HTTP API (`/api/v1`) on its pod's address.
#[derive(Clone, Copy, Debug)]
pub struct Prometheus {
    /// `<pod IP>:9090`.
    pub address: SocketAddr,
}

impl Prometheus {
    /// `GET /api/v1/<path>`: its `data`, or the error Prometheus gave.
    /// A connection that fails is tried again, twice: on a busy machine a
    /// pod's accept can miss the 2 s connect timeout of one poll.
    fn api(&self, path: &str) -> Result<Value, String> {
        let mut tries = 1;
        let body = loop {
            match http::get(self.address, &format!("/api/v1/{path}")) {
                Ok(body) => break body,
                Err(e) if tries == 3 => return Err(format!("Prometheus /api/v1/{path}: {e}")),
                Err(_) => tries += 1,
            }
            std::thread::sleep(Duration::from_secs(1));
        };
        let answer: Value =
            serde_json::from_str(&body).map_err(|e| format!("/api/v1/{path}: {e}: {body}"))?;
        if answer["status"] == "success" {
            Ok(answer["data"].clone())
        } else {
            Err(format!("/api/v1/{path}: {answer}"))
        }
    }

    /// The series an instant query returns now (`/api/v1/query`).
    pub fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.api(&format!("query?query={}", encode(expr)))?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The one number an instant query returns, if it returns one series.
    pub fn value(&self, expr: &str) -> Result<f64, String> {
        match self.query(expr)?.as_slice() {
            [series] => series["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{expr}: {series}")),
            other => Err(format!("{expr}: {} series", other.len())),
        }
    }

    /// The active targets (`/api/v1/targets`): labels, scrape URL, health, last error.
    pub fn targets(&self) -> Result<Vec<Value>, String> {
        let data = self.api("targets?state=active")?;
        Ok(data["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The pending and firing alerts (`/api/v1/alerts`).
    pub fn alerts(&self) -> Result<Vec<Value>, String> {
        let data = self.api("alerts")?;
        Ok(data["alerts"].as_array().cloned().unwrap_or_default())
    }

    /// The names of the alerting rules Prometheus has loaded.
    pub fn alert_rules(&self) -> Result<Vec<String>, String> {
        let data = self.api("rules?type=alert")?;
        Ok((data["groups"].as_array().into_iter().flatten())
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect())
    }

    /// The values `label` takes in the series `matcher` selects, as Grafana's
    /// `label_values(<matcher>, <label>)` asks for them.
    pub fn label_values(&self, label: &str, matcher: &str) -> Result<Vec<String>, String> {
        let data = self.api(&format!("label/{label}/values?match[]={}", encode(matcher)))?;
        Ok((data.as_array().into_iter().flatten())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect())
    }
}

/// `alert` is named `name`, carries every one of `labels`, and is `firing`.
pub fn firing(alert: &Value, name: &str, labels: &[(&str, &str)]) -> bool {
    alert["state"] == "firing" && is(alert, name, labels)
}

/// `alert` (pending or firing) is named `name` and carries every one of `labels`.
pub fn is(alert: &Value, name: &str, labels: &[(&str, &str)]) -> bool {
    alert["labels"]["alertname"] == name && labels.iter().all(|(k, v)| alert["labels"][k] == *v)
}

/// An alert in one line: its name, state and labels but `alertname` and `severity`.
pub fn describe(alert: &Value) -> String {
    let labels = alert["labels"].as_object().cloned().unwrap_or_default();
    let shown: Vec<String> = (labels.iter())
        .filter(|(k, _)| *k != "alertname" && *k != "severity")
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    format!(
        "{} ({}, {}) {{{}}}",
        labels
            .get("alertname")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        alert["state"].as_str().unwrap_or_default(),
        labels
            .get("severity")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        shown.join(", ")
    )
}

/// A target in one line: its job, instance, health and last error.
pub fn describe_target(target: &Value) -> String {
    let error = target["lastError"].as_str().unwrap_or_default();
    format!(
        "{} {} {}{}",
        target["labels"]["job"].as_str().unwrap_or_default(),
        target["scrapeUrl"].as_str().unwrap_or_default(),
        target["health"].as_str().unwrap_or_default(),
        if error.is_empty() {
            String::new()
        } else {
            format!(" ({error})")
        }
    )
}

/// `text` percent-encoded for a URL's query.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode(r#"up{job="a b"} == 0"#),
            "up%7Bjob%3D%22a%20b%22%7D%20%3D%3D%200"
        );
    }
}
