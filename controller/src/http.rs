//! A minimal HTTP endpoint: `/healthz`, `/readyz` (ready once the watches
//! have synced) and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Serve until the process ends.
pub async fn serve(
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    loop {
        let (mut stream, _) = listener.accept().await?;
        let (ready, metrics) = (ready.clone(), metrics.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let Ok(n) = stream.read(&mut buf).await else {
                return;
            };
            let path = std::str::from_utf8(&buf[..n])
                .ok()
                .and_then(|r| r.split_whitespace().nth(1))
                .unwrap_or("");
            let (status, body) = respond(path, ready.load(Ordering::Relaxed), &metrics);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

fn respond(path: &str, ready: bool, metrics: &Metrics) -> (&'static str, String) {
    match path {
        "/healthz" | "/livez" => ("200 OK", "ok\n".into()),
        "/readyz" if ready => ("200 OK", "ok\n".into()),
        "/readyz" => ("503 Service Unavailable", "watches not synced\n".into()),
        "/metrics" => ("200 OK", metrics.encode()),
        _ => ("404 Not Found", "not found\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_probes_and_metrics() {
        let m = Metrics::default();
        assert_eq!(respond("/healthz", false, &m).0, "200 OK");
        assert_eq!(respond("/readyz", false, &m).0, "503 Service Unavailable");
        assert_eq!(respond("/readyz", true, &m).0, "200 OK");
        assert!(
            respond("/metrics", true, &m)
                .1
                .contains("memcached_operator_reconciles_total")
        );
        assert_eq!(respond("/x", true, &m).0, "404 Not Found");
    }
}
