//! Waiting for and checking what the suites are shown: [`wait_for`] a state
//! (or [`wait_for_progress`] towards it), [`check`] a fact, an object's status
//! conditions.

use std::time::{Duration, Instant};

use serde_json::Value;

/// `Ok` when `condition` holds, else the `message` as the error.
pub fn check(condition: bool, message: impl Into<String>) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message.into())
    }
}

/// Poll `check` every 200 ms until it succeeds or `timeout` passes; the
/// error names what was awaited and the last reason it was not there yet.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return Ok(value),
            Err(reason) if Instant::now() >= deadline => {
                return Err(format!(
                    "timed out after {}s waiting for {what}: {reason}",
                    timeout.as_secs()
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Poll `progress` (how far, and what it saw) every 2 s until it reaches
/// `goal`; the error comes when it has not grown for `stall`. A bound on
/// progress, not on time: a loaded machine gets there slowly, a stuck
/// controller not at all.
pub fn wait_for_progress(
    what: &str,
    goal: usize,
    stall: Duration,
    mut progress: impl FnMut() -> Result<(usize, String), String>,
) -> Result<(), String> {
    let (mut best, mut since) = (0, Instant::now());
    loop {
        let (reached, seen) = progress().unwrap_or_else(|e| (0, e));
        if reached >= goal {
            return Ok(());
        }
        if reached > best {
            (best, since) = (reached, Instant::now());
        } else if since.elapsed() >= stall {
            return Err(format!(
                "no progress for {}s waiting for {what}: {seen}",
                stall.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The condition of type `kind` in an object's status.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The status ("True", "False", "Unknown") of an object's `kind` condition.
pub fn condition_status<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    condition(object, kind)?["status"].as_str()
}
