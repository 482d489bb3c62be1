//! `/metrics` over TLS for authorized scrapers only: each bearer token is
//! reviewed (TokenReview) and its user authorized (SubjectAccessReview for
//! `get` on `/metrics`) by an API server stand-in that answers as RBAC
//! would; decisions are cached per token. With `-- --nocapture` it prints
//! the scrape latency with and without the cache.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use memcached_controller::metrics::registry::Metrics;
use memcached_controller::serve::http::{Endpoints, Limits, MetricsEndpoint};
use memcached_controller::serve::metrics_auth::Authorizer;
use memcached_controller::serve::metrics_tls::{CERT_FILE, KEY_FILE, server_config};
use memcached_controller::stats::tls::client_config;
use serde_json::{Value, json};
use test_support::http_client::{self, get_tls, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ClientConfig;

const READER: &str = "system:serviceaccount:monitoring:prometheus";

/// The API server's answers: `reader*` tokens are the metrics reader,
/// `other` another ServiceAccount, anything else is no valid token; only
/// the reader may `get` `/metrics`. Every review is logged; each waits
/// `delay` (a real API server's round trip).
fn api(reviews: Arc<Mutex<Vec<String>>>, delay: Duration) -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let path = request.uri().path().to_string();
            let method = request.method().to_string();
            let body = request.into_body().collect_bytes().await.unwrap();
            let mut review: Value = serde_json::from_slice(&body).unwrap();
            let spec = review["spec"].clone();
            review["status"] = match path.as_str() {
                "/apis/authentication.k8s.io/v1/tokenreviews" => {
                    let token = spec["token"].as_str().unwrap_or_default();
                    reviews
                        .lock()
                        .unwrap()
                        .push(format!("{method} tokenreview {token}"));
                    match token {
                        t if t.starts_with("reader") => {
                            json!({"authenticated": true, "user": {"username": READER, "uid": "1", "groups": ["system:serviceaccounts"]}})
                        }
                        "other" => {
                            json!({"authenticated": true, "user": {"username": "system:serviceaccount:default:other"}})
                        }
                        _ => json!({"authenticated": false, "error": "invalid bearer token"}),
                    }
                }
                "/apis/authorization.k8s.io/v1/subjectaccessreviews" => {
                    let user = spec["user"].as_str().unwrap_or_default();
                    reviews
                        .lock()
                        .unwrap()
                        .push(format!("{method} subjectaccessreview {user}"));
                    let asked = &spec["nonResourceAttributes"];
                    let allowed = user == READER
                        && spec["groups"] == json!(["system:serviceaccounts"])
                        && spec["uid"] == "1"
                        && asked["path"] == "/metrics"
                        && asked["verb"] == "get";
                    json!({"allowed": allowed})
                }
                other => panic!("unexpected {method} {other}"),
            };
            tokio::time::sleep(delay).await;
            let response = Response::builder()
                .status(201)
                .body(Body::from(serde_json::to_vec(&review).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    Client::new(service, "default")
}

/// A secure `/metrics` (certificate from a directory, as a mounted Secret
/// gives it) on a free port, and a client trusting that certificate.
async fn secure_metrics(
    client: Client,
    ttl: Duration,
) -> (std::net::SocketAddr, Arc<ClientConfig>, tempfile::TempDir) {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CERT_FILE), generated.cert.pem()).unwrap();
    std::fs::write(
        dir.path().join(KEY_FILE),
        generated.key_pair.serialize_pem(),
    )
    .unwrap();
    let server = server_config(Some(dir.path()), vec![]).unwrap();
    let endpoints = Endpoints {
        health: Some(Arc::new(AtomicBool::new(true))),
        metrics: Some(MetricsEndpoint {
            metrics: Arc::new(Metrics::default()),
            auth: Some(Arc::new(Authorizer::new(client, ttl))),
        }),
    };
    let addr = start(
        endpoints,
        Some(TlsAcceptor::from(Arc::new(server))),
        Limits::default(),
    )
    .await;
    let trust = client_config(None, generated.cert.pem().as_bytes(), None).unwrap();
    (addr, Arc::new(trust), dir)
}

#[tokio::test]
async fn only_authorized_scrapers_read_metrics() {
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let (addr, trust, _dir) = secure_metrics(
        api(reviews.clone(), Duration::ZERO),
        Duration::from_secs(60),
    )
    .await;
    let scrape = |token: Option<&str>| {
        let header = token.map(|t| format!("Authorization: Bearer {t}"));
        let trust = trust.clone();
        async move {
            let headers: Vec<&str> = header.iter().map(String::as_str).collect();
            get_tls(addr, trust, "/metrics", &headers).await
        }
    };
    let allowed = scrape(Some("reader")).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert!(allowed.body.contains("memcached_operator_reconciles_total"));
    assert_eq!(scrape(Some("other")).await.status, 403);
    assert_eq!(scrape(Some("forged")).await.status, 401);
    assert_eq!(scrape(None).await.status, 401);
    assert_eq!(
        *reviews.lock().unwrap(),
        [
            "POST tokenreview reader",
            &format!("POST subjectaccessreview {READER}"),
            "POST tokenreview other",
            "POST subjectaccessreview system:serviceaccount:default:other",
            "POST tokenreview forged",
        ],
        "no token: no review"
    );
    // Cached: the same answers without asking again.
    assert_eq!(scrape(Some("reader")).await.status, 200);
    assert_eq!(scrape(Some("other")).await.status, 403);
    assert_eq!(scrape(Some("forged")).await.status, 401);
    assert_eq!(reviews.lock().unwrap().len(), 5);
    // Plain HTTP is not served on the TLS port (a TLS alert answers).
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(http_client::request("GET", "/metrics", &[]).as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut raw)).await;
    assert!(!raw.starts_with(b"HTTP/"), "{raw:?}");
}

#[tokio::test]
async fn decisions_expire() {
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let (addr, trust, _dir) = secure_metrics(
        api(reviews.clone(), Duration::ZERO),
        Duration::from_millis(200),
    )
    .await;
    let header = ["Authorization: Bearer reader"];
    assert_eq!(
        get_tls(addr, trust.clone(), "/metrics", &header)
            .await
            .status,
        200
    );
    assert_eq!(
        get_tls(addr, trust.clone(), "/metrics", &header)
            .await
            .status,
        200
    );
    assert_eq!(
        reviews.lock().unwrap().len(),
        2,
        "the second scrape was cached"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get_tls(addr, trust, "/metrics", &header).await.status, 200);
    assert_eq!(
        reviews.lock().unwrap().len(),
        4,
        "reviewed again after the TTL"
    );
}

/// Scrape latency when every scrape is reviewed (a new token each time)
/// and when the decision is cached, against an API server answering each
/// review in 2 ms.
#[tokio::test]
async fn measures_scrape_latency_with_and_without_the_cache() {
    const SCRAPES: usize = 50;
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let api = api(reviews.clone(), Duration::from_millis(2));
    let (addr, trust, _dir) = secure_metrics(api, Duration::from_secs(60)).await;
    let uncached = average(addr, &trust, SCRAPES, |i| format!("reader-{i}")).await;
    let cached = average(addr, &trust, SCRAPES, |_| "reader-0".to_string()).await;
    println!(
        "scrape latency over TLS, one connection per scrape: uncached {uncached:?} \
         (TokenReview + SubjectAccessReview, 2 ms each), cached {cached:?}"
    );
    assert_eq!(
        reviews.lock().unwrap().len(),
        2 * SCRAPES,
        "only the uncached scrapes asked"
    );
}

async fn average(
    addr: std::net::SocketAddr,
    trust: &Arc<ClientConfig>,
    scrapes: usize,
    token: impl Fn(usize) -> String,
) -> Duration {
    let started = Instant::now();
    for i in 0..scrapes {
        let header = format!("Authorization: Bearer {}", token(i));
        let answer = get_tls(addr, trust.clone(), "/metrics", &[&header]).await;
        assert_eq!(answer.status, 200);
    }
    started.elapsed() / scrapes as u32
}

/// deploy/rbac-metrics-auth.yaml grants the controller exactly the two
/// reviews it creates, and a scraper `get` on `/metrics` only; the chart
/// ships the same file.
#[test]
fn rbac_grants_exactly_the_reviews() {
    let deploy = format!("{}/../deploy", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(format!("{deploy}/rbac-metrics-auth.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let role = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
            .map(|d| d["rules"].clone())
            .unwrap()
    };
    assert_eq!(
        role("memcached-operator-metrics-auth"),
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ])
    );
    assert_eq!(
        role("memcached-operator-metrics-reader"),
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding")
        .unwrap();
    assert_eq!(
        binding["roleRef"]["name"],
        "memcached-operator-metrics-auth"
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "memcached-operator", "namespace": "memcached-operator-system"}])
    );
    let canonical = |p: &str| std::fs::canonicalize(format!("{deploy}/{p}")).unwrap();
    assert_eq!(
        canonical("helm/memcached-operator/files/rbac-metrics-auth.yaml"),
        canonical("rbac-metrics-auth.yaml")
    );
}
