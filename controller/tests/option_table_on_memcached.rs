//! The option table of the policy (`api/src/extra_args/options.rs`),
//! restricted to each release of the test bed, against that release's own
//! binary: its getopt, its `-h` and its `-o` settings.

use std::collections::BTreeSet;

use memcached_api::extra_args::options::Release as TableRelease;
use memcached_api::extra_args::options::{
    self as table, HasArg, LONG_OPTIONS, SHORT_OPTIONS, SUBOPTIONS,
};
use serde_json::json;
use test_support::on_each_release;
use test_support::real_memcached::Release;
use test_support::real_memcached::outcome::{
    Outcome, assert_exits_as_quoted, policy, run, strings,
};

/// The release of the option table the test's memcached is.
fn table_release() -> TableRelease {
    TableRelease(Release::current().patch())
}

/// What this release's memcached prints for `-h`.
fn help() -> String {
    match run(&strings(&["-h"])) {
        Outcome::Exited(Some(0), text) => text,
        other => panic!("-h: {other:?}"),
    }
}

/// Each of `lacking`, options the table gives other releases only: the
/// policy refuses it for the test's release, and memcached exits on it
/// printing what the policy quotes.
fn lacking_options_exit_as_the_policy_says(lacking: impl IntoIterator<Item = Vec<String>>) {
    for args in lacking {
        let errors = policy(json!({"extraArgs": args}));
        assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
        assert!(
            errors[0].contains(&format!(
                "and spec.image memcached:{} runs {}",
                table_release(),
                table_release()
            )),
            "{args:?}: {errors:?}"
        );
        assert_exits_as_quoted(&args, &errors[0]);
    }
}

on_each_release! {
    /// The letters the table gives the release are the ones its getopt
    /// takes, each with a value or not as the table says; any other letter
    /// is an invalid option.
    #[test]
    fn the_short_options_of_the_release_are_the_tables() {
        let release = table_release();
        for c in ('a'..='z').chain('A'..='Z').chain('0'..='9') {
            // A letter memcached lacks is refused; one that takes a value needs
            // one; any other is taken, and memcached then exits on the invalid
            // `-q` after it (before `-d` could daemonize).
            let needs = table::short_option(c)
                .filter(|o| o.span.has(release))
                .map(|o| o.has_arg);
            let args = match needs {
                Some(HasArg::Required) => vec![format!("-{c}")],
                _ => vec![format!("-{c}"), "-q".to_string()],
            };
            let outcome = run(&args);
            let text = match &outcome {
                Outcome::Exited(_, text) => text.clone(),
                _ => String::new(),
            };
            let invalid = text.contains(&format!("invalid option -- '{c}'"));
            let needs_value = text.contains(&format!("option requires an argument -- '{c}'"));
            match needs {
                None => assert!(invalid, "-{c}: {outcome:?}"),
                Some(HasArg::Required) => assert!(needs_value, "-{c}: {outcome:?}"),
                Some(_) => assert!(
                    matches!(outcome, Outcome::Exited(..)) && !invalid && !needs_value,
                    "-{c}: {outcome:?}"
                ),
            }
        }
        let lacking = SHORT_OPTIONS.iter().filter(|o| !o.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|o| vec![format!("-{}", o.letter), "1".into()]));
    }
}

on_each_release! {
    /// The long options the table gives the release are the ones its `-h`
    /// lists, and its getopt takes each with a value or not as the table
    /// says; the table's others it does not know.
    #[test]
    fn the_long_options_of_the_release_are_the_tables() {
        let release = table_release();
        let mut given = BTreeSet::new();
        for option in LONG_OPTIONS.iter().filter(|o| o.span.has(release)) {
            let name = option.name;
            given.insert(name.to_string());
            match option.has_arg {
                HasArg::Required => {
                    let outcome = run(&[format!("--{name}")]);
                    assert!(
                        matches!(&outcome, Outcome::Exited(Some(1), t) if t.contains(&format!("option '--{name}' requires an argument"))),
                        "--{name}: {outcome:?}"
                    );
                }
                HasArg::No => {
                    let outcome = run(&[format!("--{name}=x")]);
                    assert!(
                        matches!(&outcome, Outcome::Exited(Some(1), t) if t.contains(&format!("option '--{name}' doesn't allow an argument"))),
                        "--{name}: {outcome:?}"
                    );
                }
                HasArg::Optional => assert!(
                    matches!(run(&[format!("--{name}=1")]), Outcome::Serves(_)),
                    "--{name}"
                ),
            }
        }
        // `-p, --port=<num>  TCP port...`, `-W  --disable-watch  ...`; -h
        // spells --napi-ids `--napi_ids` (getopt takes the dash only, as
        // checked above).
        let listed: BTreeSet<String> = help()
            .lines()
            .filter(|line| line.starts_with('-'))
            .filter_map(|line| line.split_once("--"))
            .map(|(_, long)| {
                long.chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '-' || *c == '_')
                    .map(|c| if c == '_' { '-' } else { c })
                    .collect()
            })
            .collect();
        assert_eq!(listed, given, "memcached -h against the table for {release}");
        let lacking = LONG_OPTIONS.iter().filter(|o| !o.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|o| vec![format!("--{}=1", o.name)]));
    }
}

/// Every word memcached's binary holds that could name a `-o` setting: the
/// NUL-ended runs of `[a-z0-9_]`, and their tails after an underscore (the
/// linker stores `modern` as the tail of `no_modern`).
fn words_of_the_binary() -> BTreeSet<String> {
    let bytes = std::fs::read(Release::current().binary()).unwrap();
    let mut words = BTreeSet::new();
    for run in bytes.split(|b| *b == 0) {
        let Ok(word) = std::str::from_utf8(run) else {
            continue;
        };
        if word.len() < 3 || !word.starts_with(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        if !word
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            continue;
        }
        for (at, _) in word.match_indices('_') {
            words.insert(word[at + 1..].to_string());
        }
        words.insert(word.to_string());
    }
    words
}

/// True when memcached knows the `-o` setting `name`: it goes on to the
/// unknown one after it (or stops on the missing value) instead of exiting
/// on `name` itself.
fn takes_suboption(name: &str) -> bool {
    let output = Release::current()
        .command()
        .args(["-u", "nobody", "-o", &format!("{name},zz_unknown")])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "-o {name},zz_unknown: {text}");
    !text.contains(&format!("Illegal suboption \"{name}\""))
}

on_each_release! {
    /// The `-o` settings the table gives the release are those its binary
    /// takes, out of every word in the binary and every name in the table,
    /// and those its `-h` lists are among them; the table's others it
    /// refuses as the policy says.
    #[test]
    fn the_suboptions_of_the_release_are_the_tables() {
        let release = table_release();
        let given: BTreeSet<String> = SUBOPTIONS
            .iter()
            .filter(|s| s.span.has(release))
            .map(|s| s.name.to_string())
            .collect();
        let mut candidates = words_of_the_binary();
        candidates.extend(SUBOPTIONS.iter().map(|s| s.name.to_string()));
        let taken: BTreeSet<String> =
            candidates.into_iter().filter(|name| takes_suboption(name)).collect();
        let (unlisted, refused): (Vec<_>, Vec<_>) = (
            taken.difference(&given).collect(),
            given.difference(&taken).collect(),
        );
        assert!(
            unlisted.is_empty() && refused.is_empty(),
            "{release} takes -o {unlisted:?}, which the table does not give it, and refuses -o {refused:?}, which it does"
        );
        // `   - maxconns_fast:       immediately close ...`, and headings
        // such as `   - External storage (ext_*) related options`.
        let help = help();
        let listed: Vec<&str> = help
            .lines()
            .filter_map(|line| line.strip_prefix("   - "))
            .filter_map(|line| line.split_once(':'))
            .map(|(name, _)| name)
            .filter(|name| name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .collect();
        assert!(listed.len() > 40, "{listed:?}");
        for name in listed {
            assert!(given.contains(name), "-h lists -o {name}, the table gives {release} none");
        }
        let lacking = SUBOPTIONS.iter().filter(|s| !s.span.has(release));
        lacking_options_exit_as_the_policy_says(lacking.map(|s| strings(&["-o", &format!("{}=1", s.name)])));
    }
}
