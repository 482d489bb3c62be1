//! `memcached-controller render -f`: the objects a CR produces, without a cluster.

use std::process::Command;

fn render(cr: &str) -> (String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cr.yaml");
    std::fs::write(&file, cr).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memcached-controller"))
        .args(["render", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.success(),
    )
}

/// The kind of every rendered document, in order.
fn kinds(yaml: &str) -> Vec<&str> {
    yaml.lines()
        .filter_map(|l| l.strip_prefix("kind: "))
        .collect()
}

#[test]
fn renders_every_enabled_object_of_a_cr() {
    let (stdout, stderr, ok) = render(
        r#"
apiVersion: memcached.c5c3.io/v1beta1
kind: Memcached
metadata: {name: prod-cache, namespace: production}
spec:
  replicas: 3
  resources: {limits: {memory: 1Gi}}
  highAvailability: {podDisruptionBudget: {enabled: true, maxUnavailable: 1}}
  monitoring: {enabled: true, serviceMonitor: {interval: 15s}}
  networkPolicy: {enabled: true, allowedSources: [{podSelector: {matchLabels: {app: api}}}]}
---
apiVersion: memcached.c5c3.io/v1alpha1
kind: Memcached
metadata: {name: basic, namespace: default}
spec: {}
"#,
    );
    assert!(ok, "{stderr}");
    let kinds = kinds(&stdout);
    assert_eq!(
        kinds,
        [
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "NetworkPolicy",
            "ServiceMonitor",
            "Deployment",
            "Service"
        ]
    );
    // Quoted as kubectl quotes a string that would read as a number.
    assert!(stdout.contains("- -m\n        - \"64\"\n"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// A CR the policy would refuse renders nothing and fails, one line per
/// error in the policy's words, the warnings after them.
#[test]
fn refuses_what_the_policy_would_reject() {
    let (stdout, stderr, ok) = render(
        "apiVersion: memcached.c5c3.io/v1beta1\nkind: Memcached\nmetadata: {name: c}\n\
         spec: {replicas: 99, memcached: {maxMemoryMB: 8}}\n",
    );
    assert!(!ok, "exit 0 on an invalid CR: {stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(errors.len(), 2, "{stderr}");
    assert!(
        errors[0].ends_with("c: error: spec.replicas: Invalid value: 99: spec.replicas in body should be less than or equal to 64")
            && errors[1].contains("c: error: spec.memcached.maxMemoryMB: Invalid value: 8"),
        "{stderr}"
    );
}

/// Misspelt fields are reported as `kubectl apply --validate=strict` reports
/// them (the API server's words, checked against it in the e2e suite) and
/// fail the render instead of being dropped.
#[test]
fn reports_unknown_fields_like_strict_validation() {
    let (stdout, stderr, ok) = render(
        "apiVersion: memcached.c5c3.io/v1beta1\nkind: Memcached\nmetadata: {name: c, lables: {a: b}}\n\
         spec:\n  replica: 3\n  memcached: {maxMemoryMb: 64}\n  tolerations: [{key: k, efect: NoSchedule}]\n",
    );
    assert!(!ok, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let mut errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error: ")).collect();
    errors.sort();
    assert_eq!(
        errors,
        [
            r#"c: error: unknown field "metadata.lables""#,
            r#"c: error: unknown field "spec.memcached.maxMemoryMb""#,
            r#"c: error: unknown field "spec.replica""#,
            r#"c: error: unknown field "spec.tolerations[0].efect""#,
        ],
        "{stderr}"
    );
}

#[test]
fn refuses_what_is_not_a_memcached() {
    let (_, stderr, ok) = render("kind: Memcached\nspec: {replicas: many}\n");
    assert!(!ok);
    assert!(stderr.contains("not a Memcached"), "{stderr}");
}

#[test]
fn renders_the_stateful_set_and_its_server_list() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/examples/sharded-cache.yaml"
    ))
    .unwrap();
    let (stdout, stderr, ok) = render(&example);
    assert!(ok && stderr.is_empty(), "{stderr}");
    let kinds = kinds(&stdout);
    assert_eq!(
        kinds,
        ["StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap"]
    );
    assert!(
        stdout.contains("podManagementPolicy: Parallel\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "memcache_servers: keystone-cache-0.keystone-cache.production.svc:11211,\
             keystone-cache-1.keystone-cache.production.svc:11211,\
             keystone-cache-2.keystone-cache.production.svc:11211\n"
        ),
        "{stdout}"
    );

    let long = example.replace(
        "name: keystone-cache\n",
        &format!("name: {}\n", "k".repeat(53)),
    );
    let (stdout, stderr, ok) = render(&long);
    assert!(!ok && stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("error: metadata.name: Invalid value:")
            && stderr.contains("no more than 52 characters"),
        "{stderr}"
    );
}
