//! The requests the API server counted (`apiserver_request_total`), as the
//! suites and benches read them.

use crate::harness::Kubectl;

/// One `apiserver_request_total` series.
#[derive(Clone, Debug, Default)]
pub struct RequestCount {
    /// `GET`, `LIST`, `WATCH`, `APPLY`, `PATCH`, ...
    pub verb: String,
    /// `deployments`, `memcacheds`, ...
    pub resource: String,
    /// `status`, `scale`, or empty.
    pub subresource: String,
    /// Requests served since the API server's metrics began.
    pub count: f64,
}

impl RequestCount {
    /// Not a read (`GET`, `LIST`, `WATCH`).
    pub fn is_write(&self) -> bool {
        !matches!(self.verb.as_str(), "GET" | "LIST" | "WATCH")
    }
}

/// Every `apiserver_request_total` series the API server exports now.
pub fn request_counts(kubectl: &Kubectl) -> Result<Vec<RequestCount>, String> {
    let metrics = kubectl.ok(&["get", "--raw", "/metrics"])?;
    Ok(metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .filter_map(|(labels, value)| {
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            Some(RequestCount {
                verb: label("verb"),
                resource: label("resource"),
                subresource: label("subresource"),
                count: value.trim().parse().ok()?,
            })
        })
        .collect())
}
