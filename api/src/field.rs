//! Field errors rendered exactly like Kubernetes' `field.ErrorList`.

use std::collections::HashSet;
use std::fmt;

/// Longest bad value echoed back in a message; longer ones are cut.
const MAX_SHOWN_VALUE: usize = 256;
/// Longest structure echoed back (its rendering names every field).
const MAX_SHOWN_STRUCTURE: usize = 1024;
/// Most distinct errors rendered in one message; the rest are counted.
pub const MAX_RENDERED_ERRORS: usize = 100;
/// A list's validator stops walking its items once it has found this many
/// errors: more could never be shown, and building them costs time.
pub const MAX_ERRORS_PER_LIST: usize = MAX_RENDERED_ERRORS;

/// A field path such as `spec.memcached.extraArgs[2]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    /// A path of one or more dot-separated names.
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }

    /// The path of a named child.
    pub fn child(&self, name: &str) -> Self {
        self.extended(&[".", name])
    }

    /// The path of a list element.
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    /// The path of a map entry.
    pub fn key(&self, k: &str) -> Self {
        self.extended(&["[", k, "]"])
    }

    /// This path with `parts` appended, in one allocation: paths are built
    /// for every field walked, errors or not, so `format!` would dominate.
    fn extended(&self, parts: &[&str]) -> Self {
        let len = self.0.len() + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut path = String::with_capacity(len);
        path.push_str(&self.0);
        parts.iter().for_each(|p| path.push_str(p));
        Path(path)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The Kubernetes error types used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// `Required value`
    Required,
    /// `Invalid value`
    Invalid,
    /// `Unsupported value`
    NotSupported,
    /// `Forbidden`
    Forbidden,
    /// `Duplicate value`
    Duplicate,
    /// `Too long` (the value is never shown)
    TooLong,
    /// `Too many`
    TooMany,
    /// `Not found`
    NotFound,
}

impl ErrorType {
    fn as_str(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::NotFound => "Not found",
        }
    }
}

/// The offending value, printed the way Go's `%v` / `%q` would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadValue {
    /// No value is shown (Required, Forbidden).
    Omitted,
    /// An integer, printed bare.
    Int(i64),
    /// A string, printed quoted.
    Str(String),
    /// Printed as is: a boolean, or a structure as the API server's
    /// `json.Marshal` of its internal type shows it.
    Raw(String),
}

impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Raw(v.to_string())
    }
}

impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}

impl From<usize> for BadValue {
    fn from(v: usize) -> Self {
        BadValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<i32> for BadValue {
    fn from(v: i32) -> Self {
        BadValue::Int(v.into())
    }
}

impl From<&str> for BadValue {
    fn from(v: &str) -> Self {
        BadValue::Str(v.to_string())
    }
}

/// The kind of check that found an error. A spec's errors are listed stage
/// by stage, in the order the policy's messages have always had, whatever
/// order the validators of its fields run in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// A rule tying fields together (memory, budget, shutdown, Secrets, autoscaling).
    Rule,
    /// A bound, enum or pattern of the CRD schema.
    Schema,
    /// What memcached, Prometheus or a quantity's parser refuses.
    Runtime,
    /// What the API server refuses in the objects the controller builds.
    #[default]
    Object,
}

/// One field error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The error type.
    pub kind: ErrorType,
    /// Where it is.
    pub field: Path,
    /// What was there.
    pub value: BadValue,
    /// Why it is wrong.
    pub detail: String,
    /// Where it is listed (never shown).
    pub stage: Stage,
}

impl FieldError {
    /// `Required value: <detail>`
    pub fn required(field: Path, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Required,
            field,
            value: BadValue::Omitted,
            detail: detail.into(),
            stage: Stage::Object,
        }
    }

    /// `Invalid value: <value>: <detail>`
    pub fn invalid(field: Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Invalid,
            field,
            value: value.into(),
            detail: detail.into(),
            stage: Stage::Object,
        }
    }

    /// `Forbidden: <detail>`
    pub fn forbidden(field: Path, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::Forbidden,
            field,
            value: BadValue::Omitted,
            detail: detail.into(),
            stage: Stage::Object,
        }
    }

    /// `Duplicate value: <value>`
    pub fn duplicate(field: Path, value: impl Into<BadValue>) -> Self {
        Self {
            kind: ErrorType::Duplicate,
            field,
            value: value.into(),
            detail: String::new(),
            stage: Stage::Object,
        }
    }

    /// `Too long: may not be more than <max> bytes` (apimachinery's `field.TooLong`).
    pub fn too_long(field: Path, max: usize) -> Self {
        Self {
            kind: ErrorType::TooLong,
            field,
            value: BadValue::Omitted,
            detail: format!("may not be more than {max} bytes"),
            stage: Stage::Object,
        }
    }

    /// `Too many: <actual>: must have at most <max> items` (apimachinery's `field.TooMany`).
    pub fn too_many(field: Path, actual: usize, max: usize) -> Self {
        Self {
            kind: ErrorType::TooMany,
            field,
            value: actual.into(),
            detail: format!("must have at most {max} items"),
            stage: Stage::Object,
        }
    }

    /// `Not found: <value>: <detail>` (apimachinery's `field.NotFound`, with a detail).
    pub fn not_found(field: Path, value: &str, detail: impl Into<String>) -> Self {
        Self {
            kind: ErrorType::NotFound,
            field,
            value: value.into(),
            detail: detail.into(),
            stage: Stage::Object,
        }
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`
    pub fn not_supported(field: Path, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self {
            kind: ErrorType::NotSupported,
            field,
            value: value.into(),
            detail: format!("supported values: {}", list.join(", ")),
            stage: Stage::Object,
        }
    }

    /// This error, listed at `stage`.
    pub fn at(self, stage: Stage) -> Self {
        Self { stage, ..self }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.kind.as_str())?;
        match &self.value {
            BadValue::Omitted => {}
            BadValue::Int(v) => write!(f, ": {v}")?,
            BadValue::Str(s) => write!(f, ": {}", go_quote(&shorten(s, MAX_SHOWN_VALUE)))?,
            BadValue::Raw(s) => write!(f, ": {}", shorten(s, MAX_SHOWN_STRUCTURE))?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Errors in the order they were found.
pub type ErrorList = Vec<FieldError>;

/// The message of `apierrors.NewInvalid`: `Memcached.memcached.c5c3.io "x" is invalid: [a, b]`.
///
/// Like `field.ErrorList.ToAggregate`, equal messages are shown once, in
/// first-seen order (a hash set: linear in the number of errors). At most
/// [`MAX_RENDERED_ERRORS`] distinct errors are shown, then `and N more errors`.
pub fn invalid_message(qualified_kind: &str, name: &str, errors: &[FieldError]) -> String {
    let mut seen: HashSet<String> = HashSet::with_capacity(errors.len().min(MAX_RENDERED_ERRORS));
    let mut rendered: Vec<String> = Vec::new();
    let mut hidden = 0usize;
    for e in errors {
        let s = e.to_string();
        if seen.contains(&s) {
            continue;
        }
        if rendered.len() < MAX_RENDERED_ERRORS {
            seen.insert(s.clone());
            rendered.push(s);
        } else {
            hidden += 1;
            seen.insert(s);
        }
    }
    if hidden > 0 {
        rendered.push(format!("and {hidden} more errors"));
    }
    let aggregate = match rendered.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!(
        "{qualified_kind} {} is invalid: {aggregate}",
        go_quote(name)
    )
}

/// Go's `strconv.Quote` for the characters that matter in messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn shorten(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...({} bytes)", &s[..end], s.len()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_invalid_string_value_quoted() {
        let e = FieldError::invalid(
            Path::new("spec.resources.limits.memory"),
            "64Mi",
            "memory limit must be at least 96Mi (maxMemoryMB=64Mi + 32Mi overhead)",
        );
        assert_eq!(
            e.to_string(),
            r#"spec.resources.limits.memory: Invalid value: "64Mi": memory limit must be at least 96Mi (maxMemoryMB=64Mi + 32Mi overhead)"#
        );
    }

    #[test]
    fn renders_integer_value_bare_and_required_without_value() {
        let e = FieldError::invalid(Path::new("spec").child("replicas"), 3, "x");
        assert_eq!(e.to_string(), "spec.replicas: Invalid value: 3: x");
        let e = FieldError::required(Path::new("spec.a").index(2), "y");
        assert_eq!(e.to_string(), "spec.a[2]: Required value: y");
    }

    #[test]
    fn renders_not_supported_with_quoted_choices() {
        let e = FieldError::not_supported(Path::new("spec.p"), "medium", &["soft", "hard"]);
        assert_eq!(
            e.to_string(),
            r#"spec.p: Unsupported value: "medium": supported values: "soft", "hard""#
        );
    }

    #[test]
    fn aggregates_like_kubernetes() {
        let a = FieldError::forbidden(Path::new("spec.a"), "no");
        let b = FieldError::required(Path::new("spec.b"), "yes");
        assert_eq!(
            invalid_message("K.g", "n", std::slice::from_ref(&a)),
            r#"K.g "n" is invalid: spec.a: Forbidden: no"#
        );
        assert_eq!(
            invalid_message("K.g", "n", &[a.clone(), b, a]),
            r#"K.g "n" is invalid: [spec.a: Forbidden: no, spec.b: Required value: yes]"#
        );
    }

    #[test]
    fn renders_too_long_too_many_and_duplicate_like_apimachinery() {
        let p = Path::new("spec.x");
        assert_eq!(
            FieldError::too_many(p.clone(), 1001, 1000).to_string(),
            "spec.x: Too many: 1001: must have at most 1000 items"
        );
        assert_eq!(
            FieldError::too_long(p.clone(), 262144).to_string(),
            "spec.x: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(
            FieldError::duplicate(p, "{zone, DoNotSchedule}").to_string(),
            r#"spec.x: Duplicate value: "{zone, DoNotSchedule}""#
        );
    }

    #[test]
    fn caps_distinct_errors_and_counts_the_rest() {
        let errors: Vec<FieldError> = (0..250)
            .map(|i| FieldError::forbidden(Path::new("spec.a").index(i % 150), "no"))
            .collect();
        let message = invalid_message("K.g", "n", &errors);
        assert!(message.ends_with(", and 50 more errors]"), "{message}");
        assert_eq!(message.matches("Forbidden").count(), MAX_RENDERED_ERRORS);
    }

    #[test]
    fn quotes_like_go_and_cuts_huge_values() {
        assert_eq!(go_quote("a\"b\\\n\u{1}é"), r#""a\"b\\\n\x01é""#);
        let e = FieldError::invalid(Path::new("f"), "x".repeat(10_000).as_str(), "d");
        assert!(e.to_string().len() < 400);
        assert!(e.to_string().contains("...(10000 bytes)"));
    }
}
