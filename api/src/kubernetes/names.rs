//! apimachinery's `util/validation` string checks, with their exact messages:
//! each returns the list of messages, empty when the value is valid.

/// `validation.DNS1035LabelMaxLength` and `LabelValueMaxLength`.
const LABEL_MAX: usize = 63;
/// `validation.DNS1123SubdomainMaxLength`.
const SUBDOMAIN_MAX: usize = 253;

const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', \
     start with an alphabetic character, and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
     characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start \
     and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, \
     '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// `validation.MaxLenError`.
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `validation.RegexError`, quirks included (`',  or '`).
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns1123_label_text(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

/// `validation.IsDNS1035Label`: Service names, and names used as labels.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(max_len_error(LABEL_MAX));
    }
    let b = value.as_bytes();
    let valid = is_dns1123_label_text(value) && b[0].is_ascii_lowercase();
    if !valid {
        errors.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errors
}

/// `validation.IsDNS1123Label`.
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(max_len_error(LABEL_MAX));
    }
    if value.split('.').all(is_dns1123_label_text) && value.contains('.') {
        errors.push("must not contain dots".to_string());
    } else if !is_dns1123_label_text(value) {
        errors.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errors
}

/// `validation.IsDNS1123Subdomain`.
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        errors.push(max_len_error(SUBDOMAIN_MAX));
    }
    if !value.split('.').all(is_dns1123_label_text) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_text(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `validation.IsQualifiedName`: label keys, annotation keys, resource names.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        errors.push(format!("name part {}", max_len_error(LABEL_MAX)));
    }
    if !is_qualified_name_text(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// `validation.IsValidLabelValue`.
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(max_len_error(LABEL_MAX));
    }
    if !value.is_empty() && !is_qualified_name_text(value) {
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! cases {
        ($check:ident { $($name:ident: $value:expr => $count:expr;)* }) => {$(
            #[test]
            fn $name() {
                assert_eq!($check(&$value).len(), $count, "{:?}", $check(&$value));
            }
        )*};
    }

    cases!(is_dns1035_label {
        label_63_chars: "a".repeat(63) => 0;
        label_64_chars: "a".repeat(64) => 1;
        label_with_digits_and_dash: "cache-1" => 0;
        label_starting_with_digit: "1cache" => 1;
        label_ending_with_dash: "cache-" => 1;
        label_upper_case: "Cache" => 1;
        label_with_dot: "my.cache" => 1;
        label_empty: "" => 1;
        label_long_and_bad: "A".repeat(64) => 2;
    });

    cases!(is_qualified_name {
        qualified_plain: "app" => 0;
        qualified_prefixed: "example.com/My_name.1" => 0;
        qualified_empty_prefix: "/name" => 1;
        qualified_bad_prefix: "Example.com/name" => 1;
        qualified_empty_name: "example.com/" => 2;
        qualified_empty: "" => 2;
        qualified_name_64: "a".repeat(64) => 1;
        qualified_name_63: "a".repeat(63) => 0;
        qualified_two_slashes: "a/b/c" => 1;
        qualified_bad_start: "-app" => 1;
        qualified_prefix_254: format!("{}/a", "a".repeat(254)) => 1;
    });

    cases!(is_valid_label_value {
        value_empty: "" => 0;
        value_63: "v".repeat(63) => 0;
        value_64: "v".repeat(64) => 1;
        value_with_space: "a b" => 1;
        value_underscore_dot: "my_value.1" => 0;
    });

    #[test]
    fn messages_match_apimachinery() {
        assert_eq!(
            is_dns1035_label("My_Cache"),
            [
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(
            is_qualified_name("a b"),
            [
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(
            is_valid_label_value(&"x".repeat(64)),
            ["must be no more than 63 characters"]
        );
    }
}
