//! The policy against the API server (`make test`): Memcacheds generated near
//! every boundary of the spec (`generate::boundary_specs`, plus random specs
//! of `generate::spec`) are judged by the real policy.wasm (waPC on wasmtime,
//! as the fixture tests run it); each one, with every object
//! `memcached-controller render` builds from it, is then created with
//! `--dry-run=server` on the e2e control plane (the CRD installed, no
//! admission webhook, so the CR meets the CRD schema only).
//!
//! Fails when the policy admits a CR whose objects the API server refuses
//! (the controller would fail on it for ever), naming the CR, the object and
//! the API server's answer. Also counts the admitted CRs the CRD schema
//! refuses, and the CRs the policy refuses although the API server accepts
//! the CR and everything rendered from it (over-strict rules), and prints
//! them. ServiceMonitors are left out: their CRD is the Prometheus
//! Operator's, not installed here. Runs inside `e2e-tests/testbed/netns.sh`.
//!
//! Validity is judged at `podSecurityLevel: privileged`, as the API server
//! does not judge Pod Security itself. Pod Security gets a differential of its
//! own: every admitted CR that sets a security context or pod annotations is
//! judged again at `baseline` and `restricted`, and the workload rendered from
//! it as defaulted for that level (`apply_defaults_at`: at `restricted` the
//! security contexts are completed, which is the policy's answer when it
//! admits) is created with `--dry-run=server` in a namespace whose Pod
//! Security admission warns at that level; the policy must refuse exactly
//! when Pod Security admission warns, with the same reasons and details, and
//! when it admits, answer with the contexts that workload has.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use e2e_tests::Policy;
use e2e_tests::generate::{Rng, boundary_specs, spec};
use e2e_tests::harness::{Binaries, Cluster, Kubectl, Outcome, enter_network_namespace};
use e2e_tests::workspace_root;
use memcached_api::Memcached;
use memcached_api::pod_security::Level;
use memcached_api::pod_security::completion::apply_defaults_at;
use serde_json::{Value, json};
use test_support::object::memcached;

const NAMESPACE: &str = "differential";
/// Random specs besides the boundary ones (combinations of rules).
const RANDOM_SPECS: usize = 150;
/// CRs per kubectl call.
const BATCH: usize = 20;
/// The Pod Security levels judged by the second differential, each with a
/// namespace `differential-<level>` labelled to warn at it.
const POD_SECURITY_LEVELS: [&str; 2] = ["baseline", "restricted"];
/// `kubectl -o name` of a Memcached.
const MEMCACHED_RESOURCE: &str = "memcached.memcached.c5c3.io";
/// Objects the API server cannot check here (their CRD is another project's).
const UNCHECKED_API_VERSION: &str = "monitoring.coreos.com/";

/// One generated CR and what became of it.
struct Case {
    /// What the spec varies.
    label: String,
    /// `metadata.name`.
    name: String,
    /// The policy's verdict: the stored object when admitted, else its message.
    verdict: Result<Value, String>,
    /// What `render` built (from the stored object, or the submitted one when refused).
    objects: Result<Vec<Value>, String>,
    /// The object the API server sees: the defaulted one when admitted.
    cr: Value,
}

fn main() {
    enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e-differential");
    let binaries = match Binaries::from_env() {
        Ok(Some(binaries)) => binaries,
        Ok(None) => return,
        Err(e) => fail(&e),
    };
    match run(&binaries, &workdir) {
        Ok(0) => {}
        Ok(_) => std::process::exit(1),
        Err(e) => fail(&e),
    }
}

/// The whole test on a control plane of its own, stopped on every path (the
/// cluster is dropped when this returns); the number of failures.
fn run(binaries: &Binaries, workdir: &std::path::Path) -> Result<usize, String> {
    let started = Instant::now();
    let cluster = Cluster::start(binaries, workdir, &[])?;
    let kubectl = Kubectl::new(&binaries.kubectl, &cluster.kubeconfig);
    prepare(&kubectl)?;
    println!(
        "control plane ready in {:.1}s, logs in {}",
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    let policy = Policy::load()?;
    let cases: Vec<Case> = generated_specs()
        .into_iter()
        .enumerate()
        .map(|(i, (label, spec))| judge(&policy, label, format!("d-{i:04}"), spec))
        .collect();
    let accepted = dry_run_all(&kubectl, &cases)?;
    let failures = report(&kubectl, &cases, &accepted) + pod_security(&kubectl, &policy, &cases);
    println!(
        "differential test took {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(failures)
}

fn fail(message: &str) -> ! {
    eprintln!("differential test: {message}");
    std::process::exit(1);
}

/// The CRD and the namespaces.
fn prepare(kubectl: &Kubectl) -> Result<(), String> {
    let crd = workspace_root().join("deploy/crd.yaml");
    kubectl.ok(&["apply", "-f", &crd.to_string_lossy()])?;
    kubectl.wait_established("memcacheds.memcached.c5c3.io")?;
    kubectl.ok(&["create", "namespace", NAMESPACE])?;
    for level in POD_SECURITY_LEVELS {
        let namespace = format!("{NAMESPACE}-{level}");
        kubectl.ok(&["create", "namespace", &namespace])?;
        let label = format!("pod-security.kubernetes.io/warn={level}");
        kubectl.ok(&["label", "namespace", &namespace, &label])?;
    }
    Ok(())
}

/// The boundary specs, then random ones (objects only: a spec of the wrong
/// type tells nothing about the embedded types).
fn generated_specs() -> Vec<(String, Value)> {
    let mut specs = boundary_specs();
    let mut rng = Rng::new(0x6469_6666_6572_656e);
    let mut random = 0;
    while random < RANDOM_SPECS {
        let spec = spec(&mut rng);
        if spec.is_object() {
            random += 1;
            specs.push((format!("random #{random}"), spec));
        }
    }
    specs
}

/// The policy's verdict on a CREATE of the CR (Pod Security not judged), and what render builds from it.
fn judge(policy: &Policy, label: String, name: String, spec: Value) -> Case {
    let submitted = memcached(spec).name(&name).namespace(NAMESPACE).json();
    let verdict = match policy.validate(
        &create_request(&submitted),
        &json!({"podSecurityLevel": "privileged"}),
    ) {
        Err(e) => Err(format!("the policy failed: {e}")),
        Ok(answer) if answer["accepted"] == true => Ok(answer
            .get("mutated_object")
            .filter(|m| m.is_object())
            .cloned()
            .unwrap_or_else(|| submitted.clone())),
        Ok(answer) => Err(answer["message"].as_str().unwrap_or_default().to_string()),
    };
    let cr = verdict.as_ref().unwrap_or(&submitted).clone();
    Case {
        objects: render(&cr),
        label,
        name,
        verdict,
        cr,
    }
}

/// The AdmissionRequest of a CREATE of `cr`.
fn create_request(cr: &Value) -> Value {
    let name = &cr["metadata"]["name"];
    json!({
        "uid": "differential",
        "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
        "resource": {"group": "memcached.c5c3.io", "version": "v1beta1", "resource": "memcacheds"},
        "name": name, "namespace": NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "differential"},
        "object": cr, "oldObject": null,
    })
}

/// What `memcached-controller render` builds from the CR, valid or not (given a uid, as a stored CR has,
/// for the owner references), its objects as JSON.
fn render(cr: &Value) -> Result<Vec<Value>, String> {
    render_at(cr, Level::Privileged)
}

/// [`render`] of the CR defaulted for a Pod Security level.
fn render_at(cr: &Value, level: Level) -> Result<Vec<Value>, String> {
    let mut owned = cr.clone();
    owned["metadata"]["uid"] = json!("00000000-0000-4000-8000-000000000001");
    let mc: Memcached =
        serde_json::from_value(owned).map_err(|e| format!("not a Memcached: {e}"))?;
    let (spec, _) = apply_defaults_at(mc.spec.clone(), level);
    let yaml = memcached_controller::commands::render::objects(&mc, &spec)?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&yaml).map_err(|e| e.to_string())?;
    let mut objects = Vec::new();
    for object in documents {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        if !object.is_null() && !api_version.starts_with(UNCHECKED_API_VERSION) {
            objects.push(object);
        }
    }
    Ok(objects)
}

/// `kubectl -o name` of an object: `<kind>[.<group>]/<name>`.
fn resource_name(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| format!(".{group}"))
        .unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    format!("{kind}{group}/{name}")
}

/// Every CR with its rendered objects through `kubectl create --dry-run=server`,
/// [`BATCH`] CRs per call (a batch never holds two objects of one name);
/// the `-o name` of every object the API server accepted.
fn dry_run_all(kubectl: &Kubectl, cases: &[Case]) -> Result<HashSet<String>, String> {
    let mut accepted = HashSet::new();
    let mut batch: Vec<Value> = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut crs = 0;
    for case in cases {
        let objects = case.objects.as_deref().unwrap_or_default();
        let mut items = vec![case.cr.clone()];
        items.extend(objects.iter().cloned());
        if crs == BATCH || items.iter().any(|o| names.contains(&resource_name(o))) {
            accepted.extend(dry_run(kubectl, &batch)?);
            (batch, crs) = (Vec::new(), 0);
            names.clear();
        }
        names.extend(items.iter().map(resource_name));
        batch.extend(items);
        crs += 1;
    }
    accepted.extend(dry_run(kubectl, &batch)?);
    Ok(accepted)
}

/// `kubectl create --dry-run=server -o name` of `manifest`, with kubectl's
/// own schema check off (the API server's is what is measured).
fn create_dry_run(kubectl: &Kubectl, manifest: &Value) -> Outcome {
    kubectl.run(
        &[
            "create",
            "--dry-run=server",
            "--validate=false",
            "-o",
            "name",
            "-f",
            "-",
        ],
        Some(&manifest.to_string()),
    )
}

/// One `kubectl create --dry-run=server -o name` of a List: what it accepted.
/// Unknown fields are pruned, as the API server does without strict field
/// validation (with it, the API server refuses them before admission, so the
/// policy never judges such a CR).
fn dry_run(kubectl: &Kubectl, items: &[Value]) -> Result<Vec<String>, String> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let outcome = create_dry_run(kubectl, &list);
    let accepted: Vec<String> = outcome
        .stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect();
    if accepted.is_empty() && !outcome.stderr.contains("Error from server") {
        return Err(format!("kubectl create failed: {}", outcome.stderr.trim()));
    }
    Ok(accepted)
}

/// The API server's answer to one object alone (for the failure report).
fn refusal(kubectl: &Kubectl, object: &Value) -> String {
    let outcome = kubectl.run(
        &["create", "--dry-run=server", "--validate=false", "-f", "-"],
        Some(&object.to_string()),
    );
    outcome.stderr.trim().to_string()
}

/// Counts, the summary line, every admitted CR with a refused object and
/// every CR refused although valid everywhere; the number of failures.
fn report(kubectl: &Kubectl, cases: &[Case], accepted: &HashSet<String>) -> usize {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut over_strict = Vec::new();
    for case in cases {
        let cr_accepted = accepted.contains(&format!("{MEMCACHED_RESOURCE}/{}", case.name));
        let refused_objects: Vec<&Value> = match &case.objects {
            Ok(objects) => objects
                .iter()
                .filter(|o| !accepted.contains(&resource_name(o)))
                .collect(),
            Err(_) => Vec::new(),
        };
        match (&case.verdict, &case.objects) {
            (Ok(_), Err(e)) => failures.push(format!(
                "{} ({}): admitted, but render fails: {e}",
                case.name, case.label
            )),
            (Ok(_), Ok(_)) if !refused_objects.is_empty() => {
                let answers: Vec<String> = refused_objects
                    .iter()
                    .map(|o| format!("{}: {}", resource_name(o), refusal(kubectl, o)))
                    .collect();
                failures.push(format!(
                    "{} ({}): admitted, but the API server refuses\n       {}\n       spec: {}",
                    case.name,
                    case.label,
                    answers.join("\n       "),
                    case.cr["spec"]
                ));
            }
            (Ok(_), Ok(_)) if !cr_accepted => {
                *counts.entry("refused-by-crd-schema").or_default() += 1;
                println!(
                    "     admitted, refused by the CRD schema: {} ({}): {}",
                    case.name,
                    case.label,
                    refusal(kubectl, &case.cr)
                );
            }
            (Err(message), Ok(_)) if cr_accepted && refused_objects.is_empty() => {
                over_strict.push(format!("{} ({}): {message}", case.name, case.label));
            }
            _ => {}
        }
        if case.verdict.is_ok() {
            *counts.entry("admitted").or_default() += 1;
        }
    }
    for line in &over_strict {
        println!("     refused but valid everywhere: {line}");
    }
    for line in &failures {
        println!("FAIL {line}");
    }
    println!(
        "differential: {} generated, {} admitted, {} admitted-and-refused, {} refused-by-crd-schema, {} refused-but-valid",
        cases.len(),
        counts.get("admitted").copied().unwrap_or(0),
        failures.len(),
        counts.get("refused-by-crd-schema").copied().unwrap_or(0),
        over_strict.len()
    );
    failures.len()
}

/// The second differential (see the module doc): every disagreement between
/// the policy at a level and Pod Security admission warning at it is a
/// failure. Prints its counts; the number of failures.
fn pod_security(kubectl: &Kubectl, policy: &Policy, cases: &[Case]) -> usize {
    let (mut judged, mut refused, mut failures) = (0, 0, Vec::new());
    for case in cases.iter().filter(|c| sets_pod_security(&c.cr["spec"])) {
        let (Ok(cr), Ok(_)) = (&case.verdict, &case.objects) else {
            continue;
        };
        for level in POD_SECURITY_LEVELS {
            let Some((workload, security)) = workload_at(cr, level) else {
                continue;
            };
            judged += 1;
            let ours = policy_violations(policy, cr, level, &security);
            let theirs = admission_warning(kubectl, &workload, level);
            refused += usize::from(matches!(ours, Ok(Some(_))));
            if ours != theirs {
                failures.push(format!(
                    "{} ({}) at {level}:\n       policy:               {ours:?}\n       Pod Security admission: {theirs:?}\n       spec: {}",
                    case.name, case.label, cr["spec"]
                ));
            }
        }
    }
    for line in &failures {
        println!("FAIL pod security: {line}");
    }
    println!(
        "pod security differential: {judged} judged (CR and level), {refused} refused, {} disagreements with Pod Security admission",
        failures.len()
    );
    failures.len()
}

/// The workload rendered from `cr` defaulted for `level`, and the spec's
/// `security` as defaulted.
fn workload_at(cr: &Value, level: &str) -> Option<(Value, Value)> {
    let level: Level = serde_json::from_value(json!(level)).ok()?;
    let objects = render_at(cr, level).ok()?;
    let workload = objects
        .into_iter()
        .find(|o| matches!(o["kind"].as_str(), Some("Deployment" | "StatefulSet")))?;
    let mc: Memcached = serde_json::from_value(cr.clone()).ok()?;
    let (spec, _) = apply_defaults_at(mc.spec, level);
    let security = serde_json::to_value(&spec.security).ok()?;
    Some((workload, security))
}

/// A spec that sets what Pod Security judges.
fn sets_pod_security(spec: &Value) -> bool {
    let security = &spec["security"];
    spec["podAnnotations"].is_object()
        || security["podSecurityContext"].is_object()
        || security["containerSecurityContext"].is_object()
}

/// The reasons and details of the policy's Pod Security refusal of `cr` at
/// `level`, its spec fields taken out: Pod Security admission's text. When
/// it admits, its answer must hold the `security` that was judged.
fn policy_violations(
    policy: &Policy,
    cr: &Value,
    level: &str,
    security: &Value,
) -> Result<Option<String>, String> {
    let answer = policy.validate(&create_request(cr), &json!({"podSecurityLevel": level}))?;
    if answer["accepted"] == true {
        let stored = answer
            .get("mutated_object")
            .filter(|m| m.is_object())
            .unwrap_or(cr);
        if stored["spec"]["security"] != *security {
            return Err(format!(
                "admitted with security {}, judged {security}",
                stored["spec"]["security"]
            ));
        }
        return Ok(None);
    }
    let message = answer["message"].as_str().unwrap_or_default();
    let prefix = format!("violates PodSecurity \"{level}:latest\": ");
    let (_, violations) = message
        .split_once(&prefix)
        .filter(|_| answer["code"] == 403)
        .ok_or_else(|| format!("refused otherwise: {message}"))?;
    // Each violation is `<spec field>: <reason> (<detail>)`, joined by ", ".
    let listed = format!(", {violations}");
    let without_fields: Vec<&str> = listed
        .split(", spec.")
        .skip(1)
        .map(|v| v.split_once(": ").map_or(v, |(_, rest)| rest))
        .collect();
    Ok(Some(without_fields.join(", ")))
}

/// What Pod Security admission warns about `workload` in the namespace that
/// warns at `level`.
fn admission_warning(
    kubectl: &Kubectl,
    workload: &Value,
    level: &str,
) -> Result<Option<String>, String> {
    let mut workload = workload.clone();
    workload["metadata"]["namespace"] = json!(format!("{NAMESPACE}-{level}"));
    let outcome = create_dry_run(kubectl, &workload);
    if !outcome.success {
        return Err(format!("kubectl create failed: {}", outcome.stderr.trim()));
    }
    let prefix = format!("Warning: would violate PodSecurity \"{level}:latest\": ");
    Ok(outcome
        .stderr
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(str::to_string))
}
