//! A test-only HTTPS admission webhook that serves `policy.wasm` through the
//! same waPC host on wasmtime as the policy tests, answering like Kubewarden's
//! policy-server: a mutation becomes a JSONPatch against the request's object.
//! The product path stays policy-server with `deploy/policy.yaml`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};

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

/// An AdmissionReview for the policy thread, and where to send its answer.
type Job = (Value, oneshot::Sender<Value>);

/// The running webhook.
pub struct AdmissionHost {
    /// `https://127.0.0.1:<port>/validate`.
    pub url: String,
    /// PEM of the CA that signed the serving certificate (the webhook's caBundle).
    pub ca_pem: String,
    /// Serves the webhook until dropped.
    _runtime: tokio::runtime::Runtime,
}

impl AdmissionHost {
    /// Serve the policy from [`crate::policy_path`] with `settings` on a
    /// free loopback port. The waPC host is not `Send`: one thread owns it and
    /// answers reviews in arrival order.
    pub fn start(settings: Value) -> Result<Self, String> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (loaded, load_result) = mpsc::channel();
        std::thread::spawn(move || {
            let policy = match Policy::load() {
                Ok(policy) => policy,
                Err(e) => return drop(loaded.send(Err(e))),
            };
            let _ = loaded.send(Ok(()));
            for (review, reply) in inbox {
                let _ = reply.send(review_response(&policy, &settings, &review));
            }
        });
        load_result.recv().map_err(|e| e.to_string())??;
        let (ca_pem, tls) = serving_config()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let listener = runtime
            .block_on(TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))))
            .map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, jobs) = (acceptor.clone(), jobs.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = service_fn(move |request| handle(jobs.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(AdmissionHost {
            url: format!("https://127.0.0.1:{port}/validate"),
            ca_pem,
            _runtime: runtime,
        })
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
    jobs: mpsc::Sender<Job>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, e.to_string().into())),
    };
    let review: Value = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, e.to_string().into())),
    };
    let (answer, answered) = oneshot::channel();
    if jobs.send((review, answer)).is_err() {
        return Ok(reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "the policy thread stopped".into(),
        ));
    }
    match answered.await {
        Ok(answer) => Ok(reply(StatusCode::OK, answer.to_string().into())),
        Err(_) => Ok(reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "the policy thread stopped".into(),
        )),
    }
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
