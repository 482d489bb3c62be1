//! A suite in parts that run at once, each in a process of its own with an
//! environment of its own: the suite's program runs itself once per part
//! that has a scenario `E2E_ONLY` selects, with [`PART`] naming the part,
//! and prints each part's lines as they come, after the part's name.

use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::process::{Command, Stdio};

use crate::harness::scenarios::runner::{Scenario, select};

/// The variable naming the part a process runs (1, 2, ...).
pub const PART: &str = "E2E_PART";

/// The part this process runs (an index into the suite's parts), when it
/// is one: `Err` for a value that names no part.
pub fn this_part(parts: usize) -> Option<Result<usize, String>> {
    let value = std::env::var(PART).ok()?;
    Some(match value.parse::<usize>() {
        Ok(n) if (1..=parts).contains(&n) => Ok(n - 1),
        _ => Err(format!("{PART}={value:?} names no part: 1 to {parts}")),
    })
}

/// Run each part of `parts` (ranges of `scenarios`, named by `name(n)`)
/// with a scenario `E2E_ONLY` selects as this program again, all at once;
/// each line they print is printed after its part's name. Each part enters
/// a network namespace of its own. True when every part exited with
/// success.
pub fn run_parts(
    scenarios: &[Scenario],
    parts: &[Range<usize>],
    name: impl Fn(usize) -> String,
) -> Result<bool, String> {
    let only = std::env::var("E2E_ONLY").unwrap_or_default();
    let chosen = select(scenarios, &only)?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut running = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        if !chosen[part.clone()].contains(&true) {
            continue;
        }
        let mut child = Command::new(&exe)
            .env(PART, (n + 1).to_string())
            .env_remove("E2E_IN_NETNS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", name(n)))?;
        let label = name(n);
        let relays = [
            relay(
                child.stdout.take().map(BufReader::new),
                label.clone(),
                false,
            ),
            relay(child.stderr.take().map(BufReader::new), label.clone(), true),
        ];
        running.push((label, child, relays));
    }
    let mut passed = true;
    for (label, mut child, relays) in running {
        let status = child
            .wait()
            .map_err(|e| format!("waiting for {label}: {e}"))?;
        for relay in relays {
            let _ = relay.join();
        }
        passed &= status.success();
    }
    Ok(passed)
}

/// A thread printing each line `from` gives after `label`.
fn relay<R: BufRead + Send + 'static>(
    from: Option<R>,
    label: String,
    errors: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in from
            .into_iter()
            .flat_map(|from| from.lines().map_while(Result::ok))
        {
            if errors {
                eprintln!("{label} | {line}");
            } else {
                println!("{label} | {line}");
            }
        }
    })
}
