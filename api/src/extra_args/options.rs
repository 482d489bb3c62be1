//! memcached 1.6.18's command-line table, as compiled into Debian's binary:
//! its getopt short-option string, its `long_options[]` in table order (the
//! order getopt_long lists ambiguous matches in) and its `-o` sub-options.
//! `controller/tests/args_on_memcached.rs` checks every entry against the
//! installed memcached.

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

/// memcached's getopt string: a letter followed by `:` takes a value.
pub const SHORT_OPTIONS: &str = "a:AZp:s:U:m:Mc:khiVrvdl:u:P:f:n:t:D:LR:Cb:B:I:SFXWY:e:o:N:";

/// One entry of `long_options[]`.
#[derive(Clone, Copy, Debug)]
pub struct LongOption {
    /// Name after `--`.
    pub name: &'static str,
    /// Whether it takes a value.
    pub has_arg: HasArg,
    /// The short option it stands for.
    pub short: char,
}

const fn long(name: &'static str, has_arg: HasArg, short: char) -> LongOption {
    LongOption {
        name,
        has_arg,
        short,
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
    long("napi-ids", HasArg::Required, 'N'),
];

/// The `-o` sub-options memcached 1.6.18 (TLS and extstore built in) knows,
/// sorted for binary search; any other makes it exit with `Illegal suboption`.
pub const SUBOPTIONS: [&str; 64] = [
    "drop_privileges",
    "ext_compact_under",
    "ext_drop_under",
    "ext_drop_unread",
    "ext_io_depth",
    "ext_item_age",
    "ext_item_size",
    "ext_low_ttl",
    "ext_max_frag",
    "ext_max_sleep",
    "ext_page_size",
    "ext_path",
    "ext_recache_rate",
    "ext_threads",
    "ext_wbuf_size",
    "hash_algorithm",
    "hashpower",
    "hot_lru_pct",
    "hot_max_factor",
    "idle_timeout",
    "inline_ascii_resp",
    "lru_crawler",
    "lru_crawler_sleep",
    "lru_crawler_tocrawl",
    "lru_maintainer",
    "maxconns_fast",
    "modern",
    "no_chunked_items",
    "no_drop_privileges",
    "no_hashexpand",
    "no_inline_ascii_resp",
    "no_lru_crawler",
    "no_lru_maintainer",
    "no_maxconns_fast",
    "no_modern",
    "no_slab_automove",
    "no_slab_reassign",
    "read_buf_mem_limit",
    "resp_obj_mem_limit",
    "slab_automove",
    "slab_automove_freeratio",
    "slab_automove_ratio",
    "slab_automove_window",
    "slab_chunk_max",
    "slab_reassign",
    "slab_sizes",
    "sock_cookie_id",
    "ssl_ca_cert",
    "ssl_chain_cert",
    "ssl_ciphers",
    "ssl_kernel_tls",
    "ssl_key",
    "ssl_keyformat",
    "ssl_min_version",
    "ssl_session_cache",
    "ssl_verify_mode",
    "ssl_wbuf_size",
    "tail_repair_time",
    "temporary_ttl",
    "track_sizes",
    "warm_lru_pct",
    "warm_max_factor",
    "watcher_logbuf_size",
    "worker_logbuf_size",
];

/// Whether the short option `c` exists, and whether it takes a value.
pub fn short_option(c: char) -> Option<HasArg> {
    if c == ':' {
        return None;
    }
    let at = SHORT_OPTIONS.find(c)?;
    let takes_value = SHORT_OPTIONS[at + c.len_utf8()..].starts_with(':');
    Some(if takes_value {
        HasArg::Required
    } else {
        HasArg::No
    })
}

/// True when memcached knows the `-o` sub-option `name`.
pub fn is_suboption(name: &str) -> bool {
    SUBOPTIONS.binary_search(&name).is_ok()
}

/// The long name of the short option `c`.
pub fn long_name(c: char) -> Option<&'static str> {
    LONG_OPTIONS.iter().find(|o| o.short == c).map(|o| o.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suboptions_are_sorted_and_unique() {
        assert!(SUBOPTIONS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_suboption("modern") && is_suboption("ssl_key") && !is_suboption("bogus"));
    }

    #[test]
    fn short_options_with_values() {
        assert_eq!(short_option('m'), Some(HasArg::Required));
        assert_eq!(short_option('v'), Some(HasArg::No));
        assert_eq!(short_option('X'), Some(HasArg::No));
        assert_eq!(short_option('N'), Some(HasArg::Required));
        assert_eq!(short_option(':'), None);
        assert_eq!(short_option('q'), None);
    }
}
