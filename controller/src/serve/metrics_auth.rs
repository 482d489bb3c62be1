//! Who may scrape `/metrics`, as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` decides it: the bearer
//! token is authenticated with a TokenReview and its user authorized with a
//! SubjectAccessReview for `get` on the non-resource URL `/metrics`.
//! Decisions are cached briefly per token so scrapes do not storm the API
//! server; failures to ask are never cached.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

/// The non-resource URL a scraper needs `get` on (the `metrics-reader` ClusterRole).
pub const METRICS_PATH: &str = "/metrics";
/// How long a decision is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Most tokens remembered at once.
pub const CACHE_CAPACITY: usize = 1024;

/// The answer to one scrape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Authenticated and authorized.
    Allowed,
    /// No bearer token, or one the API server does not accept: 401.
    Unauthenticated,
    /// A user without `get` on `/metrics`: 403.
    Forbidden,
}

/// Authenticates and authorizes scrapers through the API server.
pub struct Authorizer {
    client: Client,
    ttl: Duration,
    /// Decisions by SHA-256 of the token, with when they were made.
    cache: Mutex<HashMap<[u8; 32], (Instant, Decision)>>,
}

impl Authorizer {
    /// An authorizer asking `client`'s API server, caching for `ttl`.
    pub fn new(client: Client, ttl: Duration) -> Self {
        Authorizer {
            client,
            ttl,
            cache: Mutex::default(),
        }
    }

    /// The decision for a request's `Authorization` header.
    pub async fn check(&self, authorization: Option<&[u8]>) -> Result<Decision, kube::Error> {
        let Some(token) = authorization.and_then(bearer_token) else {
            return Ok(Decision::Unauthenticated);
        };
        let key = digest(token);
        if let Some(decision) = self.cached(&key) {
            return Ok(decision);
        }
        let decision = self.review(token).await?;
        self.remember(key, decision);
        Ok(decision)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Decision> {
        let cache = self.cache.lock().ok()?;
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, d)| *d)
    }

    /// Keep a decision; when full, expired ones go first, then the oldest.
    fn remember(&self, key: [u8; 32], decision: Decision) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        if cache.len() >= CACHE_CAPACITY {
            cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        if cache.len() >= CACHE_CAPACITY
            && let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| *k)
        {
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), decision));
    }

    /// Ask the API server: TokenReview, then SubjectAccessReview.
    async fn review(&self, token: &str) -> Result<Decision, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_string()),
                    verb: Some("get".to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        Ok(if answered.status.is_some_and(|s| s.allowed) {
            Decision::Allowed
        } else {
            Decision::Forbidden
        })
    }
}

/// The token of `Bearer <token>` (the scheme is case-insensitive).
fn bearer_token(header: &[u8]) -> Option<&str> {
    let header = std::str::from_utf8(header).ok()?;
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn digest(token: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    key.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bearer_tokens() {
        assert_eq!(bearer_token(b"Bearer abc"), Some("abc"));
        assert_eq!(bearer_token(b"bearer  abc "), Some("abc"));
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"abc"), None);
        assert_eq!(bearer_token(b"Bearer \xff"), None);
    }
}
