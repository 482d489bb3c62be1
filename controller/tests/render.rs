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
    assert!(stdout.contains("- -m\n        - '64'\n"), "{stdout}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn reports_what_the_policy_would_reject() {
    let (_, stderr, ok) = render(
        "apiVersion: memcached.c5c3.io/v1beta1\nkind: Memcached\nmetadata: {name: c}\nspec: {replicas: 99}\n",
    );
    assert!(ok);
    assert!(
        stderr.contains("c: error: spec.replicas: Invalid value: 99"),
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
    let (_, stderr, ok) = render(&long);
    assert!(ok);
    assert!(
        stderr.contains("error: metadata.name: Invalid value:")
            && stderr.contains("no more than 52 characters"),
        "{stderr}"
    );
}
