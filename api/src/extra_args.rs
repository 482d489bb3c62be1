//! Which memcached flags in `spec.memcached.extraArgs` the operator manages itself.

use crate::field::{FieldError, Path};

/// Short options of memcached 1.6 that take a value (its getopt string).
const SHORT_WITH_VALUE: &str = "aApsUmMcltDRCbBIXYeofPn";

/// Long options of memcached 1.6 that take a value when written without `=`.
const LONG_WITH_VALUE: [&str; 13] = [
    "unix-socket",
    "unix-mask",
    "user",
    "pidfile",
    "listen-backlog",
    "max-reqs-per-event",
    "slab-min-size",
    "slab-growth-factor",
    "protocol",
    "extended",
    "memory-file",
    "napi-ids",
    "auth-file",
];

/// A managed flag: its short letter, long name, and what to use instead.
struct Managed {
    short: char,
    long: &'static str,
    instead: &'static str,
}

const MANAGED: [Managed; 10] = [
    Managed {
        short: 'm',
        long: "memory-limit",
        instead: "set spec.memcached.maxMemoryMB instead",
    },
    Managed {
        short: 'c',
        long: "conn-limit",
        instead: "set spec.memcached.maxConnections instead",
    },
    Managed {
        short: 't',
        long: "threads",
        instead: "set spec.memcached.threads instead",
    },
    Managed {
        short: 'I',
        long: "max-item-size",
        instead: "set spec.memcached.maxItemSize instead",
    },
    Managed {
        short: 'p',
        long: "port",
        instead: "the port is fixed at 11211 for the probes, Service and NetworkPolicy",
    },
    Managed {
        short: 'U',
        long: "udp-port",
        instead: "UDP stays disabled; clients use TCP port 11211",
    },
    Managed {
        short: 'l',
        long: "listen",
        instead: "memcached listens on all pod addresses so the Service can reach it",
    },
    Managed {
        short: 'S',
        long: "enable-sasl",
        instead: "set spec.security.sasl instead",
    },
    Managed {
        short: 'Y',
        long: "auth-file",
        instead: "set spec.security.sasl instead",
    },
    Managed {
        short: 'Z',
        long: "enable-ssl",
        instead: "set spec.security.tls instead",
    },
];

/// One Forbidden error per managed flag found in `args`.
pub fn validate(args: &[String], path: &Path) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut value_expected = false;
    for (i, arg) in args.iter().enumerate() {
        if std::mem::take(&mut value_expected) {
            continue;
        }
        let (found, takes_value) = inspect(arg);
        value_expected = takes_value;
        if let Some(m) = found {
            errors.push(FieldError::forbidden(
                path.index(i),
                format!(
                    "{arg:?} sets -{}/--{}, which the operator manages: {}",
                    m.short, m.long, m.instead
                ),
            ));
        }
    }
    errors
}

/// The managed flag `arg` sets, if any, and whether the next argument is its value.
fn inspect(arg: &str) -> (Option<&'static Managed>, bool) {
    if let Some(long) = arg.strip_prefix("--") {
        let (name, inline_value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        let managed = MANAGED.iter().find(|m| m.long == name);
        let takes_value = managed.is_some_and(|m| SHORT_WITH_VALUE.contains(m.short))
            || LONG_WITH_VALUE.contains(&name);
        return (managed, takes_value && !inline_value);
    }
    let Some(cluster) = arg.strip_prefix('-') else {
        return (None, false);
    };
    // getopt: letters cluster until one takes a value, which is the rest or the next arg.
    for (pos, c) in cluster.char_indices() {
        let managed = MANAGED.iter().find(|m| m.short == c);
        if managed.is_some() || SHORT_WITH_VALUE.contains(c) {
            let value_is_next = SHORT_WITH_VALUE.contains(c) && pos + c.len_utf8() == cluster.len();
            return (managed, value_is_next);
        }
    }
    (None, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbidden(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        validate(&args, &Path::new("spec.memcached.extraArgs"))
            .iter()
            .map(|e| e.field.to_string())
            .collect()
    }

    #[test]
    fn forbids_short_long_and_attached_forms() {
        assert_eq!(forbidden(&["-m", "64"]), ["spec.memcached.extraArgs[0]"]);
        assert_eq!(forbidden(&["-m64"]), ["spec.memcached.extraArgs[0]"]);
        assert_eq!(forbidden(&["--port=1"]), ["spec.memcached.extraArgs[0]"]);
        assert_eq!(
            forbidden(&["--memory-limit", "1"]),
            ["spec.memcached.extraArgs[0]"]
        );
        assert_eq!(forbidden(&["-vS"]), ["spec.memcached.extraArgs[0]"]);
        for flag in [
            "-c",
            "-t",
            "-I",
            "-p",
            "-U",
            "-l",
            "-S",
            "-Y",
            "-Z",
            "--conn-limit=1",
            "--threads=2",
            "--max-item-size=2m",
            "--udp-port=1",
            "--listen=0.0.0.0",
            "--enable-sasl",
            "--auth-file=/x",
            "--enable-ssl",
        ] {
            assert_eq!(forbidden(&[flag]).len(), 1, "{flag}");
        }
    }

    #[test]
    fn allows_other_flags_and_values_of_other_flags() {
        assert!(
            forbidden(&[
                "-v",
                "-o",
                "modern",
                "--disable-cas",
                "-R",
                "20",
                "-B",
                "ascii"
            ])
            .is_empty()
        );
        assert!(forbidden(&["-o", "-m"]).is_empty());
        assert!(forbidden(&["--user", "-m"]).is_empty());
        assert!(forbidden(&["-oslab_reassign", "-vv", "-L", "m"]).is_empty());
        assert_eq!(
            forbidden(&["-v", "-m", "1", "-c", "2"]),
            ["spec.memcached.extraArgs[1]", "spec.memcached.extraArgs[3]"]
        );
    }

    #[test]
    fn names_the_field_to_use_instead() {
        let e = validate(&["-m".to_string()], &Path::new("spec.memcached.extraArgs"));
        assert_eq!(
            e[0].to_string(),
            r#"spec.memcached.extraArgs[0]: Forbidden: "-m" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#
        );
    }
}
