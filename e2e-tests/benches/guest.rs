//! `make bench-guest`: the policies' own `validate` work, timed inside wasmtime
//! configured as Kubewarden's policy-server 1.35 configures it, without the host
//! work `kwctl bench` also counts (serialising the request, parsing the answer,
//! diffing a mutated object into a JSON patch).
//!
//! The engine is built as `policy-server` builds it (kubewarden-controller
//! v1.35.0, `crates/policy-server/src/lib.rs`): `wasmtime::Config::default()`,
//! `wasm_function_references(true)`, `epoch_interruption(true)` for its default
//! `--policy-timeout 2`, and a ticker that increments the epoch once a second.
//! Cranelift at its default optimisation level (speed), no fuel, no memory or
//! stack limits beyond wasmtime's defaults. Each policy is wrapped the way
//! policy-evaluator's `StackPre`/`WapcStack` wrap it
//! (`crates/policy-evaluator/src/runtimes/wapc/`): a
//! `WasmtimeEngineProviderPre` from that engine and module with the default WASI
//! context (inherited stdio, no args, env or preopened directories),
//! rehydrated with both epoch deadlines at 2 ticks, inside a `WapcHost` whose
//! host callback answers as policy-evaluator's does. The payload of `validate`
//! is what its `Runtime::validate` sends: `{"request": <AdmissionRequest>,
//! "settings": <settings>}`, the request re-serialised with policy-evaluator's
//! field order and the settings of `kwctl bench` (none for ours, the reference
//! policies' own files). What is timed is `WapcHost::call("validate", ..)`
//! alone: the waPC `__guest_call` with its `__guest_request` and
//! `__guest_response` copies, less the time spent in host callbacks
//! (`__host_call`, timed inside the callback and subtracted per call; the
//! number of callbacks per call is printed: none for ours and the two anchors
//! on these requests, two log records for the template).
//!
//! One difference remains: this is wasmtime 48 (the workspace's
//! wasmtime-provider 2.25, WASI from wasmtime-wasi's preview 1), where
//! policy-server 1.35 runs wasmtime 44 (wasmtime-provider 2.19, WASI from
//! wasi-common); no WASI call shows in a profile of these `validate` calls
//! (`GUEST_PROFILE` below), so that difference is outside what is timed.
//!
//! Two ways of calling, both printed each round:
//! * warm: one instance called again and again, as `kwctl bench` does;
//! * fresh: a new instance for each request (rehydrate, instantiate,
//!   `wapc_init`, all untimed), then one timed `validate`, as policy-server
//!   serves each admission request (`EvaluationEnvironment::validate_policy`
//!   rehydrates its `PolicyEvaluatorPre`).
//!
//! Ours runs on the full-featured CR, Kubewarden's `capabilities-psp` and
//! `psa-label-enforcer` (../shared/bench, `BENCH_REFERENCE`) on their own
//! mutating requests and settings, the template policy on its Pod as the floor;
//! every answer is checked once (ours and the anchors mutate). Each of `ROUNDS`
//! rounds (default 5) takes every case's samples in 10 slices, the cases taking
//! turns (the order rotates), so that all see the same load of the machine; a
//! round's number for a case is the median of its samples. Printed: every
//! round, then the medians over the rounds and, as the ratio, the median of the
//! per-round ratios (as `make bench-kwctl` reports them). The last line is the
//! warm one. Asserts nothing about speed.
//!
//! Knobs: `GUEST_ITERATIONS` (warm calls per case and round, 3000),
//! `GUEST_FRESH_ITERATIONS` (fresh instances, 300), `GUEST_ENGINE=kwctl` (the
//! engine `kwctl run`/`bench` builds instead: `Config::new()` with function
//! references, no epoch interruption), `GUEST_ONLY=ours,template` (only those
//! cases, no last line), `GUEST_PROFILE=perfmap` (wasmtime writes
//! /tmp/perf-<pid>.map so that `perf record`/`perf report` name the wasm
//! functions; give `POLICY_WASM` a build that keeps its name section).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use e2e_tests::{policy_path, workspace_root};
use serde::Serialize;
use serde_json::{Value, json};
use wapc::WapcHost;
use wasmtime_provider::{
    EpochDeadlines, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre, wasmtime,
};

/// policy-server's default `--policy-timeout`, in seconds: the epoch deadline in ticks.
const POLICY_TIMEOUT_TICKS: u64 = 2;
/// policy-server's epoch ticker period.
const TICK: Duration = Duration::from_secs(1);

/// The AdmissionRequest as policy-evaluator 1.35 serialises it
/// (`crates/policy-evaluator/src/admission_request.rs`): its field order, its
/// optional fields left out when absent.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionRequest {
    uid: Value,
    kind: Value,
    resource: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_resource: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_kind: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_resource: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sub_resource: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<Value>,
    operation: Value,
    user_info: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    old_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Value>,
}

impl AdmissionRequest {
    fn from_file(path: &Path) -> Self {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let document: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        // kwctl takes an AdmissionReview or a bare AdmissionRequest.
        let mut request = match document.get("request") {
            Some(request) => request.clone(),
            None => document,
        };
        let mut take = |key: &str| {
            request
                .as_object_mut()
                .and_then(|r| r.remove(key))
                .filter(|v| !v.is_null())
        };
        AdmissionRequest {
            uid: take("uid").unwrap_or_else(|| json!("")),
            kind: take("kind").expect("the request has a kind"),
            resource: take("resource").expect("the request has a resource"),
            sub_resource: take("subResource"),
            request_kind: take("requestKind"),
            request_resource: take("requestResource"),
            request_sub_resource: take("requestSubResource"),
            name: take("name"),
            namespace: take("namespace"),
            operation: take("operation").expect("the request has an operation"),
            user_info: take("userInfo").unwrap_or_else(|| json!({})),
            object: take("object"),
            old_object: take("oldObject"),
            dry_run: take("dryRun"),
            options: take("options"),
        }
    }
}

/// Time spent in host callbacks, for subtraction.
#[derive(Default)]
struct Callbacks {
    calls: AtomicU64,
    nanos: AtomicU64,
}

/// The host callback, answering as policy-evaluator's
/// (`crates/policy-evaluator/src/runtimes/callback.rs`) would for a policy
/// without context-aware resources: a log record is taken, a Namespace is read
/// as on a fresh cluster (no labels), anything else is refused. Its own time is
/// recorded so that it can be taken out of the guest's.
fn host_callback(callbacks: Arc<Callbacks>) -> Box<wapc::HostCallback> {
    Box::new(move |_id, binding, namespace, operation, payload| {
        let started = Instant::now();
        let answer = answer(binding, namespace, operation, payload);
        callbacks.calls.fetch_add(1, Ordering::Relaxed);
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        callbacks.nanos.fetch_add(spent, Ordering::Relaxed);
        answer.map_err(Into::into)
    })
}

fn answer(
    binding: &str,
    namespace: &str,
    operation: &str,
    payload: &[u8],
) -> Result<Vec<u8>, String> {
    match (binding, namespace, operation) {
        ("kubewarden", "tracing", "log") => Ok(Vec::new()),
        ("kubewarden", "kubernetes", "get_resource") => {
            let request: Value = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            if request["api_version"] != "v1" || request["kind"] != "Namespace" {
                return Err(format!("no such resource in this bench: {request}"));
            }
            let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": request["name"]}});
            Ok(object.to_string().into_bytes())
        }
        _ => Err(format!(
            "unknown operation: {binding}/{namespace}/{operation}"
        )),
    }
}

/// One policy on its request.
struct Case {
    name: &'static str,
    pre: WasmtimeEngineProviderPre,
    payload: Vec<u8>,
    callbacks: Arc<Callbacks>,
    /// Whether the answer must carry a mutated object.
    mutates: bool,
    /// Whether the engine interrupts on epochs (policy-server) or not (kwctl).
    epoch: bool,
}

impl Case {
    fn new(
        (engine, epoch): (&wasmtime::Engine, bool),
        name: &'static str,
        wasm: &Path,
        request: &Path,
        settings: Value,
        mutates: bool,
    ) -> Self {
        let bytes = std::fs::read(wasm).unwrap_or_else(|e| {
            panic!(
                "cannot read {} ({e}); policy.wasm comes from `make policy.wasm`, the others from ../shared/bench",
                wasm.display()
            )
        });
        // policy-server precompiles each module with its engine and deserialises it: the same code.
        let module = wasmtime::Module::new(engine, &bytes)
            .unwrap_or_else(|e| panic!("wasmtime cannot compile {}: {e}", wasm.display()));
        let pre = WasmtimeEngineProviderBuilder::new()
            .engine(engine.clone())
            .module(module)
            .build_pre()
            .unwrap_or_else(|e| panic!("{name}: cannot build the waPC stack: {e}"));
        let payload = serde_json::to_vec(&json!({
            "request": AdmissionRequest::from_file(request),
            "settings": settings,
        }))
        .expect("the payload serialises");
        Case {
            name,
            pre,
            payload,
            callbacks: Arc::new(Callbacks::default()),
            mutates,
            epoch,
        }
    }

    /// A new instance, as policy-evaluator's `WapcStack::new_from_pre`.
    fn instance(&self) -> WapcHost {
        let deadlines = self.epoch.then_some(EpochDeadlines {
            wapc_init: POLICY_TIMEOUT_TICKS,
            wapc_func: POLICY_TIMEOUT_TICKS,
        });
        let provider = self
            .pre
            .rehydrate(deadlines)
            .unwrap_or_else(|e| panic!("{}: cannot rehydrate: {e}", self.name));
        WapcHost::new(
            Box::new(provider),
            Some(host_callback(self.callbacks.clone())),
        )
        .unwrap_or_else(|e| panic!("{}: waPC host cannot start: {e}", self.name))
    }

    /// One `validate`: the guest's time (host callbacks taken out) and the number of callbacks.
    fn time(&self, host: &WapcHost) -> (Duration, u64) {
        let calls = self.callbacks.calls.load(Ordering::Relaxed);
        let nanos = self.callbacks.nanos.load(Ordering::Relaxed);
        let started = Instant::now();
        let answer = host.call("validate", &self.payload);
        let elapsed = started.elapsed();
        std::hint::black_box(
            answer.unwrap_or_else(|e| panic!("{}: validate failed: {e}", self.name)),
        );
        let in_callbacks = self.callbacks.nanos.load(Ordering::Relaxed) - nanos;
        (
            elapsed.saturating_sub(Duration::from_nanos(in_callbacks)),
            self.callbacks.calls.load(Ordering::Relaxed) - calls,
        )
    }

    /// Check the answer once: the policy did its work (accepted, mutated where expected).
    fn check(&self) -> String {
        let host = self.instance();
        let answer = host
            .call("validate", &self.payload)
            .unwrap_or_else(|e| panic!("{}: validate failed: {e}", self.name));
        let response: Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("{}: the answer is not JSON: {e}", self.name));
        assert_eq!(
            response["accepted"], true,
            "{}: rejected: {response}",
            self.name
        );
        let mutated = response
            .get("mutated_object")
            .is_some_and(|object| !object.is_null());
        assert_eq!(
            mutated, self.mutates,
            "{}: mutated object: {response}",
            self.name
        );
        format!(
            "{:<20} payload {:>5} B, answer {:>5} B, accepted, {}",
            self.name,
            self.payload.len(),
            answer.len(),
            if mutated { "mutated" } else { "not mutated" }
        )
    }
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a positive number, not {v:?}"))
        })
        .max(1)
}

/// Calls of one case per round are spread over this many slices, the cases taking turns, so that
/// every case sees the same load of the (shared) machine.
const SLICES: usize = 10;
/// Untimed calls at the start of each slice: the case's code back in the caches.
const SLICE_WARMUP: usize = 20;

/// One case's samples in one round.
#[derive(Default)]
struct Samples {
    warm: Vec<Duration>,
    fresh: Vec<Duration>,
    callbacks: u64,
}

impl Samples {
    /// A slice: `warm` calls on the case's warm instance, `fresh` first calls of new instances.
    fn take(&mut self, case: &Case, host: &WapcHost, warm: usize, fresh: usize) {
        for _ in 0..SLICE_WARMUP {
            case.time(host);
        }
        for _ in 0..warm {
            let (guest, calls) = case.time(host);
            self.warm.push(guest);
            self.callbacks = self.callbacks.max(calls);
        }
        for _ in 0..fresh {
            let (guest, calls) = case.time(&case.instance());
            self.fresh.push(guest);
            self.callbacks = self.callbacks.max(calls);
        }
    }
}

/// One round: every case's warm and fresh medians (us) and its most callbacks in one call.
fn round(cases: &[Case], round: usize, iterations: usize, fresh: usize) -> Vec<(f64, f64, u64)> {
    let hosts: Vec<WapcHost> = cases.iter().map(Case::instance).collect();
    for (case, host) in cases.iter().zip(&hosts) {
        for _ in 0..iterations / 10 {
            case.time(host);
        }
    }
    let mut samples: Vec<Samples> = cases.iter().map(|_| Samples::default()).collect();
    for slice in 0..SLICES {
        for step in 0..cases.len() {
            let index = (step + slice + round) % cases.len();
            let share = |n: usize| n / SLICES + usize::from(slice < n % SLICES);
            samples[index].take(
                &cases[index],
                &hosts[index],
                share(iterations),
                share(fresh),
            );
        }
    }
    samples
        .iter_mut()
        .map(|s| {
            (
                micros(median(&mut s.warm)),
                micros(median(&mut s.fresh)),
                s.callbacks,
            )
        })
        .collect()
}

fn median_of(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn reference_dir() -> PathBuf {
    std::env::var_os("BENCH_REFERENCE")
        .map_or_else(|| workspace_root().join("../shared/bench"), PathBuf::from)
}

/// `label` and each case's time; with ours and capabilities-psp, `ratio` or else the ratio of the values.
fn line(label: &str, names: &[&str], values: &[f64], ratio: Option<f64>) -> String {
    let cells: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(name, value)| format!("{name} {value:.1} us"))
        .collect();
    let ratio = match names {
        ["ours", "capabilities-psp", ..] => format!(
            "; ours/capabilities-psp {:.2}",
            ratio.unwrap_or(values[0] / values[1])
        ),
        _ => String::new(),
    };
    format!("{label}{}{ratio}", cells.join(", "))
}

fn main() {
    let rounds = env_number("ROUNDS", 5);
    let iterations = env_number("GUEST_ITERATIONS", 3_000);
    let fresh_iterations = env_number("GUEST_FRESH_ITERATIONS", 300);

    let epoch = match std::env::var("GUEST_ENGINE").unwrap_or_default().as_str() {
        "" | "policy-server" => true,
        "kwctl" => false,
        other => panic!("GUEST_ENGINE is policy-server or kwctl, not {other:?}"),
    };
    // policy-server 1.35 (crates/policy-server/src/lib.rs): `Config::default()`, function
    // references, epoch interruption (its default --policy-timeout is 2 s) and a ticker.
    // kwctl (crates/policy-evaluator/src/policy_evaluator/policy_evaluator_builder.rs,
    // `build_engine`): `Config::new()`, function references, no epoch deadline.
    let mut config = wasmtime::Config::default();
    config.wasm_function_references(true);
    config.epoch_interruption(epoch);
    if std::env::var("GUEST_PROFILE").is_ok_and(|p| p == "perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let engine = wasmtime::Engine::new(&config).expect("wasmtime engine");
    if epoch {
        let engine = engine.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(TICK);
                engine.increment_epoch();
            }
        });
    }
    let only = std::env::var("GUEST_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|o| o.trim() == name);

    let reference = reference_dir();
    let settings = |name: &str| -> Value {
        let path = reference.join(format!("{name}-settings.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).expect("settings are JSON")
    };
    let anchor = |name: &'static str| {
        (
            name,
            reference.join(format!("{name}.wasm")),
            reference.join(format!("{name}-mutate-request.json")),
            settings(name),
            true,
        )
    };
    // (name, module, request, settings, mutates), ours first, then the anchors: the last line's order.
    let specs = [
        (
            "ours",
            policy_path(),
            workspace_root()
                .join("e2e-tests/fixtures/requests/seed-valid-cr-with-all-features-v1beta1.json"),
            json!({}),
            true,
        ),
        anchor("capabilities-psp"),
        anchor("psa-label-enforcer"),
        (
            "template",
            reference.join("template-policy.wasm"),
            reference.join("pod_creation.json"),
            json!({}),
            false,
        ),
    ];
    let cases: Vec<Case> = specs
        .into_iter()
        .filter(|spec| wanted(spec.0))
        .map(|(name, wasm, request, settings, mutates)| {
            Case::new((&engine, epoch), name, &wasm, &request, settings, mutates)
        })
        .collect();
    let names: Vec<&str> = cases.iter().map(|c| c.name).collect();

    if epoch {
        println!(
            "guest validate on wasmtime as policy-server 1.35 runs it (epoch deadline {POLICY_TIMEOUT_TICKS} ticks of {TICK:?}); \
             {rounds} rounds, warm {iterations} calls, fresh {fresh_iterations} instances per case and round"
        );
    } else {
        println!(
            "guest validate on wasmtime as kwctl 1.35 runs it (no epoch interruption); \
             {rounds} rounds, warm {iterations} calls, fresh {fresh_iterations} instances per case and round"
        );
    }
    for case in &cases {
        println!("  {}", case.check());
    }

    // Per case, its per-round medians.
    let mut warm_rounds: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut fresh_rounds: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut callbacks = vec![0; cases.len()];
    for number in 0..rounds {
        let results = round(&cases, number, iterations, fresh_iterations);
        for (index, (warm, fresh, calls)) in results.into_iter().enumerate() {
            warm_rounds[index].push(warm);
            fresh_rounds[index].push(fresh);
            callbacks[index] = callbacks[index].max(calls);
        }
        let last =
            |per_round: &[Vec<f64>]| -> Vec<f64> { per_round.iter().map(|v| v[number]).collect() };
        println!(
            "{}",
            line(
                &format!("round {}: warm  ", number + 1),
                &names,
                &last(&warm_rounds),
                None
            )
        );
        println!(
            "{}",
            line(
                &format!("round {}: fresh ", number + 1),
                &names,
                &last(&fresh_rounds),
                None
            )
        );
    }

    let counts: Vec<String> = names
        .iter()
        .zip(&callbacks)
        .map(|(name, count)| format!("{name} {count}"))
        .collect();
    println!(
        "host callbacks per validate (their time subtracted): {}",
        counts.join(", ")
    );
    let medians =
        |per_round: &[Vec<f64>]| -> Vec<f64> { per_round.iter().map(|v| median_of(v)).collect() };
    // The ratio: the median of the per-round ratios (each round's pair measured side by side).
    let ratio = |per_round: &[Vec<f64>]| -> f64 {
        let ratios: Vec<f64> = per_round[0]
            .iter()
            .zip(&per_round[1])
            .map(|(ours, anchor)| ours / anchor)
            .collect();
        median_of(&ratios)
    };
    let paired = names.starts_with(&["ours", "capabilities-psp"]);
    let (fresh, warm) = (medians(&fresh_rounds), medians(&warm_rounds));
    let (fresh_ratio, warm_ratio) = (ratio(&fresh_rounds), ratio(&warm_rounds));
    println!(
        "{}",
        line(
            "median fresh: ",
            &names,
            &fresh,
            paired.then_some(fresh_ratio)
        )
    );
    println!(
        "{}",
        line(
            "median warm:  ",
            &names,
            &warm,
            paired.then_some(warm_ratio)
        )
    );
    if names.starts_with(&["ours", "capabilities-psp", "psa-label-enforcer"]) {
        println!(
            "guest: ours {:.1} us, capabilities-psp {:.1} us, psa-label-enforcer {:.1} us; ours/capabilities-psp {warm_ratio:.2}",
            warm[0], warm[1], warm[2]
        );
    }
}
