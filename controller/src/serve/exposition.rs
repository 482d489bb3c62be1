//! The two text formats a scraper may ask `/metrics` for: OpenMetrics
//! (what prometheus-client encodes) when the `Accept` header prefers it,
//! else the Prometheus text format 0.0.4 every scraper reads.

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
    /// `text/plain; version=0.0.4`.
    Prometheus,
}

impl Format {
    /// The format an `Accept` header prefers: OpenMetrics when it is
    /// accepted (q > 0) at least as much as anything else listed.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let mut openmetrics = 0.0f32;
        let mut others = 0.0f32;
        for range in accept.unwrap_or("").split(',') {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or("").to_ascii_lowercase();
            let q = params
                .find_map(|p| p.strip_prefix("q="))
                .map_or(Some(1.0), |q| q.parse::<f32>().ok())
                .unwrap_or(0.0);
            if media == "application/openmetrics-text" {
                openmetrics = openmetrics.max(q);
            } else if !media.is_empty() {
                others = others.max(q);
            }
        }
        if openmetrics > 0.0 && openmetrics >= others {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// `openmetrics` (an OpenMetrics exposition) in this format.
    pub fn render(self, openmetrics: String) -> String {
        match self {
            Format::OpenMetrics => openmetrics,
            Format::Prometheus => to_prometheus_text(&openmetrics),
        }
    }
}

/// Rewrite OpenMetrics as Prometheus text 0.0.4: no `# EOF` nor `# UNIT`,
/// and a counter family is named after its `_total` samples (else
/// Prometheus would read them as untyped).
fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .filter(|name| !name.ends_with("_total"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 8 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let family = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        match family {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or("");
                if counters.contains(&name) {
                    out.push_str(prefix);
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(&rest[name.len()..]);
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_like_prometheus_expects() {
        use Format::*;
        // What Prometheus 2.x/3.x sends.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            OpenMetrics
        );
        assert_eq!(Format::negotiate(None), Prometheus);
        assert_eq!(Format::negotiate(Some("*/*")), Prometheus);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Prometheus
        );
        assert_eq!(
            Format::negotiate(Some("text/plain, application/openmetrics-text;q=0.5")),
            Prometheus
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Prometheus
        );
    }

    #[test]
    fn rewrites_openmetrics_as_prometheus_text() {
        let om = "# HELP a_reconciles Reconciles run.\n# TYPE a_reconciles counter\na_reconciles_total 2\n# HELP b Bytes.\n# TYPE b gauge\n# UNIT b bytes\nb 3\n# HELP c_seconds Took.\n# TYPE c_seconds histogram\nc_seconds_bucket{le=\"+Inf\"} 1\nc_seconds_sum 0.1\nc_seconds_count 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_reconciles_total Reconciles run.\n# TYPE a_reconciles_total counter\na_reconciles_total 2\n# HELP b Bytes.\n# TYPE b gauge\nb 3\n# HELP c_seconds Took.\n# TYPE c_seconds histogram\nc_seconds_bucket{le=\"+Inf\"} 1\nc_seconds_sum 0.1\nc_seconds_count 1\n"
        );
    }
}
