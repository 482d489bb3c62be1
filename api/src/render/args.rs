//! The memcached command line for an effective (defaulted) spec.
//!
//! Order: `-m -c -t -I` (the spec's fields, rendered by
//! [`crate::memcached_options`]), then the memory file of warm
//! restarts (`-e`), then `-v`/`-vv`, then authentication, then TLS, then
//! `extraArgs`. The TLS and authentication flags are the ones memcached 1.6
//! really has (the design doc's `--ssl-*` flags do not exist).

use crate::defaults::Defaulted;
use crate::extra_args::{getopt, verbosity};
use crate::memcached_options::{Render, spec_args};
use crate::types::{AUTH_SECRET_KEYS, MemcachedConfig, MemcachedSpec};

/// Where the authentication Secret is mounted.
pub const AUTH_DIR: &str = "/etc/memcached/auth";
/// memcached's `-Y` file in [`AUTH_DIR`]: `username:password` lines. The
/// Secret's key of that name, else the first present of the other
/// [`AUTH_SECRET_KEYS`] mounted under this name.
pub const AUTH_FILE: &str = AUTH_SECRET_KEYS[0];
/// Where the TLS Secret is mounted.
pub const TLS_DIR: &str = "/etc/memcached/tls";
/// Certificate chain key of a `kubernetes.io/tls` Secret.
pub const TLS_CERT_KEY: &str = "tls.crt";
/// Private key of a `kubernetes.io/tls` Secret.
pub const TLS_KEY_KEY: &str = "tls.key";
/// CA bundle key for client certificate verification.
pub const TLS_CA_KEY: &str = "ca.crt";

/// Where the memory-backed volume of warm restarts is mounted.
pub const WARM_RESTART_DIR: &str = "/var/lib/memcached";
/// memcached's memory file in it (`-e`): the cache itself, mmapped; on a
/// graceful stop (SIGUSR1) memcached writes `<file>.meta` beside it and
/// restores both at the next start with the same `-m`, `-c` and `-I`.
pub const MEMORY_FILE: &str = "memory_file";

/// The container args.
pub fn memcached_args(spec: &Defaulted) -> Vec<String> {
    let unset = MemcachedConfig::default();
    let config = spec.memcached.as_ref().unwrap_or(&unset);
    let mut args = spec_args(config, Render::Valued);
    if spec.warm_restart_enabled() {
        args.extend([
            "-e".to_string(),
            format!("{WARM_RESTART_DIR}/{MEMORY_FILE}"),
        ]);
    }
    args.extend(spec_args(config, Render::Repeated));
    if spec.sasl_enabled() {
        args.extend(["-Y".to_string(), format!("{AUTH_DIR}/{AUTH_FILE}")]);
    }
    if spec.tls_enabled() {
        let mut options = vec![
            format!("ssl_chain_cert={TLS_DIR}/{TLS_CERT_KEY}"),
            format!("ssl_key={TLS_DIR}/{TLS_KEY_KEY}"),
        ];
        if client_cert_required(spec) {
            // 2: SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
            options.extend([
                format!("ssl_ca_cert={TLS_DIR}/{TLS_CA_KEY}"),
                "ssl_verify_mode=2".to_string(),
            ]);
        }
        args.extend(["-Z".to_string(), "-o".to_string(), options.join(",")]);
    }
    let extra_args = spec
        .memcached
        .as_ref()
        .and_then(|c| c.extra_args.as_deref());
    args.extend_from_slice(extra_args.unwrap_or_default());
    args
}

/// The `stats settings` that show the settings a change in place may
/// change (the memory geometry never changes in place): read back to confirm
/// a pod runs its args.
pub const CONFIRMED_SETTINGS: &[&str] = &[
    "maxconns",
    "num_threads",
    "verbosity",
    "auth_enabled_ascii",
    "ssl_enabled",
];

/// What memcached reports in [`CONFIRMED_SETTINGS`] when it runs `spec`'s
/// args, as [`confirmed_value`] reads it: its verbosity counts the `-v` of
/// `extraArgs` too.
pub fn confirmed_settings(spec: &Defaulted) -> Vec<(&'static str, String)> {
    let yes_no = |on: bool| if on { "yes" } else { "no" }.to_string();
    vec![
        ("maxconns", spec.max_connections().to_string()),
        ("num_threads", spec.threads().to_string()),
        ("verbosity", verbosity(&memcached_args(spec)).to_string()),
        ("auth_enabled_ascii", yes_no(spec.sasl_enabled())),
        ("ssl_enabled", yes_no(spec.tls_enabled())),
    ]
}

/// memcached's `stats settings` value `reported` for `name`, as
/// [`confirmed_settings`] gives it: ASCII authentication as on or off
/// (memcached reports the auth file's path, which is where the pod's runtime
/// mounted the Secret, not always [`AUTH_DIR`]).
pub fn confirmed_value(name: &str, reported: &str) -> String {
    match (name, reported) {
        ("auth_enabled_ascii", "no") => "no".to_string(),
        ("auth_enabled_ascii", _) => "yes".to_string(),
        _ => reported.to_string(),
    }
}

/// memcached run with `args` runs NAPI ids: getopt gives it `-N` in any
/// spelling it accepts (`-N 1`, `-N1`, `-vN 1`, `--napi-ids=1`, a prefix
/// such as `--napi=1`); memcached 1.6.9 to 1.6.39 crash on `stats settings`
/// then (`process_stat_settings` prints the number with `%s`, fixed by
/// memcached 77e3e2f in 1.6.40).
pub fn napi_ids(args: &[String]) -> bool {
    getopt::parse(args).0.iter().any(|o| o.short == 'N')
}

/// True when TLS is on and clients must present a certificate.
pub fn client_cert_required(spec: &MemcachedSpec) -> bool {
    spec.tls_enabled()
        && spec
            .security
            .as_ref()
            .and_then(|s| s.tls.as_ref())
            .and_then(|t| t.enable_client_cert)
            .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply_defaults;
    use serde_json::json;

    fn args(spec: serde_json::Value) -> Vec<String> {
        memcached_args(&apply_defaults(serde_json::from_value(spec).unwrap()))
    }

    #[test]
    fn builds_the_design_doc_args() {
        assert_eq!(
            args(json!({"memcached": {"maxMemoryMB": 256}})),
            ["-m", "256", "-c", "1024", "-t", "4", "-I", "1m"]
        );
    }

    #[test]
    fn orders_verbosity_auth_tls_then_extra_args() {
        let got = args(json!({
            "memcached": {"verbosity": 2, "extraArgs": ["-o", "modern"]},
            "security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "a"}},
                "tls": {"enabled": true, "certificateSecretRef": {"name": "t"}, "enableClientCert": true}}
        }));
        assert_eq!(
            got,
            [
                "-m",
                "64",
                "-c",
                "1024",
                "-t",
                "4",
                "-I",
                "1m",
                "-vv",
                "-Y",
                "/etc/memcached/auth/auth",
                "-Z",
                "-o",
                "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2",
                "-o",
                "modern",
            ]
        );
        assert_eq!(args(json!({"memcached": {"verbosity": 1}}))[8], "-v");
    }

    #[test]
    fn disabled_features_add_nothing() {
        let got = args(
            json!({"security": {"sasl": {"enabled": false}, "tls": {"enabled": false, "enableClientCert": true}}, "warmRestart": {"enabled": false}}),
        );
        assert_eq!(got.len(), 8);
    }

    #[test]
    fn napi_ids_are_seen_in_every_spelling_getopt_gives_memcached() {
        let runs =
            |args: &[&str]| napi_ids(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        for spelling in [
            &["-N", "1"][..],
            &["-N1"],
            &["-vN", "1"],
            &["--napi-ids=1"],
            &["--napi=1"],
        ] {
            assert!(runs(spelling), "{spelling:?}");
        }
        assert!(!runs(&["-m", "64", "-v"]));
        assert!(!runs(&["--", "-N", "1"]), "an operand");
    }

    #[test]
    fn warm_restarts_add_the_memory_file_after_the_sizes() {
        let got = args(json!({"warmRestart": {"enabled": true}, "memcached": {"verbosity": 1}}));
        assert_eq!(
            got[6..],
            ["-I", "1m", "-e", "/var/lib/memcached/memory_file", "-v"]
        );
    }
}
