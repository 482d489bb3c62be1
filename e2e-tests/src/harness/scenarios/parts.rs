//! A suite in parts that run at once, each in a process of its own with an
//! environment of its own: the suite's program runs itself once per part
//! that has a scenario `E2E_ONLY` selects, with [`PART`] naming the part,
//! and prints each part's lines as they come, after the part's name.

use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// How long a part's output may go on after the part exited (a process it
/// started and left behind still holding its pipes).
const OUTPUT_AFTER_EXIT: Duration = Duration::from_secs(10);

/// Run each part of `parts` (ranges of `scenarios`, named by `name(n)`)
/// with a scenario `E2E_ONLY` selects as this program again, all at once;
/// each line they print is printed after its part's name. Each part enters
/// a network namespace of its own. True when every part started and
/// exited with success.
pub fn run_parts(
    scenarios: &[Scenario],
    parts: &[Range<usize>],
    name: impl Fn(usize) -> String,
) -> Result<bool, String> {
    let only = std::env::var("E2E_ONLY").unwrap_or_default();
    let chosen = select(scenarios, &only)?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut passed = true;
    let mut running = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        if !chosen[part.clone()].contains(&true) {
            continue;
        }
        let label = name(n);
        let started = Command::new(&exe)
            .env(PART, (n + 1).to_string())
            .env_remove("E2E_IN_NETNS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match started {
            Ok(child) => child,
            Err(e) => {
                println!("FAIL starting {label}: {e}");
                passed = false;
                continue;
            }
        };
        let (done, relays) = mpsc::channel();
        relay(child.stdout.take(), label.clone(), false, done.clone());
        relay(child.stderr.take(), label.clone(), true, done);
        running.push((label, child, relays));
    }
    for (label, mut child, relays) in running {
        match child.wait() {
            Ok(status) => passed &= status.success(),
            Err(e) => {
                println!("FAIL waiting for {label}: {e}");
                passed = false;
            }
        }
        // Both relays end once every holder of the pipes is gone.
        let deadline = Instant::now() + OUTPUT_AFTER_EXIT;
        for _ in 0..2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if relays.recv_timeout(left).is_err() {
                println!("     {label}'s output still open {OUTPUT_AFTER_EXIT:?} after it exited");
                break;
            }
        }
    }
    Ok(passed)
}

/// A thread printing each line `from` gives after `label` (invalid UTF-8
/// replaced), then saying so on `done`.
fn relay<R: Read + Send + 'static>(
    from: Option<R>,
    label: String,
    errors: bool,
    done: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        if let Some(from) = from {
            let mut from = BufReader::new(from);
            let mut line = Vec::new();
            while from.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches('\n');
                if errors {
                    eprintln!("{label} | {text}");
                } else {
                    println!("{label} | {text}");
                }
                line.clear();
            }
        }
        let _ = done.send(());
    });
}
