//! A minimal HTTP endpoint: `/healthz`, `/readyz` (ready once the watches
//! have synced) and `/metrics` (OpenMetrics text).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::timeout;

use crate::metrics::Metrics;

/// How long a client gets to send its request line.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Serve until the process ends; a failed accept (e.g. out of file
/// descriptors) is logged and retried, never the end of the server.
pub async fn serve(
    addr: SocketAddr,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (ready, metrics) = (ready.clone(), metrics.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let Ok(Ok(n)) = timeout(READ_TIMEOUT, read_request_line(&mut stream, &mut buf)).await
            else {
                return;
            };
            let path = std::str::from_utf8(&buf[..n])
                .ok()
                .and_then(|r| r.split_whitespace().nth(1))
                .unwrap_or("");
            let (status, content_type, body) =
                respond(path, ready.load(Ordering::Relaxed), &metrics);
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = timeout(READ_TIMEOUT, stream.write_all(response.as_bytes())).await;
        });
    }
}

/// Read until the request line is complete (a client may send it in
/// pieces) or `buf` is full; the number of bytes read.
async fn read_request_line(
    stream: &mut tokio::net::TcpStream,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    let mut read = 0;
    while read < buf.len() && !buf[..read].windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buf[read..]).await? {
            0 => break,
            n => read += n,
        }
    }
    Ok(read)
}

fn respond(path: &str, ready: bool, metrics: &Metrics) -> (&'static str, &'static str, String) {
    match path {
        "/healthz" | "/livez" => ("200 OK", TEXT, "ok\n".into()),
        "/readyz" if ready => ("200 OK", TEXT, "ok\n".into()),
        "/readyz" => (
            "503 Service Unavailable",
            TEXT,
            "watches not synced\n".into(),
        ),
        "/metrics" => ("200 OK", OPENMETRICS, metrics.encode()),
        _ => ("404 Not Found", TEXT, "not found\n".into()),
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
        let (_, content_type, body) = respond("/metrics", true, &m);
        assert!(body.contains("memcached_operator_reconciles_total"));
        assert!(body.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
        assert!(content_type.starts_with("application/openmetrics-text"));
        assert_eq!(respond("/x", true, &m).0, "404 Not Found");
    }

    #[tokio::test]
    async fn a_silent_client_does_not_stop_the_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let server = tokio::spawn(serve(addr, Arc::default(), Arc::default()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client
            .write_all(b"GET /healthz HTTP/1.0\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        server.abort();
    }
}
