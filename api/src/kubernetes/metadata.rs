//! Object names, labels and annotations, as apimachinery's
//! `ValidateObjectMeta`, `ValidateLabels` and `ValidateAnnotations` check them
//! (errors on the map's path, as the API server reports them).

use std::collections::BTreeMap;

use super::names::{is_dns1035_label, is_qualified_name, is_valid_label_value};
use crate::field::{ErrorList, FieldError, MAX_ERRORS_PER_LIST, Path};

/// `TotalAnnotationSizeLimitB`: keys and values of one object together.
pub const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
/// Characters the API server appends to a `generateName`.
const GENERATED_SUFFIX: usize = 5;

/// `metadata.name` (or `generateName` when the API server will generate the
/// name) must name the Service the controller creates: an RFC 1035 label,
/// which is also a valid label value (the `instance` label).
pub fn validate_name(name: &str, generate_name: &str, path: &Path) -> ErrorList {
    if name.is_empty() && !generate_name.is_empty() {
        // The API server cuts the base to 58 characters and appends 5 random
        // lower-case alphanumerics: check a name it could generate.
        let cut = &generate_name[..floor_boundary(generate_name, 63 - GENERATED_SUFFIX)];
        let generated = format!("{cut}{}", "x".repeat(GENERATED_SUFFIX));
        return is_dns1035_label(&generated)
            .into_iter()
            .map(|m| FieldError::invalid(path.child("generateName"), generate_name, m))
            .collect();
    }
    if name.is_empty() {
        return ErrorList::new();
    }
    is_dns1035_label(name)
        .into_iter()
        .map(|m| FieldError::invalid(path.child("name"), name, m))
        .collect()
}

fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `ValidateLabels`: qualified-name keys, label values.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (key, value) in labels {
        if errors.len() >= MAX_ERRORS_PER_LIST {
            break;
        }
        errors.extend(validate_label_name(key, path));
        for m in is_valid_label_value(value) {
            errors.push(FieldError::invalid(path.clone(), value.as_str(), m));
        }
    }
    errors
}

/// `ValidateLabelName`.
pub fn validate_label_name(key: &str, path: &Path) -> ErrorList {
    is_qualified_name(key)
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), key, m))
        .collect()
}

/// `ValidateAnnotations`: qualified-name keys (lower-cased), 256Ki in total.
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        if errors.len() < MAX_ERRORS_PER_LIST {
            for m in is_qualified_name(&key.to_lowercase()) {
                errors.push(FieldError::invalid(path.clone(), key.as_str(), m));
            }
        }
        total = total.saturating_add(key.len()).saturating_add(value.len());
    }
    if total > TOTAL_ANNOTATION_SIZE {
        errors.push(FieldError::too_long(path.clone(), TOTAL_ANNOTATION_SIZE));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> Vec<String> {
        validate_name(n, "", &Path::new("metadata"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn generated(prefix: &str) -> usize {
        validate_name("", prefix, &Path::new("metadata")).len()
    }

    #[test]
    fn name_of_63_characters() {
        assert!(name(&"a".repeat(63)).is_empty());
    }

    #[test]
    fn name_of_64_characters() {
        assert_eq!(
            name(&"a".repeat(64)),
            [format!(
                "metadata.name: Invalid value: \"{}\": must be no more than 63 characters",
                "a".repeat(64)
            )]
        );
    }

    #[test]
    fn name_starting_with_a_digit() {
        assert_eq!(name("1cache").len(), 1);
    }

    #[test]
    fn name_with_a_dot_is_a_subdomain_but_no_service_name() {
        assert_eq!(name("my.cache").len(), 1);
    }

    #[test]
    fn generate_name_prefixes() {
        assert_eq!(generated("cache-"), 0);
        assert_eq!(generated(&"c".repeat(80)), 0);
        assert_eq!(generated("Cache-"), 1);
        assert_eq!(generated("1-"), 1);
    }

    #[test]
    fn no_name_at_all_is_left_to_the_api_server() {
        assert!(name("").is_empty());
    }

    #[test]
    fn label_errors_sit_on_the_map_path() {
        let labels = BTreeMap::from([("bad key".to_string(), "v".to_string())]);
        let errors = validate_labels(&labels, &Path::new("spec.podLabels"));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .to_string()
                .starts_with(r#"spec.podLabels: Invalid value: "bad key": name part must consist"#)
        );
    }

    #[test]
    fn annotations_at_and_over_256ki() {
        let path = Path::new("spec.podAnnotations");
        let fits = BTreeMap::from([("k".to_string(), "v".repeat(TOTAL_ANNOTATION_SIZE - 1))]);
        assert!(validate_annotations(&fits, &path).is_empty());
        let over = BTreeMap::from([("k".to_string(), "v".repeat(TOTAL_ANNOTATION_SIZE))]);
        assert_eq!(
            validate_annotations(&over, &path)[0].to_string(),
            "spec.podAnnotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn annotation_keys_are_checked_lower_cased() {
        let path = Path::new("a");
        let upper = BTreeMap::from([("Example.COM/Key".to_string(), String::new())]);
        assert!(validate_annotations(&upper, &path).is_empty());
        let bad = BTreeMap::from([("-x".to_string(), String::new())]);
        assert_eq!(validate_annotations(&bad, &path).len(), 1);
    }
}
