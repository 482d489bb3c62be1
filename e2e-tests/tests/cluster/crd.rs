//! The CRD and the policy through `kubectl`: both versions served, every seed example accepted
//! with its defaults or rejected with the seed's messages as kubectl prints them.

use super::*;

pub(crate) fn crd_installs(env: &mut Env) -> Result<(), String> {
    let crd = env.kubectl.get(&["crd", "memcacheds.memcached.c5c3.io"])?;
    for condition in ["Established", "NamesAccepted"] {
        check(
            condition_status(&crd, condition) == Some("True"),
            format!("CRD condition {condition} is not True"),
        )?;
    }
    check(
        condition_status(&crd, "NonStructuralSchema").is_none(),
        "the API server found the schema non-structural",
    )?;
    let served: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == json!(true))
        .filter_map(|v| v["name"].as_str())
        .collect();
    check(
        served == ["v1alpha1", "v1beta1"],
        format!("served versions {served:?}"),
    )?;
    for version in ["v1alpha1", "v1beta1"] {
        let list = env
            .kubectl
            .get(&[&format!("memcacheds.{version}.memcached.c5c3.io"), "-A"])?;
        check(
            list["kind"] == "List" || list["kind"] == "MemcachedList",
            format!("listing {version} answered {}", list["kind"]),
        )?;
    }
    let resources = env.kubectl.ok(&[
        "api-resources",
        "--api-group=memcached.c5c3.io",
        "-o",
        "wide",
    ])?;
    check(
        resources.contains("memcacheds") && resources.contains("mc "),
        format!("api-resources: {resources}"),
    )
}

pub(crate) fn seed_examples(env: &mut Env) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut applied = 0;
    for fixture in fixtures() {
        let request = &fixture.review["request"];
        if !(fixture.name.starts_with("design-") || fixture.name.starts_with("seed-"))
            || request["operation"] != "CREATE"
        {
            continue;
        }
        applied += 1;
        let namespace = format!(
            "seeds-{}",
            request["object"]["apiVersion"]
                .as_str()
                .unwrap_or("")
                .rsplit('/')
                .next()
                .unwrap_or("")
        );
        ensure_namespace(env, &namespace)?;
        let mut object = request["object"].clone();
        object["metadata"]["namespace"] = json!(namespace);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let outcome = env
            .kubectl
            .run(&["apply", "-f", "-"], Some(&object.to_string()));
        let expected = &fixture.expected;
        for warning in &expected.warnings {
            if !outcome.stderr.contains(&format!("Warning: {warning}")) {
                problems.push(format!(
                    "{}: warning {warning:?} not printed: {}",
                    fixture.name, outcome.stderr
                ));
            }
        }
        if !expected.accepted {
            let message = format!(
                "admission webhook \"{}\" denied the request: {}",
                env.protect.webhook_name(),
                expected.message(&name)
            );
            if outcome.success || !outcome.stderr.contains(&message) {
                problems.push(format!(
                    "{}: expected\n       {message}\n     kubectl printed\n       {}",
                    fixture.name,
                    outcome.stderr.trim()
                ));
            }
            continue;
        }
        if !outcome.success {
            problems.push(format!(
                "{}: refused: {}",
                fixture.name,
                outcome.stderr.trim()
            ));
            continue;
        }
        let stored = env.kubectl.get(&["memcached", &name, "-n", &namespace])?;
        let want = expected.object.as_ref().unwrap_or(&request["object"]);
        if stored["spec"] != want["spec"] {
            problems.push(format!(
                "{}: stored spec differs from the defaulted one\n       stored {}\n       wanted {}",
                fixture.name, stored["spec"], want["spec"]
            ));
        }
        let deleted = env.kubectl.run(
            &[
                "delete",
                "memcached",
                &name,
                "-n",
                &namespace,
                // Wait for the children too: the garbage collector must not still be
                // deleting them when a later scenario counts writes.
                "--cascade=foreground",
                "--wait=true",
            ],
            None,
        );
        if !deleted.success {
            problems.push(format!(
                "{}: delete failed: {}",
                fixture.name, deleted.stderr
            ));
        }
    }
    check(applied >= 30, format!("only {applied} seed examples found"))?;
    check(problems.is_empty(), problems.join("\n     "))
}
