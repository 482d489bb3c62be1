//! Who led when, read from the controller replicas' JSON logs (the lines of
//! `controller/src/run.rs`): each replica's terms as leader, whether a
//! replica reconciled outside its terms or after its successor started, and
//! how long each handover took after the old leader's SIGTERM.
//!
//! A leader logs "released the Lease" after the release is stored, so its
//! successor may log "leading" a few milliseconds earlier: terms are
//! compared by what the logs order causally (a replica's own lines; a
//! reconcile of the old leader happens before its release, which the new one
//! must see before it leads), not by that line.

use std::path::Path;

use serde_json::Value;

/// Logged once the Lease is held; reconciling starts.
const LEADING: &str = "leading";
/// Logged once reconciling stopped and the Lease was released.
const RELEASED: &str = "released the Lease";
/// Logged when reconciling stopped but the release failed: the Lease expires.
const NOT_RELEASED: &str = "could not release the Lease; it expires by itself";
/// Logged when reconciling stopped because another replica holds the Lease.
const TAKEN: &str = "stopped leading; the Lease is another replica's";
/// Logged on SIGTERM or SIGINT.
const SIGNALLED: &str = "shutdown signal received";
/// Logged by a standby that saw the Lease released and takes it.
const TAKING: &str = "the Lease was released: taking it";
/// The span every reconcile runs in.
const RECONCILE_SPAN: &str = "reconcile";

/// One line of a replica's log.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Seconds since the Unix epoch.
    pub at: f64,
    /// `fields.message`.
    pub message: String,
    /// Logged from within a reconcile.
    pub reconciling: bool,
}

/// One replica (a pod, or one process) and its log lines, in order.
#[derive(Clone, Debug)]
pub struct Replica {
    /// The pod name (or whatever names the log).
    pub name: String,
    /// Its JSON lines; other lines (a final error) are left out.
    pub lines: Vec<Line>,
}

impl Replica {
    /// Read the JSON log at `path`.
    pub fn read(name: &str, path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self::parse(name, &text))
    }

    /// The JSON lines of `text`.
    pub fn parse(name: &str, text: &str) -> Self {
        let lines = text
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter_map(|line| {
                Some(Line {
                    at: epoch_seconds(line["timestamp"].as_str()?)?,
                    message: line["fields"]["message"].as_str()?.to_string(),
                    reconciling: line["spans"]
                        .as_array()
                        .is_some_and(|spans| spans.iter().any(|s| s["name"] == RECONCILE_SPAN)),
                })
            })
            .collect();
        Replica {
            name: name.to_string(),
            lines,
        }
    }

    /// The first line with `message` in `from..until`.
    fn find(&self, message: &str, from: f64, until: f64) -> Option<f64> {
        self.lines
            .iter()
            .find(|l| l.message == message && l.at >= from && l.at <= until)
            .map(|l| l.at)
    }
}

/// One term as leader: from "leading" until the release (or its failure, or
/// the Lease found taken) was logged (`None`: still leading, or the process
/// died leading).
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// The replica.
    pub replica: String,
    /// "leading".
    pub from: f64,
    /// "released the Lease" (or the failed release).
    pub until: Option<f64>,
}

/// Every term of every replica, by start. An error when a replica logged
/// from a reconcile outside its own terms, when a term that never ended is
/// followed by another one, or when a leader reconciled after its successor
/// logged "leading".
pub fn exclusive_terms(replicas: &[Replica]) -> Result<Vec<Term>, String> {
    let mut terms = Vec::new();
    for replica in replicas {
        let mut open: Option<f64> = None;
        let mut end = |from: f64, until: Option<f64>| {
            terms.push(Term {
                replica: replica.name.clone(),
                from,
                until,
            })
        };
        for line in &replica.lines {
            if line.message == LEADING {
                if let Some(from) = open {
                    end(from, None);
                }
                open = Some(line.at);
            } else if [RELEASED, NOT_RELEASED, TAKEN].contains(&line.message.as_str())
                && let Some(from) = open.take()
            {
                end(from, Some(line.at));
            }
        }
        if let Some(from) = open {
            end(from, None);
        }
    }
    for replica in replicas {
        if let Some(line) = replica.lines.iter().find(|l| {
            l.reconciling
                && !terms
                    .iter()
                    .any(|t| t.replica == replica.name && t.contains(l.at))
        }) {
            return Err(format!(
                "{} reconciled while not leading ({:?} at {:.6})",
                replica.name, line.message, line.at
            ));
        }
    }
    terms.sort_by(|a, b| a.from.total_cmp(&b.from));
    for pair in terms.windows(2) {
        let (old, new) = (&pair[0], &pair[1]);
        if old.until.is_none() {
            return Err(format!(
                "{} led from {:.6} and never stopped, yet {} led from {:.6}",
                old.replica, old.from, new.replica, new.from
            ));
        }
        let late = replicas
            .iter()
            .filter(|r| r.name == old.replica)
            .flat_map(|r| &r.lines)
            .find(|l| l.reconciling && old.contains(l.at) && l.at >= new.from);
        if let Some(line) = late {
            return Err(format!(
                "{} reconciled at {:.6} ({:?}) while {} led from {:.6}",
                old.replica, line.at, line.message, new.replica, new.from
            ));
        }
    }
    Ok(terms)
}

impl Term {
    fn contains(&self, at: f64) -> bool {
        self.from <= at && self.until.is_none_or(|until| at <= until)
    }
}

/// One change of leader between two consecutive terms.
#[derive(Clone, Debug, PartialEq)]
pub struct Handover {
    /// The old leader.
    pub from: String,
    /// The new leader.
    pub to: String,
    /// From the old leader's SIGTERM to the new leader's "leading", in
    /// seconds (`None`: the old leader was not signalled).
    pub after_signal: Option<f64>,
    /// The new leader took the Lease because it saw it released (not
    /// because it expired).
    pub on_release: bool,
}

/// The handovers between consecutive `terms` (from [`exclusive_terms`]).
pub fn handovers(replicas: &[Replica], terms: &[Term]) -> Vec<Handover> {
    let named = |name: &str| replicas.iter().find(|r| r.name == name);
    terms
        .windows(2)
        .map(|pair| {
            let (old, new) = (&pair[0], &pair[1]);
            let signalled = named(&old.replica)
                .and_then(|r| r.find(SIGNALLED, old.from, old.until.unwrap_or(new.from)))
                .map(|at| new.from - at);
            // While `old` led, only its release can have been seen.
            let on_release = named(&new.replica)
                .and_then(|r| r.find(TAKING, old.from, new.from))
                .is_some();
            Handover {
                from: old.replica.clone(),
                to: new.replica.clone(),
                after_signal: signalled,
                on_release,
            }
        })
        .collect()
}

/// `2026-11-23T05:41:25.123456Z` (tracing-subscriber's timestamps, UTC) as
/// seconds since the Unix epoch.
pub fn epoch_seconds(timestamp: &str) -> Option<f64> {
    let (date, time) = timestamp.strip_suffix('Z')?.split_once('T')?;
    let mut ymd = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let mut hms = time.splitn(3, ':');
    let (hour, minute) = (
        hms.next()?.parse::<i64>().ok()?,
        hms.next()?.parse::<i64>().ok()?,
    );
    let second: f64 = hms.next()?.parse().ok()?;
    // Days from 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hour * 3_600 + minute * 60) as f64 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(time: &str, message: &str, reconciling: bool) -> String {
        // As tracing-subscriber writes a span: its fields, then its name
        // under the same key as the reconcile span's `name` field (the last wins).
        let spans = if reconciling {
            r#","spans":[{"namespace":"ns","name":"cache","name":"reconcile"}]"#
        } else {
            ""
        };
        format!(
            r#"{{"timestamp":"2026-11-23T05:{time}Z","level":"INFO","fields":{{"message":"{message}"}}{spans}}}"#
        )
    }

    fn replica(name: &str, lines: &[(&str, &str, bool)]) -> Replica {
        let text: Vec<String> = lines.iter().map(|(t, m, r)| line(t, m, *r)).collect();
        Replica::parse(name, &(text.join("\n") + "\nError: not JSON\n"))
    }

    #[test]
    fn timestamps_are_epoch_seconds() {
        assert_eq!(epoch_seconds("1970-01-01T00:00:00.000000Z"), Some(0.0));
        assert_eq!(
            epoch_seconds("2000-03-01T00:00:01.500000Z"),
            Some(951_868_801.5)
        );
        assert_eq!(epoch_seconds("2026-11-23T05:41:25Z"), Some(1_795_412_485.0));
        assert_eq!(epoch_seconds("2026-11-23 05:41:25"), None);
    }

    #[test]
    fn a_sigterm_handover_is_exclusive_and_measured() {
        let old = replica(
            "old",
            &[
                ("00:00.000000", LEADING, false),
                ("00:01.000000", "managed object", true),
                ("00:10.000000", SIGNALLED, false),
                // Logged after the successor's "leading": the release itself came first.
                ("00:10.900000", RELEASED, false),
            ],
        );
        let new = replica(
            "new",
            &[
                ("00:00.100000", "waiting for leadership", false),
                ("00:10.600000", TAKING, false),
                ("00:10.800000", LEADING, false),
                ("00:11.000000", "managed object", true),
            ],
        );
        let replicas = [old, new];
        let terms = exclusive_terms(&replicas).unwrap();
        assert_eq!(terms.len(), 2);
        assert_eq!(terms[1].until, None);
        let handovers = handovers(&replicas, &terms);
        assert_eq!(handovers.len(), 1);
        assert!((handovers[0].after_signal.unwrap() - 0.8).abs() < 1e-6);
        assert!(handovers[0].on_release);
    }

    #[test]
    fn a_leader_that_never_stopped_is_refused() {
        let a = replica("a", &[("00:00.000000", LEADING, false)]);
        let b = replica("b", &[("00:05.000000", LEADING, false)]);
        let error = exclusive_terms(&[a, b]).unwrap_err();
        assert!(error.contains("never stopped, yet b led"), "{error}");
    }

    #[test]
    fn reconciling_after_the_successor_started_is_refused() {
        let a = replica(
            "a",
            &[
                ("00:00.000000", LEADING, false),
                ("00:05.500000", "managed object", true),
                ("00:06.000000", RELEASED, false),
            ],
        );
        let b = replica("b", &[("00:05.000000", LEADING, false)]);
        let error = exclusive_terms(&[a, b]).unwrap_err();
        assert!(error.contains("a reconciled at"), "{error}");
    }

    #[test]
    fn reconciling_outside_a_term_is_refused() {
        let a = replica(
            "a",
            &[
                ("00:00.000000", LEADING, false),
                ("00:01.000000", RELEASED, false),
                ("00:02.000000", "managed object", true),
            ],
        );
        let error = exclusive_terms(&[a]).unwrap_err();
        assert!(error.contains("a reconciled while not leading"), "{error}");
    }
}
