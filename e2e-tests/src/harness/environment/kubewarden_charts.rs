//! Kubewarden the way its users install it: `helm install` of its own
//! charts of release 1.35.0 (`kubewarden-crds`, `kubewarden-controller`,
//! `kubewarden-defaults`, from `../shared/kubewarden` or
//! `$KUBEWARDEN_CHARTS`) into `kubewarden`, on the real node, from the
//! images `e2e-tests/testbed/local-cluster/images/kubewarden.sh` builds under the names the charts
//! pull (the node mirrors ghcr.io from the suite's registry). Then
//! kubewarden-controller, not the suite, runs the default PolicyServer and
//! registers each policy's webhook, and its audit scanner writes reports.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::clients::checks::{condition_status, wait_for};
use crate::harness::clients::kubectl::Kubectl;
use crate::harness::environment::helm::Helm;
use crate::harness::environment::kubewarden::KUBEWARDEN_NAMESPACE;
use crate::harness::environment::programs::kubewarden_charts;
use crate::workspace_root;

/// The release the charts, the images and `../shared/bin` are of.
pub const VERSION: &str = "v1.35.0";

/// policy-server's image repository, as `kubewarden-defaults` names it
/// below `ghcr.io/`.
const POLICY_SERVER_REPOSITORY: &str = "kubewarden/policy-server";

/// The images (tag in `target/e2e/kubewarden/images`, repository in the
/// registry), as the charts name them below `ghcr.io/`.
pub const IMAGES: [(&str, &str); 3] = [
    ("kubewarden-controller", "kubewarden/kubewarden-controller"),
    ("audit-scanner", "kubewarden/audit-scanner"),
    ("policy-server", POLICY_SERVER_REPOSITORY),
];

/// The PolicyServer `kubewarden-defaults` creates, and its Deployment.
pub const POLICY_SERVER: &str = "default";
const POLICY_SERVER_DEPLOYMENT: &str = "policy-server-default";

/// kubewarden-controller's webhook Service, which `kubewarden-defaults`'
/// PolicyServer is admitted through.
const CONTROLLER_WEBHOOK_SERVICE: &str = "kubewarden-controller-webhook-service";

/// Wait until kubewarden-controller's webhook Service takes connections, as
/// kube-apiserver (in this network namespace) reaches it: `helm --wait`
/// returns once the pod is Ready, but kube-proxy rejects the Service's
/// address ("no route to host") until it has synced the pod's endpoint, and
/// a `kubewarden-defaults` install meanwhile fails on its webhook.
fn webhook_answers(kubectl: &Kubectl) -> Result<(), String> {
    wait_for(
        "kubewarden-controller's webhook Service answers",
        Duration::from_secs(60),
        || {
            let service = kubectl.get(&[
                "service",
                CONTROLLER_WEBHOOK_SERVICE,
                "-n",
                KUBEWARDEN_NAMESPACE,
            ])?;
            let ip: IpAddr = (service["spec"]["clusterIP"].as_str())
                .and_then(|ip| ip.parse().ok())
                .ok_or_else(|| format!("no cluster IP: {}", service["spec"]))?;
            let port = service["spec"]["ports"][0]["port"].as_u64().unwrap_or(443) as u16;
            TcpStream::connect_timeout(&SocketAddr::new(ip, port), Duration::from_secs(2))
                .map(drop)
                .map_err(|e| format!("{ip}:{port}: {e}"))
        },
    )
}

/// `helm install` of the three charts in their order, with
/// `e2e-tests/testbed/kubewarden-values.yaml`; the default PolicyServer fetches
/// policies from `insecure_source` over plain HTTP. Waits until its
/// Deployment's pods are Ready.
pub fn install(helm: &Helm, kubectl: &Kubectl, insecure_source: &str) -> Result<(), String> {
    let chart = read_yaml(&kubewarden_charts().join("kubewarden-controller/Chart.yaml"))?;
    if chart["appVersion"] != VERSION {
        return Err(format!(
            "the charts in {} are of Kubewarden {}, the images built here of {VERSION}",
            kubewarden_charts().display(),
            chart["appVersion"]
        ));
    }
    let values = workspace_root().join("e2e-tests/testbed/kubewarden-values.yaml");
    let values = values.to_string_lossy();
    let insecure = format!("policyServer.insecureSources[0]={insecure_source}");
    for (chart, extra) in [
        ("kubewarden-crds", Vec::new()),
        ("kubewarden-controller", vec!["--values", &values]),
        (
            "kubewarden-defaults",
            vec!["--values", &values, "--set", &insecure],
        ),
    ] {
        helm.install_chart(
            &kubewarden_charts().join(chart),
            chart,
            KUBEWARDEN_NAMESPACE,
            &extra,
        )?;
        if chart == "kubewarden-controller" {
            webhook_answers(kubectl)?;
        }
    }
    wait_for(
        "the default PolicyServer's pods Ready",
        Duration::from_secs(180),
        || {
            let deployment = kubectl.get(&[
                "deployment",
                POLICY_SERVER_DEPLOYMENT,
                "-n",
                KUBEWARDEN_NAMESPACE,
            ])?;
            let status = &deployment["status"];
            let wanted = deployment["spec"]["replicas"].as_i64().unwrap_or(1);
            if status["readyReplicas"].as_i64() == Some(wanted)
                && status["updatedReplicas"].as_i64() == Some(wanted)
            {
                Ok(())
            } else {
                Err(format!("status {status}"))
            }
        },
    )
}

/// How long [`take_over`] took.
#[derive(Clone, Copy, Debug)]
pub struct TakeOver {
    /// From `helm install` to the default PolicyServer's pods Ready.
    pub installed: Duration,
    /// From `kubectl apply` of the policies to both `active`.
    pub active: Duration,
}

/// Wait until ClusterAdmissionPolicy `name` is `active`; how long it took.
pub fn wait_active(kubectl: &Kubectl, name: &str, timeout: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    wait_for(
        &format!("ClusterAdmissionPolicy {name} active"),
        timeout,
        || {
            let policy = kubectl.get(&["clusteradmissionpolicy", name])?;
            match policy["status"]["policyStatus"].as_str() {
                Some("active") => Ok(()),
                _ => Err(format!("status {}", policy["status"])),
            }
        },
    )?;
    Ok(started.elapsed())
}

/// Run the audit scanner now, as its CronJob would (a Job from it), and
/// wait until it completed; how long it ran.
pub fn audit(kubectl: &Kubectl, job: &str) -> Result<Duration, String> {
    let started = Instant::now();
    kubectl.ok(&[
        "create",
        "job",
        job,
        "--from=cronjob/audit-scanner",
        "-n",
        KUBEWARDEN_NAMESPACE,
    ])?;
    wait_for(
        "the audit scanner's Job complete",
        Duration::from_secs(180),
        || {
            let job = kubectl.get(&["job", job, "-n", KUBEWARDEN_NAMESPACE])?;
            if condition_status(&job, "Failed") == Some("True") {
                return Ok(Err(format!("the audit scanner failed: {}", job["status"])));
            }
            if condition_status(&job, "Complete") == Some("True") {
                Ok(Ok(()))
            } else {
                Err(format!("status {}", job["status"]))
            }
        },
    )??;
    Ok(started.elapsed())
}

/// One policy's result on one object in a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditResult {
    /// The policy's unique name (`clusterwide-<name>` for a
    /// ClusterAdmissionPolicy).
    pub policy: String,
    /// `pass`, `fail`, ...
    pub result: String,
    /// Why, for a `fail`.
    pub message: String,
}

/// The audit scanner's reports (`reports.openreports.io`, the kind 1.35
/// writes by default) in `namespace`: each object's name with its results.
pub fn reports(
    kubectl: &Kubectl,
    namespace: &str,
) -> Result<BTreeMap<String, Vec<AuditResult>>, String> {
    let list = kubectl.get(&["reports.openreports.io", "-n", namespace])?;
    let mut by_object = BTreeMap::new();
    for report in list["items"].as_array().into_iter().flatten() {
        let object = report["scope"]["name"].as_str().unwrap_or_default();
        let results = report["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|result| AuditResult {
                policy: text(&result["policy"]),
                result: text(&result["result"]),
                message: text(&result["message"]),
            })
            .collect();
        by_object.insert(object.to_string(), results);
    }
    Ok(by_object)
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// A PolicyServer `name` like the default one (its image, ServiceAccount,
/// placement on the real node, `insecure_source`), requiring the signature
/// the ConfigMap `verification` describes, verified offline with the trust
/// config in the ConfigMap `trust` (see [`crate::harness::environment::signing`]).
pub fn verifying_policy_server(
    name: &str,
    insecure_source: &str,
    verification: &str,
    trust: &str,
) -> Result<Value, String> {
    let values = read_yaml(&workspace_root().join("e2e-tests/testbed/kubewarden-values.yaml"))?;
    Ok(json!({
        "apiVersion": "policies.kubewarden.io/v1",
        "kind": "PolicyServer",
        "metadata": {"name": name},
        "spec": {
            "image": format!("ghcr.io/{POLICY_SERVER_REPOSITORY}:{VERSION}"),
            "replicas": 1,
            "serviceAccountName": "policy-server",
            "affinity": values["global"]["affinity"],
            "tolerations": values["global"]["tolerations"],
            "insecureSources": [insecure_source],
            "verificationConfig": verification,
            "sigstoreTrustConfig": trust,
        },
    }))
}

/// The ClusterAdmissionPolicy of `deploy/policy.yaml` as `name`, served by
/// `policy_server`, loading `module`.
pub fn protect_policy(name: &str, policy_server: &str, module: &str) -> Result<Value, String> {
    let mut policy = read_yaml(&workspace_root().join("deploy/policy.yaml"))?;
    policy["metadata"]["name"] = json!(name);
    policy["spec"]["policyServer"] = json!(policy_server);
    policy["spec"]["module"] = json!(module);
    Ok(policy)
}

fn read_yaml(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The host and the repository with its tag of a
/// `registry://<host>/<repository>:<tag>` module.
fn module_parts(module: &str) -> Result<(&str, &str), String> {
    module
        .strip_prefix("registry://")
        .and_then(|rest| rest.split_once('/'))
        .ok_or_else(|| format!("{module} is no registry:// module"))
}

/// The host of a `registry://<host>/<repository>:<tag>` module.
pub fn module_host(module: &str) -> Result<&str, String> {
    module_parts(module).map(|(host, _)| host)
}

/// The repository with its tag of a `registry://<host>/<repository>:<tag>`
/// module: where the artifact goes in the registry that mirrors `<host>`.
pub fn module_repository(module: &str) -> Result<&str, String> {
    module_parts(module).map(|(_, repository)| repository)
}
