//! The rendered pod as the checks read it, where the spec sets each part,
//! and the words Pod Security admission uses for what fails.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, PodSecurityContext, PodSpec, SecurityContext};

use crate::field::Path;

/// One failed check: the spec field that fails it, and Pod Security
/// admission's reason and detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// The field of the Memcached to change.
    pub path: Path,
    /// Pod Security admission's reason, e.g. `privileged`.
    pub reason: String,
    /// Pod Security admission's detail, e.g. `container "memcached" must not set ...`.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.path, self.reason, self.detail)
    }
}

/// The rendered pod, and where the spec sets its parts.
pub(super) struct Pod<'a> {
    pub(super) spec: &'a PodSpec,
    pub(super) annotations: Option<&'a BTreeMap<String, String>>,
    /// The Memcached's spec: what it cannot set names it as a whole.
    pub(super) spec_path: Path,
    pub(super) pod_path: Path,
    pub(super) container_path: Path,
    pub(super) annotations_path: Path,
}

impl<'a> Pod<'a> {
    /// The pod's security context.
    pub(super) fn context(&self) -> Option<&'a PodSecurityContext> {
        self.spec.security_context.as_ref()
    }

    /// Every container, as Pod Security admission visits them: init
    /// containers, then containers.
    pub(super) fn containers(&self) -> impl Iterator<Item = &'a Container> {
        let init = self.spec.init_containers.iter().flatten();
        init.chain(&self.spec.containers)
    }

    /// `container "a"` or `containers "a", "b"`: the containers whose
    /// security context `bad` flags; `None` when none.
    pub(super) fn containers_where(
        &self,
        bad: impl Fn(Option<&SecurityContext>) -> bool,
    ) -> Option<String> {
        let names: Vec<&str> = (self.containers())
            .filter(|c| bad(c.security_context.as_ref()))
            .map(|c| c.name.as_str())
            .collect();
        (!names.is_empty()).then(|| named("container", "containers", &names))
    }

    /// A field of the containers' security context.
    pub(super) fn container_field(&self, field: &str) -> Path {
        self.container_path.child(field)
    }
}

/// `container "a"`, `containers "a", "b"`.
pub(super) fn named(singular: &str, plural: &str, names: &[&str]) -> String {
    format!(
        "{} {}",
        pluralize(singular, plural, names.len()),
        join_quote(names)
    )
}

pub(super) fn violation(path: Path, reason: &str, detail: String) -> Option<Violation> {
    Some(Violation {
        path,
        reason: reason.to_string(),
        detail,
    })
}

/// `"a", "b"` (Go's `joinQuote`).
pub(super) fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    quoted.join(", ")
}

pub(super) fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// Who sets a forbidden value, for details like `pod and container "x" must not ...`.
#[derive(Default)]
pub(super) struct Setters {
    pub(super) names: Vec<String>,
    pub(super) first_path: Option<Path>,
}

impl Setters {
    pub(super) fn add(&mut self, name: String, path: Path) {
        self.names.push(name);
        self.first_path.get_or_insert(path);
    }

    pub(super) fn joined(&self) -> String {
        self.names.join(" and ")
    }
}
