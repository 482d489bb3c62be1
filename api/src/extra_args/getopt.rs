//! glibc's `getopt_long` over memcached's option table: what memcached sees
//! in its argument list, with glibc's own error messages. It reads every
//! option of the table, whichever releases have it (no long option of 1.6
//! has gone, so a prefix names the same one in every release); what the
//! image's release lacks is refused after ([`super::validate`]).
//!
//! Modelled: bundled short options (`-vd`), values glued to the letter
//! (`-m64`) or in the next argument, `--name=value` and `--name value`,
//! unique prefixes of long names (`--mem-l`), ambiguous prefixes, `--` ending
//! the options, and operands (non-options), which glibc permutes to the end
//! and memcached ignores. memcached exits on the first getopt error, so
//! parsing stops there.

use super::options::{HasArg, LONG_OPTIONS, LongOption, short_option};

/// One option memcached would act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// Index of the argument the option is written in.
    pub index: usize,
    /// The short option it stands for.
    pub short: char,
    /// Its value, if it has one.
    pub value: Option<&'a str>,
}

/// Why getopt refuses an argument: memcached then prints this and exits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetoptError {
    /// Index of the argument.
    pub index: usize,
    /// glibc's message, e.g. `invalid option -- 'x'`.
    pub message: String,
}

/// The options of `args` in order, and the getopt error that ends them, if any.
pub fn parse(args: &[String]) -> (Vec<Parsed<'_>>, Option<GetoptError>) {
    let mut parsed = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let step = if arg == "--" {
            break;
        } else if let Some(long) = arg.strip_prefix("--") {
            long_option(args, i, long)
        } else if let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) {
            short_cluster(args, i, cluster, &mut parsed)
        } else {
            Ok((None, 0))
        };
        match step {
            Ok((option, consumed)) => {
                parsed.extend(option);
                i += 1 + consumed;
            }
            Err(message) => return (parsed, Some(GetoptError { index: i, message })),
        }
    }
    (parsed, None)
}

/// The value of an option that requires one and has none glued: the next argument.
fn next_value(args: &[String], i: usize) -> Option<&str> {
    args.get(i + 1).map(String::as_str)
}

/// `--name`, `--name=value`, `--name value`, or a unique prefix of a name.
type Step<'a> = Result<(Option<Parsed<'a>>, usize), String>;

fn long_option<'a>(args: &'a [String], i: usize, text: &'a str) -> Step<'a> {
    let (name, inline) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    let option = find_long(name).map_err(|candidates| match candidates.as_slice() {
        [] => format!("unrecognized option '--{text}'"),
        many => {
            let list: Vec<String> = many.iter().map(|o| format!("'--{}'", o.name)).collect();
            format!(
                "option '--{text}' is ambiguous; possibilities: {}",
                list.join(" ")
            )
        }
    })?;
    let parsed = |value| Parsed {
        index: i,
        short: option.short,
        value,
    };
    match (option.has_arg, inline) {
        (HasArg::No, Some(_)) => Err(format!(
            "option '--{}' doesn't allow an argument",
            option.name
        )),
        (HasArg::Required, None) => match next_value(args, i) {
            Some(value) => Ok((Some(parsed(Some(value))), 1)),
            None => Err(format!("option '--{}' requires an argument", option.name)),
        },
        (_, value) => Ok((Some(parsed(value)), 0)),
    }
}

/// The option an exact name or a unique prefix names; else every candidate.
fn find_long(name: &str) -> Result<&'static LongOption, Vec<&'static LongOption>> {
    if let Some(exact) = LONG_OPTIONS.iter().find(|o| o.name == name) {
        return Ok(exact);
    }
    let candidates: Vec<&'static LongOption> = LONG_OPTIONS
        .iter()
        .filter(|o| o.name.starts_with(name))
        .collect();
    match candidates.as_slice() {
        [one] => Ok(one),
        _ => Err(candidates),
    }
}

/// Letters after one dash: each is an option until one takes a value, which
/// is the rest of the argument or, when nothing is left, the next argument.
fn short_cluster<'a>(
    args: &'a [String],
    i: usize,
    cluster: &'a str,
    parsed: &mut Vec<Parsed<'a>>,
) -> Step<'a> {
    for (at, c) in cluster.char_indices() {
        let option = |value| Parsed {
            index: i,
            short: c,
            value,
        };
        match short_option(c).map(|o| o.has_arg) {
            None => return Err(format!("invalid option -- '{c}'")),
            Some(HasArg::No | HasArg::Optional) => parsed.push(option(None)),
            Some(HasArg::Required) => {
                let rest = &cluster[at + c.len_utf8()..];
                if !rest.is_empty() {
                    return Ok((Some(option(Some(rest))), 0));
                }
                return match next_value(args, i) {
                    Some(value) => Ok((Some(option(Some(value))), 1)),
                    None => Err(format!("option requires an argument -- '{c}'")),
                };
            }
        }
    }
    Ok((None, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Opt = (usize, char, Option<String>);

    fn run(args: &[&str]) -> (Vec<Opt>, Option<String>) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (parsed, error) = parse(&args);
        (
            parsed
                .into_iter()
                .map(|p| (p.index, p.short, p.value.map(str::to_string)))
                .collect(),
            error.map(|e| format!("{}: {}", e.index, e.message)),
        )
    }

    fn opt(index: usize, short: char, value: Option<&str>) -> Opt {
        (index, short, value.map(str::to_string))
    }

    #[test]
    fn bundled_short_options_end_at_the_first_that_takes_a_value() {
        assert_eq!(
            run(&["-vdm64", "x"]),
            (
                vec![
                    opt(0, 'v', None),
                    opt(0, 'd', None),
                    opt(0, 'm', Some("64"))
                ],
                None
            )
        );
        assert_eq!(
            run(&["-vm", "64"]).0,
            vec![opt(0, 'v', None), opt(0, 'm', Some("64"))]
        );
    }

    #[test]
    fn a_required_value_may_start_with_a_dash() {
        assert_eq!(run(&["-o", "-m"]).0, vec![opt(0, 'o', Some("-m"))]);
        assert_eq!(run(&["--user", "-d"]).0, vec![opt(0, 'u', Some("-d"))]);
    }

    #[test]
    fn long_options_take_inline_or_next_values() {
        assert_eq!(run(&["--port=1"]).0, vec![opt(0, 'p', Some("1"))]);
        assert_eq!(run(&["--port", "1"]).0, vec![opt(0, 'p', Some("1"))]);
        assert_eq!(run(&["--verbose", "2"]).0, vec![opt(0, 'v', None)]);
        assert_eq!(run(&["--verbose=2"]).0, vec![opt(0, 'v', Some("2"))]);
    }

    #[test]
    fn unique_prefixes_abbreviate_and_exact_names_win() {
        assert_eq!(run(&["--memory-l=64"]).0, vec![opt(0, 'm', Some("64"))]);
        assert_eq!(run(&["--da"]).0, vec![opt(0, 'd', None)]);
        assert_eq!(run(&["--listen", "x"]).0, vec![opt(0, 'l', Some("x"))]);
        assert_eq!(run(&["--listen-", "9"]).0, vec![opt(0, 'b', Some("9"))]);
    }

    #[test]
    fn ambiguous_prefixes_list_candidates_in_table_order() {
        assert_eq!(
            run(&["--ver"]).1.as_deref(),
            Some("0: option '--ver' is ambiguous; possibilities: '--version' '--verbose'")
        );
        assert_eq!(
            run(&["-v", "--mem=64"]).1.as_deref(),
            Some(
                "1: option '--mem=64' is ambiguous; possibilities: '--memory-limit' '--memory-file'"
            )
        );
    }

    #[test]
    fn getopt_errors_use_glibc_wording() {
        for (args, message) in [
            (vec!["-vx"], "0: invalid option -- 'x'"),
            (vec!["-:"], "0: invalid option -- ':'"),
            (vec!["-R"], "0: option requires an argument -- 'R'"),
            (vec!["--foo=bar"], "0: unrecognized option '--foo=bar'"),
            (
                vec!["--daemon=1"],
                "0: option '--daemon' doesn't allow an argument",
            ),
            (vec!["--port"], "0: option '--port' requires an argument"),
        ] {
            assert_eq!(run(&args).1.as_deref(), Some(message), "{args:?}");
        }
    }

    #[test]
    fn double_dash_ends_options_and_operands_are_skipped() {
        assert_eq!(run(&["--", "-m", "1"]), (vec![], None));
        assert_eq!(run(&["foo", "-", "", "-d"]).0, vec![opt(3, 'd', None)]);
    }

    #[test]
    fn parsing_stops_at_the_first_error() {
        assert_eq!(
            run(&["-d", "-x", "-m", "1"]),
            (
                vec![opt(0, 'd', None)],
                Some("1: invalid option -- 'x'".into())
            )
        );
    }
}
