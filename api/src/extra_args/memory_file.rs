//! What memcached 1.6 compares when it restores a saved memory file (`-e`,
//! warm restarts): the memory geometry its `.meta` file records
//! (`_mc_meta_load_cb` in memcached.c: `maxbytes`, `chunk_size`,
//! `item_size_max`, `slab_chunk_size_max`, `slab_page_size`, `slab_config`,
//! `use_cas`, `slab_reassign`). A start whose options give another geometry
//! starts cold; every other option may change across a warm restart. Which
//! options are part of it is [`crate::memcached_options`]'s `geometry`.

use super::getopt::parse;
use crate::memcached_options;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
