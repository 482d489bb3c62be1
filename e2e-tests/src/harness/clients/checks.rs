//! Waiting for and checking what the suites are shown: [`wait_for`] a state,
//! [`check`] a fact, an object's status conditions.

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
