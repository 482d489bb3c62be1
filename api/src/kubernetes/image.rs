//! Container image references. The API server only refuses surrounding
//! whitespace (with the message below); the kubelet then refuses anything the
//! distribution reference grammar does not parse (`InvalidImageName`), so the
//! policy checks that grammar too:
//! `[host[:port]/]path[:tag][@algorithm:hex]`, the name at most 255 bytes.

use crate::field::{ErrorList, FieldError, Path};

/// `reference.NameTotalLengthMax`.
const NAME_MAX: usize = 255;
/// Longest tag: `[\w][\w.-]{0,127}`.
const TAG_MAX: usize = 128;

const REFERENCE_DETAIL: &str = "must be a valid image reference: [registry[:port]/]repository[:tag][@digest], \
     with a lower-case repository path, a tag of at most 128 characters from [A-Za-z0-9_.-] \
     and a digest such as sha256:<64 hex digits>";

/// The errors of one image reference.
pub fn validate_image(image: &str, path: &Path) -> ErrorList {
    if image.trim().is_empty() {
        return vec![FieldError::required(path.clone(), "must not be empty")];
    }
    if image.trim() != image {
        return vec![FieldError::invalid(
            path.clone(),
            image,
            "must not have leading or trailing whitespace",
        )];
    }
    if is_reference(image) {
        ErrorList::new()
    } else {
        vec![FieldError::invalid(path.clone(), image, REFERENCE_DETAIL)]
    }
}

/// The last component of an image's repository path, without tag or
/// digest: `memcached` for `registry.example.com:5000/team/memcached:1.6`.
pub fn repository_name(image: &str) -> &str {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let last = &name[name.rfind('/').map_or(0, |i| i + 1)..];
    last.split_once(':')
        .map_or(last, |(repository, _)| repository)
}

/// The tag of an image reference, without its digest: `1.6.18-alpine` for
/// `registry.example.com:5000/memcached:1.6.18-alpine@sha256:...`; none for
/// `memcached` or a digest alone.
pub fn tag(image: &str) -> Option<&str> {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let last = &name[name.rfind('/').map_or(0, |i| i + 1)..];
    last.split_once(':').map(|(_, tag)| tag)
}

fn is_reference(image: &str) -> bool {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(at) => (&rest[..last_slash + at], Some(&rest[last_slash + at + 1..])),
        None => (rest, None),
    };
    name.len() <= NAME_MAX
        && is_name(name)
        && tag.is_none_or(is_tag)
        && digest.is_none_or(is_digest)
}

/// `[domain/]path-component(/path-component)*`; the first component is a
/// domain when it has a '.' or ':' or is `localhost`.
fn is_name(name: &str) -> bool {
    let mut components = name.split('/').peekable();
    let Some(first) = components.peek().copied() else {
        return false;
    };
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_domain {
        components.next();
        if !is_domain(first) {
            return false;
        }
    }
    let mut any = false;
    for component in components {
        any = true;
        if !is_path_component(component) {
            return false;
        }
    }
    any
}

/// `host[:port]`, host being dot-separated `[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?`
/// or a bracketed IPv6 address.
fn is_domain(domain: &str) -> bool {
    if let Some(v6) = domain.strip_prefix('[') {
        let Some((address, port)) = v6.split_once(']') else {
            return false;
        };
        return address.parse::<std::net::Ipv6Addr>().is_ok()
            && (port.is_empty() || port.strip_prefix(':').is_some_and(is_port));
    }
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    host.split('.').all(|label| {
        let b = label.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    }) && port.is_none_or(is_port)
}

fn is_port(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn is_path_component(component: &str) -> bool {
    let b = component.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(&b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(&b[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        if !(separator == "."
            || separator == "_"
            || separator == "__"
            || separator.bytes().all(|c| c == b'-'))
        {
            return false;
        }
    }
    true
}

/// `[\w][\w.-]{0,127}`
fn is_tag(tag: &str) -> bool {
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= TAG_MAX
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

/// `algorithm:hex`: `[A-Za-z][A-Za-z0-9]*([+._-][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let components_ok = algorithm.split(['+', '.', '_', '-']).all(|c| {
        let b = c.as_bytes();
        !b.is_empty() && b[0].is_ascii_alphabetic() && b.iter().all(u8::is_ascii_alphanumeric)
    });
    components_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! images {
        ($($name:ident: $image:expr => $valid:expr;)*) => {$(
            #[test]
            fn $name() {
                let errors = validate_image(&$image, &Path::new("spec.image"));
                assert_eq!(errors.is_empty(), $valid, "{errors:?}");
            }
        )*};
    }

    images! {
        plain: "memcached" => true;
        tagged: "memcached:1.6.18-alpine" => true;
        registry_with_port: "registry.example.com:5000/team/memcached:1.6" => true;
        localhost: "localhost/memcached" => true;
        ipv6_registry: "[::1]:5000/memcached:1.6" => true;
        digest: format!("memcached@sha256:{}", "a".repeat(64)) => true;
        tag_and_digest: format!("docker.io/library/memcached:1.6@sha256:{}", "0".repeat(64)) => true;
        separators: "a/b__c/d-e--f.g_h" => true;
        tag_of_128: format!("m:{}", "t".repeat(128)) => true;
        tag_of_129: format!("m:{}", "t".repeat(129)) => false;
        name_of_256: "m".repeat(256) => false;
        upper_case_repository: "Memcached:1.6" => false;
        space_inside: "memcached 1.6" => false;
        leading_space: " memcached" => false;
        empty_tag: "memcached:" => false;
        bad_tag_start: "memcached:.1" => false;
        short_digest: "memcached@sha256:abc" => false;
        double_slash: "a//b" => false;
        empty: "" => false;
        trailing_separator: "memcached-" => false;
    }

    #[test]
    fn whitespace_uses_the_api_server_message() {
        assert_eq!(
            validate_image("memcached ", &Path::new("spec.image"))[0].to_string(),
            r#"spec.image: Invalid value: "memcached ": must not have leading or trailing whitespace"#
        );
    }

    #[test]
    fn tag_is_after_the_last_path_component_and_before_the_digest() {
        for (image, tag_of) in [
            ("memcached", None),
            ("memcached:1.6", Some("1.6")),
            ("registry.example.com:5000/team/memcached", None),
            (
                "registry.example.com:5000/team/memcached:1.6.18-alpine",
                Some("1.6.18-alpine"),
            ),
            ("localhost/memcached@sha256:0", None),
            ("[::1]:5000/cache:2@sha256:0", Some("2")),
        ] {
            assert_eq!(tag(image), tag_of, "{image}");
        }
    }

    #[test]
    fn repository_name_is_the_last_path_component() {
        for (image, name) in [
            ("memcached", "memcached"),
            ("memcached:1.6", "memcached"),
            ("registry.example.com:5000/team/memcached:1.6", "memcached"),
            ("localhost/bitnami/memcached@sha256:0", "memcached"),
            ("[::1]:5000/cache:2@sha256:0", "cache"),
        ] {
            assert_eq!(repository_name(image), name, "{image}");
        }
    }
}
