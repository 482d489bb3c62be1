//! The real node (`make e2e-node`): two environments of the end-to-end
//! suites (control plane, policy-server, the controller), each with a
//! kubelet on containerd and kube-proxy beside the kwok nodes, run at once
//! by this program running itself twice (each node in a network namespace
//! of its own; their lines after `node 1 |`, `node 2 |`). On the first, one
//! scenario installs Kubewarden from its own charts and removes the suite's
//! policy-server webhook: from then on its PolicyServer pod judges every
//! Memcached there. A Memcached steered to a node runs its pod in a real
//! container pulled from the local registry, Ready through the rendered
//! tcpSocket probe; `kubectl logs` and `exec` reach it, memcached answers
//! over the pod IP, and the pod resolves Services through CoreDNS. Teardown
//! must leave no process, cgroup, mount or changed sysctl.
//!
//! Every scenario runs even when an earlier one failed, and the program
//! fails if any did. `E2E_ONLY` numbers scenarios across both nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::{Duration, Instant};

use e2e_tests::harness::clients::api_requests::request_counts;
use e2e_tests::harness::clients::http;
use e2e_tests::harness::clients::memcache::Memcache;
use e2e_tests::harness::environment::helm::{self, Helm};
use e2e_tests::harness::environment::kubewarden::KUBEWARDEN_NAMESPACE;
use e2e_tests::harness::environment::kubewarden_charts;
use e2e_tests::harness::environment::node::{self, NodeState};
use e2e_tests::harness::environment::pki;
use e2e_tests::harness::environment::signing;
use e2e_tests::harness::scenarios::objects::auth_secret;
use e2e_tests::harness::scenarios::parts;
use e2e_tests::harness::scenarios::pods::pod_name;
use e2e_tests::harness::scenarios::runner::{Scenario, exit_with, run_part};
use e2e_tests::harness::scenarios::scenario::{
    SETTLE, check, ensure_namespace, instance_objects, memcached, memcached_as_written,
    ready_endpoints, wait_ready,
};
use e2e_tests::harness::{Env, Outcome, condition, condition_status, wait_for};
use memcached_api::render::labels::SECRET_HASH_ANNOTATION;
use memcached_api::render::stamp::{BASE_ANNOTATION, INTENT_SPEC_ANNOTATION, TEMPLATE_ANNOTATION};
use serde_json::{Value, json};

mod chart;
mod handover;
mod kubewarden;
mod monitoring;
mod platform;
mod pods;
mod rollouts;
mod secrets;
mod versions;
mod warm;

use chart::*;
use handover::*;
use kubewarden::*;
use monitoring::*;
use platform::*;
use pods::*;
use rollouts::*;
use secrets::*;
use versions::*;
use warm::*;

const NAMESPACE: &str = "real-node";

const NAME: &str = "cache";
/// The namespace of the Memcacheds created before Kubewarden judged any.
const AUDITED: &str = "audited";

/// The scenario that installs Kubewarden on the node.
const KUBEWARDEN: &str = "Kubewarden from its own charts on the node: deploy/policy.yaml turns \
    active and judges every Memcached from here on through the webhook kubewarden-controller \
    registered; its audit scanner reports the invalid ones created before";

/// The first node's scenarios: Kubewarden from its own charts, then those its PolicyServer judges
/// (every Memcached of this node from then on) and the longest of the others.
const FIRST_NODE: &[Scenario] = &[
    Scenario::new(
        "the real node is Ready on containerd 2.x beside the kwok nodes",
        node_ready,
    ),
    Scenario::new(KUBEWARDEN, kubewarden_from_its_charts),
    Scenario::new(
        "Kubewarden requiring the release key: a PolicyServer serves the artifact make push \
         signed, and refuses to load an unsigned one, saying why",
        signature_required,
    )
    .needs(&[KUBEWARDEN]),
    Scenario::new(
        "warm restart: a rotated password whose Secret files reach the pod after its new hash: \
         memcached waits for them, then serves the new password; every key kept, 0 restarts",
        rotation_with_late_files,
    ),
    Scenario::new(
        "warm restart: NAPI ids (-N) in each spelling memcached accepts, then removed in place: \
         the stats probe never crashes a pod still running them, 0 container restarts, every key kept",
        napi_ids_removed,
    ),
    Scenario::new(
        "a registry mirror rewriting memcached images at admission (a MutatingAdmissionPolicy): \
         a config change and an image change complete warm, the rewritten image kept, each pod \
         patched once per change",
        mirrored_images,
    ),
    Scenario::new(
        "warm restarts by default: a Memcached created through the PolicyServer without a word of \
         them gets them and keeps every key through a config change; one stored before the default \
         keeps its pod and stays without, applied again",
        warm_by_default,
    )
    .needs(&[KUBEWARDEN]),
    Scenario::new(
        "a certificate renewed under the same CA (cert-manager's renewal, the same Secret): each \
         pod's memcached loads it in place, warm restarts on and off; 0 restarts, the same \
         processes, every key served, the renewed certificate presented",
        certificate_renewed,
    ),
    Scenario::new(
        "helm install of the published chart alone, policy included, on Kubewarden from its \
         charts: the chart's policy turns active and judges: a seed example refused with each of \
         its messages, the minimal one stored defaulted and Ready on the node; uninstalled, the \
         policy goes too",
        chart_with_policy,
    )
    .needs(&[KUBEWARDEN]),
    Scenario::new(
        "monitoring as users run it: kube-prometheus-stack's Prometheus scrapes every target the \
         chart and the Memcacheds create (the controller over TLS with its token), each alert \
         fires on real data and resolves, an authenticated cache's too; every dashboard query \
         returns series",
        monitored_by_prometheus,
    ),
    Scenario::new("the node stack's memory", node_memory),
    Scenario::new(
        "an image upgrade from an older memcached (memcached:1.6.18) to today's memcached:1.6, warm \
         restarts on: each pod restarted in place on the new release, every key kept",
        image_upgraded_to_todays_memcached,
    ),
    Scenario::new(
        "maxMemoryMB 64 -> 16 of a cache twice the new size keeps the most recently used keys",
        keys_kept_through_a_memory_shrink,
    ),
];

/// The second node's scenarios, beside the first's (its Memcacheds judged by the suite's
/// policy-server).
const SECOND_NODE: &[Scenario] = &[
    Scenario::new(
        "the real node is Ready on containerd 2.x beside the kwok nodes",
        node_ready,
    ),
    Scenario::new(
        "a Memcached's pod runs in a real container on the real node, Ready through its tcpSocket probe",
        pod_in_container,
    ),
    Scenario::new(
        "memcached answers stats over the pod IP, and kubectl logs shows its output",
        stats_and_logs,
    ),
    Scenario::new(
        "the pod resolves kubernetes.default.svc and its own Service through CoreDNS",
        cluster_dns,
    ),
    Scenario::new(
        "warm restart: a new spec.image is applied to each pod in place, every key kept",
        warm_image_change,
    ),
    Scenario::new(
        "warm restart in StatefulSet mode: the new image in place, every key kept, the new revision current",
        warm_image_change_stateful,
    ),
    Scenario::new(
        "warm restart: a config change (threads, connections) reaches every pod in place, one at a \
         time, confirmed from memcached's stats settings, every key kept",
        warm_config_change,
    ),
    Scenario::new(
        "warm restart in StatefulSet mode: a config change in place, one pod at a time, every key kept",
        warm_config_change_stateful,
    ),
    Scenario::new(
        "warm restart: a rotated password reaches every pod in place, one at a time; the old one \
         is refused after, every key kept",
        warm_rotation,
    ),
    Scenario::new(
        "warm restart after a controller upgrade that renders another supervisor: a config \
         change still reaches every pod in place, 0 pods replaced, every key kept",
        warm_change_after_upgrade,
    ),
    Scenario::new(
        "small caches start: maxMemoryMB 16 gets warm restarts off and kubectl apply says why, 39 \
         gets them on; both pods serve, never restarted",
        small_caches_start,
    ),
    Scenario::new(
        "the exporter sidecar serves memcached's numbers on the pod IP",
        exporter_scraped,
    ),
    Scenario::new(
        "TLS and authentication from the Secret files the kubelet mounts; a rotated password rolls the pod",
        tls_and_auth,
    ),
    Scenario::new(
        "StatefulSet: each server of status.serverList resolves to its pod through CoreDNS; a deleted pod returns under its name",
        stateful_set_names,
    ),
    Scenario::new(
        "memcached killed in its container: the kubelet restarts it in the same pod",
        killed_memcached_restarted,
    ),
    Scenario::new(
        "a deleted pod leaves its Service at once, serves through its preStop delay, then stops on SIGTERM",
        graceful_deletion,
    ),
    Scenario::new(
        "a StatefulSet whose clients' hashing is known keeps its keys through a deleted pod, a drain's \
         eviction, a maxMemoryMB resize and the autoscaler's 3 -> 4 -> 3: each leaving pod hands them \
         over in its preStop delay and is unlisted, a replacement or new pod takes its keys before it is \
         listed; a client following status.serverList reads 90 % of 20,000 keys in every pass, 95 % \
         after a replaced pod or a scale, 90 % after the resize",
        keys_through_replaced_pods,
    ),
    Scenario::new(
        "a Deployment whose clients' hashing is known keeps its keys through a deleted pod, 3 -> 4 -> 3 \
         and a maxMemoryMB resize: a new pod turns ready once its readiness gate is set, after its keys \
         are copied; a leaving pod hands them over in its preStop delay; values written after 3 -> 4 \
         are read after 4 -> 3",
        keys_through_a_deployment_s_moves,
    ),
    Scenario::new(
        "3 replicas Ready; a config change rolls 3 new pods that run the new -m; scale 3 -> 1 -> 2",
        config_rollout_and_scale,
    ),
    Scenario::new(
        "a Deployment rollout paced by the cache: one new pod at a time, the next only once \
         the last is warm again, the old pod serving meanwhile",
        paced_deployment_rollout,
    ),
    Scenario::new(
        "a StatefulSet rollout paced by the cache: one pod at a time, the next only once the \
         last is warm again, each under its name",
        paced_stateful_rollout,
    ),
    Scenario::new(
        "a rollout under read traffic paced by what clients feel: a new pod holding its peers' items \
         but missing holds the next until its hit ratio is back to 90% of theirs",
        hit_ratio_paced_rollout,
    ),
    Scenario::new(
        "autoscaling turned off without a replica count keeps the pods the autoscaler ran, every key \
         served, and kubectl apply says so",
        autoscaling_handed_back,
    ),
    Scenario::new(
        "a controller upgrade that renders pods differently restarts none, in either workload mode",
        controller_upgrade_restarts_none,
    ),
    Scenario::new(
        "pods that answer stats with garbage or reset the connection are named on their Memcached; \
         none is replaced, the controller runs on, another Memcached scales meanwhile",
        faulty_pods,
    ),
    Scenario::new(
        "helm install of the chart make push-chart published and signed: the controller's \
         image runs in its container on the node, reconciles there, hands over its Lease on a \
         rollout restart; helm test passes; uninstalled, it leaves nothing",
        chart_installed,
    ),
    Scenario::new(
        "helm install with watchNamespaces: each release reconciles only the namespaces it \
         watches; two in one namespace each lead on their own Lease (on the other's, helm test \
         says it never leads); uninstalled, they leave nothing",
        chart_watching_namespaces,
    ),
    Scenario::new("the node stack's memory", node_memory),
];

fn main() {
    let scenarios = [FIRST_NODE, SECOND_NODE].concat();
    let nodes = [0..FIRST_NODE.len(), FIRST_NODE.len()..scenarios.len()];
    match parts::this_part(nodes.len()) {
        None => run_nodes(&scenarios, &nodes),
        Some(Ok(node)) => run_node(&scenarios, nodes[node].clone(), node + 1),
        Some(Err(e)) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

/// Both nodes at once, each this program again; then whether the host's
/// sysctls, which the kubelets write, are as before.
fn run_nodes(scenarios: &[Scenario], nodes: &[Range<usize>]) -> ! {
    let sysctls = node::sysctls();
    let started = Instant::now();
    let passed =
        parts::run_parts(scenarios, nodes, |n| format!("node {}", n + 1)).unwrap_or_else(|e| {
            println!("FAIL {e}");
            false
        });
    let name = format!(
        "{}. the host's sysctls, which each kubelet writes, are as before once both nodes stopped",
        scenarios.len() + 2
    );
    let restored = sysctls_restored(&sysctls);
    match &restored {
        Ok(()) => println!("ok   {name}"),
        Err(e) => println!("FAIL {name}\n     {e}"),
    }
    let passed = passed && restored.is_ok();
    println!(
        "the real nodes {} in {:.0}s",
        if passed { "passed" } else { "FAILED" },
        started.elapsed().as_secs_f64()
    );
    std::process::exit(if passed { 0 } else { 1 });
}

/// The scenarios at `part` of `scenarios` on real node `number`, with a
/// control plane of its own in a network namespace of its own.
fn run_node(scenarios: &[Scenario], part: Range<usize>, number: usize) {
    e2e_tests::harness::enter_network_namespace();
    let workdir = std::env::temp_dir().join(format!("memcached-node-{number}"));
    let started = Instant::now();
    let env = match Env::start_with(&workdir, true) {
        Ok(Some(env)) => env,
        Ok(None) => return,
        Err(e) => {
            eprintln!("cannot start the end-to-end environment with a real node: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "control plane and real node ready in {:.1}s (environment {:.1}s), logs in {}",
        env.cluster.start_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    let state = NodeState::read(&env.cluster.workdir);
    let mut env = env;
    let mut tally = run_part(&mut env, scenarios, part);
    let stopping = Instant::now();
    drop(env);
    // Always, after the others: what the environment leaves behind.
    tally.ran += 1;
    let name = format!(
        "{}. teardown leaves no process, cgroup or mount",
        scenarios.len() + 1
    );
    match state.and_then(|state| teardown_clean(&state)) {
        Ok(()) => println!(
            "ok   {name} (stopped in {:.1}s)",
            stopping.elapsed().as_secs_f64()
        ),
        Err(e) => {
            tally.failed += 1;
            println!("FAIL {name}\n     {e}");
        }
    }
    exit_with(&tally, started)
}
