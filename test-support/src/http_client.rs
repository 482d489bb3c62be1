//! A raw HTTP/1.1 client for the endpoint tests: one request per
//! connection, the answer read to its end, over TCP or TLS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use memcached_controller::metrics::registry::Metrics;
use memcached_controller::serve::http::{Endpoints, Limits, MetricsEndpoint, serve};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send `request` (a whole head, `\r\n\r\n` included) and read the answer.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: &str) -> Answer {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    // A TLS peer may close without close_notify: keep what was read.
    let _ = stream.read_to_end(&mut raw).await;
    parse(&String::from_utf8_lossy(&raw))
}

pub fn parse(raw: &str) -> Answer {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// `METHOD path` with extra header lines, `Connection: close`.
pub fn request(method: &str, path: &str, headers: &[&str]) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r
}

/// A plain GET.
pub async fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    exchange(stream, &request("GET", path, headers)).await
}

/// A GET over TLS, trusting `client`'s roots for `localhost`.
pub async fn get_tls(
    addr: SocketAddr,
    client: Arc<ClientConfig>,
    path: &str,
    headers: &[&str],
) -> Answer {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = TlsConnector::from(client).connect(name, tcp).await.unwrap();
    exchange(tls, &request("GET", path, headers)).await
}

/// A server on a free loopback port: probes (ready) and plain `/metrics`.
pub async fn start_plain(limits: Limits) -> SocketAddr {
    let endpoints = Endpoints {
        health: Some(Arc::new(AtomicBool::new(true))),
        metrics: Some(MetricsEndpoint {
            metrics: Arc::new(Metrics::default()),
            auth: None,
        }),
    };
    start(endpoints, None, limits).await
}

/// A server of `endpoints` on a free loopback port.
pub async fn start(endpoints: Endpoints, tls: Option<TlsAcceptor>, limits: Limits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, endpoints, tls, limits));
    addr
}
