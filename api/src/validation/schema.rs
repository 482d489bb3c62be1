//! The checks of the CRD schema (bounds, enums), worded as the API server
//! words them, so `kwctl run` catches them without an API server.

use std::ops::{Bound, RangeBounds};

use crate::field::{BadValue, ErrorList, FieldError, Path, Stage};

/// `value` lies within `bounds` (`minimum`, `maximum`).
pub(super) fn within(value: i32, bounds: &impl RangeBounds<i32>, path: Path) -> ErrorList {
    let detail = match (bounds.start_bound(), bounds.end_bound()) {
        (Bound::Included(min), _) if value < *min => {
            format!("{path} in body should be greater than or equal to {min}")
        }
        (_, Bound::Included(max)) if value > *max => {
            format!("{path} in body should be less than or equal to {max}")
        }
        _ => return ErrorList::new(),
    };
    vec![FieldError::invalid(path, BadValue::from(value), detail).at(Stage::Schema)]
}

/// `value` is one of `supported` (`enum`).
pub(super) fn one_of(value: &str, supported: &[&str], path: Path) -> ErrorList {
    if supported.contains(&value) {
        return ErrorList::new();
    }
    vec![FieldError::not_supported(path, value, supported).at(Stage::Schema)]
}
