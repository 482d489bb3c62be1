//! A test-only HTTPS admission webhook that serves `policy.wasm` through the
//! same waPC host on wasmtime as the policy tests, answering like Kubewarden's
//! policy-server: a mutation becomes a JSONPatch against the request's object.
//! The product path stays policy-server with `deploy/policy.yaml`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::Policy;

/// The running webhook.
pub struct AdmissionHost {
    /// `https://127.0.0.1:<port>/validate`.
    pub url: String,
    /// PEM of the CA that signed the serving certificate (the webhook's caBundle).
    pub ca_pem: String,
    /// How long each request took, from its headers to the answer.
    service_times: Arc<Mutex<Vec<Duration>>>,
    /// Stops the server when dropped.
    _shutdown: oneshot::Sender<()>,
}

impl AdmissionHost {
    /// Serve the policy from [`crate::policy_path`] with `settings` on a
    /// free loopback port. The waPC host is not `Send`, so one thread owns
    /// it and serves every connection: no hop between threads per request.
    pub fn start(settings: Value) -> Result<Self, String> {
        let (ca_pem, tls) = serving_config()?;
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let service_times = Arc::new(Mutex::new(Vec::new()));
        let times = service_times.clone();
        let (shutdown, stop) = oneshot::channel::<()>();
        let (started, port) = mpsc::channel::<Result<u16, String>>();
        std::thread::spawn(move || {
            let setup = || -> Result<_, String> {
                let policy = Rc::new(Policy::load()?);
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                let listener = runtime
                    .block_on(TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))
                    .map_err(|e| e.to_string())?;
                Ok((policy, runtime, listener))
            };
            let (policy, runtime, listener) = match setup() {
                Ok(ready) => ready,
                Err(e) => return drop(started.send(Err(e))),
            };
            let _ = started.send(
                listener
                    .local_addr()
                    .map(|a| a.port())
                    .map_err(|e| e.to_string()),
            );
            let settings = Rc::new(settings);
            let serve = async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (acceptor, policy, settings, times) = (
                        acceptor.clone(),
                        policy.clone(),
                        settings.clone(),
                        times.clone(),
                    );
                    tokio::task::spawn_local(async move {
                        let Ok(stream) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = service_fn(move |request| {
                            handle(policy.clone(), settings.clone(), times.clone(), request)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            };
            tokio::task::LocalSet::new().block_on(&runtime, async move {
                tokio::select! {
                    _ = serve => {}
                    _ = stop => {}
                }
            });
        });
        let port = port.recv().map_err(|e| e.to_string())??;
        Ok(AdmissionHost {
            url: format!("https://127.0.0.1:{port}/validate"),
            ca_pem,
            service_times,
            _shutdown: shutdown,
        })
    }

    /// How long each request served so far took inside this host.
    pub fn service_times(&self) -> Vec<Duration> {
        self.service_times
            .lock()
            .map(|times| times.clone())
            .unwrap_or_default()
    }

    /// A MutatingWebhookConfiguration sending CREATE and UPDATE of `memcacheds` here.
    pub fn webhook_configuration(&self) -> Value {
        use base64::engine::general_purpose::STANDARD;
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "memcached-policy"},
            "webhooks": [{
                "name": "memcached.c5c3.io",
                "clientConfig": {"url": self.url, "caBundle": STANDARD.encode(&self.ca_pem)},
                "rules": [{
                    "apiGroups": ["memcached.c5c3.io"],
                    "apiVersions": ["v1alpha1", "v1beta1"],
                    "resources": ["memcacheds"],
                    "operations": ["CREATE", "UPDATE"],
                }],
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }],
        })
    }
}

async fn handle(
    policy: Rc<Policy>,
    settings: Rc<Value>,
    times: Arc<Mutex<Vec<Duration>>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let started = Instant::now();
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, e.to_string().into())),
    };
    let review: Value = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, e.to_string().into())),
    };
    let answer = review_response(&policy, &settings, &review).to_string();
    if let Ok(mut times) = times.lock() {
        times.push(started.elapsed());
    }
    Ok(reply(StatusCode::OK, answer.into()))
}

fn reply(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The AdmissionReview answering `review`, as policy-server builds it from the
/// policy's ValidationResponse.
pub fn review_response(policy: &Policy, settings: &Value, review: &Value) -> Value {
    let request = &review["request"];
    let mut response = json!({"uid": request["uid"], "allowed": false});
    match policy.validate(request, settings) {
        Err(e) => {
            response["status"] = json!({"code": 500, "message": e});
        }
        Ok(verdict) => {
            response["allowed"] = json!(verdict["accepted"] == json!(true));
            if verdict["accepted"] != json!(true) {
                response["status"] = json!({
                    "code": verdict.get("code").filter(|c| !c.is_null()).cloned().unwrap_or(json!(400)),
                    "message": verdict["message"],
                });
            }
            if let Some(mutated) = verdict.get("mutated_object").filter(|m| !m.is_null()) {
                let patch = json_patch::diff(&request["object"], mutated);
                if !patch.0.is_empty() {
                    let patch = serde_json::to_vec(&patch).unwrap_or_default();
                    response["patchType"] = json!("JSONPatch");
                    response["patch"] =
                        json!(base64::engine::general_purpose::STANDARD.encode(patch));
                }
            }
            if let Some(warnings) = verdict.get("warnings").filter(|w| w.is_array()) {
                response["warnings"] = warnings.clone();
            }
        }
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// A fresh CA and a serving certificate for 127.0.0.1 signed by it.
fn serving_config() -> Result<(String, ServerConfig), String> {
    let pki = super::pki::issue(&["127.0.0.1"])?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(pki.cert_der)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key_der)),
        )
        .map_err(|e| e.to_string())?;
    Ok((pki.ca, config))
}
