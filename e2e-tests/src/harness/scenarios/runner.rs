//! Running a suite's scenarios: each a value with its name (what it proves),
//! what it runs, and the scenarios it needs run before it. Scenarios are
//! numbered by their place in the suite; `E2E_ONLY` picks some (with what
//! they need), by number, by name, or by whole words of the name.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::harness::Env;
use crate::harness::clients::api_requests::request_counts;
use crate::harness::scenarios::diagnosis::diagnose;

/// How long a scenario may wait for the namespaces earlier ones deleted.
const DELETED_NAMESPACES_GONE: Duration = Duration::from_secs(600);

/// An end-to-end scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    /// What it proves, as a sentence.
    pub name: &'static str,
    /// The check against the running environment.
    pub run: fn(&mut Env) -> Result<(), String>,
    /// The names of the scenarios it needs run first (what they set up).
    pub needs: &'static [&'static str],
}

impl Scenario {
    /// A scenario that needs no other.
    pub const fn new(name: &'static str, run: fn(&mut Env) -> Result<(), String>) -> Self {
        Scenario {
            name,
            run,
            needs: &[],
        }
    }

    /// This scenario, run only after `needs` (names of earlier scenarios).
    pub const fn needs(self, needs: &'static [&'static str]) -> Self {
        Scenario { needs, ..self }
    }
}

/// How a suite's scenarios went.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Scenarios run.
    pub ran: usize,
    /// Of those, the failed ones (and those not run as a need failed).
    pub failed: usize,
    /// Scenarios `E2E_ONLY` left out.
    pub skipped: usize,
}

/// Run every selected scenario (see [`select`]) in order, even after one
/// failed (but not one whose need failed: that one fails, saying so),
/// printing each outcome with its number, its time and its cost; then stop
/// the environment, print the tally and exit, non-zero when any failed.
pub fn run_scenarios(mut env: Env, scenarios: &[Scenario]) -> ! {
    let started = Instant::now();
    let tally = run_each(&mut env, scenarios);
    drop(env);
    exit_with(&tally, started)
}

/// Print the tally of a suite that took since `started`, and exit with it.
pub fn exit_with(tally: &Tally, started: Instant) -> ! {
    println!(
        "{} of {} scenarios passed in {:.0}s{}",
        tally.ran - tally.failed,
        tally.ran,
        started.elapsed().as_secs_f64(),
        match tally.skipped {
            0 => String::new(),
            n => format!(", {n} skipped"),
        }
    );
    std::process::exit(if tally.failed == 0 { 0 } else { 1 });
}

/// [`run_scenarios`] without the exit: the tally.
pub fn run_each(env: &mut Env, scenarios: &[Scenario]) -> Tally {
    run_part(env, scenarios, 0..scenarios.len())
}

/// [`run_each`] for the scenarios at `part` of `scenarios`, numbered by
/// their place in the whole suite: a suite whose parts run in processes of
/// their own, at once. A scenario needing one outside its part fails.
pub fn run_part(env: &mut Env, scenarios: &[Scenario], part: Range<usize>) -> Tally {
    let only = std::env::var("E2E_ONLY").unwrap_or_default();
    let chosen = match select(scenarios, &only) {
        Ok(chosen) => chosen,
        Err(e) => {
            println!("FAIL E2E_ONLY={only:?}: {e}");
            return Tally {
                failed: 1,
                ran: 1,
                ..Tally::default()
            };
        }
    };
    let mut tally = Tally {
        skipped: chosen[part.clone()].iter().filter(|c| !**c).count(),
        ..Tally::default()
    };
    if tally.skipped > 0 {
        println!("skipping {} scenarios: E2E_ONLY={only:?}", tally.skipped);
    }
    let mut failed_names = Vec::new();
    let mut stuck = BTreeSet::new();
    for at in part.clone() {
        let (number, scenario) = (at + 1, &scenarios[at]);
        if !chosen[at] {
            continue;
        }
        tally.ran += 1;
        let name = format!("{number}. {}", scenario.name);
        let in_part = |need: &str| scenarios[part.clone()].iter().any(|s| s.name == need);
        if let Some(need) = scenario.needs.iter().find(|need| !in_part(need)) {
            tally.failed += 1;
            failed_names.push(scenario.name);
            println!("FAIL {name}\n     not run: it needs \"{need}\", which runs in another part");
            continue;
        }
        if let Some(need) = (scenario.needs.iter()).find(|n| failed_names.contains(*n)) {
            tally.failed += 1;
            failed_names.push(scenario.name);
            println!("FAIL {name}\n     not run: it needs \"{need}\", which failed");
            continue;
        }
        match deleted_namespaces_gone(env, &mut stuck) {
            Ok(waited) if waited >= Duration::from_secs(1) => println!(
                "     waited {:.1}s for the namespaces earlier scenarios deleted",
                waited.as_secs_f64()
            ),
            Ok(_) => {}
            Err(e) => {
                tally.failed += 1;
                failed_names.push(scenario.name);
                println!("FAIL {name}\n     not run: {e}");
                continue;
            }
        }
        let began = Instant::now();
        let requests = (api_requests(env), controller_requests(env));
        let outcome = (scenario.run)(env);
        println!("     {}", cost(env, requests));
        let took = began.elapsed().as_secs_f64();
        match outcome {
            Ok(()) => println!("ok   {name} ({took:.1}s)"),
            Err(e) => {
                tally.failed += 1;
                failed_names.push(scenario.name);
                println!("FAIL {name} ({took:.1}s)\n     {e}");
                print!("{}", diagnose(env));
            }
        }
    }
    tally
}

/// Wait until no namespace is being deleted but those in `stuck`, and say
/// how long that took: each scenario starts on a cluster that has finished
/// cleaning up after the ones before it (a namespace being emptied keeps pods
/// on the nodes and the controllers busy; 1,000 Memcacheds took up to 125 s
/// on a loaded machine), however fast this machine did it. Namespaces still
/// terminating at the bound are added to `stuck` and the error names them:
/// the next scenarios do not wait for them again.
fn deleted_namespaces_gone(env: &Env, stuck: &mut BTreeSet<String>) -> Result<Duration, String> {
    let started = Instant::now();
    let terminating = |env: &Env| -> Result<Vec<String>, String> {
        let listed = env.kubectl.get(&["namespaces"])?;
        Ok((listed["items"].as_array().into_iter().flatten())
            .filter(|n| !n["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|n| n["metadata"]["name"].as_str().map(String::from))
            .filter(|n| !stuck.contains(n))
            .collect())
    };
    loop {
        let timed_out = started.elapsed() >= DELETED_NAMESPACES_GONE;
        match terminating(env) {
            Ok(left) if left.is_empty() => return Ok(started.elapsed()),
            Ok(left) if timed_out => {
                let message = format!(
                    "{} namespace(s) still terminating after {}s: {}",
                    left.len(),
                    DELETED_NAMESPACES_GONE.as_secs(),
                    left.join(", ")
                );
                stuck.extend(left);
                return Err(message);
            }
            Err(e) if timed_out => return Err(format!("cannot list namespaces: {e}")),
            _ => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

/// Which `scenarios` `only` picks (every one when it is empty): a
/// comma-separated list, each item a scenario's number (a number picks by
/// number only), its whole name, or words found whole in its name
/// (`E2E_ONLY="warm restart"`, case aside);
/// and, before them, every scenario a picked one needs. An item that picks
/// nothing, or a need that names no earlier scenario, is an error.
pub fn select(scenarios: &[Scenario], only: &str) -> Result<Vec<bool>, String> {
    for (at, scenario) in scenarios.iter().enumerate() {
        for need in scenario.needs {
            if !scenarios[..at].iter().any(|s| s.name == *need) {
                return Err(format!(
                    "\"{}\" needs \"{need}\", which is no scenario before it",
                    scenario.name
                ));
            }
        }
    }
    let items: Vec<&str> = (only.split(','))
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect();
    if items.is_empty() {
        return Ok(vec![true; scenarios.len()]);
    }
    let mut chosen = vec![false; scenarios.len()];
    for item in items {
        let picked: Vec<usize> = (0..scenarios.len())
            .filter(|&i| picks(item, i + 1, scenarios[i].name))
            .collect();
        if picked.is_empty() {
            return Err(format!("{item:?} picks no scenario"));
        }
        for i in picked {
            chosen[i] = true;
        }
    }
    // Needs come before: walking backwards, each chosen one's needs are chosen.
    for at in (0..scenarios.len()).rev() {
        if chosen[at] {
            for need in scenarios[at].needs {
                if let Some(i) = scenarios.iter().position(|s| s.name == *need) {
                    chosen[i] = true;
                }
            }
        }
    }
    Ok(chosen)
}

/// `item` picks the scenario numbered `number` named `name`.
fn picks(item: &str, number: usize, name: &str) -> bool {
    if item.bytes().all(|b| b.is_ascii_digit()) {
        return item == number.to_string();
    }
    if item == name {
        return true;
    }
    let (item, name) = (item.to_lowercase(), name.to_lowercase());
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    name.match_indices(&item).any(|(at, found)| {
        boundary(name[..at].chars().next_back())
            && boundary(name[at + found.len()..].chars().next())
    })
}

/// Every request the API server has served so far (all clients), when its
/// metrics can be read.
fn api_requests(env: &Env) -> Option<f64> {
    let counts = request_counts(&env.kubectl).ok()?;
    Some(counts.iter().map(|c| c.count).sum())
}

/// The running controller and the requests it sent the API server so far.
fn controller_requests(env: &Env) -> Option<(String, u64)> {
    let operator = env.operator.as_ref()?;
    Some((operator.name.clone(), operator.api_requests().ok()?))
}

/// What a scenario cost: the requests the API server served meanwhile (all
/// clients: the controller, kube-controller-manager, the scheduler, the test
/// itself), those the controller sent (when the same one ran throughout), and
/// the running controller's memory after it.
fn cost(env: &Env, (all_before, ours_before): (Option<f64>, Option<(String, u64)>)) -> String {
    let requests = match (all_before, api_requests(env)) {
        (Some(before), Some(after)) if after >= before => format!("{:.0}", after - before),
        _ => "unknown (the API server restarted or cannot be read)".to_string(),
    };
    let ours = match (ours_before, controller_requests(env)) {
        (Some((before_name, before)), Some((name, after))) if name == before_name => {
            format!("{} by the controller", after.saturating_sub(before))
        }
        _ => "the controller's unknown (it was replaced)".to_string(),
    };
    let memory = env
        .operator
        .as_ref()
        .and_then(|operator| operator.rss_kib())
        .map_or("no controller running".to_string(), |kib| {
            format!("controller RSS {:.1} MiB", kib as f64 / 1024.0)
        });
    format!("cost: {requests} API requests (all clients), {ours}, {memory}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop(_: &mut Env) -> Result<(), String> {
        Ok(())
    }

    const SUITE: &[Scenario] = &[
        Scenario::new("the node is Ready", noop),
        Scenario::new("Kubewarden from its charts", noop),
        Scenario::new("a warm restart keeps every key", noop),
        Scenario::new("Kubewarden requires the release key", noop)
            .needs(&["Kubewarden from its charts"]),
        Scenario::new("a warm restart in StatefulSet mode", noop),
        Scenario::new("restarting warm 13 times, scaled 3 -> 1 -> 2", noop),
    ];

    fn picked(only: &str) -> Vec<usize> {
        let chosen = select(SUITE, only).unwrap();
        (1..)
            .zip(chosen)
            .filter(|(_, c)| *c)
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn scenarios_are_picked_by_number_name_or_whole_words_with_their_needs() {
        assert_eq!(picked(""), [1, 2, 3, 4, 5, 6]);
        assert_eq!(
            picked("1"),
            [1],
            "a number picks by number: not 13, not '-> 1 ->'"
        );
        assert_eq!(
            picked("warm restart"),
            [3, 5],
            "whole words, not 'restarting'"
        );
        assert_eq!(picked("Warm Restart"), [3, 5]);
        assert_eq!(picked("the node is Ready"), [1]);
        assert_eq!(picked("4"), [2, 4], "with what it needs");
        assert_eq!(picked("1, 6"), [1, 6]);
        assert!(select(SUITE, "nothing like it").is_err());
    }

    #[test]
    fn a_need_must_name_an_earlier_scenario() {
        let backwards = [
            Scenario::new("b", noop).needs(&["a"]),
            Scenario::new("a", noop),
        ];
        assert!(select(&backwards, "").is_err());
    }
}
