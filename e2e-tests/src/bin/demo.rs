//! `make demo`: the built policy.wasm judging every seed example, the way
//! Kubewarden's policy-server runs it. Shows each verdict, the defaults it
//! added and every message.

use e2e_tests::{Policy, fixtures};
use serde_json::Value;

fn main() {
    let policy = match Policy::load() {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let shown = fixtures()
        .into_iter()
        .filter(|f| !f.name.ends_with("-v1alpha1"));
    let (mut accepted, mut rejected) = (0, 0);
    for f in shown {
        let request = &f.review["request"];
        let answer = match policy.validate(request, &f.expected.settings) {
            Ok(answer) => answer,
            Err(e) => {
                eprintln!("{}: {e}", f.name);
                std::process::exit(1);
            }
        };
        println!(
            "\n== {} ({} {}/{}, settings {})",
            f.name,
            request["operation"].as_str().unwrap_or_default(),
            request["kind"]["version"].as_str().unwrap_or_default(),
            request["kind"]["kind"].as_str().unwrap_or_default(),
            f.expected.settings
        );
        if answer["accepted"] == true {
            accepted += 1;
            match answer.get("mutated_object").filter(|o| !o.is_null()) {
                Some(mutated) => {
                    println!("   ACCEPTED, with defaults:");
                    diff("", &request["object"], mutated);
                }
                None => println!("   ACCEPTED, unchanged"),
            }
        } else {
            rejected += 1;
            println!("   REJECTED (code {}):", answer["code"]);
            println!("   {}", answer["message"].as_str().unwrap_or_default());
        }
        for warning in answer["warnings"].as_array().into_iter().flatten() {
            println!("   Warning: {}", warning.as_str().unwrap_or_default());
        }
    }
    println!("\n{accepted} accepted, {rejected} rejected by policy.wasm");
}

/// Print what `after` adds to, removes from or changes in `before`.
fn diff(path: &str, before: &Value, after: &Value) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (key, value) in a {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match b.get(key) {
                    Some(old) => diff(&child, old, value),
                    None => println!("     + {child}: {value}"),
                }
            }
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                println!("     - {path}.{key} (removed)");
            }
        }
        _ if before != after => println!("     ~ {path}: {before} -> {after}"),
        _ => {}
    }
}
