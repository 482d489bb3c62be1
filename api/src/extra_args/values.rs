//! Option values memcached 1.6 checks when it starts, read the way it reads
//! them (C's `atoi` and `atof`, its own `safe_strtoul` and `safe_strtod`),
//! with the message it exits on.

use crate::memcached_options::SLAB_CHUNK_MAX;

/// Why memcached exits on `value` of the short option `c`, if it does.
pub fn short_option(c: char, value: &str) -> Option<&'static str> {
    match c {
        // Up to 1.6.23 only 0 is refused; 1.6.24 on (memcached 2bc409e8b), what
        // `memcached:1.6` runs today, refuse a negative count too.
        'R' if atoi(value) <= 0 => Some("Number of requests per event must be greater than 0"),
        'f' => match atof(value) {
            factor if factor <= 1.0 => Some("Factor must be greater than 1"),
            factor if factor.is_nan() => Some("Floating point exception (a NaN factor crashes it)"),
            _ => None,
        },
        'n' if atoi(value) == 0 => Some("Chunk size must be greater than 0"),
        'D' if value.is_empty() => Some("No delimiter specified"),
        'N' if atoi(value) <= 0 => Some("Maximum number of NAPI IDs must be greater than 0"),
        _ => None,
    }
}

/// memcached's default smallest item chunk (`-n`).
const CHUNK_SIZE: u64 = 48;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES - 1`.
const MAX_SLAB_SIZES: usize = 63;
/// From this `slab_automove_window` on, memcached's 32-bit size overflows and it crashes.
const SLAB_AUTOMOVE_WINDOW_CRASHES: i32 = 1 << 26;

/// Why memcached exits on the `-o` sub-option `name` with `value` (`None` when
/// written without `=`), if it does, as it reads the option list.
pub fn suboption(name: &str, value: Option<&str>) -> Option<String> {
    let Some(value) = value else {
        return missing(name);
    };
    let refuse = |refused: bool, message: &str| refused.then(|| message.to_string());
    match name {
        "hashpower" => match atoi(value) {
            v if v < 12 => Some(format!("Initial hashtable multiplier of {v} is too low")),
            v if v > 32 => Some(format!("Initial hashtable multiplier of {v} is too high")),
            _ => None,
        },
        "slab_automove" => refuse(
            !(0..=2).contains(&atoi(value)),
            "slab_automove must be between 0 and 2",
        ),
        "slab_automove_ratio" => {
            let ratio = atof(value);
            refuse(
                ratio <= 0.0 || ratio > 1.0,
                "slab_automove_ratio must be > 0 and < 1",
            )
        }
        "slab_automove_window" => match atoi(value) {
            v if v < 3 => Some("slab_automove_window must be > 2".to_string()),
            v if v >= SLAB_AUTOMOVE_WINDOW_CRASHES => {
                Some("Segmentation fault (the window overflows its buffer size)".to_string())
            }
            _ => None,
        },
        "tail_repair_time" => refuse(
            atoi(value) < 10,
            "Cannot set tail_repair_time to less than 10 seconds",
        ),
        "hash_algorithm" => refuse(
            !matches!(value, "jenkins" | "murmur3" | "xxh3"),
            "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
        ),
        "lru_crawler_sleep" => refuse(
            !(0..=1_000_000).contains(&atoi(value)),
            "LRU crawler sleep must be between 0 and 1 second",
        ),
        "lru_crawler_tocrawl" => refuse(
            strtoul(value).is_none(),
            "lru_crawler_tocrawl takes a numeric 32bit value",
        ),
        "hot_lru_pct" | "warm_lru_pct" => {
            (!(1..80).contains(&atoi(value))).then(|| format!("{name} must be > 1 and < 80"))
        }
        "hot_max_factor" | "warm_max_factor" => {
            (atof(value) <= 0.0).then(|| format!("{name} must be > 0"))
        }
        // memcached 1.6.18 also reads this value as the slab_sizes list.
        "worker_logbuf_size" => match strtoul(value) {
            None => Some(format!("could not parse argument to {name}")),
            Some(_) => slab_sizes(value),
        },
        "slab_sizes" => slab_sizes(value),
        "watcher_logbuf_size"
        | "read_buf_mem_limit"
        | "ext_page_size"
        | "ext_wbuf_size"
        | "ext_threads"
        | "ext_io_depth"
        | "ext_item_size"
        | "ext_item_age"
        | "ext_low_ttl"
        | "ext_recache_rate"
        | "ext_compact_under"
        | "ext_drop_under"
        | "ext_max_sleep" => strtoul(value)
            .is_none()
            .then(|| format!("could not parse argument to {name}")),
        "ext_max_frag" | "slab_automove_freeratio" => {
            (!strtod_ok(value)).then(|| format!("could not parse argument to {name}"))
        }
        _ => None,
    }
}

/// What memcached says of the sub-option `name` written without a value.
fn missing(name: &str) -> Option<String> {
    let message = match name {
        "hashpower" | "tail_repair_time" | "idle_timeout" => {
            format!("Missing numeric argument for {name}")
        }
        "lru_crawler_sleep" | "lru_crawler_tocrawl" => format!("Missing {name} value"),
        "slab_sizes" | "sock_cookie_id" | "proxy_arg" => {
            "Segmentation fault (it needs a value)".to_string()
        }
        "slab_automove_ratio"
        | "slab_automove_window"
        | "hash_algorithm"
        | "hot_lru_pct"
        | "warm_lru_pct"
        | "hot_max_factor"
        | "warm_max_factor"
        | "temporary_ttl"
        | "watcher_logbuf_size"
        | "worker_logbuf_size"
        | "read_buf_mem_limit"
        | "slab_automove_freeratio" => format!("Missing {name} argument"),
        name if name.starts_with("ext_") && name != "ext_drop_unread" => {
            format!("Missing {name} argument")
        }
        _ => return None,
    };
    Some(message)
}

/// `slab_sizes`: increasing sizes joined by `-`, each between the default
/// chunk size and slab_chunk_max and at least 8 bytes above the previous one.
fn slab_sizes(list: &str) -> Option<String> {
    if list.is_empty() {
        return Some("an empty slab_sizes list (it exits without a message)".to_string());
    }
    let mut last = 0u64;
    for (i, piece) in list.split('-').filter(|p| !p.is_empty()).enumerate() {
        let parsed = strtoul(piece);
        // memcached keeps an `unsigned int`.
        let size = parsed.map_or(0, |v| v & u64::from(u32::MAX));
        let message = if parsed.is_none() || !(CHUNK_SIZE..=SLAB_CHUNK_MAX).contains(&size) {
            format!("slab size {size} is out of valid range")
        } else if last >= size {
            format!("slab size {size} cannot be lower than or equal to a previous class size")
        } else if size <= last + 8 {
            format!("slab size {size} must be at least 8 bytes larger than previous class")
        } else if i + 1 >= MAX_SLAB_SIZES {
            "too many slab classes specified".to_string()
        } else {
            last = size;
            continue;
        };
        return Some(message);
    }
    None
}

/// The share of the LRU `hot_lru_pct` and `warm_lru_pct` may take together;
/// memcached checks the sum once every option is read.
pub const MAX_HOT_AND_WARM_PCT: i32 = 80;
/// Their defaults.
pub const DEFAULT_HOT_LRU_PCT: i32 = 20;
pub const DEFAULT_WARM_LRU_PCT: i32 = 40;

/// The power of two of memcached's item-lock table for `threads` workers
/// (`thread.c`); the hash table (`-o hashpower`) must be larger.
pub fn item_lock_power(threads: i32) -> i32 {
    match threads {
        ..3 => 10,
        3 => 11,
        4 => 12,
        5..=10 => 13,
        11..=20 => 14,
        _ => 15,
    }
}

/// The white space C's `isspace` skips before a number.
const C_SPACE: [char; 6] = [' ', '\t', '\n', '\x0b', '\x0c', '\r'];

/// `s` without leading white space, and whether a `-` sign was taken off.
fn sign(s: &str) -> (bool, &str) {
    let s = s.trim_start_matches(C_SPACE);
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// C's `atoi`: `(int) strtol(s, NULL, 10)`, a 64-bit `long` that saturates on
/// overflow, truncated to 32 bits; no digits read as 0.
pub fn atoi(s: &str) -> i32 {
    let (negative, digits) = sign(s);
    let mut long: i64 = 0;
    for digit in digits.bytes().take_while(u8::is_ascii_digit) {
        let step = long.checked_mul(10).and_then(|v| {
            let d = i64::from(digit - b'0');
            if negative {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        });
        match step {
            Some(v) => long = v,
            None => {
                long = if negative { i64::MIN } else { i64::MAX };
                break;
            }
        }
    }
    // C converts out-of-range values modulo 2^32, as `as` does.
    long as i32
}

/// C's `atof`: the longest prefix `strtod` reads (decimal, hexadecimal, `inf`,
/// `nan`); no number reads as 0.
pub fn atof(s: &str) -> f64 {
    strtod(s).0
}

/// C's `strtod`: the value of the longest number `s` starts with, and the bytes
/// read (0 when there is none).
fn strtod(s: &str) -> (f64, usize) {
    let (negative, rest) = sign(s);
    let start = s.len() - rest.len();
    let (value, len) = if starts_with_ignore_case(rest, "infinity") {
        (f64::INFINITY, 8)
    } else if starts_with_ignore_case(rest, "inf") {
        (f64::INFINITY, 3)
    } else if starts_with_ignore_case(rest, "nan") {
        (f64::NAN, 3)
    } else if let Some((value, len)) = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))
        .and_then(hex_float)
    {
        (value, 2 + len)
    } else {
        let len = decimal_len(rest);
        (rest[..len].parse().unwrap_or(0.0), len)
    };
    match len {
        0 => (0.0, 0),
        _ => (if negative { -value } else { value }, start + len),
    }
}

/// memcached's `safe_strtoul`: a decimal number ending the text or followed by
/// white space, at most 2^64-1, and not negative; its value (as `unsigned
/// long`), or `None` when memcached refuses it.
pub fn strtoul(s: &str) -> Option<u64> {
    let (negative, rest) = sign(s);
    let len = digits(rest, u8::is_ascii_digit);
    let after = &rest[len..];
    if len == 0 || !(after.is_empty() || after.starts_with(C_SPACE)) {
        return None;
    }
    let magnitude: u64 = rest[..len].parse().ok()?;
    let value = if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    // Negative as a signed long, and written with a minus: refused.
    ((value as i64) >= 0 || !s.contains('-')).then_some(value)
}

/// memcached's `safe_strtod`: a number ending the text or followed by white
/// space, neither overflowing nor underflowing.
pub fn strtod_ok(s: &str) -> bool {
    let (value, len) = strtod(s);
    let after = &s[len..];
    let overflow = value.is_infinite() && !starts_with_ignore_case(sign(s).1, "inf");
    let out_of_range = overflow || (value != 0.0 && value.abs() < f64::MIN_POSITIVE);
    len > 0 && (after.is_empty() || after.starts_with(C_SPACE)) && !out_of_range
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

fn digits(s: &str, is_digit: fn(&u8) -> bool) -> usize {
    s.bytes().take_while(is_digit).count()
}

/// Length of the decimal number `s` starts with: digits, a fraction and an
/// exponent; 0 when there is no digit before the exponent.
fn decimal_len(s: &str) -> usize {
    let whole = digits(s, u8::is_ascii_digit);
    let mut len = whole;
    let mut mantissa_digits = whole;
    if s[len..].starts_with('.') {
        let fraction = digits(&s[len + 1..], u8::is_ascii_digit);
        mantissa_digits += fraction;
        len += 1 + fraction;
    }
    if mantissa_digits == 0 {
        return 0;
    }
    if let Some((exponent_len, _)) = s[len..].strip_prefix(['e', 'E']).and_then(exponent) {
        len += 1 + exponent_len;
    }
    len
}

/// The exponent `s` starts with (an optional sign, then digits): its length
/// and value (saturated).
fn exponent(s: &str) -> Option<(usize, i32)> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let count = digits(unsigned, u8::is_ascii_digit);
    if count == 0 {
        return None;
    }
    let magnitude = unsigned[..count].bytes().fold(0i32, |v, d| {
        v.saturating_mul(10).saturating_add(i32::from(d - b'0'))
    });
    let len = s.len() - unsigned.len() + count;
    Some((len, if negative { -magnitude } else { magnitude }))
}

/// The hexadecimal float `s` starts with after its `0x` (digits with an
/// optional fraction, then an optional binary exponent): its value and
/// length, or `None` without a digit.
fn hex_float(s: &str) -> Option<(f64, usize)> {
    let whole = digits(s, u8::is_ascii_hexdigit);
    let fraction = s[whole..]
        .strip_prefix('.')
        .map(|f| digits(f, u8::is_ascii_hexdigit));
    if whole + fraction.unwrap_or(0) == 0 {
        return None;
    }
    let mut mantissa = 0.0;
    for b in s[..whole].bytes() {
        mantissa = mantissa * 16.0 + hex_digit(b);
    }
    let mut scale = 1.0;
    if let Some(fraction) = fraction {
        for b in s[whole + 1..whole + 1 + fraction].bytes() {
            scale /= 16.0;
            mantissa += hex_digit(b) * scale;
        }
    }
    let len = whole + fraction.map_or(0, |f| 1 + f);
    match s[len..].strip_prefix(['p', 'P']).and_then(exponent) {
        Some((exponent_len, power)) => Some((mantissa * 2f64.powi(power), len + 1 + exponent_len)),
        None => Some((mantissa, len)),
    }
}

fn hex_digit(b: u8) -> f64 {
    f64::from(char::from(b).to_digit(16).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_like_c() {
        for (s, expected) in [
            ("20", 20),
            ("  -7x", -7),
            ("+3", 3),
            ("abc", 0),
            ("", 0),
            ("0x10", 0),
            ("4294967296", 0),
            ("4294967297", 1),
            ("99999999999999999999", -1),
            ("-99999999999999999999", 0),
        ] {
            assert_eq!(atoi(s), expected, "{s:?}");
        }
    }

    #[test]
    fn atof_reads_like_c() {
        for (s, expected) in [
            ("1.25", 1.25),
            (" 2", 2.0),
            ("1.5e1x", 15.0),
            ("3e", 3.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("-2", -2.0),
            ("abc", 0.0),
            (".", 0.0),
            ("e5", 0.0),
            ("0x1.8", 1.5),
            ("0x2p-1", 1.0),
            ("0xA", 10.0),
            ("0x1.", 1.0),
            ("0x.8p1", 1.0),
            ("0x1p", 1.0),
            ("0x", 0.0),
            ("INFINITY", f64::INFINITY),
        ] {
            assert_eq!(atof(s), expected, "{s:?}");
        }
        assert!(atof("nan").is_nan());
    }

    #[test]
    fn strtoul_and_strtod_read_like_memcached() {
        for (s, expected) in [
            ("5", Some(5)),
            (" +7 x", Some(7)),
            ("-0", Some(0)),
            ("5x", None),
            ("-1", None),
            ("0x10", None),
            ("", None),
            ("18446744073709551616", None),
            ("9223372036854775808", Some(1 << 63)),
        ] {
            assert_eq!(strtoul(s), expected, "{s:?}");
        }
        for (s, ok) in [
            ("-1", true),
            ("nan", true),
            ("inf", true),
            ("0.5 ", true),
            ("abc", false),
            ("1e999", false),
            ("5x", false),
        ] {
            assert_eq!(strtod_ok(s), ok, "{s:?}");
        }
    }

    #[test]
    fn suboption_values_memcached_exits_on() {
        let exits = |name: &str, value: Option<&str>| suboption(name, value);
        for (name, value, message) in [
            (
                "hashpower",
                Some("11"),
                "Initial hashtable multiplier of 11 is too low",
            ),
            (
                "hashpower",
                Some("33"),
                "Initial hashtable multiplier of 33 is too high",
            ),
            ("hashpower", None, "Missing numeric argument for hashpower"),
            (
                "slab_automove",
                Some("3"),
                "slab_automove must be between 0 and 2",
            ),
            (
                "slab_automove_ratio",
                Some("1.01"),
                "slab_automove_ratio must be > 0 and < 1",
            ),
            (
                "slab_automove_window",
                Some("2"),
                "slab_automove_window must be > 2",
            ),
            (
                "tail_repair_time",
                Some("abc"),
                "Cannot set tail_repair_time to less than 10 seconds",
            ),
            (
                "hash_algorithm",
                Some("Jenkins"),
                "Unknown hash_algorithm option (jenkins, murmur3, xxh3)",
            ),
            (
                "lru_crawler_sleep",
                Some("1000001"),
                "LRU crawler sleep must be between 0 and 1 second",
            ),
            (
                "lru_crawler_tocrawl",
                Some("-1"),
                "lru_crawler_tocrawl takes a numeric 32bit value",
            ),
            (
                "lru_crawler_tocrawl",
                None,
                "Missing lru_crawler_tocrawl value",
            ),
            (
                "hot_lru_pct",
                Some("80"),
                "hot_lru_pct must be > 1 and < 80",
            ),
            ("warm_max_factor", Some("0"), "warm_max_factor must be > 0"),
            ("temporary_ttl", None, "Missing temporary_ttl argument"),
            (
                "worker_logbuf_size",
                Some("abc"),
                "could not parse argument to worker_logbuf_size",
            ),
            (
                "worker_logbuf_size",
                Some("47"),
                "slab size 47 is out of valid range",
            ),
            (
                "read_buf_mem_limit",
                Some("0x10"),
                "could not parse argument to read_buf_mem_limit",
            ),
            (
                "ext_threads",
                Some("-1"),
                "could not parse argument to ext_threads",
            ),
            (
                "ext_max_frag",
                Some("1e999"),
                "could not parse argument to ext_max_frag",
            ),
            (
                "slab_sizes",
                Some("100-108"),
                "slab size 108 must be at least 8 bytes larger than previous class",
            ),
            (
                "slab_sizes",
                Some("100-100"),
                "slab size 100 cannot be lower than or equal to a previous class size",
            ),
            (
                "slab_sizes",
                Some("524289"),
                "slab size 524289 is out of valid range",
            ),
            ("slab_sizes", None, "Segmentation fault (it needs a value)"),
        ] {
            assert_eq!(
                exits(name, value).as_deref(),
                Some(message),
                "{name}={value:?}"
            );
        }
        let many: Vec<String> = (0..63).map(|i| (100 + 10 * i).to_string()).collect();
        assert_eq!(
            exits("slab_sizes", Some(&many.join("-"))).as_deref(),
            Some("too many slab classes specified")
        );
        for (name, value) in [
            ("hashpower", Some("31")),
            ("slab_automove", None),
            ("slab_automove", Some("abc")),
            ("slab_automove_ratio", Some("1")),
            ("tail_repair_time", Some("10abc")),
            ("lru_crawler_sleep", Some("abc")),
            ("lru_crawler_tocrawl", Some("4294967296")),
            ("hot_lru_pct", Some("1")),
            ("idle_timeout", Some("abc")),
            ("worker_logbuf_size", Some("524288")),
            ("slab_sizes", Some("48-100-109")),
            ("slab_sizes", Some(&many[..62].join("-"))),
            ("modern", Some("junk")),
            ("modern", None),
            ("ext_max_frag", Some("-1")),
        ] {
            assert_eq!(exits(name, value), None, "{name}={value:?}");
        }
    }

    #[test]
    fn the_item_lock_table_grows_with_the_threads() {
        let powers: Vec<i32> = [1, 2, 3, 4, 5, 10, 11, 20, 21, 64]
            .map(item_lock_power)
            .to_vec();
        assert_eq!(powers, [10, 10, 11, 12, 13, 13, 14, 14, 15, 15]);
    }

    #[test]
    fn short_option_values_memcached_exits_on() {
        assert_eq!(
            short_option('R', "0"),
            Some("Number of requests per event must be greater than 0")
        );
        assert_eq!(
            short_option('R', "-1"),
            Some("Number of requests per event must be greater than 0"),
            "memcached 1.6.24 on"
        );
        assert_eq!(short_option('R', "1"), None);
        assert_eq!(
            short_option('f', "1"),
            Some("Factor must be greater than 1")
        );
        assert_eq!(short_option('f', "1.01"), None);
        assert_eq!(
            short_option('f', "nan"),
            Some("Floating point exception (a NaN factor crashes it)"),
            "NaN passes memcached's check, then crashes it"
        );
        assert_eq!(short_option('f', "inf"), None);
        assert_eq!(
            short_option('n', "x"),
            Some("Chunk size must be greater than 0")
        );
        assert_eq!(short_option('D', ""), Some("No delimiter specified"));
        assert_eq!(short_option('D', ":"), None);
        assert_eq!(
            short_option('N', "-1"),
            Some("Maximum number of NAPI IDs must be greater than 0")
        );
        assert_eq!(short_option('b', "abc"), None);
    }
}
