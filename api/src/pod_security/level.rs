//! The Pod Security Standards' levels, and the namespace label that sets one.

use std::fmt;

use serde::Deserialize;

/// The namespace label that sets the level Pod Security admission enforces.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";

/// A Pod Security Standards level, least strict first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// No known privilege escalation.
    Baseline,
    /// Hardened: what the operator's defaults meet.
    #[default]
    Restricted,
}

impl Level {
    /// The level's name, as in labels and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// The level an `enforce` label value sets; like Pod Security admission,
    /// a value it cannot read enforces `restricted`.
    pub fn from_label(value: &str) -> Level {
        match value {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            _ => Level::Restricted,
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
