//! memcached 1.6's command-line table, one entry per option with the
//! releases of the official image (`memcached:<tag>`) that have it: its
//! getopt short options, its `long_options[]` in table order (the order
//! getopt_long lists ambiguous matches in) and its `-o` sub-options.
//!
//! Evidence: each tag's `memcached.c` (its `shortopts` string, `longopts[]`
//! and `subopts_tokens[]`) and `storage.c` (the `ext_` settings), 1.6.0 to
//! 1.6.45, built as the official image builds them (`--enable-extstore
//! --enable-tls`, and `--enable-proxy` since its 1.6.38 image, see
//! [`PROXY_IMAGES`]; `MEMCACHED_DEBUG` never, so `relaxed_privileges` is no
//! entry). `controller/tests/option_table_on_memcached.rs` checks the entries of each
//! test-bed release against that release's own binary.

use std::fmt;

/// A memcached 1.6 release, `1.6.<patch>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub u32);

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.6.{}", self.0)
    }
}

/// The oldest release the option table covers.
pub const OLDEST: Release = Release(0);
/// The newest release the option table covers: what `memcached:1.6` runs
/// today.
pub const NEWEST: Release = Release(45);

/// The releases that have an option: from `since` on, and before `until`
/// when it was removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The first release with it.
    pub since: Release,
    /// The first release without it again.
    pub until: Option<Release>,
}

impl Span {
    /// True when `release` has the option.
    pub fn has(self, release: Release) -> bool {
        self.since <= release && self.until.is_none_or(|until| release < until)
    }
}

/// In every 1.6 release.
const ALL: Span = since(0);

/// From `1.6.<patch>` on.
const fn since(patch: u32) -> Span {
    Span {
        since: Release(patch),
        until: None,
    }
}

/// The proxy's settings (`proxy_config` 1.6.13, `proxy_uring` 1.6.14,
/// `proxy_memprofile` 1.6.22, `proxy_arg` 1.6.26 in the source) are compiled
/// only with `--enable-proxy`, which the official image has since its
/// 1.6.38 build (docker-library/memcached f79bca5, "Enable built-in proxy
/// support", 2025-03-24; older tags were not rebuilt): an older image, and
/// Debian 12's 1.6.18, lack them.
const PROXY_IMAGES: Span = since(38);

/// Whether an option takes a value (`struct option.has_arg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HasArg {
    /// `no_argument`
    No,
    /// `required_argument`: glued, after `=`, or the next argument.
    Required,
    /// `optional_argument`: only glued or after `=`.
    Optional,
}

/// One short option: a letter of memcached's getopt string.
#[derive(Clone, Copy, Debug)]
pub struct ShortOption {
    /// Its letter.
    pub letter: char,
    /// Whether it takes a value (a `:` after it in the string).
    pub has_arg: HasArg,
    /// The releases that have it.
    pub span: Span,
}

const fn short(letter: char, has_arg: HasArg, span: Span) -> ShortOption {
    ShortOption {
        letter,
        has_arg,
        span,
    }
}

/// memcached's getopt string, `a:AZp:...`, letter by letter.
pub const SHORT_OPTIONS: [ShortOption; 37] = [
    short('a', HasArg::Required, ALL),
    short('A', HasArg::No, ALL),
    short('Z', HasArg::No, ALL),
    short('p', HasArg::Required, ALL),
    short('s', HasArg::Required, ALL),
    short('U', HasArg::Required, ALL),
    short('m', HasArg::Required, ALL),
    short('M', HasArg::No, ALL),
    short('c', HasArg::Required, ALL),
    short('k', HasArg::No, ALL),
    short('h', HasArg::No, ALL),
    short('i', HasArg::No, ALL),
    short('V', HasArg::No, ALL),
    short('r', HasArg::No, ALL),
    short('v', HasArg::No, ALL),
    short('d', HasArg::No, ALL),
    short('l', HasArg::Required, ALL),
    short('u', HasArg::Required, ALL),
    short('P', HasArg::Required, ALL),
    short('f', HasArg::Required, ALL),
    short('n', HasArg::Required, ALL),
    short('t', HasArg::Required, ALL),
    short('D', HasArg::Required, ALL),
    short('L', HasArg::No, ALL),
    short('R', HasArg::Required, ALL),
    short('C', HasArg::No, ALL),
    short('b', HasArg::Required, ALL),
    short('B', HasArg::Required, ALL),
    short('I', HasArg::Required, ALL),
    short('S', HasArg::No, ALL),
    short('F', HasArg::No, ALL),
    short('X', HasArg::No, ALL),
    short('W', HasArg::No, ALL),
    short('Y', HasArg::Required, ALL),
    short('e', HasArg::Required, ALL),
    short('o', HasArg::Required, ALL),
    short('N', HasArg::Required, since(9)),
];

/// One entry of `long_options[]`.
#[derive(Clone, Copy, Debug)]
pub struct LongOption {
    /// Name after `--`.
    pub name: &'static str,
    /// Whether it takes a value.
    pub has_arg: HasArg,
    /// The short option it stands for.
    pub short: char,
    /// The releases that have it.
    pub span: Span,
}

const fn long(name: &'static str, has_arg: HasArg, short: char) -> LongOption {
    long_since(name, has_arg, short, ALL)
}

const fn long_since(name: &'static str, has_arg: HasArg, short: char, span: Span) -> LongOption {
    LongOption {
        name,
        has_arg,
        short,
        span,
    }
}

/// memcached's `long_options[]`, in table order.
pub const LONG_OPTIONS: [LongOption; 36] = [
    long("unix-mask", HasArg::Required, 'a'),
    long("enable-shutdown", HasArg::No, 'A'),
    long("enable-ssl", HasArg::No, 'Z'),
    long("port", HasArg::Required, 'p'),
    long("unix-socket", HasArg::Required, 's'),
    long("udp-port", HasArg::Required, 'U'),
    long("memory-limit", HasArg::Required, 'm'),
    long("disable-evictions", HasArg::No, 'M'),
    long("conn-limit", HasArg::Required, 'c'),
    long("lock-memory", HasArg::No, 'k'),
    long("help", HasArg::No, 'h'),
    long("license", HasArg::No, 'i'),
    long("version", HasArg::No, 'V'),
    long("enable-coredumps", HasArg::No, 'r'),
    long("verbose", HasArg::Optional, 'v'),
    long("daemon", HasArg::No, 'd'),
    long("listen", HasArg::Required, 'l'),
    long("user", HasArg::Required, 'u'),
    long("pidfile", HasArg::Required, 'P'),
    long("slab-growth-factor", HasArg::Required, 'f'),
    long("slab-min-size", HasArg::Required, 'n'),
    long("threads", HasArg::Required, 't'),
    long("enable-largepages", HasArg::No, 'L'),
    long("max-reqs-per-event", HasArg::Required, 'R'),
    long("disable-cas", HasArg::No, 'C'),
    long("listen-backlog", HasArg::Required, 'b'),
    long("protocol", HasArg::Required, 'B'),
    long("max-item-size", HasArg::Required, 'I'),
    long("enable-sasl", HasArg::No, 'S'),
    long("disable-flush-all", HasArg::No, 'F'),
    long("disable-dumping", HasArg::No, 'X'),
    long("disable-watch", HasArg::No, 'W'),
    long("auth-file", HasArg::Required, 'Y'),
    long("memory-file", HasArg::Required, 'e'),
    long("extended", HasArg::Required, 'o'),
    long_since("napi-ids", HasArg::Required, 'N', since(9)),
];

/// One `-o` sub-option.
#[derive(Clone, Copy, Debug)]
pub struct Suboption {
    /// Its name, before any `=value`.
    pub name: &'static str,
    /// The releases that have it.
    pub span: Span,
}

const fn sub(name: &'static str, span: Span) -> Suboption {
    Suboption { name, span }
}

/// The `-o` sub-options of memcached 1.6 (TLS and extstore built in, the
/// proxy from its 1.6.38 image on), sorted for binary search; any other
/// makes it exit with `Illegal suboption`. `ssl_session_cache` came in
/// 1.6.3, `ssl_min_version` 1.6.11, `ext_max_sleep` 1.6.15, `ssl_kernel_tls`
/// 1.6.16, `sock_cookie_id` 1.6.17; `meta_response_old` came in 1.6.10 and
/// went in 1.6.18.
pub const SUBOPTIONS: [Suboption; 69] = [
    sub("drop_privileges", ALL),
    sub("ext_compact_under", ALL),
    sub("ext_drop_under", ALL),
    sub("ext_drop_unread", ALL),
    sub("ext_io_depth", ALL),
    sub("ext_item_age", ALL),
    sub("ext_item_size", ALL),
    sub("ext_low_ttl", ALL),
    sub("ext_max_frag", ALL),
    sub("ext_max_sleep", since(15)),
    sub("ext_page_size", ALL),
    sub("ext_path", ALL),
    sub("ext_recache_rate", ALL),
    sub("ext_threads", ALL),
    sub("ext_wbuf_size", ALL),
    sub("hash_algorithm", ALL),
    sub("hashpower", ALL),
    sub("hot_lru_pct", ALL),
    sub("hot_max_factor", ALL),
    sub("idle_timeout", ALL),
    sub("inline_ascii_resp", ALL),
    sub("lru_crawler", ALL),
    sub("lru_crawler_sleep", ALL),
    sub("lru_crawler_tocrawl", ALL),
    sub("lru_maintainer", ALL),
    sub("maxconns_fast", ALL),
    sub(
        "meta_response_old",
        Span {
            since: Release(10),
            until: Some(Release(18)),
        },
    ),
    sub("modern", ALL),
    sub("no_chunked_items", ALL),
    sub("no_drop_privileges", ALL),
    sub("no_hashexpand", ALL),
    sub("no_inline_ascii_resp", ALL),
    sub("no_lru_crawler", ALL),
    sub("no_lru_maintainer", ALL),
    sub("no_maxconns_fast", ALL),
    sub("no_modern", ALL),
    sub("no_slab_automove", ALL),
    sub("no_slab_reassign", ALL),
    sub("proxy_arg", PROXY_IMAGES),
    sub("proxy_config", PROXY_IMAGES),
    sub("proxy_memprofile", PROXY_IMAGES),
    sub("proxy_uring", PROXY_IMAGES),
    sub("read_buf_mem_limit", ALL),
    sub("resp_obj_mem_limit", ALL),
    sub("slab_automove", ALL),
    sub("slab_automove_freeratio", ALL),
    sub("slab_automove_ratio", ALL),
    sub("slab_automove_window", ALL),
    sub("slab_chunk_max", ALL),
    sub("slab_reassign", ALL),
    sub("slab_sizes", ALL),
    sub("sock_cookie_id", since(17)),
    sub("ssl_ca_cert", ALL),
    sub("ssl_chain_cert", ALL),
    sub("ssl_ciphers", ALL),
    sub("ssl_kernel_tls", since(16)),
    sub("ssl_key", ALL),
    sub("ssl_keyformat", ALL),
    sub("ssl_min_version", since(11)),
    sub("ssl_session_cache", since(3)),
    sub("ssl_verify_mode", ALL),
    sub("ssl_wbuf_size", ALL),
    sub("tail_repair_time", ALL),
    sub("temporary_ttl", ALL),
    sub("track_sizes", ALL),
    sub("warm_lru_pct", ALL),
    sub("warm_max_factor", ALL),
    sub("watcher_logbuf_size", ALL),
    sub("worker_logbuf_size", ALL),
];

/// The short option `c`, in whichever releases have it.
pub fn short_option(c: char) -> Option<&'static ShortOption> {
    SHORT_OPTIONS.iter().find(|o| o.letter == c)
}

/// The `-o` sub-option `name`, in whichever releases have it.
pub fn suboption(name: &str) -> Option<&'static Suboption> {
    SUBOPTIONS
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .map(|at| &SUBOPTIONS[at])
}

/// The long option of the short option `c`.
pub fn long_option(c: char) -> Option<&'static LongOption> {
    LONG_OPTIONS.iter().find(|o| o.short == c)
}

/// The long name of the short option `c`.
pub fn long_name(c: char) -> Option<&'static str> {
    long_option(c).map(|o| o.name)
}

/// `-m/--memory-limit`, or `-D` for a letter without a long name.
pub fn flag(c: char) -> String {
    match long_name(c) {
        Some(name) => format!("-{c}/--{name}"),
        None => format!("-{c}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suboptions_are_sorted_and_unique() {
        assert!(SUBOPTIONS.windows(2).all(|w| w[0].name < w[1].name));
        assert!(suboption("modern").is_some() && suboption("ssl_key").is_some());
        assert!(suboption("bogus").is_none() && suboption("relaxed_privileges").is_none());
    }

    #[test]
    fn every_letter_once_and_every_long_option_a_letters() {
        for (i, option) in SHORT_OPTIONS.iter().enumerate() {
            assert!(
                SHORT_OPTIONS[i + 1..]
                    .iter()
                    .all(|o| o.letter != option.letter),
                "-{}",
                option.letter
            );
        }
        for option in LONG_OPTIONS {
            let short = short_option(option.short).expect(option.name);
            assert_eq!(
                short.has_arg == HasArg::Required,
                option.has_arg == HasArg::Required,
                "--{}",
                option.name
            );
        }
    }

    #[test]
    fn short_options_with_values() {
        let has_arg = |c| short_option(c).map(|o| o.has_arg);
        assert_eq!(has_arg('m'), Some(HasArg::Required));
        assert_eq!(has_arg('v'), Some(HasArg::No));
        assert_eq!(has_arg('X'), Some(HasArg::No));
        assert_eq!(has_arg('N'), Some(HasArg::Required));
        assert_eq!(has_arg(':'), None);
        assert_eq!(has_arg('q'), None);
    }

    #[test]
    fn spans_hold_from_since_to_before_until() {
        let napi = short_option('N').unwrap().span;
        assert!(!napi.has(Release(8)) && napi.has(Release(9)) && napi.has(Release(45)));
        let old = suboption("meta_response_old").unwrap().span;
        assert!(!old.has(Release(9)) && old.has(Release(10)) && old.has(Release(17)));
        assert!(!old.has(Release(18)));
        assert!(ALL.has(Release(0)) && ALL.has(Release(u32::MAX)));
    }
}
