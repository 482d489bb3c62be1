//! Prometheus durations (`30s`, `1m30s`, `500ms`, `0`), as the Prometheus
//! Operator accepts them: units y w d h m s ms, each at most once, largest first.

/// Units with their length in milliseconds, in the order they must appear.
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 24 * 3_600_000),
    ("w", 7 * 24 * 3_600_000),
    ("d", 24 * 3_600_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// The duration in milliseconds, or `None` when `s` is not a Prometheus duration.
pub fn parse_millis(s: &str) -> Option<u128> {
    if s == "0" {
        return Some(0);
    }
    let mut rest = s;
    let mut next_unit = 0;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 || digits > 20 {
            return None;
        }
        let value: u128 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        // "ms" must win over "m" followed by garbage.
        let (index, (unit, millis)) = UNITS
            .iter()
            .enumerate()
            .skip(next_unit)
            .filter(|(_, (unit, _))| rest.starts_with(unit))
            .max_by_key(|(_, (unit, _))| unit.len())?;
        rest = &rest[unit.len()..];
        next_unit = index + 1;
        total += value * u128::from(*millis);
    }
    (!s.is_empty()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn accepts_prometheus_durations() {
        assert_eq!(parse_millis("30s"), Some(30_000));
        assert_eq!(parse_millis("1m30s"), Some(90_000));
        assert_eq!(parse_millis("500ms"), Some(500));
        assert_eq!(parse_millis("1h0m"), Some(3_600_000));
        assert_eq!(
            parse_millis("1y2w3d4h5m6s7ms"),
            Some(((365 + 14 + 3) * 24 + 4) as u128 * 3_600_000 + 5 * 60_000 + 6_000 + 7)
        );
        assert_eq!(parse_millis("0"), Some(0));
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "", "s", "30", "1.5s", "30S", "10s1m", "1m1m", "-1s", " 30s", "30s ", "1msx", "10sec",
            "1ms1s",
        ] {
            assert_eq!(parse_millis(bad), None, "{bad:?}");
        }
    }
}
