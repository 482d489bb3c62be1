//! Every seed example through the real policy.wasm, asserted whole.

use e2e_tests::{Policy, fixtures};
use serde_json::{Value, json};

#[test]
fn every_fixture_gets_its_expected_answer() {
    let policy = Policy::load().unwrap();
    let fixtures = fixtures();
    assert!(fixtures.len() >= 40, "only {} fixtures", fixtures.len());
    let mut failures = Vec::new();
    for f in &fixtures {
        let settings = policy.validate_settings(&f.expected.settings).unwrap();
        assert_eq!(
            settings,
            json!({"valid": true, "message": null}),
            "{}: settings",
            f.name
        );
        let answer = policy
            .validate(&f.review["request"], &f.expected.settings)
            .unwrap();
        if let Err(why) = check(&answer, f) {
            failures.push(format!("{}: {why}\n  answer: {answer}", f.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n")
    );
}

fn check(answer: &Value, f: &e2e_tests::Fixture) -> Result<(), String> {
    let e = &f.expected;
    let warnings: Vec<String> =
        serde_json::from_value(answer["warnings"].clone()).unwrap_or_default();
    if warnings != e.warnings {
        return Err(format!("warnings {warnings:?}, expected {:?}", e.warnings));
    }
    if answer["accepted"] != e.accepted {
        return Err(format!(
            "accepted is {}, expected {}",
            answer["accepted"], e.accepted
        ));
    }
    if !e.accepted {
        let name = f.review["request"]["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default();
        if answer["message"] != e.message(name) {
            return Err(format!("message differs, expected {:?}", e.message(name)));
        }
        if answer["code"] != e.code.unwrap_or(400) {
            return Err(format!("code {}", answer["code"]));
        }
        return Ok(());
    }
    let mutated = answer.get("mutated_object").filter(|o| !o.is_null());
    match (&e.object, mutated) {
        (None, None) => Ok(()),
        (Some(expected), Some(got)) if expected == got => Ok(()),
        (Some(expected), Some(got)) => Err(format!(
            "mutated object differs:\n  expected {expected}\n  got      {got}"
        )),
        (Some(_), None) => Err("expected a mutation, got a plain acceptance".into()),
        (None, Some(_)) => Err("expected a plain acceptance, got a mutation".into()),
    }
}

#[test]
fn a_defaulted_object_comes_back_unchanged() {
    let policy = Policy::load().unwrap();
    for f in fixtures().iter().filter(|f| f.expected.object.is_some()) {
        let mut request = f.review["request"].clone();
        request["object"] = f.expected.object.clone().unwrap();
        if request["operation"] == "UPDATE" {
            request["oldObject"] = request["object"].clone();
        }
        let answer = policy.validate(&request, &f.expected.settings).unwrap();
        assert_eq!(answer["accepted"], true, "{}", f.name);
        assert!(
            answer["mutated_object"].is_null(),
            "{}: defaulting is not idempotent: {answer}",
            f.name
        );
    }
}

#[test]
fn protocol_version_is_v1() {
    let policy = Policy::load().unwrap();
    assert_eq!(
        policy.call_raw("protocol_version", b"").unwrap(),
        json!("v1")
    );
}

#[test]
fn settings_are_validated_with_clear_messages() {
    let policy = Policy::load().unwrap();
    for (settings, valid) in [
        (json!({}), true),
        (json!(null), true),
        (json!({"memoryOverhead": "48Mi", "mutate": false}), true),
        (json!({"memoryOverhead": "a lot"}), false),
        (json!({"mutate": 1}), false),
        (json!({"typo": true}), false),
    ] {
        let answer = policy.validate_settings(&settings).unwrap();
        assert_eq!(answer["valid"], valid, "{settings}: {answer}");
        if !valid {
            assert!(
                answer["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("invalid settings: "),
                "{answer}"
            );
        }
    }
}
