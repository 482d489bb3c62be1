//! The controller's HTTP endpoints on a real socket: routing by method and
//! path (query ignored), content negotiation, the process metrics, timeouts.

use std::time::{Duration, Instant};

use memcached_controller::serve::http::Limits;
use test_support::http_client::{exchange, get, parse, request, start_plain};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn routes_by_method_and_path() {
    let addr = start_plain(Limits::default()).await;
    let answer = get(addr, "/healthz?verbose=1", &[]).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
    assert_eq!(get(addr, "/livez", &[]).await.status, 200);
    assert_eq!(get(addr, "/readyz?x", &[]).await.status, 200);
    assert_eq!(get(addr, "/metrics?name[]=x", &[]).await.status, 200);
    assert_eq!(get(addr, "/", &[]).await.status, 404);
    assert_eq!(get(addr, "/healthz/x", &[]).await.status, 404);
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let stream = TcpStream::connect(addr).await.unwrap();
        let answer = exchange(stream, &request(method, "/metrics", &["Content-Length: 0"])).await;
        assert_eq!(answer.status, 405, "{method}");
        assert_eq!(answer.header("allow"), Some("GET, HEAD"));
    }
    let stream = TcpStream::connect(addr).await.unwrap();
    let head = exchange(stream, &request("HEAD", "/metrics", &[])).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD has no body: {:?}", head.body);
    let length: usize = head.header("content-length").unwrap().parse().unwrap();
    assert!(length > 100, "HEAD announces the GET's length");
}

#[tokio::test]
async fn negotiates_the_exposition_format() {
    let addr = start_plain(Limits::default()).await;
    let om = get(addr, "/metrics", &["Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"]).await;
    assert!(
        om.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text; version=1.0.0"),
        "{om:?}"
    );
    assert!(om.body.ends_with("# EOF\n"));
    assert!(
        om.body
            .contains("# TYPE memcached_operator_reconciles counter\n")
    );
    for accept in [&[][..], &["Accept: text/plain"], &["Accept: */*"]] {
        let text = get(addr, "/metrics", accept).await;
        assert_eq!(
            text.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8"),
            "{accept:?}"
        );
        assert!(!text.body.contains("# EOF"), "{accept:?}");
        assert!(text.body.contains("# TYPE memcached_operator_reconciles_total counter\nmemcached_operator_reconciles_total 0\n"));
        assert!(
            text.body
                .contains("# TYPE process_cpu_seconds_total counter\n")
        );
    }
}

/// The standard process metrics, with values this process really has.
#[tokio::test]
async fn exposes_process_metrics() {
    let addr = start_plain(Limits::default()).await;
    let body = get(addr, "/metrics", &[]).await.body;
    let value = |name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {name} in {body}"))
            .parse()
            .unwrap()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(
        started > now - 600.0 && started <= now + 1.0,
        "{started} vs {now}"
    );
    assert!(value("process_cpu_seconds_total") >= 0.0);
    let rss = value("process_resident_memory_bytes");
    assert!(rss > 1e6 && rss < value("process_virtual_memory_bytes"));
    let fds = value("process_open_fds");
    assert!(fds >= 4.0 && fds < value("process_max_fds"), "{fds}");
    assert!(body.contains("# TYPE process_open_fds gauge\n"));
}

/// A connection that sends no request head, or nothing after its first
/// request, is closed after the header-read timeout.
#[tokio::test]
async fn closes_silent_and_idle_connections() {
    let limits = Limits {
        header_read_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let addr = start_plain(limits).await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut rest))
        .await
        .expect("a silent connection is closed")
        .ok();
    assert!(started.elapsed() >= Duration::from_millis(250));

    // Keep-alive: two requests on one connection, then silence.
    let mut kept = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 256];
    for _ in 0..2 {
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let n = kept.read(&mut buf).await.unwrap();
        assert_eq!(parse(&String::from_utf8_lossy(&buf[..n])).status, 200);
    }
    let idle = Instant::now();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), kept.read_to_end(&mut rest))
        .await
        .expect("an idle kept-alive connection is closed")
        .ok();
    assert!(idle.elapsed() >= Duration::from_millis(250));
}
