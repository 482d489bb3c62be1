//! Consecutive occurrences of something per Memcached (failed reconciles, a
//! stalled change), and the doubling delay before the next look they earn.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Streak lengths by `namespace/name`.
#[derive(Default)]
pub struct Streaks(Mutex<HashMap<String, u32>>);

impl Streaks {
    /// Count one more for `key`: the streak's length, and `base` doubled for
    /// each earlier one, at most `cap`.
    pub fn next(&self, key: &str, base: Duration, cap: Duration) -> (u32, Duration) {
        let length = self
            .0
            .lock()
            .map(|mut streaks| {
                let n = streaks.entry(key.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            })
            .unwrap_or(1);
        let doublings = length.saturating_sub(1).min(16);
        (length, base.saturating_mul(1 << doublings).min(cap))
    }

    /// `key`'s streak ended.
    pub fn end(&self, key: &str) {
        if let Ok(mut streaks) = self.0.lock() {
            streaks.remove(key);
        }
    }

    /// Forget the keys `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut streaks) = self.0.lock() {
            streaks.retain(|key, _| keep(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_up_to_its_cap_and_a_new_streak_starts_over() {
        let streaks = Streaks::default();
        let second = Duration::from_secs(1);
        let delays: Vec<u64> = (0..6)
            .map(|_| streaks.next("ns/c", 2 * second, 20 * second).1.as_secs())
            .collect();
        assert_eq!(delays, [2, 4, 8, 16, 20, 20]);
        assert_eq!(streaks.next("ns/other", second, 20 * second), (1, second));
        streaks.end("ns/c");
        assert_eq!(streaks.next("ns/c", second, 20 * second), (1, second));
        streaks.retain(|key| key != "ns/c");
        assert_eq!(streaks.next("ns/c", second, 20 * second).0, 1);
    }
}
