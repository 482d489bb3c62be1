//! The HTTP servers of `run`: the probes on the health address, `/metrics`
//! on the metrics address (over TLS with scrapers authenticated and
//! authorized, or plain), or all of them on one plain address.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context as _;
use kube::Client;
use tokio_rustls::TlsAcceptor;

use crate::metrics::registry::Metrics;
use crate::serve::address::ListenAddress;
use crate::serve::http::{Endpoints, Limits, MetricsEndpoint, serve};
use crate::serve::metrics_auth::{Authorizer, CACHE_TTL};
use crate::serve::metrics_tls;

/// Where and how the endpoints are served.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// `/metrics`.
    pub metrics_address: ListenAddress,
    /// `/healthz`, `/livez` and `/readyz`.
    pub health_address: ListenAddress,
    /// `/metrics` over TLS, for authenticated and authorized scrapers only.
    pub metrics_secure: bool,
    /// `tls.crt` and `tls.key` for `/metrics`; none: a self-signed certificate.
    pub metrics_cert_dir: Option<PathBuf>,
}

/// Bind both addresses now (a port in use fails the start) and serve them
/// in the background.
pub fn start(
    settings: &HttpSettings,
    client: &Client,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    let (metrics_at, health_at) = (settings.metrics_address, settings.health_address);
    let auth = settings
        .metrics_secure
        .then(|| Arc::new(Authorizer::new(client.clone(), CACHE_TTL)));
    let metrics = MetricsEndpoint { metrics, auth };
    let health = Endpoints {
        health: Some(ready),
        metrics: None,
    };
    if metrics_at == health_at {
        anyhow::ensure!(
            !settings.metrics_secure,
            "--metrics-address and --health-address are both {metrics_at}: with --metrics-secure they must differ (the probes stay plain HTTP)"
        );
        let both = Endpoints {
            metrics: Some(metrics),
            ..health
        };
        return listen(metrics_at, both, None, "/healthz, /readyz and /metrics");
    }
    listen(health_at, health, None, "/healthz and /readyz")?;
    let tls = settings
        .metrics_secure
        .then(|| {
            let names = vec!["localhost".to_string()];
            metrics_tls::server_config(settings.metrics_cert_dir.as_deref(), names)
        })
        .transpose()?
        .map(|config| TlsAcceptor::from(Arc::new(config)));
    let what = if tls.is_some() {
        "/metrics over TLS, for authorized scrapers"
    } else {
        "/metrics"
    };
    let endpoints = Endpoints {
        health: None,
        metrics: Some(metrics),
    };
    listen(metrics_at, endpoints, tls, what)
}

fn listen(
    address: ListenAddress,
    endpoints: Endpoints,
    tls: Option<TlsAcceptor>,
    what: &str,
) -> anyhow::Result<()> {
    let socket = address
        .bind()
        .with_context(|| format!("listening on {address}"))?;
    let bound = socket.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(socket)?;
    tracing::info!(%address, %bound, "serving {what}");
    tokio::spawn(serve(listener, endpoints, tls, Limits::default()));
    Ok(())
}
