//! Properties over 100,000 generated requests through the native build, and a
//! sample of them through policy.wasm, which must answer byte for byte alike.

use e2e_tests::Policy;
use e2e_tests::generate::{Rng, request};
use memcached_api::admission::NamespaceEnforce;
use serde_json::{Value, json};

const REQUESTS: usize = 100_000;
const WASM_SAMPLE_EVERY: usize = 100;

/// The native build, in a cluster whose namespaces carry no labels (as the
/// waPC host of [`Policy`] answers the policy's Namespace lookups).
fn native(request: &Value, settings: &Value) -> Value {
    let payload = json!({"request": request, "settings": settings}).to_string();
    let unlabelled = |_: &str| NamespaceEnforce::Label(None);
    let answer = memcached_policy::request::evaluate_with(payload.as_bytes(), unlabelled);
    serde_json::to_value(answer).unwrap()
}

/// Every leaf of `original` is in `mutated` unchanged (an empty list may be
/// filled: empty autoscaling metrics are defaulted).
fn preserved(original: &Value, mutated: &Value) -> bool {
    match (original, mutated) {
        (Value::Object(o), Value::Object(m)) => o
            .iter()
            .all(|(k, v)| m.get(k).is_some_and(|mv| preserved(v, mv))),
        (Value::Array(o), Value::Array(_)) if o.is_empty() => true,
        _ => original == mutated,
    }
}

fn check(request: &Value, settings: &Value, answer: &Value) -> Result<(), String> {
    let accepted = answer["accepted"].as_bool().ok_or("no accepted flag")?;
    if !accepted {
        let message = answer["message"].as_str().unwrap_or_default();
        let pod_security =
            answer["code"] == 403 && message.contains(" is forbidden: violates PodSecurity ");
        if !(answer["code"] == 400 && !message.is_empty() || pod_security) {
            return Err("a rejection needs code 400 and a message, or 403 by Pod Security".into());
        }
        return Ok(());
    }
    let Some(mutated) = answer.get("mutated_object").filter(|m| !m.is_null()) else {
        return Ok(());
    };
    let mut original = request["object"].clone();
    let dropped_replicas = answer["warnings"].to_string().contains("spec.replicas");
    if dropped_replicas {
        original["spec"]
            .as_object_mut()
            .ok_or("spec")?
            .remove("replicas");
    }
    if !preserved(&original, mutated) {
        return Err("the mutation changed something the user set".into());
    }
    // The defaulted object is final: submitting it again changes nothing.
    let mut again = request.clone();
    again["object"] = mutated.clone();
    if dropped_replicas {
        again["oldObject"] = mutated.clone();
    }
    let second = native(&again, settings);
    if second["accepted"] != true || !second["mutated_object"].is_null() {
        return Err(format!("re-submitting the defaulted object gave {second}"));
    }
    Ok(())
}

#[test]
fn generated_requests_get_consistent_answers_natively_and_in_wasm() {
    let policy = Policy::load().unwrap();
    let mut rng = Rng::new(0x6d65_6d63_6163_6865);
    let (mut accepted, mut mutated, mut rejected, mut sampled) = (0, 0, 0, 0);
    for i in 0..REQUESTS {
        let request = request(&mut rng);
        let settings = match i % 7 {
            0 => json!({"mutate": false, "memoryOverhead": "16Mi"}),
            1 => json!({"podSecurityLevel": "baseline"}),
            2 => json!({"podSecurityLevel": "privileged"}),
            _ => json!({}),
        };
        let answer = native(&request, &settings);
        if let Err(why) = check(&request, &settings, &answer) {
            panic!("request {i}: {why}\nrequest: {request}\nanswer: {answer}");
        }
        match (
            answer["accepted"].as_bool(),
            answer["mutated_object"].is_null(),
        ) {
            (Some(true), true) => accepted += 1,
            (Some(true), false) => mutated += 1,
            _ => rejected += 1,
        }
        if i % WASM_SAMPLE_EVERY == 0 {
            let in_wasm = policy.validate(&request, &settings).unwrap();
            assert_eq!(
                in_wasm, answer,
                "request {i}: wasm and native differ\nrequest: {request}"
            );
            sampled += 1;
        }
    }
    println!(
        "{REQUESTS} requests: {accepted} accepted, {mutated} mutated, {rejected} rejected; {sampled} also through policy.wasm"
    );
    // The generator must reach every outcome, or it explores nothing.
    assert!(
        accepted > 1000 && mutated > 1000 && rejected > 1000,
        "{accepted}/{mutated}/{rejected}"
    );
}
