//! Which memcached release `extraArgs` are judged against: the one the
//! image's tag states (`memcached:1.6.18`, `1.6.18-alpine`, `1.6.45-bookworm`),
//! else the newest 1.6 the option table knows ([`options::NEWEST`]), what a floating
//! tag (`1.6`, `1`, `latest`, `alpine`, a digest alone, a tag of one's own)
//! pulls today. Options that releases of 1.6 lack are refused on a stated
//! release and warned about on a floating tag ([`warnings`]).

use super::getopt;
use super::options::{self, NEWEST, OLDEST, Release, Span};
use crate::kubernetes::image::tag;
use crate::memcached_options::{self, ExtraArgs::Allowed, MemcachedOption};

/// What an image's tag says of the memcached it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tagged {
    /// A 1.6 release the table covers, as `1.6.18` or `1.6.18-alpine`.
    Release(Release),
    /// A 1.6 release newer than [`NEWEST`] (`1.6.46`).
    Newer(Release),
    /// Another series than 1.6: `1.5.22`, `1.5`, `1.7.0`, `2.0`.
    OtherSeries(String),
    /// No release: `1.6`, `1`, `latest`, `alpine`, a digest alone, or a tag
    /// that does not start with a version (a lone number but 1 included).
    Floating,
}

impl Tagged {
    /// Read the tag of `image`: its leading version, before any `-variant`.
    pub fn of(image: &str) -> Tagged {
        let Some(tag) = tag(image) else {
            return Tagged::Floating;
        };
        let version = tag.split_once('-').map_or(tag, |(version, _)| version);
        let numbers: Option<Vec<u32>> = version.split('.').map(|n| n.parse().ok()).collect();
        match numbers.as_deref() {
            Some([1] | [1, 6]) => Tagged::Floating,
            Some([1, 6, patch]) if *patch <= NEWEST.0 => Tagged::Release(Release(*patch)),
            Some([1, 6, patch]) => Tagged::Newer(Release(*patch)),
            Some([major, minor] | [major, minor, _]) => {
                Tagged::OtherSeries(format!("{major}.{minor}"))
            }
            // A lone number but 1 (`2`, `20240101`) is a tag of one's own.
            _ => Tagged::Floating,
        }
    }
}

/// The release `extraArgs` are judged against, and how the image says it.
#[derive(Clone, Debug)]
pub struct Judge<'a> {
    /// `spec.image`.
    pub image: &'a str,
    /// What its tag says.
    pub tagged: Tagged,
}

impl<'a> Judge<'a> {
    /// The judge for `spec.image`.
    pub fn of(image: &'a str) -> Judge<'a> {
        Judge {
            image,
            tagged: Tagged::of(image),
        }
    }

    /// The release options are judged against.
    pub fn release(&self) -> Release {
        match self.tagged {
            Tagged::Release(release) => release,
            _ => NEWEST,
        }
    }

    /// Why memcached exits on `what` (`-N/--napi-ids`, `-o proxy_arg`),
    /// which it has only in `span`: `message` is memcached's own.
    pub fn lacks(&self, what: &str, span: Span, message: &str) -> String {
        let runs = match self.tagged {
            Tagged::Release(release) => format!("runs {release}"),
            _ => format!("is judged as {NEWEST}, the newest 1.6 this policy knows"),
        };
        format!(
            "{}, and spec.image {} {runs}: memcached exits on it: {message}",
            had(what, span),
            self.image
        )
    }
}

/// `-N/--napi-ids is in memcached from 1.6.9 on`, or the span of a removed one.
fn had(what: &str, span: Span) -> String {
    match span.until {
        Some(until) => format!(
            "{what} was in memcached from {} to {}",
            span.since,
            Release(until.0.saturating_sub(1))
        ),
        None => format!("{what} is in memcached from {} on", span.since),
    }
}

/// The warnings for `args` run by `image`: with a floating tag, each option
/// `extraArgs` may set that older 1.6 releases refuse; with a release the table does not cover, that
/// the judgment is [`NEWEST`]'s.
pub fn warnings(image: &str, args: &[String]) -> Vec<String> {
    if args.is_empty() {
        return Vec::new();
    }
    let judge = Judge::of(image);
    match &judge.tagged {
        Tagged::Release(_) => Vec::new(),
        Tagged::Newer(release) => vec![format!(
            "spec.image {image} runs memcached {release}, newer than the newest release this policy knows \
             ({NEWEST}): spec.memcached.extraArgs are judged as {NEWEST} takes them, so an option {release} \
             added is refused"
        )],
        Tagged::OtherSeries(series) => vec![format!(
            "spec.image {image} runs memcached {series}, and this policy knows the options of memcached 1.6 \
             only ({OLDEST} to {NEWEST}): spec.memcached.extraArgs are judged as {NEWEST} takes them"
        )],
        Tagged::Floating => newer_options(args)
            .into_iter()
            .map(|(index, what, span)| {
                format!(
                    "spec.memcached.extraArgs[{index}]: {}, and spec.image {image} names no release: a node \
                     whose {image} is an older 1.6 exits on it; pin memcached:{} or later (memcached:{NEWEST})",
                    had(&what, span),
                    span.since
                )
            })
            .collect(),
    }
}

/// The options of `args` that the newest release has and the oldest lacks,
/// and that `extraArgs` may set (the others are refused whatever the
/// release): the index of each, its name, and the releases that have it.
fn newer_options(args: &[String]) -> Vec<(usize, String, Span)> {
    let allowed = |rule: Option<&MemcachedOption>| rule.is_none_or(|o| o.extra_args == Allowed);
    let (parsed, _) = getopt::parse(args);
    let mut newer = Vec::new();
    for option in &parsed {
        let Some(short) = options::short_option(option.short) else {
            continue;
        };
        if option.short == 'o' {
            for name in option.value.unwrap_or_default().split(',') {
                let name = name.split_once('=').map_or(name, |(name, _)| name);
                if let Some(sub) = options::suboption(name)
                    && allowed(memcached_options::suboption(name))
                {
                    newer.push((option.index, format!("-o {name}"), sub.span));
                }
            }
        } else if allowed(memcached_options::short(option.short)) {
            newer.push((option.index, options::flag(option.short), short.span));
        }
    }
    newer.retain(|(_, _, span)| !span.has(OLDEST) && span.has(NEWEST));
    newer
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! tags {
        ($($name:ident: $image:expr => $tagged:expr;)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(Tagged::of($image), $tagged);
            }
        )*};
    }

    tags! {
        default_image_floats: "memcached:1.6" => Tagged::Floating;
        major_only_floats: "memcached:1" => Tagged::Floating;
        latest_floats: "memcached:latest" => Tagged::Floating;
        untagged_floats: "memcached" => Tagged::Floating;
        variant_only_floats: "memcached:alpine" => Tagged::Floating;
        series_with_variant_floats: "memcached:1.6-alpine" => Tagged::Floating;
        digest_only_floats: "memcached@sha256:0123456789abcdef0123456789abcdef" => Tagged::Floating;
        own_tag_floats: "registry.example.com:5000/cache/memcached:prod" => Tagged::Floating;
        huge_number_floats: "memcached:1.6.99999999999999999999" => Tagged::Floating;
        four_numbers_float: "memcached:1.6.18.1" => Tagged::Floating;
        stated: "memcached:1.6.18" => Tagged::Release(Release(18));
        stated_with_variant: "memcached:1.6.18-alpine" => Tagged::Release(Release(18));
        stated_with_debian_variant: "memcached:1.6.45-bookworm" => Tagged::Release(Release(45));
        stated_behind_a_registry_port: "localhost:5000/memcached:1.6.9" => Tagged::Release(Release(9));
        stated_with_digest: "memcached:1.6.0@sha256:0123456789abcdef0123456789abcdef" => Tagged::Release(Release(0));
        newer_than_known: "memcached:1.6.46" => Tagged::Newer(Release(46));
        older_series: "memcached:1.5.22" => Tagged::OtherSeries("1.5".into());
        older_series_floating: "memcached:1.5-alpine" => Tagged::OtherSeries("1.5".into());
        next_series: "memcached:1.7.0" => Tagged::OtherSeries("1.7".into());
        next_major: "memcached:2.0" => Tagged::OtherSeries("2.0".into());
        lone_number_floats: "memcached:20240101" => Tagged::Floating;
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    macro_rules! warned {
        ($($name:ident: $image:expr, [$($arg:expr),*] => [$($expected:expr),*];)*) => {$(
            #[test]
            fn $name() {
                let expected: Vec<&str> = vec![$($expected),*];
                assert_eq!(warnings($image, &strings(&[$($arg),*])), expected);
            }
        )*};
    }

    warned! {
        floating_tag_names_what_older_releases_refuse: "memcached:1.6", ["-v", "-N", "2", "-o", "modern,proxy_arg=x"] => [
            "spec.memcached.extraArgs[1]: -N/--napi-ids is in memcached from 1.6.9 on, and spec.image memcached:1.6 \
             names no release: a node whose memcached:1.6 is an older 1.6 exits on it; pin memcached:1.6.9 or later \
             (memcached:1.6.45)",
            "spec.memcached.extraArgs[3]: -o proxy_arg is in memcached from 1.6.38 on, and spec.image memcached:1.6 \
             names no release: a node whose memcached:1.6 is an older 1.6 exits on it; pin memcached:1.6.38 or later \
             (memcached:1.6.45)"
        ];
        floating_tag_with_options_of_every_release: "memcached:latest", ["-v", "-o", "modern", "--disable-cas"] => [];
        floating_tag_and_options_refused_anyway: "memcached:1.6", ["-o", "ssl_min_version=tlsv1.3,proxy_config=/p.lua"] => [];
        stated_release_is_not_warned_about: "memcached:1.6.45", ["-N", "2"] => [];
        no_args_no_warning: "memcached:1.5.22", [] => [];
        other_series: "memcached:1.5.22", ["-v"] => [
            "spec.image memcached:1.5.22 runs memcached 1.5, and this policy knows the options of memcached 1.6 only \
             (1.6.0 to 1.6.45): spec.memcached.extraArgs are judged as 1.6.45 takes them"
        ];
        newer_release: "memcached:1.6.46", ["-v"] => [
            "spec.image memcached:1.6.46 runs memcached 1.6.46, newer than the newest release this policy knows \
             (1.6.45): spec.memcached.extraArgs are judged as 1.6.45 takes them, so an option 1.6.46 added is refused"
        ];
    }

    #[test]
    fn a_removed_option_names_its_last_release() {
        let span = options::suboption("meta_response_old").unwrap().span;
        assert_eq!(
            Judge::of("memcached:1.6.18").lacks(
                "-o meta_response_old",
                span,
                "Illegal suboption \"meta_response_old\""
            ),
            "-o meta_response_old was in memcached from 1.6.10 to 1.6.17, and spec.image memcached:1.6.18 runs 1.6.18: \
             memcached exits on it: Illegal suboption \"meta_response_old\""
        );
    }
}
