//! The memcached options the operator has a say in, one row each: the spec
//! field that sets it and its default, whether `spec.memcached.extraArgs` may
//! set it (and why not), and whether it is part of the memory geometry a warm
//! restart needs unchanged. Defaulting ([`crate::defaults`]), the schema
//! checks of `spec.memcached` ([`crate::validation`]), the `extraArgs` rules
//! ([`crate::extra_args`]), what a saved memory file restores into
//! ([`crate::extra_args::memory_file`]) and the restart classification
//! ([`crate::render::changes`]) read it; so can a builder of memcached's command
//! line ([`MemcachedOption::args`], [`spec_args`]).
//!
//! A new parameter of `spec.memcached` is its field in [`MemcachedConfig`]
//! (with its doc comment and schema bound), and its row here: the table's
//! lengths, [`SPEC_FIELDS`] and the rows' names are derived from the rows.
//! A field of `MemcachedConfig` without a row fails this module's tests,
//! naming the field.

use std::fmt;
use std::ops::RangeInclusive;

use serde::Serialize;

// The rows name their bounds `types::...`: a new row needs no new import.
use crate::types::{self, ITEM_SIZE_PATTERN, MemcachedConfig};

/// memcached 1.6's default `slab_chunk_max` (half its 1m slab page): `-I`
/// must be a multiple of it (`-I 700k` exits with code 64; so do 1k and 511k),
/// and `-n` at most it.
pub const SLAB_CHUNK_MAX: u64 = 512 * 1024;
/// memcached refuses items larger than a gigabyte (`-I`).
pub const MAX_ITEM_SIZE_BYTES: u64 = 1024 * 1024 * 1024;

/// The value of a memcached parameter of the spec (in JSON as written).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Setting<'a> {
    /// A number (`maxMemoryMB`).
    Int(i32),
    /// A text (`maxItemSize`).
    Text(&'a str),
}

impl fmt::Display for Setting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Int(n) => write!(f, "{n}"),
            Setting::Text(s) => f.write_str(s),
        }
    }
}

/// What the CRD schema allows of a parameter (the API server checks it too).
#[derive(Clone, Copy, Debug)]
pub enum Schema {
    /// `minimum` and `maximum`.
    Range(&'static RangeInclusive<i32>),
    /// `pattern`, and a test of it.
    Pattern(&'static str, fn(&str) -> bool),
}

/// How a value becomes arguments of memcached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Render {
    /// The flag, then the value as the next argument: `-m 64`.
    Valued,
    /// The flag's letter repeated value times in one argument, nothing for
    /// 0: `-v`, `-vv`.
    Repeated,
}

/// A field of `spec.memcached` that sets the option of its row.
#[derive(Clone, Copy)]
pub struct SpecField {
    /// Its name under `spec.memcached`.
    pub name: &'static str,
    /// Its path under `spec`: `memcached.<name>`.
    pub key: &'static str,
    /// Its default, filled in when absent.
    pub default: Setting<'static>,
    /// The schema's bound.
    pub schema: Schema,
    /// How memcached gets its value.
    pub render: Render,
    get: fn(&MemcachedConfig) -> Option<Setting<'_>>,
    slot: fn(&mut MemcachedConfig) -> Slot<'_>,
}

/// Where a field's value is kept.
enum Slot<'a> {
    Int(&'a mut Option<i32>),
    Text(&'a mut Option<String>),
}

impl SpecField {
    /// The field's value in `config`, when set.
    pub fn get<'a>(&self, config: &'a MemcachedConfig) -> Option<Setting<'a>> {
        (self.get)(config)
    }

    /// Set the field to its default when absent.
    pub fn fill(&self, config: &mut MemcachedConfig) {
        match ((self.slot)(config), self.default) {
            (Slot::Int(value), Setting::Int(default)) => {
                value.get_or_insert(default);
            }
            (Slot::Text(value), Setting::Text(default)) => {
                value.get_or_insert_with(|| default.to_string());
            }
            // A row whose default has another type than its field: the
            // table's test refuses it.
            _ => {}
        }
    }

    /// Unset the field in `after` when `before` holds the same value.
    pub fn unset_if_same(&self, before: &MemcachedConfig, after: &mut MemcachedConfig) {
        if self.get(before) != self.get(after) {
            return;
        }
        match (self.slot)(after) {
            Slot::Int(value) => *value = None,
            Slot::Text(value) => *value = None,
        }
    }

    /// The field's value in `config`, or its default.
    pub fn value<'a>(&self, config: &'a MemcachedConfig) -> Setting<'a> {
        self.get(config).unwrap_or(self.default)
    }

    /// `spec.memcached.<name>`.
    pub fn path(&self) -> String {
        format!("spec.{}", self.key)
    }
}

impl fmt::Debug for SpecField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpecField")
            .field("name", &self.name)
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

/// The accessors of a field of [`MemcachedConfig`]: `access!(get threads, Int)`.
macro_rules! access {
    (get $field:ident, Int) => {
        |c| c.$field.map(Setting::Int)
    };
    (get $field:ident, Text) => {
        |c| c.$field.as_deref().map(Setting::Text)
    };
    (slot $field:ident, $kind:ident) => {
        |c| Slot::$kind(&mut c.$field)
    };
}

/// A row's [`SpecField`]: `field!(threads: Int = 4, "threads", Range(&types::THREADS_BOUNDS), Valued)`.
macro_rules! field {
    ($field:ident: $kind:ident = $default:expr, $name:literal, $schema:expr, $render:ident) => {
        Some(SpecField {
            name: $name,
            key: concat!("memcached.", $name),
            default: Setting::$kind($default),
            schema: $schema,
            render: Render::$render,
            get: access!(get $field, $kind),
            slot: access!(slot $field, $kind),
        })
    };
}

/// An option of memcached's command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// A short option (its long form is the same option): `-m`, `--memory-limit`.
    Short(char),
    /// A sub-option of `-o`: `-o slab_chunk_max=...`.
    Sub(&'static str),
    /// Every sub-option of `-o` with this prefix: `ssl_`.
    SubPrefix(&'static str),
}

/// What `spec.memcached.extraArgs` may do with an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtraArgs {
    /// Set it as written.
    Allowed,
    /// Not set it: the operator sets it (from the row's field, another part
    /// of the spec) or fixes it; what to do instead.
    Managed(&'static str),
    /// Not set it: it stops memcached from serving in a pod; why.
    Breaks(&'static str),
}

/// One memcached option the operator has a say in.
#[derive(Clone, Copy, Debug)]
pub struct MemcachedOption {
    /// The option.
    pub option: Opt,
    /// The field of `spec.memcached` that sets it, if one does.
    pub field: Option<SpecField>,
    /// What `extraArgs` may do with it.
    pub extra_args: ExtraArgs,
    /// memcached records it in a memory file's `.meta` (`_mc_meta_load_cb`
    /// in memcached.c: `maxbytes`, `chunk_size`, `item_size_max`,
    /// `slab_chunk_size_max`, `slab_page_size`, `slab_config`, `use_cas`,
    /// `slab_reassign`) and restores a save only into the same values: a
    /// change starts memcached cold, even with warm restarts.
    pub geometry: bool,
}

impl MemcachedOption {
    /// Push the arguments that give memcached the value `config` has for
    /// this row's field (its default when absent) onto `args`: `-m 64`,
    /// `-vv`; none for a row without a field, or a repeated flag at 0.
    pub fn push_args(&self, config: &MemcachedConfig, args: &mut Vec<String>) {
        let (Some(field), Opt::Short(flag)) = (&self.field, self.option) else {
            return;
        };
        let repeats = match (field.render, field.value(config)) {
            (Render::Valued, _) => 1,
            (Render::Repeated, Setting::Int(n)) if n > 0 => n.unsigned_abs() as usize,
            (Render::Repeated, _) => return,
        };
        let mut option = String::with_capacity(1 + repeats);
        option.push('-');
        option.extend(std::iter::repeat_n(flag, repeats));
        args.push(option);
        if field.render == Render::Valued {
            args.push(field.value(config).to_string());
        }
    }
}

/// A row without a field.
const fn row(option: Opt, extra_args: ExtraArgs, geometry: bool) -> MemcachedOption {
    MemcachedOption {
        option,
        field: None,
        extra_args,
        geometry,
    }
}

use ExtraArgs::{Allowed, Breaks, Managed};
use Opt::{Short, Sub, SubPrefix};
use Schema::{Pattern, Range};

/// Every option the operator has a say in. The rows with a field come first,
/// in the order of memcached's command line and of their checks.
pub const OPTIONS: &[MemcachedOption] = &[
    MemcachedOption {
        option: Short('m'),
        field: field!(max_memory_mb: Int = 64, "maxMemoryMB", Range(&types::MAX_MEMORY_MB_BOUNDS), Valued),
        extra_args: Managed("set spec.memcached.maxMemoryMB instead"),
        geometry: true,
    },
    MemcachedOption {
        option: Short('c'),
        field: field!(max_connections: Int = 1024, "maxConnections", Range(&types::MAX_CONNECTIONS_BOUNDS), Valued),
        extra_args: Managed("set spec.memcached.maxConnections instead"),
        geometry: false,
    },
    MemcachedOption {
        option: Short('t'),
        field: field!(threads: Int = 4, "threads", Range(&types::THREADS_BOUNDS), Valued),
        extra_args: Managed("set spec.memcached.threads instead"),
        geometry: false,
    },
    MemcachedOption {
        option: Short('I'),
        field: field!(max_item_size: Text = "1m", "maxItemSize", Pattern(ITEM_SIZE_PATTERN, is_item_size), Valued),
        extra_args: Managed("set spec.memcached.maxItemSize instead"),
        geometry: true,
    },
    MemcachedOption {
        option: Short('v'),
        field: field!(verbosity: Int = 0, "verbosity", Range(&types::VERBOSITY_BOUNDS), Repeated),
        extra_args: Allowed,
        geometry: false,
    },
    row(
        Short('e'),
        Managed(
            "set spec.warmRestart.enabled instead: the operator then mounts a memory-backed volume for the file",
        ),
        true,
    ),
    row(
        Short('p'),
        Managed("the port is fixed at 11211 for the probes, Service and NetworkPolicy"),
        false,
    ),
    row(
        Short('U'),
        Managed("UDP stays disabled; clients use TCP port 11211"),
        false,
    ),
    row(
        Short('l'),
        Managed("memcached listens on all pod addresses so the Service can reach it"),
        false,
    ),
    row(Short('S'), Managed("set spec.security.sasl instead"), false),
    row(Short('Y'), Managed("set spec.security.sasl instead"), false),
    row(Short('Z'), Managed("set spec.security.tls instead"), false),
    row(
        Short('u'),
        Managed(
            "set spec.security.podSecurityContext.runAsUser or containerSecurityContext.runAsUser instead",
        ),
        false,
    ),
    row(
        Short('s'),
        Breaks(
            "a UNIX socket turns TCP off, so clients, probes and the Service cannot reach memcached on port 11211",
        ),
        false,
    ),
    row(
        Short('d'),
        Breaks(
            "memcached must stay in the foreground as the container's main process; as a daemon the container exits",
        ),
        false,
    ),
    row(
        Short('h'),
        Breaks("memcached prints its help and exits instead of serving"),
        false,
    ),
    row(
        Short('V'),
        Breaks("memcached prints its version and exits instead of serving"),
        false,
    ),
    row(
        Short('i'),
        Breaks("memcached prints its license and exits instead of serving"),
        false,
    ),
    // The chunk size, the growth factor and CAS shape the slabs.
    row(Short('n'), Allowed, true),
    row(Short('f'), Allowed, true),
    row(Short('C'), Allowed, true),
    row(
        SubPrefix("ssl_"),
        Managed("set spec.security.tls instead"),
        false,
    ),
    row(
        Sub("slab_chunk_max"),
        Managed(
            "spec.memcached.maxItemSize is checked against memcached's default slab_chunk_max (512k); \
             set maxItemSize to a multiple of 512k instead",
        ),
        true,
    ),
    // extstore never restores a memory file at all.
    row(
        Sub("ext_path"),
        Breaks(
            "external storage needs a writable volume the operator does not mount, so memcached exits \
             when it cannot open the file",
        ),
        true,
    ),
    // The proxy, from the 1.6.38 image on.
    row(
        Sub("proxy_config"),
        Breaks(
            "it makes memcached a proxy that routes requests to the pools of a Lua file the operator does \
             not mount, so memcached exits when it cannot load the file",
        ),
        false,
    ),
    row(Sub("slab_sizes"), Allowed, true),
    row(Sub("no_chunked_items"), Allowed, true),
    row(Sub("slab_reassign"), Allowed, true),
    row(Sub("no_slab_reassign"), Allowed, true),
    // `no_modern` turns slab_reassign off; `worker_logbuf_size` falls
    // through into `slab_sizes` in memcached 1.6.18 to 1.6.39.
    row(Sub("no_modern"), Allowed, true),
    row(Sub("worker_logbuf_size"), Allowed, true),
];

/// [`ITEM_SIZE_PATTERN`]: `^[0-9]+(k|m)$`.
pub fn is_item_size(s: &str) -> bool {
    s.strip_suffix(['k', 'm'])
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// How many rows of [`OPTIONS`], from the first, have a field; no row after
/// them has one (the build fails otherwise).
const FIELD_ROWS: usize = {
    let mut n = 0;
    while n < OPTIONS.len() && OPTIONS[n].field.is_some() {
        n += 1;
    }
    let mut rest = n;
    while rest < OPTIONS.len() {
        assert!(
            OPTIONS[rest].field.is_none(),
            "the rows with a field come first in OPTIONS"
        );
        rest += 1;
    }
    n
};

/// The rows of [`OPTIONS`] set by a field of `spec.memcached`, in order.
/// Every field of [`MemcachedConfig`] but `extraArgs` has one (the tests
/// name a field without).
pub const SPEC_FIELDS: [&MemcachedOption; FIELD_ROWS] = {
    let mut rows = [&OPTIONS[0]; FIELD_ROWS];
    let mut i = 0;
    while i < FIELD_ROWS {
        rows[i] = &OPTIONS[i];
        i += 1;
    }
    rows
};

/// The row of the field `name` of `spec.memcached`; a name without a row
/// does not compile where a constant is defined with it.
const fn spec_field(name: &str) -> &'static MemcachedOption {
    let mut i = 0;
    while i < FIELD_ROWS {
        if let Some(field) = &OPTIONS[i].field
            && same(field.name, name)
        {
            return &OPTIONS[i];
        }
        i += 1;
    }
    panic!("no row of OPTIONS has this field")
}

/// `a == b`, in a constant.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `spec.memcached.maxMemoryMB`'s row.
pub const MAX_MEMORY_MB: &MemcachedOption = spec_field("maxMemoryMB");
/// `spec.memcached.maxConnections`'s row.
pub const MAX_CONNECTIONS: &MemcachedOption = spec_field("maxConnections");
/// `spec.memcached.threads`'s row.
pub const THREADS: &MemcachedOption = spec_field("threads");
/// `spec.memcached.maxItemSize`'s row.
pub const MAX_ITEM_SIZE: &MemcachedOption = spec_field("maxItemSize");
/// `spec.memcached.verbosity`'s row.
pub const VERBOSITY: &MemcachedOption = spec_field("verbosity");

/// The row of the short option `c`.
pub fn short(c: char) -> Option<&'static MemcachedOption> {
    OPTIONS.iter().find(|o| o.option == Short(c))
}

/// The row of the `-o` sub-option `name`.
pub fn suboption(name: &str) -> Option<&'static MemcachedOption> {
    OPTIONS.iter().find(|o| match o.option {
        Sub(sub) => sub == name,
        SubPrefix(prefix) => name.starts_with(prefix),
        Short(_) => false,
    })
}

/// The arguments the fields of `config` rendered as `render` give memcached,
/// in the table's order: `-m 64 -c 1024 -t 4 -I 1m` ([`Render::Valued`]),
/// `-v`/`-vv` ([`Render::Repeated`]).
pub fn spec_args(config: &MemcachedConfig, render: Render) -> Vec<String> {
    let mut args = Vec::with_capacity(2 * SPEC_FIELDS.len());
    for option in SPEC_FIELDS {
        if option.field.is_some_and(|f| f.render == render) {
            option.push_args(config, &mut args);
        }
    }
    args
}

/// memcached's arguments from `config` alone: its fields' ([`spec_args`])
/// and `extraArgs`; the rest of the spec adds the memory file, SASL and TLS,
/// which shape no slab.
pub fn config_args(config: &MemcachedConfig) -> Vec<String> {
    let mut args = spec_args(config, Render::Valued);
    args.extend(spec_args(config, Render::Repeated));
    args.extend(config.extra_args.iter().flatten().cloned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extra_args::options;

    #[test]
    fn the_field_rows_come_first_and_their_defaults_fit_their_fields() {
        for (i, option) in OPTIONS.iter().enumerate() {
            assert_eq!(option.field.is_some(), i < SPEC_FIELDS.len(), "{option:?}");
        }
        let mut config = MemcachedConfig::default();
        for option in SPEC_FIELDS {
            let field = option.field.as_ref().unwrap();
            field.fill(&mut config);
            assert_eq!(field.get(&config), Some(field.default), "{}", field.name);
            if let Managed(instead) = option.extra_args {
                assert_eq!(instead, format!("set {} instead", field.path()));
            }
        }
    }

    /// Every field of [`MemcachedConfig`] but `extraArgs` has its row: with
    /// every row's field filled, no field is left `None`. (A row under
    /// another name than its field's on the wire fails
    /// `controller/tests/crd.rs`, which finds no description of it.)
    #[test]
    fn every_field_of_the_config_has_its_row() {
        let mut config = MemcachedConfig {
            extra_args: Some(Vec::new()),
            ..MemcachedConfig::default()
        };
        for option in SPEC_FIELDS {
            option.field.unwrap().fill(&mut config);
        }
        let shown = format!("{config:#?}");
        let without: Vec<&str> = (shown.lines())
            .filter_map(|line| line.trim().strip_suffix(": None,"))
            .collect();
        assert!(
            without.is_empty(),
            "fields of MemcachedConfig without a row in OPTIONS: {without:?}"
        );
    }

    #[test]
    fn every_row_is_an_option_memcached_has() {
        for option in OPTIONS {
            match option.option {
                Short(c) => assert!(options::short_option(c).is_some(), "-{c}"),
                Sub(name) => assert!(options::suboption(name).is_some(), "-o {name}"),
                SubPrefix(prefix) => assert!(
                    options::SUBOPTIONS
                        .iter()
                        .any(|s| s.name.starts_with(prefix)),
                    "-o {prefix}*"
                ),
            }
        }
    }

    #[test]
    fn the_args_of_the_fields_are_what_memcached_reads() {
        let config: MemcachedConfig =
            serde_json::from_value(serde_json::json!({"maxMemoryMB": 256, "verbosity": 2}))
                .unwrap();
        assert_eq!(
            spec_args(&config, Render::Valued),
            ["-m", "256", "-c", "1024", "-t", "4", "-I", "1m"]
        );
        assert_eq!(spec_args(&config, Render::Repeated), ["-vv"]);
        let args = |option: &MemcachedOption, config: &MemcachedConfig| {
            let mut args = Vec::new();
            option.push_args(config, &mut args);
            args
        };
        assert!(args(VERBOSITY, &MemcachedConfig::default()).is_empty());
        assert!(args(short('e').unwrap(), &config).is_empty());
        assert_eq!(
            suboption("ssl_key").map(|o| o.option),
            Some(SubPrefix("ssl_"))
        );
        assert!(suboption("modern").is_none());
    }
}
