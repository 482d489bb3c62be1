//! A renewed TLS certificate reaches the pods without a restart: the stats
//! collection asks each pod presenting another certificate than the TLS
//! Secret's to load its certificate files again (`refresh_certs`) and
//! checks the next handshake ([`Presented`]); this step says per pod what
//! came of it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::discovery::ApiResource;
use memcached_api::Memcached;

use crate::reconcile::context::Context;
use crate::reconcile::events::{self, Target};
use crate::stats::client::{ClusterStats, StatsClient};
use crate::stats::tls::{Mounted, Presented};

/// Event reason: a pod's memcached presents the renewed certificate.
pub const CERTIFICATE_RELOADED: &str = "CertificateReloaded";
/// Event reason: a pod's memcached refused to load its certificate files.
pub const CERTIFICATE_NOT_RELOADED: &str = "CertificateNotReloaded";

/// An Event per pod whose memcached loaded the renewed certificate (or
/// refused to); whether a pod still presents another one (look again soon:
/// the kubelet writes renewed Secret files into a pod within about a minute).
pub(super) async fn announce(
    ctx: &Context,
    mc: &Memcached,
    stats: &ClusterStats,
    pods: &BTreeMap<SocketAddr, String>,
) -> bool {
    let mut older = false;
    let resource = ApiResource::erase::<Pod>(&());
    for (addr, presented) in stats.certificates() {
        let name = pods.get(addr).cloned().unwrap_or_else(|| addr.to_string());
        let target = Target {
            resource: &resource,
            name: &name,
        };
        match presented {
            Presented::Reloaded => {
                let note = format!(
                    "pod {name} presents the TLS Secret's renewed certificate: its memcached \
                     loaded it without a restart"
                );
                events::inform(ctx, mc, CERTIFICATE_RELOADED, note, &target).await;
            }
            Presented::Refused(answer) => {
                older = true;
                let note = format!(
                    "pod {name} presents an older certificate than the TLS Secret's: its \
                     memcached refused to load the renewed files ({answer}) and keeps serving the \
                     one it has"
                );
                events::warn(ctx, mc, CERTIFICATE_NOT_RELOADED, note, Some(&target)).await;
            }
            Presented::Older => {
                older = true;
                tracing::info!(pod = name, "the renewed certificate is not in the pod yet");
            }
            Presented::Current | Presented::Unchecked => {}
        }
    }
    older
}

/// A warning when the TLS Secret holds a certificate memcached cannot load
/// ([`Mounted::Unloadable`]): no pod is asked to load it.
pub(super) async fn warn_unloadable(ctx: &Context, mc: &Memcached, client: &StatsClient) {
    if let Some(Mounted::Unloadable(why)) = client.tls.as_ref().map(|tls| &tls.mounted) {
        let note = format!(
            "the TLS Secret's certificate cannot be loaded by memcached ({why}): no pod is asked \
             to load it, each keeps the certificate it has"
        );
        events::warn(ctx, mc, CERTIFICATE_NOT_RELOADED, note, None).await;
    }
}
