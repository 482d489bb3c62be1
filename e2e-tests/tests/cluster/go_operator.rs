//! The Go operator's own objects (C5C3/memcached-operator: its samples and
//! the first objects, `00-*.yaml`, of each scenario of its e2e suite),
//! unmodified copies in `../shared/go-operator`, applied from there as they
//! are with `kubectl apply -f`, through the policy in policy-server: each
//! admitted and stored with every field, Ready with a real memcached behind
//! every pod, with its NetworkPolicy when it enables one (in either place)
//! and its authentication in force; the one the Go operator refuses itself
//! (its `webhook-rejection` scenario) refused for the same reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use e2e_tests::cluster::memcache::{Memcache, memcached_version};
use e2e_tests::cluster::objects::{exists, owned_by, tls_secret};
use e2e_tests::cluster::pods::pod_ips;
use e2e_tests::cluster::scenario::{SETTLE, check, ensure_namespace};
use e2e_tests::cluster::{Env, Kubectl, Outcome, condition, pki, wait_for};
use e2e_tests::workspace_root;
use memcached_api::AUTH_SECRET_KEYS;
use serde_json::{Value, json};

/// The memory the Go operator's webhook adds to `maxMemoryMB` for the
/// smallest memory limit it admits (its `webhook-rejection` file: "64Mi +
/// 32Mi overhead = 96Mi").
const GO_OPERATOR_OVERHEAD_MI: i64 = 32;

/// One file of the Go operator's objects.
struct GoFile {
    /// Its path below `../shared/go-operator` (`samples/...`, `e2e/<scenario>/00-...`).
    name: String,
    path: PathBuf,
    /// Where it is applied: the namespace its objects name, else its own
    /// (one per sample, one per e2e scenario).
    namespace: String,
    docs: Vec<Value>,
}

impl GoFile {
    fn memcacheds(&self) -> impl Iterator<Item = &Value> {
        self.docs.iter().filter(|d| d["kind"] == "Memcached")
    }

    /// `kubectl apply -f` of the file as it is, in its namespace.
    fn apply(&self, kubectl: &Kubectl) -> Outcome {
        let path = self.path.to_string_lossy();
        kubectl.run(&["apply", "-f", &path, "-n", &self.namespace], None)
    }
}

/// The memory, in MiB, this test bed gives a container. With warm restarts
/// (the policy's default for a new Memcached) memcached fills its whole
/// memory file as it starts: memory on a real node, a file on the disk of
/// the suite's pod runtime. The production samples ask for 5 pods of 4 GiB
/// (2 GiB of cache each); a LimitRange of this much in their namespace
/// refuses those pods, as a cluster without room for them would.
const ROOM_MIB: i64 = 2048;

/// What is expected of a Memcached of the Go operator's.
#[derive(PartialEq)]
enum Expected {
    /// The Go operator refuses it itself (its `webhook-rejection` scenario).
    Refused,
    /// An image no node can pull (its `status-degraded` scenario), so it
    /// stays Degraded there. The suite's pod runtime runs memcached whatever
    /// the image names, so what is shown is that its pods ask for that image
    /// as written (the node suite pulls real images).
    PodsAskForItsImage,
    /// A memory limit above [`ROOM_MIB`]: admitted and stored with its
    /// children, its pods refused by the namespace's LimitRange.
    NoRoom,
    /// Every other one: Ready, its pods running memcached.
    Ready,
}

fn refused_by_the_go_operator(file: &GoFile) -> bool {
    file.name.starts_with("e2e/webhook-rejection/")
}

fn expected(file: &GoFile, object: &Value) -> Expected {
    if refused_by_the_go_operator(file) {
        Expected::Refused
    } else if file.name.starts_with("e2e/status-degraded/") {
        Expected::PodsAskForItsImage
    } else if memory_limit_mib(object).is_ok_and(|mib| mib > ROOM_MIB) {
        Expected::NoRoom
    } else {
        Expected::Ready
    }
}

/// `spec.resources.limits.memory` in MiB (0 without one).
fn memory_limit_mib(object: &Value) -> Result<i64, String> {
    let Some(limit) = object["spec"]["resources"]["limits"]["memory"].as_str() else {
        return Ok(0);
    };
    let (number, unit) = limit.split_at(
        limit
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(limit.len()),
    );
    let factor = match unit {
        "Mi" => 1,
        "Gi" => 1024,
        _ => {
            return Err(format!(
                "memory limit {limit}: only Mi and Gi are read here"
            ));
        }
    };
    number
        .parse::<i64>()
        .map(|n| n * factor)
        .map_err(|e| format!("memory limit {limit}: {e}"))
}

/// The scenario: every file applied and checked (see the module's
/// documentation), then the namespaces it used deleted, whatever happened.
pub fn go_operator_objects(env: &mut Env) -> Result<(), String> {
    let files = go_operator_files()?;
    let namespaces: BTreeSet<&str> = files.iter().map(|f| f.namespace.as_str()).collect();
    let outcome = apply_and_check(env, &files, &namespaces);
    // Whatever happened: the next scenarios start without these (the runner
    // waits for the namespaces to be gone).
    for namespace in &namespaces {
        env.kubectl
            .ok(&["delete", "namespace", namespace, "--wait=false"])?;
    }
    outcome
}

fn apply_and_check(env: &Env, files: &[GoFile], namespaces: &BTreeSet<&str>) -> Result<(), String> {
    for namespace in namespaces {
        ensure_namespace(env, namespace)?;
    }
    let mut credentials = create_secrets(env, files)?;
    for file in files {
        if (file.memcacheds()).any(|m| expected(file, m) == Expected::NoRoom) {
            env.kubectl.apply(&room_limit(&file.namespace))?;
        }
    }
    let mut problems = Vec::new();
    let rounds = rounds(files);
    for (at, round) in rounds.iter().enumerate() {
        let admitted = apply_round(env, round, &mut problems)?;
        for (file, _) in &admitted {
            fix_unterminated_auth_files(env, file, &mut credentials)?;
        }
        let ready: Vec<(&GoFile, &Value)> = (admitted.iter())
            .flat_map(|(f, _)| f.memcacheds().map(move |m| (*f, m)))
            .filter(|(f, m)| expected(f, m) == Expected::Ready)
            .collect();
        wait_all_ready(env, &ready)?;
        for (file, warnings) in &admitted {
            problems.extend(stored_whole(env, file)?);
            problems.extend(as_expected(env, file, warnings, &credentials));
        }
        // The next round applies objects of the same names again.
        for file in later_twins(round, &rounds[at + 1..]) {
            let path = file.path.to_string_lossy();
            let args = ["delete", "-f", &path, "-n", &file.namespace];
            let waited = ["--cascade=foreground", "--wait=true"];
            env.kubectl.ok(&[&args[..], &waited[..]].concat())?;
        }
    }
    check(problems.is_empty(), problems.join("\n     "))
}

/// `kubectl apply -f` of each file of `round` at once: the files admitted,
/// with what kubectl printed on stderr (the policy's warnings); the file the
/// Go operator refuses checked refused, problems added to `problems`.
fn apply_round<'a>(
    env: &Env,
    round: &[&'a GoFile],
    problems: &mut Vec<String>,
) -> Result<Vec<(&'a GoFile, String)>, String> {
    let outcomes = apply_each(&env.kubectl, round)?;
    let mut admitted = Vec::new();
    for (file, outcome) in round.iter().zip(outcomes) {
        if refused_by_the_go_operator(file) {
            problems.extend(refused_for_its_reason(env, file, &outcome)?);
        } else if outcome.success {
            admitted.push((*file, outcome.stderr));
        } else {
            let refusal = outcome.stderr.trim();
            problems.push(format!("{}: refused: {refusal}", file.name));
        }
    }
    Ok(admitted)
}

/// What [`Expected`] says of each Memcached of an admitted `file`: the
/// problems found.
fn as_expected(
    env: &Env,
    file: &GoFile,
    warnings: &str,
    credentials: &BTreeMap<(String, String), String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for object in file.memcacheds() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let outcome = match expected(file, object) {
            Expected::PodsAskForItsImage => pods_ask_for(env, file, name, object),
            Expected::NoRoom => {
                network_policy(env, file, name, warnings).and_then(|()| no_room(env, file, name))
            }
            _ => network_policy(env, file, name, warnings)
                .and_then(|()| access(env, file, name, credentials)),
        };
        problems.extend(outcome.err().map(|e| format!("{}: {e}", file.name)));
    }
    problems
}

/// Every file of the Go operator's samples and of its e2e scenarios' first
/// step, with the documents it holds; an error when `../shared/go-operator`
/// is absent (CI has it beside the checkout).
fn go_operator_files() -> Result<Vec<GoFile>, String> {
    let dir = workspace_root().join("../shared/go-operator");
    if !dir.is_dir() {
        return Err(format!(
            "{} is absent: the Go operator's samples and e2e objects are applied from there \
             (unmodified copies, beside the checkout as in CI)",
            dir.display()
        ));
    }
    let mut paths = listed(&dir.join("samples"))?;
    for scenario in listed(&dir.join("e2e"))? {
        paths.extend(
            listed(&scenario)?
                .into_iter()
                .filter(|p| first_step_objects(p)),
        );
    }
    paths.sort();
    let files = paths
        .into_iter()
        .map(|path| {
            let name = path
                .strip_prefix(&dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"))?;
            let docs: Vec<Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| format!("{name}: {e}"))?;
            let namespace = namespace_of(&name, &docs)?;
            Ok(GoFile {
                name,
                path,
                namespace,
                docs,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    for (file, object) in files
        .iter()
        .flat_map(|f| f.memcacheds().map(move |m| (f, m)))
    {
        memory_limit_mib(object).map_err(|e| format!("{}: {e}", file.name))?;
    }
    let count = files.iter().flat_map(GoFile::memcacheds).count();
    check(
        count >= 30 && files.iter().any(refused_by_the_go_operator),
        format!(
            "{count} Memcacheds found in {}, or none of its webhook-rejection scenario",
            dir.display()
        ),
    )?;
    Ok(files)
}

fn listed(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    entries
        .map(|entry| entry.map(|e| e.path()).map_err(|e| e.to_string()))
        .collect()
}

/// A file of an e2e scenario's first step (kuttl's `00-*.yaml`) that holds
/// objects, not what the step asserts (`00-assert*`, `00-errors*`).
fn first_step_objects(path: &Path) -> bool {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    name.strip_prefix("00-").is_some_and(|rest| {
        rest.ends_with(".yaml") && !rest.starts_with("assert") && !rest.starts_with("errors")
    })
}

/// The one namespace `docs` name, else the file's own: `go-<scenario>` for
/// an e2e scenario's files, `go-<sample>` for a sample.
fn namespace_of(file: &str, docs: &[Value]) -> Result<String, String> {
    let named: BTreeSet<&str> = (docs.iter())
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    let own = match file.strip_prefix("e2e/") {
        Some(rest) => rest.split('/').next().unwrap_or(rest),
        None => file
            .trim_start_matches("samples/")
            .trim_end_matches(".yaml"),
    };
    match Vec::from_iter(named).as_slice() {
        [] => Ok(format!("go-{}", own.replace('_', "-"))),
        [one] => Ok(one.to_string()),
        several => Err(format!("{file} names several namespaces: {several:?}")),
    }
}

/// The files holding Memcacheds, in rounds: a file whose Memcached has the
/// namespace and name of one in an earlier file (a v1beta1 sample and its
/// v1alpha1 twin) comes a round after it.
fn rounds(files: &[GoFile]) -> Vec<Vec<&GoFile>> {
    let mut rounds: Vec<Vec<&GoFile>> = Vec::new();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for file in files.iter().filter(|f| f.memcacheds().next().is_some()) {
        let identities: Vec<(String, String)> =
            (file.memcacheds()).map(|m| identity(file, m)).collect();
        let round = (identities.iter())
            .filter_map(|i| seen.get(i).map(|r| r + 1))
            .max()
            .unwrap_or(0);
        for identity in identities {
            seen.insert(identity, round);
        }
        if rounds.len() <= round {
            rounds.resize_with(round + 1, Vec::new);
        }
        rounds[round].push(file);
    }
    rounds
}

/// Where a Memcached of `file` is: its namespace and name.
fn identity(file: &GoFile, memcached: &Value) -> (String, String) {
    let name = memcached["metadata"]["name"].as_str().unwrap_or_default();
    (file.namespace.clone(), name.to_string())
}

/// The files of `round` with a Memcached that a file of the `later` rounds
/// has again.
fn later_twins<'a>(round: &[&'a GoFile], later: &[Vec<&GoFile>]) -> Vec<&'a GoFile> {
    let again: BTreeSet<(String, String)> = (later.iter().flatten())
        .flat_map(|f| f.memcacheds().map(|m| identity(f, m)))
        .collect();
    (round.iter().copied())
        .filter(|f| f.memcacheds().any(|m| again.contains(&identity(f, m))))
        .collect()
}

/// The Secrets the files' objects need, made as a user would before applying
/// them: the files' own Secrets applied as they are; for each cert-manager
/// Certificate the Secret it would write (no cert-manager here: its Issuers
/// are not applied); each TLS or credentials Secret a Memcached names that
/// no file holds, made here: TLS from a fresh CA for the Service names the
/// controller verifies, credentials under the key the Go operator reads
/// (`password-file`). Returns each credentials Secret's auth file by
/// namespace and name.
fn create_secrets(
    env: &Env,
    files: &[GoFile],
) -> Result<BTreeMap<(String, String), String>, String> {
    // The files' own Secrets, as they are.
    let mut auth_files = BTreeMap::new();
    for file in files
        .iter()
        .filter(|f| f.docs.iter().all(|d| d["kind"] == "Secret"))
    {
        let outcome = file.apply(&env.kubectl);
        check(
            outcome.success,
            format!("{}: {}", file.name, outcome.stderr.trim()),
        )?;
        for doc in &file.docs {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let content = auth_file(doc)
                .ok_or_else(|| format!("{}: no auth file key in {name}", file.name))?;
            auth_files.insert((file.namespace.clone(), name.to_string()), content);
        }
    }
    let from_files: BTreeSet<(String, String)> = auth_files.keys().cloned().collect();
    let mut certificates: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for file in files {
        let ns = &file.namespace;
        for doc in &file.docs {
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            let group = doc["apiVersion"].as_str().unwrap_or_default();
            let security = &doc["spec"]["security"];
            let (tls, sasl) = (
                security["tls"]["certificateSecretRef"]["name"].as_str(),
                security["sasl"]["credentialsSecretRef"]["name"].as_str(),
            );
            match doc["kind"].as_str().unwrap_or_default() {
                "Memcached" => {
                    if let Some(secret) = tls {
                        let names = certificates.entry((ns.clone(), secret.to_string()));
                        names.or_default().push(format!("{name}.{ns}.svc"));
                    }
                    if let Some(secret) = sasl {
                        let content = format!("go-operator-user:{secret}-password\n");
                        auth_files
                            .entry((ns.clone(), secret.to_string()))
                            .or_insert(content);
                    }
                }
                "Certificate" if group.starts_with("cert-manager.io/") => {
                    let secret = doc["spec"]["secretName"].as_str().unwrap_or_default();
                    let names = (doc["spec"]["dnsNames"].as_array().into_iter().flatten())
                        .filter_map(|n| n.as_str().map(str::to_string));
                    let made = certificates.entry((ns.clone(), secret.to_string()));
                    made.or_default().extend(names);
                }
                "Issuer" if group.starts_with("cert-manager.io/") => {}
                "Secret" => {}
                kind => {
                    let file = &file.name;
                    return Err(format!(
                        "{file}: a {kind} is not among the kinds applied here"
                    ));
                }
            }
        }
    }
    for ((ns, name), content) in &auth_files {
        if !from_files.contains(&(ns.clone(), name.clone())) {
            env.kubectl.apply(
                &json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": name, "namespace": ns},
                    "stringData": {"password-file": content},
                })
                .to_string(),
            )?;
        }
    }
    for ((ns, name), names) in &certificates {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        env.kubectl
            .apply(&tls_secret(ns, name, &pki::issue(&names)?))?;
    }
    Ok(auth_files)
}

/// The auth file a Secret document holds under the first key the controller
/// reads (`stringData`, else base64 `data`).
fn auth_file(secret: &Value) -> Option<String> {
    use base64::Engine;
    AUTH_SECRET_KEYS.iter().find_map(|key| {
        if let Some(text) = secret["stringData"][key].as_str() {
            return Some(text.to_string());
        }
        let encoded = secret["data"][key].as_str()?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        String::from_utf8(bytes).ok()
    })
}

/// `kubectl apply -f` of each file, all at once; their outcomes in order.
fn apply_each(kubectl: &Kubectl, files: &[&GoFile]) -> Result<Vec<Outcome>, String> {
    std::thread::scope(|scope| {
        let running: Vec<_> = (files.iter())
            .map(|file| scope.spawn(move || file.apply(kubectl)))
            .collect();
        running
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| "a kubectl apply thread panicked".to_string())
            })
            .collect()
    })
}

/// The file the Go operator refuses is refused by the policy's webhook with
/// the Go operator's reason (the memory limit below `maxMemoryMB` plus its
/// overhead), and nothing is stored.
fn refused_for_its_reason(
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

/// A credentials Secret from the files whose auth file lacks its final
/// newline (the Go operator's e2e Secret): the Memcached shows
/// `Degraded: InvalidAuthSecret` naming the key, and the fix
/// docs/migration.md gives (`kubectl create secret generic ... --dry-run=client
/// -o yaml | kubectl apply -f -`) makes it valid.
fn fix_unterminated_auth_files(
    env: &Env,
    file: &GoFile,
    credentials: &mut BTreeMap<(String, String), String>,
) -> Result<(), String> {
    let ns = &file.namespace;
    for object in file.memcacheds() {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let Some(secret) =
            object["spec"]["security"]["sasl"]["credentialsSecretRef"]["name"].as_str()
        else {
            continue;
        };
        let key = (ns.clone(), secret.to_string());
        let Some(content) = credentials
            .get(&key)
            .filter(|c| !c.ends_with('\n'))
            .cloned()
        else {
            continue;
        };
        wait_for(
            &format!("{}: Degraded/InvalidAuthSecret", file.name),
            SETTLE,
            || {
                let mc = env.kubectl.get(&["memcached", name, "-n", ns])?;
                match condition(&mc, "Degraded") {
                    Some(c)
                        if c["reason"] == "InvalidAuthSecret"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.contains("must end with a newline")) =>
                    {
                        Ok(())
                    }
                    other => Err(format!("Degraded: {other:?}")),
                }
            },
        )?;
        // As a user meets it: the pods run with the file as it is, then the fix.
        let listening = format!("{}: every pod of {ns}/{name} listening", file.name);
        wait_for(&listening, SETTLE, || {
            each_pod(env, ns, name, |ip| Memcache::connect(ip).map(drop))
        })?;
        let literal = format!("--from-literal=password-file={content}\n");
        let manifest = env.kubectl.ok(&[
            "create",
            "secret",
            "generic",
            secret,
            "-n",
            ns,
            &literal,
            "--dry-run=client",
            "-o",
            "yaml",
        ])?;
        env.kubectl.apply(&manifest)?;
        credentials.insert(key, format!("{content}\n"));
    }
    Ok(())
}

/// Wait until every one of `wanted` is Ready with the replicas its stored
/// spec asks for (`replicas`, else autoscaling's `minReplicas`), all at once.
fn wait_all_ready(env: &Env, wanted: &[(&GoFile, &Value)]) -> Result<(), String> {
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
fn stored_whole(env: &Env, file: &GoFile) -> Result<Vec<String>, String> {
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
fn not_as_written(written: &Value, stored: &Value, at: String, out: &mut Vec<String>) {
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
fn network_policy(env: &Env, file: &GoFile, name: &str, warnings: &str) -> Result<(), String> {
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
fn access(
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
fn each_pod(
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
fn pods_ask_for(env: &Env, file: &GoFile, name: &str, object: &Value) -> Result<(), String> {
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
fn room_limit(namespace: &str) -> String {
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
fn no_room(env: &Env, file: &GoFile, name: &str) -> Result<(), String> {
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
