//! The policy's judgment of `spec.memcached` (its `extraArgs` above all)
//! against what the real memcached of each test-bed release does with the
//! args the controller renders: what the policy refuses, memcached exits
//! on, is overridden by or stops serving with; what it accepts, memcached
//! serves.

use std::process::Command;
use std::time::{Duration, Instant};

use memcached_api::apply_defaults;
use memcached_api::render::args::{WARM_RESTART_DIR, confirmed_settings, confirmed_value};
use serde_json::json;
use test_support::on_each_release;
use test_support::real_memcached::Release;
use test_support::real_memcached::outcome::{
    Outcome, assert_exits_as_quoted, judged, policy, rendered, run, strings, writable_tempdir,
};

on_each_release! {
    /// For every extraArgs the policy refuses as "memcached exits on it", memcached
    /// does exit, printing the message the policy quotes.
    #[test]
    fn memcached_exits_where_the_policy_says_it_would() {
        let cases: [&[&str]; 33] = [
            &["-N", "5"],
            &["-o", "temporary_ttl=61", "-o", "no_modern"],
            &["-ohashpower=12"],
            &["-o", "modern,hot_lru_pct=90"],
            &["-olru_crawler_sleep"],
            &["-o", "hot_lru_pct=30", "-o", "warm_lru_pct=60"],
            &["-o", "slab_sizes=100-108"],
            &["-o", "slab_sizes=100-100"],
            &["-o", "worker_logbuf_size=47"],
            &["-o", "hashpower=11"],
            &["-o", "hash_algorithm=Jenkins"],
            &["-o", "read_buf_mem_limit=0x10"],
            &["-o", "ext_threads=-1"],
            &["-o", "lru_crawler_tocrawl=-1"],
            &["-o", "tail_repair_time=9"],
            &["-o", "slab_automove_ratio=0"],
            &["-o", "ext_max_frag=1e999"],
            &["-R", "0"],
            &["--slab-growth-factor=1"],
            &["-f", "0x2p-1"],
            &["-vn", "abc"],
            &["-D", ""],
            &["-N", "4294967296"],
            &["-vx"],
            &["--foo=bar"],
            &["--ver"],
            &["--mem=64"],
            &["-v", "-R"],
            &["--disable-cas=yes"],
            &["--protocol=text"],
            &["-o", "bogus"],
            &["-o", "modern,,track_sizes"],
            &["-:"],
        ];
        let release = Release::current();
        for args in cases {
            let errors = policy(json!({"extraArgs": args}));
            assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
            // memcached up to 1.6.39 reads a worker_logbuf_size as slab_sizes
            // too (a missing `break`) and exits on a size below the smallest
            // chunk; 1.6.40 takes it (memcached 112797f1b). The policy judges
            // by the older releases: it refuses what today's serves.
            if args == ["-o", "worker_logbuf_size=47"] && release.patch() >= 40 {
                let mut full = rendered(json!({}));
                full.extend(strings(args));
                match run(&full) {
                    Outcome::Serves(settings) => assert_eq!(
                        settings.get("worker_logbuf_size").map(String::as_str),
                        Some("48128"),
                        "{release:?} {args:?}"
                    ),
                    other => panic!("{release:?} {args:?}: {other:?}"),
                }
                continue;
            }
            assert_exits_as_quoted(&strings(args), &errors[0]);
        }
    }
}

on_each_release! {
    /// What memcached would do with the flags the policy refuses as managed or
    /// pod-breaking: it takes them, overriding what the operator set, or it stops
    /// serving TCP, or it exits.
    #[test]
    fn refused_flags_would_override_the_operator_or_stop_memcached() {
        let overrides: [(&[&str], &str, &str); 5] = [
            (&["-m", "128"], "maxbytes", "134217728"),
            (&["--conn-l=100"], "maxconns", "100"),
            (&["-vt2"], "num_threads", "2"),
            (&["--max-item-size", "2m"], "item_size_max", "2097152"),
            (&["-U", "11311"], "udpport", "11311"),
        ];
        for (args, setting, value) in overrides {
            assert!(!policy(json!({"extraArgs": args})).is_empty(), "{args:?}");
            let mut full = rendered(json!({}));
            full.extend(strings(args));
            match run(&full) {
                Outcome::Serves(settings) => assert_eq!(
                    settings.get(setting).map(String::as_str),
                    Some(value),
                    "{args:?}"
                ),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        let dir = writable_tempdir();
        let socket = dir.path().join("m.sock").display().to_string();
        /// Arguments and what memcached does with them.
        type Stop = (Vec<String>, fn(&Outcome) -> bool);
        let stops: [Stop; 10] = [
            // A sub-option that needs a value, without one: memcached crashes (SIGSEGV).
            (strings(&["-o", "slab_sizes"]), |o| {
                matches!(o, Outcome::Exited(None, _))
            }),
            // External storage on a path it cannot create.
            (
                strings(&["-o", "ext_path=/proc/no-such-dir/extstore:64m"]),
                |o| matches!(o, Outcome::Exited(Some(1), t) if t.contains("Failed to initialize external storage")),
            ),
            // No file can be created there: memcached aborts.
            (
                strings(&["-e", "/proc/no-such-dir/memory"]),
                |o| matches!(o, Outcome::Exited(None, t) if t.contains("failed to open file for mmap")),
            ),
            // A NaN growth factor passes memcached's `<= 1.0` check, then kills it (SIGFPE).
            (strings(&["-f", "nan"]), |o| {
                matches!(o, Outcome::Exited(None, _))
            }),
            // Binary only: the ASCII `stats` of the probes and the operator gets no answer.
            (
                strings(&["-B", "binary"]),
                |o| matches!(o, Outcome::Serves(s) if s.is_empty()),
            ),
            (
                strings(&["-h"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.contains("-p, --port")),
            ),
            (
                strings(&["--vers"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.starts_with("memcached 1.6")),
            ),
            (
                strings(&["-i"]),
                |o| matches!(o, Outcome::Exited(Some(0), t) if t.contains("Copyright")),
            ),
            (
                strings(&["-Z"]),
                |o| matches!(o, Outcome::Exited(Some(c), _) if *c != 0),
            ),
            (strings(&["-s", &socket]), |o| matches!(o, Outcome::NoTcp)),
        ];
        for (args, expected) in stops {
            assert!(!policy(json!({"extraArgs": args})).is_empty(), "{args:?}");
            let mut full = rendered(json!({}));
            full.extend(args.clone());
            let outcome = run(&full);
            assert!(expected(&outcome), "{args:?}: {outcome:?}");
        }
    }
}

on_each_release! {
    /// `-d`: the process the container runs exits at once, leaving a daemon.
    #[test]
    fn daemon_mode_ends_the_containers_process() {
        assert!(!policy(json!({"extraArgs": ["--daemon"]})).is_empty());
        let dir = writable_tempdir();
        let pidfile = dir.path().join("pid");
        let mut full = rendered(json!({}));
        full.extend(strings(&["-d", "-P", &pidfile.display().to_string()]));
        let outcome = run(&full);
        // Stop the daemon it left, by the pid it wrote.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !pidfile.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Ok(pid) = std::fs::read_to_string(&pidfile) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        assert!(
            matches!(outcome, Outcome::Exited(Some(0), _)),
            "{outcome:?}"
        );
    }
}

on_each_release! {
    /// Every extraArgs list the policy accepts starts with the rendered args.
    #[test]
    fn accepted_extra_args_serve() {
        let cases: [&[&str]; 10] = [
            &[
                "-o",
                "hot_lru_pct=40,warm_lru_pct=40,slab_sizes=48-100-200,hashpower=13,modern=x",
            ],
            &["-o", "no_modern,temporary_ttl=61,lru_maintainer", "-N", "4"],
            &["-f1.05", "-n", "48", "-N", "1", "-b", "abc", "-a", "700"],
            &[
                "-v",
                "-o",
                "modern",
                "--disable-cas",
                "-R",
                "20",
                "-B",
                "ascii",
            ],
            &["-o", "modern", "-P", "-m"],
            &["-oslab_reassign,lru_crawler,", "-vvLC", "-D", ":"],
            &["--disable-c", "--lock", "--slab-g=1.5", "--verbose"],
            &["foo", "--", "-m", "1", "-d"],
            &["-o", ""],
            &["--max-r=30", "-b", "512", "-A", "-F", "-X", "-W"],
        ];
        for args in cases {
            let config = json!({"extraArgs": args, "verbosity": 1});
            assert_eq!(policy(config.clone()), Vec::<String>::new(), "{args:?}");
            let outcome = run(&rendered(config.clone()));
            let Outcome::Serves(running) = outcome else {
                panic!("{args:?}: {outcome:?}");
            };
            // What a change in place confirms is what memcached says it runs
            // (its verbosity counts the -v of extraArgs too).
            let spec = apply_defaults(serde_json::from_value(json!({"memcached": config})).unwrap());
            for (name, wanted) in confirmed_settings(&spec) {
                if let Some(value) = running.get(name) {
                    assert_eq!(confirmed_value(name, value), wanted, "{args:?}: {name}");
                }
            }
        }
    }
}

on_each_release! {
    /// maxItemSize at the boundaries: what the policy accepts runs, what it
    /// refuses makes memcached exit with EX_USAGE (64).
    #[test]
    fn item_sizes_the_policy_accepts_are_the_ones_memcached_runs() {
        let cases = [
            ("1k", 4096),
            ("100k", 4096),
            ("511k", 4096),
            ("512k", 4096),
            ("513k", 4096),
            ("700k", 4096),
            ("1m", 4096),
            ("1024k", 4096),
            ("1536k", 4096),
            ("2m", 4096),
            ("2047k", 4096),
            ("32m", 64),
            ("33m", 64),
            ("1024m", 4096),
            ("1025m", 4096),
        ];
        for (size, mb) in cases {
            let config = json!({"maxItemSize": size, "maxMemoryMB": mb});
            let accepted = policy(config.clone()).is_empty();
            let outcome = run(&rendered(config));
            match outcome {
                Outcome::Serves(settings) if accepted => assert_eq!(
                    settings
                        .get("item_size_max")
                        .and_then(|v| v.parse::<u64>().ok()),
                    Some(
                        if size.ends_with('k') {
                            1024
                        } else {
                            1024 * 1024
                        } * size[..size.len() - 1].parse::<u64>().unwrap()
                    ),
                    "{size}"
                ),
                Outcome::Exited(Some(64), _) if !accepted => {}
                other => {
                    panic!("{size} with -m {mb}: policy accepts: {accepted}, memcached: {other:?}")
                }
            }
        }
    }
}

on_each_release! {
    /// Warm restarts at the policy's bound of maxMemoryMB, on the args the
    /// controller renders (the memory file in a fresh temp dir): memcached starts
    /// at the minimum the policy computes, and one below it, which the policy
    /// refuses, it exits preallocating its slab pages; without warm restarts
    /// 16 MB starts. The default geometry and others of `-f` and `-n`.
    #[test]
    fn warm_restarts_start_from_the_policys_minimum_memory() {
        let spec = |warm: bool, mb: i32, extra: &[&str]| {
            json!({"warmRestart": {"enabled": warm},
                "memcached": {"maxMemoryMB": mb, "extraArgs": extra}})
        };
        let start = |args: &[String]| {
            let dir = writable_tempdir();
            let local = dir.path().display().to_string();
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace(WARM_RESTART_DIR, &local))
                .collect();
            run(&args)
        };
        for (extra, minimum) in [
            (&[][..], 39),
            (&["-f", "1.5"][..], 22),
            (&["--slab-growth-factor=1.1"][..], 63),
            (&["-n", "96"][..], 37),
        ] {
            let (errors, args) = judged(&spec(true, minimum, extra));
            assert_eq!(errors, Vec::<String>::new(), "{extra:?} at {minimum}");
            assert!(args.iter().any(|a| a == "-e"), "{args:?}");
            let outcome = start(&args);
            assert!(
                matches!(outcome, Outcome::Serves(_)),
                "{extra:?} at {minimum}: {outcome:?}"
            );

            let below = minimum - 1;
            let (errors, args) = judged(&spec(true, below, extra));
            assert!(
                errors.len() == 1
                    && errors[0].starts_with(&format!(
                        "spec.memcached.maxMemoryMB: Invalid value: {below}: warm restarts preallocate"
                    ))
                    && errors[0].contains(&format!("needs at least {minimum} ")),
                "{extra:?} at {below}: {errors:?}"
            );
            match start(&args) {
                Outcome::Exited(Some(1), text)
                    if text.contains("Error while preallocating slab memory!") => {}
                other => panic!("{extra:?} at {below}: {other:?}"),
            }

            let (errors, args) = judged(&spec(false, 16, extra));
            assert_eq!(errors, Vec::<String>::new(), "{extra:?} cold at 16");
            assert!(!args.iter().any(|a| a == "-e"), "{args:?}");
            let outcome = start(&args);
            assert!(
                matches!(outcome, Outcome::Serves(_)),
                "{extra:?} cold at 16: {outcome:?}"
            );
        }
        // A geometry that needs less than the schema's 16 starts warm at 16.
        let (errors, args) = judged(&spec(true, 16, &["-f", "2"]));
        assert_eq!(errors, Vec::<String>::new());
        let outcome = start(&args);
        assert!(matches!(outcome, Outcome::Serves(_)), "{outcome:?}");
    }
}

on_each_release! {
    /// Large pages (`-L`, in each spelling) preallocate as the memory file does:
    /// below the minimum the policy refuses them naming `maxMemoryMB`, warm
    /// restarts or not, and memcached exits; at it the policy admits them and
    /// memcached serves (or, on a kernel without transparent huge pages,
    /// refuses `-L` itself, whatever the memory).
    #[test]
    fn large_pages_start_from_the_policys_minimum_memory() {
        for spelling in [&["-L"][..], &["--enable-largepages"], &["-vL"]] {
            let judged_at = |mb: i32| {
                judged(&json!({"warmRestart": {"enabled": false},
                    "memcached": {"maxMemoryMB": mb, "extraArgs": spelling}}))
            };
            let no_huge_pages = |text: &str| text.contains("Cannot enable large pages");
            let (errors, args) = judged_at(39);
            assert_eq!(errors, Vec::<String>::new(), "{spelling:?} at 39");
            match run(&args) {
                Outcome::Serves(_) => {}
                Outcome::Exited(Some(1), text) if no_huge_pages(&text) => {}
                other => panic!("{spelling:?} at 39: {other:?}"),
            }
            let (errors, args) = judged_at(38);
            assert!(
                errors.len() == 1
                    && errors[0].starts_with(
                        "spec.memcached.maxMemoryMB: Invalid value: 38: extraArgs -L preallocates"
                    )
                    && errors[0].contains("needs at least 39 "),
                "{spelling:?} at 38: {errors:?}"
            );
            match run(&args) {
                Outcome::Exited(Some(1), text)
                    if text.contains("Error while preallocating slab memory!")
                        || no_huge_pages(&text) => {}
                other => panic!("{spelling:?} at 38: {other:?}"),
            }
        }
    }
}
