//! Admission latency as kube-apiserver measures it: its
//! `apiserver_admission_webhook_admission_duration_seconds` histogram for
//! one webhook, read from `/metrics` before and after a phase.

use crate::harness::Kubectl;

/// Cumulative (upper bound in seconds, count) buckets, summed over
/// operations and outcomes, by ascending bound.
#[derive(Clone, Debug, Default)]
pub struct Histogram(Vec<(f64, f64)>);

impl Histogram {
    /// The webhook `webhook`'s histogram as kube-apiserver reports it now.
    pub fn read(kubectl: &Kubectl, webhook: &str) -> Result<Self, String> {
        Ok(Self::parse(
            &kubectl.ok(&["get", "--raw", "/metrics"])?,
            webhook,
        ))
    }

    /// The webhook `webhook`'s histogram in a `/metrics` text.
    pub fn parse(metrics: &str, webhook: &str) -> Self {
        let label = format!("name=\"{webhook}\"");
        let mut buckets: Vec<(f64, f64)> = Vec::new();
        for line in metrics.lines() {
            let Some(rest) =
                line.strip_prefix("apiserver_admission_webhook_admission_duration_seconds_bucket{")
            else {
                continue;
            };
            if !rest.contains(&label) {
                continue;
            }
            let Some((labels, count)) = rest.rsplit_once("} ") else {
                continue;
            };
            let Some(le) = labels
                .split("le=\"")
                .nth(1)
                .and_then(|v| v.split('"').next())
            else {
                continue;
            };
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::INFINITY)
            };
            let count: f64 = count.trim().parse().unwrap_or(0.0);
            match buckets.iter_mut().find(|(b, _)| *b == bound) {
                Some((_, c)) => *c += count,
                None => buckets.push((bound, count)),
            }
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram(buckets)
    }

    /// The observations `before` had not seen.
    pub fn since(&self, before: &Histogram) -> Histogram {
        Histogram(
            self.0
                .iter()
                .map(|&(bound, count)| (bound, count - before.count_within(bound)))
                .collect(),
        )
    }

    /// How many observations there are.
    pub fn total(&self) -> f64 {
        self.0.last().map_or(0.0, |(_, count)| *count)
    }

    /// How many took at most `bound` seconds (a bucket's bound).
    pub fn count_within(&self, bound: f64) -> f64 {
        self.0
            .iter()
            .find(|(b, _)| *b == bound)
            .map_or(0.0, |(_, c)| *c)
    }

    /// The q-quantile, interpolated inside its bucket like Prometheus'
    /// histogram_quantile, except in the first bucket, where all it can say
    /// is "at most 5 ms" (the buckets are coarse: 5 ms, 25 ms, 100 ms...).
    pub fn quantile(&self, q: f64) -> String {
        let total = self.total();
        if total == 0.0 {
            return "n/a".into();
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(bound, count) in &self.0 {
            if count >= rank {
                if bound.is_infinite() {
                    return format!("> {:.0} ms", lower * 1000.0);
                }
                if lower == 0.0 {
                    return format!("<= {:.0} ms", bound * 1000.0);
                }
                let within = if count > below {
                    (rank - below) / (count - below)
                } else {
                    1.0
                };
                return format!("{:.2} ms", (lower + (bound - lower) * within) * 1000.0);
            }
            (lower, below) = (bound, count);
        }
        "n/a".into()
    }

    /// `(N requests): p50 .., p99 ..; X% within 5 ms`.
    pub fn summary(&self) -> String {
        let total = self.total();
        format!(
            "({total} requests): p50 {}, p99 {}; {:.1}% within 5 ms",
            self.quantile(0.50),
            self.quantile(0.99),
            100.0 * self.count_within(0.005) / total.max(1.0)
        )
    }
}
