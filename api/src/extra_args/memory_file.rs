//! What memcached 1.6 compares when it restores a saved memory file (`-e`,
//! warm restarts): the memory geometry its `.meta` file records
//! (`_mc_meta_load_cb` in memcached.c: `maxbytes`, `chunk_size`,
//! `item_size_max`, `slab_chunk_size_max`, `slab_page_size`, `slab_config`,
//! `use_cas`, `slab_reassign`). A start whose options give another geometry
//! starts cold; every other option may change across a warm restart. Which
//! options are part of it is [`crate::memcached_options`]'s `geometry`.
//!
//! The same geometry decides how much memory memcached needs to start with a
//! memory file: [`minimum_memory_mb`].

use super::getopt::parse;
use super::values::{atof, atoi, strtoul};
use crate::memcached_options::{self, MAX_ITEM_SIZE, MAX_MEMORY_MB, Setting};
use crate::types::MemcachedConfig;

/// The options of `args` that decide whether a saved memory file restores,
/// as written and in order: two argument lists with the same geometry
/// restore each other's saves.
pub fn geometry(args: &[String]) -> Vec<String> {
    let (options, _) = parse(args);
    let mut geometry = Vec::new();
    for option in options {
        let value = option.value.unwrap_or_default();
        if memcached_options::short(option.short).is_some_and(|o| o.geometry) {
            geometry.push(format!("-{}{value}", option.short));
        } else if option.short == 'o' {
            let suboptions = value.split(',');
            geometry.extend(
                suboptions
                    .filter(|s| memcached_options::suboption(name(s)).is_some_and(|o| o.geometry))
                    .map(String::from),
            );
        }
    }
    geometry
}

/// The name of a `-o` sub-option (`name=value` or `name`).
fn name(suboption: &str) -> &str {
    suboption.split_once('=').map_or(suboption, |(n, _)| n)
}

/// memcached's slab page (`slab_page_size`, 1 MB): what it hands a slab class.
const SLAB_PAGE_SIZE: u64 = 1024 * 1024;
/// `sizeof(item)` on 64-bit: the smallest chunk is this plus `-n`.
const ITEM_HEADER: u32 = 48;
/// Every chunk size and allocation is rounded up to a multiple of this.
const CHUNK_ALIGN_BYTES: u64 = 8;
/// `MAX_NUMBER_OF_SLAB_CLASSES - 1`: the largest slab class id.
const LARGEST_CLASS: usize = 63;

/// The smallest `-m` (in MB) memcached starts with when it runs `args` with
/// a memory file (`-e`, warm restarts): from 1.6.18 to 1.6.45 it then
/// preallocates a slab page for every slab class (`slabs_preallocate` in
/// slabs.c) out of the `-m` megabytes the file holds, and with less exits:
/// `Error while preallocating slab memory! If using -L or other prealloc
/// options, max memory must be at least N megabytes.`
///
/// The classes are those `slabs_init` builds: chunk sizes from `48 + -n`
/// growing by `-f` (each rounded up to 8 bytes) while below
/// `slab_chunk_max / -f`, or the `-o slab_sizes` list, then one of
/// `slab_chunk_max` (512k; the 1 MB page with `-o no_chunked_items` or
/// `no_modern` when `-I` is at most 1m), at most 63 classes. Each takes a
/// whole page, unless slab reassignment is off (`no_slab_reassign`,
/// `no_modern`) and `slab_chunk_max` is the page, when it takes its chunks
/// only. With the defaults (`-I 1m`) that is 39 classes: 39 MB.
///
/// A `worker_logbuf_size` is also read as a `slab_sizes` list by memcached
/// 1.6.18 to 1.6.39 and not after: the larger of the two answers is given.
/// Arguments memcached exits on before it preallocates are not judged here.
pub fn minimum_memory_mb(args: &[String]) -> i32 {
    Slabs::default().read(args).minimum_mb()
}

/// A `spec.memcached` whose `maxMemoryMB` is below the [`minimum_memory_mb`]
/// of its args: with warm restarts memcached exits at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShortOfMemory {
    /// `maxMemoryMB`, or its default.
    pub max_memory_mb: i32,
    /// The least memcached starts with a memory file.
    pub minimum_mb: i32,
}

impl ShortOfMemory {
    /// `config`'s shortfall, if its memory is too little for warm restarts.
    pub fn of(config: &MemcachedConfig) -> Option<Self> {
        let Setting::Int(max_memory_mb) = MAX_MEMORY_MB.field?.value(config) else {
            return None;
        };
        let minimum_mb = Slabs::of(config).minimum_mb();
        (max_memory_mb < minimum_mb).then_some(ShortOfMemory {
            max_memory_mb,
            minimum_mb,
        })
    }

    /// Why warm restarts cannot run, for an error or a warning.
    pub fn reason(&self) -> String {
        format!(
            "warm restarts preallocate one 1 MB page per slab class: memcached needs at least {} for this \
             geometry (spec.memcached.maxItemSize and the slab options of extraArgs) and exits with \
             \"Error while preallocating slab memory!\"",
            self.minimum_mb
        )
    }
}

/// What shapes memcached's slab classes, as it reads its command line.
struct Slabs<'a> {
    /// `-f`.
    factor: f64,
    /// `-n`.
    chunk_size: i32,
    /// `-I`, in bytes.
    item_size_max: i64,
    /// `slab_chunk_size_max`: the largest chunk, the size of the last class.
    chunk_max: i64,
    /// Set by `-o slab_chunk_max`.
    chunk_max_set: bool,
    /// `slab_reassign`, on by default.
    reassign: bool,
    /// The `slab_sizes` list as memcached 1.6.18 reads it (a
    /// `worker_logbuf_size` falls through into it) and as 1.6.40 on do.
    sizes: [Option<&'a str>; 2],
}

impl Default for Slabs<'_> {
    /// memcached's defaults.
    fn default() -> Self {
        Slabs {
            factor: 1.25,
            chunk_size: 48,
            item_size_max: 1024 * 1024,
            chunk_max: (SLAB_PAGE_SIZE / 2) as i64,
            chunk_max_set: false,
            reassign: true,
            sizes: [None; 2],
        }
    }
}

impl<'a> Slabs<'a> {
    /// The least `-m` these slab classes start with ([`minimum_memory_mb`]).
    fn minimum_mb(&self) -> i32 {
        let [first, second] = self.sizes;
        let mut bytes = self.preallocated(first);
        // The two readings agree unless a `worker_logbuf_size` was given.
        if second != first {
            bytes = bytes.max(self.preallocated(second));
        }
        let mb = bytes.div_ceil(SLAB_PAGE_SIZE);
        i32::try_from(mb).unwrap_or(i32::MAX)
    }

    /// The slab classes of `config`'s args ([`config_args`]) without
    /// rendering them: of the fields' args only `-I` shapes a slab class,
    /// and `extraArgs` come after them.
    fn of(config: &'a MemcachedConfig) -> Self {
        let mut slabs = Slabs::default();
        if let Some(Setting::Text(size)) = MAX_ITEM_SIZE.field.map(|f| f.value(config)) {
            slabs.item_size_max = item_size(size);
        }
        slabs.read(config.extra_args.as_deref().unwrap_or_default())
    }

    /// These classes with `args` read over them, as memcached reads its
    /// command line.
    fn read(self, args: &'a [String]) -> Self {
        let mut slabs = self;
        let (options, _) = parse(args);
        for option in options {
            let value = option.value.unwrap_or_default();
            match option.short {
                'f' => slabs.factor = atof(value),
                'n' => slabs.chunk_size = atoi(value),
                'I' => slabs.item_size_max = item_size(value),
                'o' => value.split(',').for_each(|s| slabs.suboption(s)),
                _ => {}
            }
        }
        // Above 1m, -I puts back the default slab_chunk_max.
        if slabs.item_size_max > 1024 * 1024 && !slabs.chunk_max_set {
            slabs.chunk_max = (SLAB_PAGE_SIZE / 2) as i64;
        }
        slabs
    }

    fn suboption(&mut self, suboption: &'a str) {
        let value = suboption.split_once('=').map(|(_, v)| v);
        match name(suboption) {
            "slab_chunk_max" => {
                self.chunk_max = value.and_then(strtoul).map_or(0, |v| v as i64);
                self.chunk_max_set = true;
            }
            "no_chunked_items" => self.chunk_max = SLAB_PAGE_SIZE as i64,
            "slab_reassign" => self.reassign = true,
            "no_slab_reassign" => self.reassign = false,
            "no_modern" => {
                if !self.chunk_max_set {
                    self.chunk_max = SLAB_PAGE_SIZE as i64;
                }
                self.reassign = false;
            }
            "slab_sizes" => self.sizes = [value; 2],
            "worker_logbuf_size" => self.sizes[0] = value,
            _ => {}
        }
    }

    /// The chunk size of every slab class, from `slabs_init`: `list` (a
    /// `slab_sizes` value) or the growth factor's, then `slab_chunk_max`.
    fn classes(&self, list: Option<&str>) -> Vec<u64> {
        let mut sizes = Vec::with_capacity(LARGEST_CLASS);
        if let Some(list) = list {
            let listed = list.split('-').filter(|p| !p.is_empty());
            let listed = listed.map_while(|p| strtoul(p).map(|v| v & u64::from(u32::MAX)));
            sizes.extend(listed.take_while(|s| *s != 0).map(align));
        } else {
            // C's `unsigned int`: `sizeof(item) + settings.chunk_size`.
            let mut size = ITEM_HEADER.wrapping_add(self.chunk_size as u32);
            while sizes.len() < LARGEST_CLASS - 1
                && f64::from(size) < self.chunk_max as f64 / self.factor
            {
                let aligned = align(u64::from(size));
                sizes.push(aligned);
                // C converts the product back to `unsigned int`, truncating.
                size = (aligned as f64 * self.factor) as u32;
            }
        }
        sizes.truncate(LARGEST_CLASS - 1);
        sizes.push(u64::try_from(self.chunk_max).unwrap_or_default());
        sizes
    }

    /// The bytes preallocated for the classes of `list` (`do_slabs_newslab`).
    fn preallocated(&self, list: Option<&str>) -> u64 {
        let whole_pages = self.reassign || self.chunk_max != SLAB_PAGE_SIZE as i64;
        let page = |size: u64| {
            if whole_pages {
                SLAB_PAGE_SIZE
            } else {
                align(size * (SLAB_PAGE_SIZE / size.max(1)))
            }
        };
        self.classes(list).into_iter().map(page).sum()
    }
}

/// `size` rounded up to [`CHUNK_ALIGN_BYTES`].
fn align(size: u64) -> u64 {
    size.div_ceil(CHUNK_ALIGN_BYTES) * CHUNK_ALIGN_BYTES
}

/// `-I`'s value in bytes, as memcached reads it: a number with an optional
/// `k` or `m` (either case).
fn item_size(value: &str) -> i64 {
    let scale = match value.chars().last() {
        Some('k' | 'K') => 1024,
        Some('m' | 'M') => 1024 * 1024,
        _ => return i64::from(atoi(value)),
    };
    i64::from(atoi(&value[..value.len() - 1])) * scale
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memcached_options::config_args;

    /// The classes read from a config agree with those of its rendered args.
    #[test]
    fn a_config_reads_as_its_args() {
        for config in [
            serde_json::json!({}),
            serde_json::json!({"maxItemSize": "2m"}),
            serde_json::json!({"maxItemSize": "512k", "extraArgs": ["-f", "1.5"]}),
            serde_json::json!({"maxItemSize": "4m", "extraArgs": ["-o", "no_chunked_items"]}),
            serde_json::json!({"extraArgs": ["-o", "slab_chunk_max=16384", "-n", "96"]}),
            serde_json::json!({"extraArgs": ["-o", "worker_logbuf_size=64-128"]}),
            serde_json::json!({"maxItemSize": "2m", "extraArgs": ["-I", "1m", "-o", "no_modern"]}),
        ] {
            let config: MemcachedConfig = serde_json::from_value(config).unwrap();
            let from_args = minimum_memory_mb(&config_args(&config));
            assert_eq!(Slabs::of(&config).minimum_mb(), from_args, "{config:?}");
        }
    }

    fn of(args: &[&str]) -> Vec<String> {
        geometry(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn only_what_the_memory_file_records_counts() {
        let base = ["-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-e", "/f"];
        assert_eq!(of(&base), ["-m64", "-I1m", "-e/f"]);
        let warm = [
            "-m", "64", "-c", "2048", "-t", "2", "-I", "1m", "-e", "/f", "-vv", "-Y", "/a",
        ];
        assert_eq!(
            of(&warm),
            of(&base),
            "connections, threads, verbosity, auth: warm"
        );
        let tls = [
            "-m",
            "64",
            "-I",
            "1m",
            "-e",
            "/f",
            "-Z",
            "-o",
            "ssl_chain_cert=/c,ssl_key=/k",
        ];
        assert_eq!(of(&tls), of(&["-m", "64", "-I", "1m", "-e", "/f"]));
        assert_ne!(of(&["-m", "128", "-I", "1m", "-e", "/f"]), of(&base));
        assert_eq!(
            of(&[
                "--slab-growth-factor=1.5",
                "-o",
                "hash_algorithm=xxh3,slab_chunk_max=256",
                "-C"
            ]),
            ["-f1.5", "slab_chunk_max=256", "-C"]
        );
        assert_eq!(
            of(&["-o", "worker_logbuf_size=64,lru_crawler"]),
            ["worker_logbuf_size=64"]
        );
    }

    /// The minimum of memcached's args (after `-I 1m`, the operator's
    /// default, unless the case sets its own), against what memcached 1.6.18
    /// started with (`-e`, binary search over `-m`).
    macro_rules! minimum {
        ($($name:ident: [$($arg:expr),*] => $mb:expr;)*) => {$(
            #[test]
            fn $name() {
                let written: &[&str] = &[$($arg),*];
                let args: Vec<String> = written.iter().map(|a| a.to_string()).collect();
                assert_eq!(minimum_memory_mb(&args), $mb);
            }
        )*};
    }

    minimum! {
        defaults_39_classes: ["-m", "64", "-I", "1m"] => 39;
        no_args_at_all: [] => 39;
        factor_1_1_hits_the_63_class_cap: ["-I", "1m", "-f", "1.1"] => 63;
        factor_1_01_capped_too: ["-I", "1m", "-f", "1.01"] => 63;
        factor_1_5_long_prefix: ["-I", "1m", "--slab-growth-factor=1.5", "-vv"] => 22;
        factor_2: ["-I", "1m", "-f", "2"] => 13;
        factor_3: ["-I", "1m", "-f", "3"] => 8;
        explicit_defaults: ["-I", "1m", "-f", "1.25", "-n", "48"] => 39;
        chunk_size_8: ["-I", "1m", "-n", "8"] => 41;
        item_size_1536k_factor_1_5: ["-I", "1536k", "-f", "1.5"] => 22;
        factor_glued_in_a_bundle: ["-I1m", "-vf2"] => 13;
        chunk_size_96: ["-I", "1m", "-n", "96"] => 37;
        chunk_size_1000: ["-I", "1m", "-n", "1000"] => 28;
        chunk_size_above_chunk_max_leaves_one_class: ["-I", "1m", "-n", "600000"] => 1;
        item_size_2m_keeps_512k_chunks: ["-I", "2m"] => 39;
        item_size_4m: ["-I", "4m"] => 39;
        item_size_512k: ["-I", "512k"] => 39;
        slab_chunk_max_16k: ["-I", "1m", "-o", "slab_chunk_max=16384"] => 23;
        slab_chunk_max_128k_factor_1_1: ["-I", "1m", "-o", "slab_chunk_max=131072", "-f", "1.1"] => 63;
        slab_sizes_three: ["-I", "1m", "-o", "slab_sizes=48-100-200"] => 4;
        slab_sizes_ignore_the_factor: ["-I", "1m", "-f", "2", "-o", "slab_sizes=100-200-300"] => 4;
        the_last_slab_sizes_counts: ["-I", "1m", "-o", "slab_sizes=100-200,slab_sizes=100-200-300-400"] => 5;
        slab_sizes_powers_of_two: [
            "-I", "1m", "-o",
            "slab_sizes=64-128-256-512-1024-2048-4096-8192-16384-32768-65536-131072-262144-524288"
        ] => 15;
        no_chunked_items_1m_chunks: ["-I", "1m", "-o", "no_chunked_items"] => 42;
        no_modern_without_reassign_pages_are_their_chunks: ["-I", "1m", "-o", "no_modern"] => 41;
        no_modern_above_1m_keeps_512k_chunks: ["-I", "2m", "-o", "no_modern"] => 39;
        no_modern_then_slab_reassign_whole_pages: ["-I", "1m", "-o", "no_modern,slab_reassign"] => 42;
        no_slab_reassign_alone_whole_pages: ["-I", "1m", "-o", "no_slab_reassign"] => 39;
        no_chunked_items_without_reassign: ["-I", "1m", "-o", "no_chunked_items,no_slab_reassign"] => 41;
        // 1.6.18 reads it as slab_sizes=64 and starts with 2; 1.6.40 on do not.
        worker_logbuf_size_the_larger_reading: ["-I", "1m", "-o", "worker_logbuf_size=64"] => 39;
    }
}
