//! Exact Kubernetes `Quantity` parsing, with the API server's semantics:
//! values are exact to the nano unit (finer values round up, away from zero)
//! and capped at 2^63-1 units. No floating point anywhere.

use std::fmt;

use num_bigint::BigUint;

/// Nano units per unit.
const NANO: i128 = 1_000_000_000;
/// Kubernetes caps every quantity at 2^63-1 units.
const CAP: i128 = (i64::MAX as i128) * NANO;
/// More significant digits than this are refused rather than computed.
const MAX_DIGITS: usize = 100;
/// The message Kubernetes gives for a malformed quantity.
pub const FORMAT_MESSAGE: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed quantity: an exact count of nano units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

/// Why a string is not a quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// Not the Quantity syntax.
    Format,
    /// Syntax is fine but the number has too many significant digits.
    TooManyDigits,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityError::Format => f.write_str(FORMAT_MESSAGE),
            QuantityError::TooManyDigits => {
                write!(f, "quantity has more than {MAX_DIGITS} significant digits")
            }
        }
    }
}

impl Quantity {
    /// A whole number of units.
    pub const fn from_units(units: i64) -> Self {
        Quantity {
            nanos: units as i128 * NANO,
        }
    }

    /// `n` mebi-units (`nMi`).
    pub const fn mebi(n: i64) -> Self {
        Self::from_units(n * 1024 * 1024)
    }

    /// The sum, capped like Kubernetes.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: (self.nanos + other.nanos).clamp(-CAP, CAP),
        }
    }

    /// Go's `Quantity.Value()`: whole units, rounded up.
    pub fn value(self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    /// Go's `Quantity.MilliValue()`: thousandths, rounded up.
    pub fn milli_value(self) -> i128 {
        ceil_div(self.nanos, NANO / 1000)
    }

    /// True when the quantity is above zero.
    pub fn is_positive(self) -> bool {
        self.nanos > 0
    }

    /// True when the quantity is below zero.
    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// Parse any valid Kubernetes quantity (`128Mi`, `1e8`, `0.5Gi`, `100M`, `250m`, `+.5`).
    pub fn parse(input: &str) -> Result<Quantity, QuantityError> {
        let (negative, rest) = match input.as_bytes().first() {
            Some(b'-') => (true, &input[1..]),
            Some(b'+') => (false, &input[1..]),
            _ => (false, input),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
            return Err(QuantityError::Format);
        }
        let (exp10, exp2) = parse_suffix(suffix)?;

        let frac_part = frac_part.trim_end_matches('0');
        let int_part = int_part.trim_start_matches('0');
        // The significant digits: the integer part without leading zeros,
        // then the fraction (whose own leading zeros count when there is an
        // integer part) without trailing ones.
        let (digits_int, digits_frac) = if int_part.is_empty() {
            ("", frac_part.trim_start_matches('0'))
        } else {
            (int_part, frac_part)
        };
        let len = digits_int.len() + digits_frac.len();
        if len == 0 {
            return Ok(Quantity { nanos: 0 });
        }
        if len > MAX_DIGITS {
            return Err(QuantityError::TooManyDigits);
        }
        let frac_len = frac_part.len() as i64;
        let nanos = to_nanos(digits_int, digits_frac, exp10 - frac_len + 9, exp2);
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }
}

/// `n / d` rounded towards positive infinity (`d > 0`).
fn ceil_div(n: i128, d: i128) -> i128 {
    n.div_euclid(d) + i128::from(n.rem_euclid(d) != 0)
}

/// `(power of ten, power of two)` of a suffix.
fn parse_suffix(suffix: &str) -> Result<(i64, u32), QuantityError> {
    let table = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .ok_or(QuantityError::Format)?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QuantityError::Format);
            }
            let e: i32 = exponent.parse().map_err(|_| QuantityError::Format)?;
            (i64::from(e), 0)
        }
    };
    Ok(table)
}

/// `ceil(digits * 10^exp10 * 2^exp2)`, capped at [`CAP`], where `digits` is
/// `int` then `frac` (no leading zero, not empty).
fn to_nanos(int: &str, frac: &str, exp10: i64, exp2: u32) -> i128 {
    let len = (int.len() + frac.len()) as i64;
    // digits * 10^exp10 >= 10^(len - 1 + exp10): far above the cap.
    if len - 1 + exp10 > 30 {
        return CAP;
    }
    // digits * 2^exp2 < 10^(len + 19) <= 10^-exp10: a positive fraction of a nano.
    if exp10 < 0 && -exp10 >= len + 19 {
        return 1;
    }
    small_nanos(int, frac, exp10, exp2).unwrap_or_else(|| big_nanos(int, frac, exp10, exp2))
}

/// [`to_nanos`] with big numbers.
fn big_nanos(int: &str, frac: &str, exp10: i64, exp2: u32) -> i128 {
    let Ok(mut value) = format!("{int}{frac}").parse::<BigUint>() else {
        return CAP;
    };
    value <<= exp2;
    if exp10 >= 0 {
        value *= BigUint::from(10u8).pow(exp10 as u32);
    } else {
        let divisor = BigUint::from(10u8).pow((-exp10) as u32);
        value = (value + &divisor - 1u8) / divisor;
    }
    i128::try_from(value).map_or(CAP, |v| v.min(CAP))
}

/// [`to_nanos`] in 128-bit integers, when nothing overflows them (every
/// quantity people write): the same value, without big numbers.
fn small_nanos(int: &str, frac: &str, exp10: i64, exp2: u32) -> Option<i128> {
    let mut value: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        value = value.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    value = value.checked_mul(1i128.checked_shl(exp2).filter(|p| *p > 0)?)?;
    let power = 10i128.checked_pow(u32::try_from(exp10.unsigned_abs()).ok()?)?;
    let value = if exp10 >= 0 {
        value.checked_mul(power)?
    } else {
        value.checked_add(power - 1)? / power
    };
    Some(value.min(CAP))
}

/// Canonical text: the largest binary suffix that divides the value for whole
/// units (`96Mi`, `66536Ki`, `1000`), `m`/`u`/`n` for fractions.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.nanos;
        if n % NANO != 0 {
            return match () {
                _ if n % 1_000_000 == 0 => write!(f, "{}m", n / 1_000_000),
                _ if n % 1_000 == 0 => write!(f, "{}u", n / 1_000),
                _ => write!(f, "{n}n"),
            };
        }
        let units = n / NANO;
        for (suffix, shift) in [
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ] {
            if units != 0 && units % (1i128 << shift) == 0 {
                return write!(f, "{}{suffix}", units >> shift);
            }
        }
        write!(f, "{units}")
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn small_numbers_give_what_big_ones_give() {
        let digits = [
            "1",
            "5",
            "12",
            "999",
            "1024",
            "123456789",
            "99999999999999999",
            "340282366920938463",
        ];
        for int in digits {
            for frac in ["", "5", "05", "125", "000001"] {
                for exp10 in -40..=31 {
                    for exp2 in [0, 10, 20, 30, 40, 50, 60] {
                        assert_eq!(
                            small_nanos(int, frac, exp10, exp2)
                                .unwrap_or_else(|| big_nanos(int, frac, exp10, exp2)),
                            big_nanos(int, frac, exp10, exp2),
                            "{int}.{frac}e{exp10} << {exp2}"
                        );
                    }
                }
            }
        }
    }

    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_every_suffix_family_exactly() {
        assert_eq!(q("96Mi"), Quantity::mebi(96));
        assert_eq!(q("0.09375Gi"), q("96Mi"));
        assert_eq!(q("1e8"), Quantity::from_units(100_000_000));
        assert_eq!(q("1E8"), q("100M"));
        assert_eq!(q("100663296"), q("96Mi"));
        assert_eq!(q("1.5"), q("1500m"));
        assert_eq!(q(".5Ki"), q("512"));
        assert_eq!(q("5."), q("5"));
        assert_eq!(q("+1k"), q("1000"));
        assert_eq!(q("-1Ki"), Quantity::from_units(-1024));
        assert_eq!(q("1e-3"), q("1m"));
        assert_eq!(q("2E"), Quantity::from_units(2_000_000_000_000_000_000));
    }

    #[test]
    fn orders_decimal_and_binary_units() {
        assert!(q("100M") < q("96Mi"));
        assert!(q("101M") > q("96Mi"));
        assert_eq!(q("96Mi").cmp(&q("100663296")), std::cmp::Ordering::Equal);
    }

    #[test]
    fn rounds_sub_nano_up_and_caps_huge_values() {
        assert_eq!(q("0.1n"), q("1n"));
        assert_eq!(q("1e-100"), q("1n"));
        assert_eq!(q("1e100"), q("9223372036854775807"));
        assert_eq!(q("1e2147483647"), q("9223372036854775807"));
        assert_eq!(q("0.000"), q("0"));
        assert_eq!(
            q(
                "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001"
            ),
            q("1")
        );
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in [
            "",
            "Mi",
            "abc",
            "1.2.3",
            "1 Mi",
            "1mi",
            "1KiB",
            "--1",
            "1e",
            "1e+",
            "1ee3",
            "1e99999999999",
            ".",
            "+",
            "1Mi ",
            " 1",
            "\u{0}",
        ] {
            assert_eq!(Quantity::parse(bad), Err(QuantityError::Format), "{bad:?}");
        }
        assert_eq!(
            Quantity::parse(&"9".repeat(101)),
            Err(QuantityError::TooManyDigits)
        );
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(q("96Mi").to_string(), "96Mi");
        assert_eq!(
            Quantity::mebi(64).saturating_add(q("100M")).to_string(),
            "167108864"
        );
        assert_eq!(
            Quantity::mebi(64).saturating_add(q("1000Ki")).to_string(),
            "66536Ki"
        );
        assert_eq!(q("1000").to_string(), "1000");
        assert_eq!(q("1.5").to_string(), "1500m");
        assert_eq!(q("1Gi").to_string(), "1Gi");
        assert_eq!(q("0").to_string(), "0");
        assert_eq!(q("3n").to_string(), "3n");
    }
}
