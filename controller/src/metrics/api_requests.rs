//! The controller's requests to the API server, counted by method and
//! answer as client-go's `rest_client_requests_total` counts them: its own
//! share of the API server's load, on its `/metrics` beside the reconciles.
//! A watch counts once, when its answer starts.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower::{Layer, Service};

/// One method and answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Request {
    /// `GET`, `POST`, `PATCH`, `PUT`, `DELETE`.
    pub method: String,
    /// The HTTP status code, or `<error>` when no answer came.
    pub code: String,
}

/// The requests counted so far.
pub type Counts = Family<Request, Counter>;

/// A layer of the client's stack that counts into [`Counts`].
pub struct CountRequests(pub Counts);

impl<S> Layer<S> for CountRequests {
    type Service = Counting<S>;

    fn layer(&self, inner: S) -> Counting<S> {
        Counting {
            inner,
            counts: self.0.clone(),
        }
    }
}

/// A service counting each request it passes on once its answer starts.
pub struct Counting<S> {
    inner: S,
    counts: Counts,
}

impl<S, B, R> Service<http::Request<B>> for Counting<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let counts = self.counts.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => response.status().as_str().to_string(),
                Err(_) => "<error>".to_string(),
            };
            counts.get_or_create(&Request { method, code }).inc();
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn counts_each_request_by_method_and_answer() {
        let counts = Counts::default();
        let mut service = CountRequests(counts.clone()).layer(tower::service_fn(
            |request: http::Request<()>| async move {
                let status = if request.method() == http::Method::GET {
                    200
                } else {
                    409
                };
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder().status(status).body(()).unwrap(),
                )
            },
        ));
        for method in [http::Method::GET, http::Method::GET, http::Method::PATCH] {
            let request = http::Request::builder().method(method).body(()).unwrap();
            service.ready().await.unwrap().call(request).await.unwrap();
        }
        let count = |method: &str, code: &str| {
            let request = Request {
                method: method.into(),
                code: code.into(),
            };
            counts.get_or_create(&request).get()
        };
        assert_eq!((count("GET", "200"), count("PATCH", "409")), (2, 1));
    }
}
