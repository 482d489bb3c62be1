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

use e2e_tests::harness::clients::memcache::{Memcache, memcached_version};
use e2e_tests::harness::scenarios::objects::{exists, owned_by, tls_secret};
use e2e_tests::harness::scenarios::pods::pod_ips;
use e2e_tests::harness::scenarios::scenario::{SETTLE, check, ensure_namespace};
use e2e_tests::harness::{Env, Kubectl, Outcome, condition, environment::pki, wait_for};
use e2e_tests::workspace_root;
use memcached_api::AUTH_SECRET_KEYS;
use serde_json::{Value, json};

mod checks;
mod files;
mod secrets;

use checks::*;
use files::*;
use secrets::*;

/// The memory the Go operator's webhook adds to `maxMemoryMB` for the
/// smallest memory limit it admits (its `webhook-rejection` file: "64Mi +
/// 32Mi overhead = 96Mi").
const GO_OPERATOR_OVERHEAD_MI: i64 = 32;

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

fn apply_and_check(
    env: &mut Env,
    files: &[GoFile],
    namespaces: &BTreeSet<&str>,
) -> Result<(), String> {
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
