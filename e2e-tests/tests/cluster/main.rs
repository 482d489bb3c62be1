//! End-to-end scenarios on a real control plane (`make e2e`): kubectl apply
//! through Kubewarden's policy-server (the policy's OCI artifact pulled from a
//! local registry), the controller driving real objects to Ready, a real
//! memcached behind every pod.
//!
//! Runs inside `e2e-tests/testbed/netns.sh`; every scenario runs even when an earlier
//! one failed, and the process fails if any did. One module per topic: the CRD
//! and the seed examples (`crd`), a Memcached's life (`lifecycle`), Secrets,
//! StatefulSet mode, the controller's restarts and leadership (`controller`),
//! the policy in policy-server (`policy`), the Go operator's objects.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e_tests::fixtures;
use e2e_tests::harness::clients::memcache::{Memcache, memcached_stat, memcached_version};
use e2e_tests::harness::scenarios::leadership::{self, Replica};
use e2e_tests::harness::scenarios::objects::{
    auth_secret, changed, exists, get, install_service_monitor_crd, ordinal_servers, owned_by,
    resource_versions, tls_secret, wait_disruption_budget, wait_exists, wait_server_list,
};
use e2e_tests::harness::scenarios::pods::{
    EndpointWatch, memcached_pods, pod_ips, pod_name, pod_names, served_by, served_pods,
    wait_ordinal_pods,
};
use e2e_tests::harness::scenarios::runner::{Scenario, run_scenarios};
use e2e_tests::harness::scenarios::scenario::{
    self, SETTLE, check, ensure_namespace, lease_holder, memcached, patch, touch, wait_ready,
};
use e2e_tests::harness::{
    Env, Kubectl, OPERATOR_NAMESPACE, condition, condition_status, environment::pki,
    metrics_reader_token, reconciles_at_secure, wait_for,
};
use serde_json::{Value, json};

mod controller;
mod crd;
mod go_operator;
mod handover;
mod lifecycle;
mod policy;
mod secrets;
mod stateful_set;

use controller::*;
use crd::*;
use handover::*;
use lifecycle::*;
use policy::*;
use secrets::*;
use stateful_set::*;

const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "the CRD installs and both versions are served",
        crd_installs,
    ),
    Scenario::new("every seed example through kubectl apply", seed_examples),
    Scenario::new(
        "a minimal Memcached becomes Ready with live stats",
        minimal_ready,
    ),
    Scenario::new(
        "scaling, config rollout and feature toggles",
        scale_and_toggle,
    ),
    Scenario::new("Secret rotation and a missing Secret", secrets),
    Scenario::new(
        "deleting a Memcached collects every child",
        garbage_collection,
    ),
    Scenario::new(
        "StatefulSet mode: stable per-pod names, the server list ConfigMap, mode switches without an outage",
        statefulset_mode,
    ),
    Scenario::new("a restarted controller writes nothing", restart_no_writes),
    Scenario::new("leader election hands over", leader_election),
    Scenario::new(
        "policy-server runs the artifact pulled from the local registry",
        artifact_from_registry,
    ),
    Scenario::new(
        "monitor mode (deploy/policy-audit.yaml) admits an invalid Memcached and reports it",
        audit_mode,
    ),
    Scenario::new(
        "a namespace's Pod Security label, read by policy-server for the policy at podSecurityLevel \
         baseline; a kubectl scale up after the label is refused as the apply is, a scale down admitted",
        namespace_pod_security,
    ),
    Scenario::new(
        "kubectl scale of an autoscaled Memcached: refused by the CRD's rule, in the policy's words",
        scale_while_autoscaling,
    ),
    Scenario::new(
        "the controller Deployment: both replicas Ready, a rollout restart finishes, one leader at a time",
        controller_rollout,
    ),
    Scenario::new(
        "the Go operator's samples and e2e objects through kubectl apply as they are: admitted whole, \
         Ready, with their NetworkPolicy and authentication in force; the one it refuses refused",
        go_operator::go_operator_objects,
    ),
    Scenario::new(
        "scaling a StatefulSet whose clients hash with pymemcache keeps the keys: 3 -> 4 and 4 -> 3 \
         serve at least 99 % of 20,000 keys from the new server list",
        keys_through_scaling,
    ),
    Scenario::new(
        "an autoscaled StatefulSet scaled up as the HorizontalPodAutoscaler does keeps the keys: \
         at least 99 % of 20,000 served from the new server list",
        keys_through_autoscaling,
    ),
];

fn main() {
    e2e_tests::harness::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e");
    let started = Instant::now();
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    println!(
        "control plane ready in {:.1}s (environment {:.1}s), logs in {}",
        env.cluster.start_time.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        workdir.display()
    );
    println!(
        "policy-server {} serves {} from {}@{}",
        env.policy_server.url,
        [env.protect.id(), env.audit.id(), env.namespaced.id()].join(", "),
        env.artifact.reference,
        env.artifact.digest
    );
    run_scenarios(env, SCENARIOS);
}
