//! Every object one Memcached should have, built purely from the CR and
//! what the installation sets for every Memcached ([`Installation`]).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::DynamicObject;
use memcached_api::{Defaulted, Memcached};

use crate::objects::secret_stamp::SecretStamp;
use crate::objects::{
    deployment, hpa, network_policy, pdb, service, service_monitor, stateful_set,
};

/// The workload `spec.workload` names.
#[derive(Clone, Debug)]
pub enum Workload {
    /// The default.
    Deployment(Deployment),
    /// Stable per-pod names.
    StatefulSet(StatefulSet),
}

impl Workload {
    /// Keep `stamp` on the workload's metadata (not the pod template's:
    /// writing it restarts no pod).
    pub fn stamp(&mut self, stamp: SecretStamp) {
        let metadata = match self {
            Workload::Deployment(d) => &mut d.metadata,
            Workload::StatefulSet(s) => &mut s.metadata,
        };
        stamp.annotate(metadata.annotations.get_or_insert_default());
    }
}

/// What the installation (the controller's flags) sets for every Memcached.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Installation {
    /// Who reaches the pods besides a NetworkPolicy's allowed sources.
    pub access: network_policy::Access,
    /// Labels on every ServiceMonitor (`--service-monitor-labels`, e.g. the
    /// `release` a kube-prometheus-stack Prometheus selects by); a Memcached's
    /// own `additionalLabels` win.
    pub service_monitor_labels: BTreeMap<String, String>,
}

/// The desired objects; `None` where a feature is off. The server-list
/// ConfigMap depends on the replicas the workload runs: see
/// [`crate::objects::server_list::config_map`].
#[derive(Clone, Debug)]
pub struct Desired {
    /// Memcached (and exporter) pods.
    pub workload: Workload,
    /// Headless Service.
    pub service: Service,
    /// PodDisruptionBudget.
    pub pdb: Option<PodDisruptionBudget>,
    /// HorizontalPodAutoscaler.
    pub hpa: Option<HorizontalPodAutoscaler>,
    /// NetworkPolicy.
    pub network_policy: Option<NetworkPolicy>,
    /// ServiceMonitor.
    pub service_monitor: Option<DynamicObject>,
}

impl Desired {
    /// Build everything for `mc` from its effective (defaulted) `spec` and
    /// what `installation` sets for every Memcached; `auth_key` is the
    /// authentication Secret's key memcached reads
    /// ([`crate::cluster::secrets::auth_key`]).
    pub fn new(
        mc: &Memcached,
        spec: &Defaulted,
        secret_hash: Option<&str>,
        auth_key: &str,
        installation: &Installation,
    ) -> Self {
        let workload = if spec.stateful_set() {
            Workload::StatefulSet(stateful_set::build(mc, spec, secret_hash, auth_key))
        } else {
            Workload::Deployment(deployment::build(mc, spec, secret_hash, auth_key))
        };
        Desired {
            workload,
            service: service::build(mc, spec),
            pdb: pdb::build(mc, spec),
            hpa: hpa::build(mc, spec),
            network_policy: network_policy::build(mc, spec, &installation.access),
            service_monitor: service_monitor::build(mc, spec, &installation.service_monitor_labels),
        }
    }
}
