//! The controller's HTTP endpoints on hyper: `/healthz` and `/livez`,
//! `/readyz` (see [`crate::serve::readiness`]) and `/metrics` (over TLS
//! with scrapers authenticated and authorized when an [`Authorizer`] is
//! given).
//!
//! Each server holds at most [`Limits::max_connections`] connections: a new
//! one beyond that makes the oldest close (after the request it may be
//! answering), so idle or slow clients never lock out the probes, and the
//! file descriptors in use stay bounded. A connection that sends no
//! complete request head within [`Limits::header_read_timeout`] (the first
//! one, or the next one on a kept-alive connection) is closed.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, ALLOW, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_rustls::TlsAcceptor;

use crate::metrics::registry::Metrics;
use crate::serve::exposition::Format;
use crate::serve::metrics_auth::{Authorizer, Decision};

/// What a server may hold and wait for.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Open connections at once.
    pub max_connections: usize,
    /// Time to receive a complete request head (and to finish a TLS handshake).
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 128,
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// The endpoints one server answers.
#[derive(Clone, Default)]
pub struct Endpoints {
    /// `/healthz`, `/livez` and `/readyz`, with the readiness flag.
    pub health: Option<Arc<AtomicBool>>,
    /// `/metrics`.
    pub metrics: Option<MetricsEndpoint>,
}

/// `/metrics` and who may read it.
#[derive(Clone)]
pub struct MetricsEndpoint {
    /// The registry.
    pub metrics: Arc<Metrics>,
    /// Checks each scraper; `None`: everyone may read.
    pub auth: Option<Arc<Authorizer>>,
}

/// Serve `endpoints` on `listener` (over TLS with `tls`) until the process
/// ends; a failed accept (e.g. out of file descriptors) is logged and
/// retried, never the end of the server.
pub async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    tls: Option<TlsAcceptor>,
    limits: Limits,
) {
    let endpoints = Arc::new(endpoints);
    let open = Arc::new(Connections::default());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (id, close) = open.admit(limits.max_connections);
        let (endpoints, tls, open) = (endpoints.clone(), tls.clone(), open.clone());
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => {
                    let handshake =
                        tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream));
                    let stream = tokio::select! {
                        stream = handshake => stream.ok().and_then(Result::ok),
                        _ = close.notified() => None,
                    };
                    if let Some(stream) = stream {
                        connection(stream, endpoints, &close, limits).await;
                    }
                }
                None => connection(stream, endpoints, &close, limits).await,
            }
            open.forget(id);
        });
    }
}

/// The open connections, oldest first, each with its signal to close.
#[derive(Default)]
struct Connections {
    open: Mutex<(u64, BTreeMap<u64, Arc<Notify>>)>,
}

impl Connections {
    /// Register a new connection, telling the oldest ones to close when
    /// more than `max` would be open.
    fn admit(&self, max: usize) -> (u64, Arc<Notify>) {
        let close = Arc::new(Notify::new());
        let mut guard = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (next, open) = &mut *guard;
        while open.len() >= max.max(1) {
            if let Some((_, oldest)) = open.pop_first() {
                oldest.notify_one();
            }
        }
        let id = *next;
        *next += 1;
        open.insert(id, close.clone());
        (id, close)
    }

    fn forget(&self, id: u64) {
        let mut guard = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        guard.1.remove(&id);
    }
}

/// Serve HTTP/1.1 requests on one connection until the client leaves, a
/// head is late, or `close` says so (the request in flight is answered).
async fn connection<S>(stream: S, endpoints: Arc<Endpoints>, close: &Notify, limits: Limits)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| {
        let endpoints = endpoints.clone();
        async move { Ok::<_, Infallible>(respond(request, &endpoints).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = close.notified() => conn.as_mut().graceful_shutdown(),
    }
    let _ = tokio::time::timeout(limits.header_read_timeout, conn).await;
}

async fn respond(request: Request<Incoming>, endpoints: &Endpoints) -> Response<Full<Bytes>> {
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match (request.uri().path(), endpoints) {
        (
            "/healthz" | "/livez",
            Endpoints {
                health: Some(_), ..
            },
        ) => text(StatusCode::OK, "ok\n"),
        (
            "/readyz",
            Endpoints {
                health: Some(ready),
                ..
            },
        ) => {
            if ready.load(Ordering::Relaxed) {
                text(StatusCode::OK, "ok\n")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "watches not synced\n")
            }
        }
        (
            "/metrics",
            Endpoints {
                metrics: Some(m), ..
            },
        ) => metrics(request.headers(), m).await,
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// `/metrics`, in the format the scraper asks for, once it is allowed to read it.
async fn metrics(headers: &HeaderMap, endpoint: &MetricsEndpoint) -> Response<Full<Bytes>> {
    if let Some(auth) = &endpoint.auth {
        let header = headers.get(AUTHORIZATION).map(|h| h.as_bytes());
        match auth.check(header).await {
            Ok(Decision::Allowed) => {}
            Ok(Decision::Unauthenticated) => {
                return text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
            }
            Ok(Decision::Forbidden) => return text(StatusCode::FORBIDDEN, "Forbidden\n"),
            Err(e) => {
                tracing::warn!(error = %e, "could not review a scraper's token");
                return text(StatusCode::INTERNAL_SERVER_ERROR, "authorization failed\n");
            }
        }
    }
    let accept = headers.get(ACCEPT).and_then(|a| a.to_str().ok());
    let format = Format::negotiate(accept);
    let mut response = Response::new(Full::new(Bytes::from(
        format.render(endpoint.metrics.encode()),
    )));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    response
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
