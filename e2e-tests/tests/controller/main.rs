//! The controller against the real API server's semantics (`make e2e`):
//! server-side apply converging both ways, the replica handover to the HPA,
//! refusals and conflicts in status, readiness of standbys and the Lease
//! handover after SIGTERM and SIGKILL, the StatefulSet name bound, an
//! invalid spec stored without the policy, render against kubectl's strict
//! validation, replicas whose clocks differ by 12 s, secure `/metrics`, a
//! Memcached the controller's types cannot read, a missing namespace, a CRD
//! older than the controller, the guard on the controller's writes, a
//! mounted Secret deleted, a controller upgrade that renders pods differently,
//! a hung API server, a hung memcached, the leader killed mid-apply, the
//! Lease taken mid-reconcile, etcd compacted and the API server restarted,
//! 1,000 Memcacheds across 50 namespaces, the API server stopped for 40 s.
//!
//! Runs inside `e2e-tests/testbed/netns.sh`; every scenario runs even when an earlier
//! one failed, and the process fails if any did.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e_tests::harness::clients::api_requests::request_counts;
use e2e_tests::harness::clients::http::free_address;
use e2e_tests::harness::clients::memcache::Memcache;
use e2e_tests::harness::scenarios::objects::{auth_secret, delete_namespace, deployment};
use e2e_tests::harness::scenarios::pods::pod_uids;
use e2e_tests::harness::scenarios::runner::{Scenario, run_scenarios};
use e2e_tests::harness::scenarios::scenario::{
    self, SETTLE, check, ensure_namespace, lease_holder, memcached, touch, wait_ready,
};
use e2e_tests::harness::{
    Env, Kubectl, OPERATOR_NAMESPACE, Operator, Outcome, condition, metrics_reader_token, scrape,
    wait_for, wait_for_progress,
};
use memcached_api::MemcachedSpec;
use memcached_api::field::invalid_message;
use memcached_api::validation::{self, ObjectName, Options};
use memcached_controller::cluster::cache::{NOT_SERVED, WATCH_EXPIRED};
use memcached_controller::cluster::leadership::{LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD};
use memcached_controller::serve::readiness::{HEARTBEAT, UNANSWERED};
use serde_json::{Value, json};

mod access;
mod apply;
mod faults;
mod leadership;
mod refusals;
mod rollouts;
mod scale;

use access::*;
use apply::*;
use faults::*;
use leadership::*;
use refusals::*;
use rollouts::*;
use scale::*;

const SCENARIOS: &[Scenario] = &[
    Scenario::new(
        "fields removed from the spec disappear from the Deployment",
        removed_fields,
    ),
    Scenario::new(
        "quantities the server rewrites cause no writes and no Events",
        normalised_quantities,
    ),
    Scenario::new(
        "autoscaling takes replicas over without a dip, and hands them back without one",
        autoscaling_handover,
    ),
    Scenario::new(
        "a foreign Deployment degrades the Memcached and is never reported",
        foreign_deployment,
    ),
    Scenario::new(
        "standbys are ready; the Lease hands over after SIGTERM and SIGKILL",
        readiness_and_handover,
    ),
    Scenario::new(
        "a 52-character StatefulSet runs its pods, a 53-character one cannot (the policy's bound)",
        stateful_set_name_bound,
    ),
    Scenario::new(
        "without the policy, an invalid Memcached is refused visibly and converges once fixed",
        invalid_spec_without_the_policy,
    ),
    Scenario::new(
        "render names unknown fields as kubectl apply --validate=strict does",
        render_reports_unknown_fields_as_kubectl,
    ),
    Scenario::new(
        "replicas whose clocks differ by 12s take no renewed Lease and an abandoned one on time",
        skewed_clocks,
    ),
    Scenario::new(
        "secure /metrics: a metrics-reader scrapes, another ServiceAccount gets 403, no token 401",
        secure_metrics,
    ),
    Scenario::new(
        "an unreadable Memcached is reported on itself; after a restart every other one converges",
        unreadable_memcached,
    ),
    Scenario::new(
        "without its namespace the controller exits saying so in one line",
        missing_namespace_in_one_line,
    ),
    Scenario::new(
        "an older CRD without a status field the controller writes: the rest is written",
        older_crd,
    ),
    Scenario::new(
        "the controller's token writes only objects it manages (deploy/rbac-writes-guard.yaml), creates only those a Memcached owns, and puts back a removed label",
        writes_only_its_own,
    ),
    Scenario::new(
        "a Secret deleted while mounted, then recreated alike, restarts no pod",
        secret_deleted_while_mounted,
    ),
    Scenario::new(
        "a controller that renders pods differently restarts none until the spec changes",
        new_rendering_waits_for_the_spec,
    ),
    Scenario::new(
        "the API server hung for 40s: the leader steps down before its Lease expires, the standby turns unready, no pod restarts, all converges after",
        api_server_hung,
    ),
    Scenario::new(
        "a hung memcached is named on its Memcached and delays no other; it is Ready again once it answers",
        hung_memcached,
    ),
    Scenario::new(
        "the leader SIGKILLed while applying 20 Memcacheds: the standby converges each, nothing duplicated",
        leader_killed_mid_apply,
    ),
    Scenario::new(
        "the Lease taken by another replica mid-reconcile: the leader stops and leaves it alone",
        lease_taken_mid_reconcile,
    ),
    Scenario::new(
        "etcd compacted and the API server restarted: watches answered 410 Gone list again, changes made after converge",
        compacted_and_restarted,
    ),
    Scenario::new(
        "1,000 Memcacheds across 50 namespaces at once: each converges, then no request storm and bounded memory",
        many_across_namespaces,
    ),
    Scenario::new(
        "the API server stopped for 40s after an etcd compaction, then started: the leader steps down before its Lease expires, the standby turns unready, no pod restarts, all converges after",
        api_server_stopped,
    ),
    Scenario::new(
        "hard anti-affinity with a pod on every node: the rollout's surge pod finds no node, and the Memcached says why",
        surge_pod_unschedulable,
    ),
    Scenario::new(
        "a rotated password rolls the pods paced: those not yet replaced are read with the password they run, an empty new pod holds the next",
        rotation_stays_paced,
    ),
];

fn main() {
    e2e_tests::harness::enter_network_namespace();
    let workdir = std::env::temp_dir().join("memcached-e2e-controller");
    let Some(env) = scenario::start(&workdir) else {
        return;
    };
    println!("environment ready, logs in {}", workdir.display());
    run_scenarios(env, SCENARIOS);
}
