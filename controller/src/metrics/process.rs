//! The standard `process_*` metrics of Prometheus client libraries (CPU,
//! memory, file descriptors, start time), read from `/proc/self` at each
//! scrape. prometheus-client has no such collector; names, types and units
//! are those of client_golang's, so existing dashboards and alerts work.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ): 100 on every
/// Linux architecture, as Prometheus' own procfs library assumes.
const TICKS_PER_SECOND: f64 = 100.0;

/// The process's own figures at one moment; `None` where `/proc` is absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// User plus system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident set size, bytes.
    pub resident_bytes: Option<f64>,
    /// Virtual memory size, bytes.
    pub virtual_bytes: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<f64>,
    /// Soft limit of open file descriptors.
    pub max_fds: Option<f64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl Sample {
    /// Read `/proc/self` now.
    pub fn read() -> Sample {
        let proc = |file: &str| std::fs::read_to_string(format!("/proc/{file}")).ok();
        let stat = proc("self/stat");
        let stat = stat.as_deref().map(stat_fields).unwrap_or_default();
        let status = proc("self/status").unwrap_or_default();
        let boot_time = proc("stat").as_deref().and_then(boot_time);
        Sample {
            cpu_seconds: stat.cpu_ticks.map(|t| t / TICKS_PER_SECOND),
            resident_bytes: status_kib(&status, "VmRSS:").map(|k| k * 1024.0),
            virtual_bytes: status_kib(&status, "VmSize:").map(|k| k * 1024.0),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|dir| dir.count() as f64),
            max_fds: proc("self/limits").as_deref().and_then(max_open_files),
            start_time_seconds: stat
                .start_ticks
                .zip(boot_time)
                .map(|(ticks, boot)| boot + ticks / TICKS_PER_SECOND),
        }
    }
}

/// What `/proc/self/stat` says.
#[derive(Default)]
struct Stat {
    cpu_ticks: Option<f64>,
    start_ticks: Option<f64>,
}

/// utime + stime (fields 14, 15) and starttime (22); the command name
/// (field 2, in parentheses) may hold spaces, so count after its `)`.
fn stat_fields(stat: &str) -> Stat {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Stat::default();
    };
    // `rest` starts at field 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    Stat {
        cpu_ticks: field(14).zip(field(15)).map(|(u, s)| u + s),
        start_ticks: field(22),
    }
}

/// A `Name:   123 kB` line of `/proc/self/status`.
fn status_kib(status: &str, name: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// `btime` of `/proc/stat`: boot time, seconds since the epoch.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<f64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Exposes a fresh [`Sample`] at every encoding of the registry.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = Sample::read();
        if let Some(v) = s.cpu_seconds {
            let m = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(v).encode(m)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                s.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(v).encode(m)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat =
            "42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 1234 1000 100";
        let s = stat_fields(stat);
        assert_eq!(s.cpu_ticks, Some(300.0));
        assert_eq!(s.start_ticks, Some(1234.0));
        assert_eq!(
            status_kib("Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t 512 kB\n", "VmRSS:"),
            Some(512.0)
        );
        assert_eq!(boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1.7e9));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files"
            ),
            None
        );
    }

    #[test]
    fn reads_this_process() {
        let s = Sample::read();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 3600.0,
            "{start} vs {now}"
        );
        assert!(s.cpu_seconds.unwrap() >= 0.0);
        let rss = s.resident_bytes.unwrap();
        assert!(rss > 1e6 && rss < s.virtual_bytes.unwrap(), "{s:?}");
        let (open, max) = (s.open_fds.unwrap(), s.max_fds.unwrap());
        assert!(open >= 3.0 && open < max, "{s:?}");
    }
}
