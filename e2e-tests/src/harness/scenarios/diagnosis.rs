//! What a failed scenario leaves in its log besides its own message: the
//! Memcacheds whose conditions are not all well, the pods that are not
//! Ready, and the controller's last warnings, so a failure seen once on a
//! loaded machine can be understood without running it again.

use serde_json::Value;

use crate::harness::Env;

/// At most this many lines of each part.
const LINES: usize = 25;

/// The cluster as a failed scenario left it, as indented lines.
pub fn diagnose(env: &Env) -> String {
    let mut parts = vec![
        part("Memcacheds not all well", unwell_memcacheds(env)),
        part("pods not Ready", unready_pods(env)),
    ];
    if let Ok(operator) = env.operator() {
        let log = env.cluster.workdir.join(format!("{}.log", operator.name));
        let warnings = std::fs::read_to_string(&log)
            .map(|text| warnings(&text))
            .map_err(|e| format!("{}: {e}", log.display()));
        parts.push(part(
            &format!("{}'s last warnings ({})", operator.name, log.display()),
            warnings,
        ));
    }
    parts.concat()
}

/// `title:` and `lines` (the last [`LINES`] of them), or the error.
fn part(title: &str, lines: Result<Vec<String>, String>) -> String {
    let mut text = format!("     {title}:\n");
    match lines {
        Ok(lines) if lines.is_empty() => text.push_str("       none\n"),
        Ok(lines) => {
            for line in &lines[lines.len().saturating_sub(LINES)..] {
                text.push_str(&format!("       {line}\n"));
            }
        }
        Err(e) => text.push_str(&format!("       cannot tell: {e}\n")),
    }
    text
}

/// Each Memcached with a condition other than `Ready`/`Available` True or
/// `Degraded`/`Progressing` False: its namespace, name and those conditions.
fn unwell_memcacheds(env: &Env) -> Result<Vec<String>, String> {
    let listed = env.kubectl.get(&["memcacheds", "-A"])?;
    Ok(items(&listed)
        .filter_map(|mc| {
            let unwell: Vec<String> = (mc["status"]["conditions"].as_array().into_iter())
                .flatten()
                .filter(|c| {
                    let bad_news = matches!(c["type"].as_str(), Some("Degraded" | "Progressing"));
                    c["status"] != if bad_news { "False" } else { "True" }
                })
                .map(|c| {
                    format!(
                        "{}={} {}: {}",
                        c["type"], c["status"], c["reason"], c["message"]
                    )
                })
                .collect();
            (!unwell.is_empty()).then(|| format!("{}: {}", qualified(mc), unwell.join("; ")))
        })
        .collect())
}

/// Each pod without a Ready condition True: phase, node, address, and why
/// its conditions and containers say it is not.
fn unready_pods(env: &Env) -> Result<Vec<String>, String> {
    let listed = env.kubectl.get(&["pods", "-A"])?;
    Ok(items(&listed)
        .filter(|pod| {
            let conditions = pod["status"]["conditions"].as_array().into_iter().flatten();
            !conditions
                .into_iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
        .map(|pod| {
            let status = &pod["status"];
            let reasons = (status["conditions"].as_array().into_iter().flatten())
                .filter(|c| c["status"] != "True" && !c["reason"].is_null())
                .map(|c| format!("{} {}: {}", c["type"], c["reason"], c["message"]));
            let waiting = (status["containerStatuses"].as_array().into_iter().flatten())
                .filter_map(|c| c["state"]["waiting"]["reason"].as_str())
                .map(|reason| format!("waiting: {reason}"));
            format!(
                "{} {} on {} at {}{}",
                qualified(pod),
                status["phase"],
                pod["spec"]["nodeName"],
                status["podIP"],
                reasons
                    .chain(waiting)
                    .map(|r| format!("; {r}"))
                    .collect::<String>(),
            )
        })
        .collect())
}

/// The WARN and ERROR lines of a controller log.
fn warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .map(str::to_string)
        .collect()
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list["items"].as_array().into_iter().flatten()
}

fn qualified(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_warnings_and_errors() {
        let log = "2026-11-29T10:00:00Z  INFO reconciled\n\
                   2026-11-29T10:00:01Z  WARN cannot list the rollout's pods\n\
                   2026-11-29T10:00:02Z ERROR lost leadership\n";
        assert_eq!(
            warnings(log),
            [
                "2026-11-29T10:00:01Z  WARN cannot list the rollout's pods",
                "2026-11-29T10:00:02Z ERROR lost leadership"
            ]
        );
    }

    #[test]
    fn shows_the_last_lines_or_why_not() {
        let many: Vec<String> = (0..LINES + 5).map(|i| i.to_string()).collect();
        let shown = part("t", Ok(many));
        assert!(shown.starts_with("     t:\n       5\n"), "{shown}");
        assert!(
            shown.ends_with(&format!("       {}\n", LINES + 4)),
            "{shown}"
        );
        assert_eq!(part("t", Ok(vec![])), "     t:\n       none\n");
        assert_eq!(
            part("t", Err("no API".into())),
            "     t:\n       cannot tell: no API\n"
        );
    }
}
