//! `spec.memcached.extraArgs`, read the way memcached 1.6 reads its command
//! line: flags the operator manages, flags that stop memcached from serving in
//! a pod, and arguments memcached would exit on are refused, each naming the
//! argument as written and what to use instead. So are options the
//! image's memcached release does not have ([`release`]).

pub mod getopt;
pub mod memory_file;
pub mod options;
pub mod release;
pub mod values;

use crate::field::{ErrorList, FieldError, Path};
use crate::memcached_options::{self, ExtraArgs};
use getopt::{GetoptError, Parsed};
use options::flag;
use release::Judge;

/// What `extraArgs` may do with the short option `c` (its long form is the
/// same option).
fn rule(c: char) -> ExtraArgs {
    memcached_options::short(c).map_or(ExtraArgs::Allowed, |o| o.extra_args)
}

/// The verbosity memcached runs with for its whole command line `args`: one
/// level per `-v` (bundled, `-vv`, or `--verbose`), with no upper bound, as
/// memcached counts them and reports them in `stats settings`.
pub fn verbosity(args: &[String]) -> usize {
    let (parsed, _) = getopt::parse(args);
    parsed.iter().filter(|o| o.short == 'v').count()
}

/// Every refused argument of `args`, for a memcached running `threads`
/// workers, of the release `judge` reads from the image.
pub fn validate(args: &[String], threads: i32, judge: &Judge<'_>, path: &Path) -> ErrorList {
    let (parsed, error) = getopt::parse(args);
    let mut errors = ErrorList::new();
    let mut combined = Combined::default();
    for option in &parsed {
        let written = args[option.index].as_str();
        let at = path.index(option.index);
        if let Some(message) = lacking(option, written, judge) {
            errors.push(FieldError::invalid(at, written, message));
            continue;
        }
        match (option.short, rule(option.short)) {
            ('o', _) => {
                let shown = as_written(args, option);
                let this = Suboptions {
                    option,
                    written,
                    shown: &shown,
                    at: &at,
                    judge,
                };
                this.check(&mut combined, &mut errors);
            }
            ('B', _) => protocol(option, written, &at, &mut errors),
            (c, ExtraArgs::Managed(instead)) => errors.push(FieldError::forbidden(
                at,
                format!(
                    "{written:?} sets {}, which the operator manages: {instead}",
                    flag(c)
                ),
            )),
            (c, ExtraArgs::Breaks(why)) => errors.push(FieldError::forbidden(
                at,
                format!("{written:?} sets {}, which breaks the pod: {why}", flag(c)),
            )),
            (c, ExtraArgs::Allowed) => {
                if let Some(message) = option.value.and_then(|v| values::short_option(c, v)) {
                    errors.push(FieldError::invalid(
                        at,
                        as_written(args, option).as_str(),
                        format!("memcached exits on it: {message}"),
                    ));
                } else if let (Some(value), 'N') = (option.value, c) {
                    combined.napi_ids = Some((values::atoi(value), (at, as_written(args, option))));
                }
            }
        }
    }
    for (at, shown, message) in combined.check(threads) {
        errors.push(FieldError::invalid(
            at,
            shown.as_str(),
            format!("memcached exits on it: {message}"),
        ));
    }
    if let Some(GetoptError { index, message }) = error {
        errors.push(FieldError::invalid(
            path.index(index),
            args[index].as_str(),
            format!("memcached exits on it: {message}"),
        ));
    }
    errors
}

/// The option as written: its argument, and its value when that is the next one.
fn as_written(args: &[String], option: &Parsed<'_>) -> String {
    let written = &args[option.index];
    match (option.value, args.get(option.index + 1)) {
        (Some(value), Some(next)) if std::ptr::eq(value.as_ptr(), next.as_ptr()) => {
            format!("{written} {value}")
        }
        _ => written.clone(),
    }
}

/// Why the image's release refuses `option`, written as `written`, when it
/// lacks it: the release and its own message.
fn lacking(option: &Parsed<'_>, written: &str, judge: &Judge<'_>) -> Option<String> {
    let release = judge.release();
    let short = options::short_option(option.short)?;
    let (span, message) = match written.strip_prefix("--") {
        Some(text) => (
            options::long_option(option.short)?.span,
            format!("unrecognized option '--{text}'"),
        ),
        None => (short.span, format!("invalid option -- '{}'", option.short)),
    };
    (!span.has(release)).then(|| judge.lacks(&flag(option.short), span, &message))
}

/// `-B`: memcached accepts ascii, binary or auto; the probes and the
/// operator's stats client speak ASCII, so binary-only is refused.
fn protocol(option: &Parsed<'_>, written: &str, at: &Path, errors: &mut ErrorList) {
    match option.value.unwrap_or_default() {
        "ascii" | "auto" => {}
        "binary" => errors.push(FieldError::forbidden(
            at.clone(),
            format!(
                "{written:?} sets -B/--protocol binary, which breaks the pod: the probes and the operator's \
                 stats client speak the ASCII protocol; use ascii or auto"
            ),
        )),
        other => errors.push(FieldError::invalid(
            at.clone(),
            written,
            format!(
                "memcached exits on it: Invalid value for binding protocol: {other} -- should be one of auto, \
                 binary, or ascii"
            ),
        )),
    }
}

/// Where an option was set: its field path and the option as shown.
type SetBy = (Path, String);

/// What memcached checks once it has read every option, combining several.
struct Combined {
    hot_lru_pct: i32,
    warm_lru_pct: i32,
    /// The last `-o` that set one of the LRU shares.
    lru_pct_set_by: Option<SetBy>,
    hashpower: Option<(i32, SetBy)>,
    napi_ids: Option<(i32, SetBy)>,
    temporary_ttl: Option<SetBy>,
    /// `lru_maintainer`/`modern` turn it on (the default), their `no_` forms off.
    lru_maintainer: bool,
}

impl Default for Combined {
    fn default() -> Self {
        Combined {
            hot_lru_pct: values::DEFAULT_HOT_LRU_PCT,
            warm_lru_pct: values::DEFAULT_WARM_LRU_PCT,
            lru_pct_set_by: None,
            hashpower: None,
            napi_ids: None,
            temporary_ttl: None,
            lru_maintainer: true,
        }
    }
}

impl Combined {
    /// Take note of the valid sub-option `name=value`, written in `shown` at `at`.
    fn note(&mut self, name: &str, value: Option<&str>, at: &Path, shown: &str) {
        let set_by = || (at.clone(), shown.to_string());
        match (name, value) {
            ("hot_lru_pct", Some(v)) => {
                self.hot_lru_pct = values::atoi(v);
                self.lru_pct_set_by = Some(set_by());
            }
            ("warm_lru_pct", Some(v)) => {
                self.warm_lru_pct = values::atoi(v);
                self.lru_pct_set_by = Some(set_by());
            }
            ("hashpower", Some(v)) => self.hashpower = Some((values::atoi(v), set_by())),
            ("temporary_ttl", Some(_)) => self.temporary_ttl = Some(set_by()),
            ("lru_maintainer" | "modern", _) => self.lru_maintainer = true,
            ("no_lru_maintainer" | "no_modern", _) => self.lru_maintainer = false,
            _ => {}
        }
    }

    /// What memcached exits on after reading the options, with `threads` workers.
    fn check(self, threads: i32) -> Vec<(Path, String, String)> {
        let mut refused = Vec::new();
        if self.hot_lru_pct + self.warm_lru_pct > values::MAX_HOT_AND_WARM_PCT
            && let Some((at, shown)) = self.lru_pct_set_by
        {
            refused.push((
                at,
                shown,
                format!(
                    "hot_lru_pct + warm_lru_pct cannot be more than {}% combined",
                    values::MAX_HOT_AND_WARM_PCT
                ),
            ));
        }
        if let Some((n, (at, shown))) = self.napi_ids.filter(|(n, _)| *n > threads) {
            refused.push((
                at,
                shown,
                format!(
                    "Number of napi_ids({n}) cannot be greater than number of threads({threads})"
                ),
            ));
        }
        if let Some((at, shown)) = self.temporary_ttl.filter(|_| !self.lru_maintainer) {
            refused.push((
                at,
                shown,
                "temporary_ttl requires lru_maintainer to be enabled".to_string(),
            ));
        }
        let lock_power = values::item_lock_power(threads);
        if let Some((power, (at, shown))) = self.hashpower.filter(|(p, _)| *p <= lock_power) {
            refused.push((
                at,
                shown,
                format!(
                    "Hash table power size ({power}) cannot be equal to or less than item lock table ({lock_power})"
                ),
            ));
        }
        refused
    }
}

/// One `-o a,b=c`: memcached reads the comma-separated list with getsubopt
/// and exits on an unknown name (an empty one included), one its release
/// lacks, or a value it cannot take; a trailing comma ends it.
struct Suboptions<'o, 'a> {
    option: &'o Parsed<'a>,
    /// The argument as written.
    written: &'o str,
    /// The option as shown in messages (with its value when that is the
    /// next argument).
    shown: &'o str,
    at: &'o Path,
    judge: &'o Judge<'o>,
}

impl Suboptions<'_, '_> {
    fn check(&self, combined: &mut Combined, errors: &mut ErrorList) {
        let (at, written) = (self.at, self.written);
        let list = self.option.value.unwrap_or_default();
        let mut tokens: Vec<&str> = list.split(',').collect();
        if tokens.last() == Some(&"") {
            tokens.pop();
        }
        for token in tokens {
            let (name, value) = token
                .split_once('=')
                .map_or((token, None), |(name, value)| (name, Some(value)));
            let illegal = format!("Illegal suboption {token:?}");
            let message = match options::suboption(name) {
                None => format!("memcached exits on it: {illegal}"),
                Some(sub) if !sub.span.has(self.judge.release()) => {
                    self.judge.lacks(&format!("-o {name}"), sub.span, &illegal)
                }
                Some(_) => {
                    self.known(name, value, combined, errors);
                    continue;
                }
            };
            errors.push(FieldError::invalid(at.clone(), written, message));
        }
    }

    /// The sub-option `name`, which the release has, with `value`.
    fn known(
        &self,
        name: &str,
        value: Option<&str>,
        combined: &mut Combined,
        errors: &mut ErrorList,
    ) {
        let (at, written, shown) = (self.at, self.written, self.shown);
        let extra_args = memcached_options::suboption(name).map(|o| o.extra_args);
        let (rule, reason) = match extra_args.unwrap_or(ExtraArgs::Allowed) {
            ExtraArgs::Managed(instead) => ("which the operator manages", instead),
            ExtraArgs::Breaks(why) => ("which breaks the pod", why),
            ExtraArgs::Allowed => {
                if let Some(message) = values::suboption(name, value) {
                    errors.push(FieldError::invalid(
                        at.clone(),
                        shown,
                        format!("memcached exits on it: {message}"),
                    ));
                } else {
                    combined.note(name, value, at, shown);
                }
                return;
            }
        };
        errors.push(FieldError::forbidden(
            at.clone(),
            format!("{written:?} sets -o {name}, {rule}: {reason}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors of `args` for a memcached of `image`.
    fn messages_on(image: &str, args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let judge = Judge::of(image);
        validate(&args, 4, &judge, &Path::new("spec.memcached.extraArgs"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// The errors of `args` for the default image, `memcached:1.6`.
    fn messages(args: &[&str]) -> Vec<String> {
        messages_on("memcached:1.6", args)
    }

    #[test]
    fn verbosity_counts_every_v_as_memcached_does() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(verbosity(&args(&["-m", "64"])), 0);
        assert_eq!(verbosity(&args(&["-vv", "-o", "modern", "-v"])), 3);
        assert_eq!(verbosity(&args(&["-v", "--verbose"])), 2);
        // A value of another option is no flag.
        assert_eq!(verbosity(&args(&["-o", "-v"])), 0);
    }

    macro_rules! refused {
        ($($name:ident: [$($arg:expr),*] => $expected:expr;)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(messages(&[$($arg),*]), [$expected]);
            }
        )*};
    }

    macro_rules! allowed {
        ($($name:ident: [$($arg:expr),*];)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(messages(&[$($arg),*]), Vec::<String>::new());
            }
        )*};
    }

    refused! {
        memory_short: ["-m", "64"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-m" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#;
        memory_glued: ["-m64"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-m64" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#;
        memory_in_a_bundle: ["-vm64"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-vm64" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#;
        memory_long_prefix: ["--memory-l=1"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--memory-l=1" sets -m/--memory-limit, which the operator manages: set spec.memcached.maxMemoryMB instead"#;
        connections_long: ["--conn-limit", "9"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--conn-limit" sets -c/--conn-limit, which the operator manages: set spec.memcached.maxConnections instead"#;
        threads_prefix: ["--th=2"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--th=2" sets -t/--threads, which the operator manages: set spec.memcached.threads instead"#;
        item_size: ["-I2m"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-I2m" sets -I/--max-item-size, which the operator manages: set spec.memcached.maxItemSize instead"#;
        port: ["--port=1"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--port=1" sets -p/--port, which the operator manages: the port is fixed at 11211 for the probes, Service and NetworkPolicy"#;
        udp_port: ["-U", "11211"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-U" sets -U/--udp-port, which the operator manages: UDP stays disabled; clients use TCP port 11211"#;
        listen: ["--listen", "127.0.0.1"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--listen" sets -l/--listen, which the operator manages: memcached listens on all pod addresses so the Service can reach it"#;
        sasl: ["-vS"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-vS" sets -S/--enable-sasl, which the operator manages: set spec.security.sasl instead"#;
        auth_file: ["--auth-file=/x"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--auth-file=/x" sets -Y/--auth-file, which the operator manages: set spec.security.sasl instead"#;
        tls: ["-Z"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-Z" sets -Z/--enable-ssl, which the operator manages: set spec.security.tls instead"#;
        tls_suboption: ["-o", "modern,ssl_key=/k"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-o" sets -o ssl_key, which the operator manages: set spec.security.tls instead"#;
        tls_suboption_glued: ["-ossl_verify_mode=2"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-ossl_verify_mode=2" sets -o ssl_verify_mode, which the operator manages: set spec.security.tls instead"#;
        slab_chunk_max: ["--extended=slab_chunk_max=256"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--extended=slab_chunk_max=256" sets -o slab_chunk_max, which the operator manages: spec.memcached.maxItemSize is checked against memcached's default slab_chunk_max (512k); set maxItemSize to a multiple of 512k instead"#;
        user: ["-u", "root"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-u" sets -u/--user, which the operator manages: set spec.security.podSecurityContext.runAsUser or containerSecurityContext.runAsUser instead"#;
        daemon: ["--daemon"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--daemon" sets -d/--daemon, which breaks the pod: memcached must stay in the foreground as the container's main process; as a daemon the container exits"#;
        unix_socket: ["-s", "/tmp/m.sock"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-s" sets -s/--unix-socket, which breaks the pod: a UNIX socket turns TCP off, so clients, probes and the Service cannot reach memcached on port 11211"#;
        help: ["-h"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-h" sets -h/--help, which breaks the pod: memcached prints its help and exits instead of serving"#;
        version_prefix: ["--vers"] => r#"spec.memcached.extraArgs[0]: Forbidden: "--vers" sets -V/--version, which breaks the pod: memcached prints its version and exits instead of serving"#;
        memory_file: ["-e", "/cache/mem"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-e" sets -e/--memory-file, which the operator manages: set spec.warmRestart.enabled instead: the operator then mounts a memory-backed volume for the file"#;
        license: ["-i"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-i" sets -i/--license, which breaks the pod: memcached prints its license and exits instead of serving"#;
        binary_protocol: ["-B", "binary"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-B" sets -B/--protocol binary, which breaks the pod: the probes and the operator's stats client speak the ASCII protocol; use ascii or auto"#;
        unknown_protocol: ["--protocol=text"] => r#"spec.memcached.extraArgs[0]: Invalid value: "--protocol=text": memcached exits on it: Invalid value for binding protocol: text -- should be one of auto, binary, or ascii"#;
        unknown_suboption: ["-o", "bogus"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-o": memcached exits on it: Illegal suboption "bogus""#;
        empty_suboption: ["-o", "modern,,track_sizes"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-o": memcached exits on it: Illegal suboption """#;
        unknown_short: ["-vx"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-vx": memcached exits on it: invalid option -- 'x'"#;
        unknown_long: ["--foo=bar"] => r#"spec.memcached.extraArgs[0]: Invalid value: "--foo=bar": memcached exits on it: unrecognized option '--foo=bar'"#;
        ambiguous_long: ["--ver"] => r#"spec.memcached.extraArgs[0]: Invalid value: "--ver": memcached exits on it: option '--ver' is ambiguous; possibilities: '--version' '--verbose'"#;
        missing_value: ["-v", "-R"] => r#"spec.memcached.extraArgs[1]: Invalid value: "-R": memcached exits on it: option requires an argument -- 'R'"#;
        requests_per_event_zero: ["-R", "0"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-R 0": memcached exits on it: Number of requests per event must be greater than 0"#;
        requests_per_event_negative: ["-R", "-1"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-R -1": memcached exits on it: Number of requests per event must be greater than 0"#;
        growth_factor_one: ["--slab-growth-factor=1"] => r#"spec.memcached.extraArgs[0]: Invalid value: "--slab-growth-factor=1": memcached exits on it: Factor must be greater than 1"#;
        growth_factor_nan: ["-fnan"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-fnan": memcached exits on it: Floating point exception (a NaN factor crashes it)"#;
        chunk_size_not_a_number: ["-vn", "abc"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-vn abc": memcached exits on it: Chunk size must be greater than 0"#;
        empty_delimiter: ["-D", ""] => r#"spec.memcached.extraArgs[0]: Invalid value: "-D ": memcached exits on it: No delimiter specified"#;
        napi_ids: ["-N", "0"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-N 0": memcached exits on it: Maximum number of NAPI IDs must be greater than 0"#;
        suboption_value: ["-o", "modern,hot_lru_pct=90"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-o modern,hot_lru_pct=90": memcached exits on it: hot_lru_pct must be > 1 and < 80"#;
        suboption_without_value: ["-olru_crawler_sleep"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-olru_crawler_sleep": memcached exits on it: Missing lru_crawler_sleep value"#;
        lru_shares_together: ["-o", "hot_lru_pct=30", "-o", "warm_lru_pct=60"] => r#"spec.memcached.extraArgs[2]: Invalid value: "-o warm_lru_pct=60": memcached exits on it: hot_lru_pct + warm_lru_pct cannot be more than 80% combined"#;
        napi_ids_above_threads: ["-N", "5"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-N 5": memcached exits on it: Number of napi_ids(5) cannot be greater than number of threads(4)"#;
        temporary_ttl_without_maintainer: ["-o", "temporary_ttl=61", "-o", "no_modern"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-o temporary_ttl=61": memcached exits on it: temporary_ttl requires lru_maintainer to be enabled"#;
        hashpower_within_the_lock_table: ["-ohashpower=12"] => r#"spec.memcached.extraArgs[0]: Invalid value: "-ohashpower=12": memcached exits on it: Hash table power size (12) cannot be equal to or less than item lock table (12)"#;
        external_storage: ["-o", "ext_path=/data/extstore:1g"] => r#"spec.memcached.extraArgs[0]: Forbidden: "-o" sets -o ext_path, which breaks the pod: external storage needs a writable volume the operator does not mount, so memcached exits when it cannot open the file"#;
        value_for_a_flag: ["--disable-cas=yes"] => r#"spec.memcached.extraArgs[0]: Invalid value: "--disable-cas=yes": memcached exits on it: option '--disable-cas' doesn't allow an argument"#;
    }

    allowed! {
        common_tuning: ["-v", "-o", "modern", "--disable-cas", "-R", "20", "-B", "ascii"];
        suboption_values_memcached_takes: ["-o", "hot_lru_pct=40,warm_lru_pct=40,slab_sizes=48-100-200,hashpower=13,modern=x"];
        temporary_ttl_with_the_maintainer_back: ["-o", "no_modern,temporary_ttl=61,lru_maintainer", "-N", "4"];
        values_memcached_takes: ["-f1.05", "-n", "48", "-N", "1", "-b", "abc", "-a", "700"];
        values_that_look_like_flags: ["-o", "modern", "-P", "-m"];
        glued_suboptions_and_bundles: ["-oslab_reassign,lru_crawler,", "-vvLC", "-D", ":"];
        long_prefixes: ["--disable-c", "--lock", "--slab-g=1.5", "--verbose"];
        operands_and_double_dash: ["foo", "--", "-m", "1", "-d"];
        empty_list: [];
        empty_suboption_list: ["-o", ""];
    }

    macro_rules! on_release {
        ($($name:ident: $image:expr, [$($arg:expr),*] => [$($expected:expr),*];)*) => {$(
            #[test]
            fn $name() {
                let expected: Vec<&str> = vec![$($expected),*];
                assert_eq!(messages_on($image, &[$($arg),*]), expected);
            }
        )*};
    }

    on_release! {
        napi_ids_before_they_came: "memcached:1.6.8", ["-v", "-N", "1"] => [
            r#"spec.memcached.extraArgs[1]: Invalid value: "-N": -N/--napi-ids is in memcached from 1.6.9 on, and spec.image memcached:1.6.8 runs 1.6.8: memcached exits on it: invalid option -- 'N'"#
        ];
        napi_ids_long_before_they_came: "memcached:1.6.8-alpine", ["--napi-ids=1"] => [
            r#"spec.memcached.extraArgs[0]: Invalid value: "--napi-ids=1": -N/--napi-ids is in memcached from 1.6.9 on, and spec.image memcached:1.6.8-alpine runs 1.6.8: memcached exits on it: unrecognized option '--napi-ids=1'"#
        ];
        napi_ids_since_they_came: "memcached:1.6.9", ["-N", "1"] => [];
        proxy_setting_before_the_proxy_image: "memcached:1.6.18", ["-o", "modern,proxy_arg=x"] => [
            r#"spec.memcached.extraArgs[0]: Invalid value: "-o": -o proxy_arg is in memcached from 1.6.38 on, and spec.image memcached:1.6.18 runs 1.6.18: memcached exits on it: Illegal suboption "proxy_arg=x""#
        ];
        proxy_settings_of_the_proxy_image: "memcached:1.6.38", ["-o", "proxy_arg=x,proxy_uring,proxy_memprofile"] => [];
        proxy_setting_without_its_value: "memcached:1.6.45", ["-o", "proxy_arg"] => [
            r#"spec.memcached.extraArgs[0]: Invalid value: "-o proxy_arg": memcached exits on it: Segmentation fault (it needs a value)"#
        ];
        proxy_config: "memcached:1.6", ["-o", "proxy_config=/etc/proxy.lua"] => [
            r#"spec.memcached.extraArgs[0]: Forbidden: "-o" sets -o proxy_config, which breaks the pod: it makes memcached a proxy that routes requests to the pools of a Lua file the operator does not mount, so memcached exits when it cannot load the file"#
        ];
        removed_setting_on_a_floating_tag: "memcached:1.6", ["-ometa_response_old"] => [
            r#"spec.memcached.extraArgs[0]: Invalid value: "-ometa_response_old": -o meta_response_old was in memcached from 1.6.10 to 1.6.17, and spec.image memcached:1.6 is judged as 1.6.45, the newest 1.6 this policy knows: memcached exits on it: Illegal suboption "meta_response_old""#
        ];
        removed_setting_where_it_was: "memcached:1.6.17", ["-ometa_response_old"] => [];
        newer_release_judged_as_the_newest: "memcached:1.6.46", ["-ometa_response_old", "-N", "1"] => [
            r#"spec.memcached.extraArgs[0]: Invalid value: "-ometa_response_old": -o meta_response_old was in memcached from 1.6.10 to 1.6.17, and spec.image memcached:1.6.46 is judged as 1.6.45, the newest 1.6 this policy knows: memcached exits on it: Illegal suboption "meta_response_old""#
        ];
        other_series_judged_as_the_newest: "memcached:1.5.22", ["-N", "1", "-o", "proxy_arg=x"] => [];
    }

    #[test]
    fn reports_every_refused_flag_in_order() {
        assert_eq!(
            messages(&["-v", "-m", "1", "-c", "2", "-dx"])
                .iter()
                .map(|m| m.split(':').next().unwrap_or_default())
                .collect::<Vec<_>>(),
            [
                "spec.memcached.extraArgs[1]",
                "spec.memcached.extraArgs[3]",
                "spec.memcached.extraArgs[5]",
                "spec.memcached.extraArgs[5]"
            ]
        );
    }
}
