//! The answer to a request, and how refusals are worded.

use serde_json::Value;

use crate::admission::request::Request;
use crate::field::{ErrorList, invalid_message};

/// `Kind.group`, as Kubernetes prefixes invalid-object messages.
pub const QUALIFIED_KIND: &str = "Memcached.memcached.c5c3.io";

/// Code of every rejection: the request carries an object we cannot admit.
pub const REJECT_CODE: u16 = 400;

/// Code of a refusal by Pod Security, as Pod Security admission answers.
pub const FORBIDDEN_CODE: u16 = 403;

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Admit unchanged.
    Accept {
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Admit with the defaulted object.
    Mutate {
        /// The whole object after defaulting.
        object: Value,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Refuse, listing every error.
    Reject {
        /// The message kubectl prints.
        message: String,
        /// HTTP status code.
        code: u16,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
}

impl Decision {
    pub(super) fn accept() -> Self {
        Decision::Accept {
            warnings: Vec::new(),
        }
    }

    pub(super) fn bad_request(message: String) -> Self {
        Decision::Reject {
            message,
            code: REJECT_CODE,
            warnings: Vec::new(),
        }
    }
}

/// The rejection of `request` for `errors`, worded as the API server words it.
pub(super) fn rejection(request: &Request, errors: &ErrorList, warnings: Vec<String>) -> Decision {
    let name = request
        .object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or(&request.name);
    Decision::Reject {
        message: invalid_message(QUALIFIED_KIND, name, errors),
        code: REJECT_CODE,
        warnings,
    }
}
