//! deploy/: the controller passes the restricted Pod Security profile, RBAC
//! stays least-privilege, and the Helm chart carries the same CRD and RBAC.

use serde_json::Value;

fn documents(file: &str) -> Vec<Value> {
    let path = format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn canonical(file: &str) -> String {
    std::fs::canonicalize(format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn controller_pods_pass_the_restricted_profile() {
    let docs = documents("controller.yaml");
    let namespace = docs.iter().find(|d| d["kind"] == "Namespace").unwrap();
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    for c in pod["containers"].as_array().unwrap() {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert!(
            sc.get("privileged").is_none()
                && c.get("ports")
                    .unwrap()
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|p| p.get("hostPort").is_none())
        );
    }
    assert!(pod.get("hostNetwork").is_none() && pod.get("volumes").is_none());
}

/// (kind of role, API group, resource, verbs): what the controller sends.
const USED: &[(&str, &str, &str, &[&str])] = &[
    // Controller and readiness watches.
    (
        "ClusterRole",
        "memcached.c5c3.io",
        "memcacheds",
        &["list", "watch"],
    ),
    // status::write_status: server-side apply.
    (
        "ClusterRole",
        "memcached.c5c3.io",
        "memcacheds/status",
        &["patch"],
    ),
    // Owner references with blockOwnerDeletion.
    (
        "ClusterRole",
        "memcached.c5c3.io",
        "memcacheds/finalizers",
        &["update"],
    ),
    // cache::watch (list, watch), reconcile's read of what the cache lacks
    // (get), apply::ensure (apply = patch/create, delete).
    (
        "ClusterRole",
        "apps",
        "deployments",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "apps",
        "statefulsets",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "",
        "services",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "",
        "configmaps",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "policy",
        "poddisruptionbudgets",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "autoscaling",
        "horizontalpodautoscalers",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "networking.k8s.io",
        "networkpolicies",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    (
        "ClusterRole",
        "monitoring.coreos.com",
        "servicemonitors",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    // secrets::read (get), the metadata watch (list, watch).
    ("ClusterRole", "", "secrets", &["get", "list", "watch"]),
    // in_place::converge: the ReplicaSet's template, then each pod.
    (
        "ClusterRole",
        "apps",
        "replicasets",
        &["get", "list", "patch"],
    ),
    ("ClusterRole", "", "pods", &["list", "patch"]),
    // gate::open: a Deployment's new pod, its keys taken.
    ("ClusterRole", "", "pods/status", &["patch"]),
    // The EndpointSlice watch of cache::watch.
    (
        "ClusterRole",
        "discovery.k8s.io",
        "endpointslices",
        &["list", "watch"],
    ),
    // The event recorder.
    (
        "ClusterRole",
        "events.k8s.io",
        "events",
        &["create", "patch"],
    ),
    // kube-lease-manager (get, create, patch) and run::lease_deadline (list, watch).
    (
        "Role",
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "patch"],
    ),
    // hash_key::load_or_create, in the controller's namespace only: get (by name), create.
    ("Role", "", "secrets", &["get"]),
    ("Role", "", "secrets", &["create"]),
];

#[test]
fn rbac_grants_exactly_the_verbs_the_code_uses() {
    let mut granted = Vec::new();
    let docs = documents("rbac.yaml");
    for doc in docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in doc["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    let verbs: Vec<&str> = rule["verbs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap())
                        .collect();
                    granted.push((
                        doc["kind"].as_str().unwrap().to_string(),
                        group.as_str().unwrap().to_string(),
                        resource.as_str().unwrap().to_string(),
                        verbs,
                    ));
                }
            }
        }
    }
    let used: Vec<_> = USED
        .iter()
        .map(|(kind, group, resource, verbs)| {
            (
                kind.to_string(),
                group.to_string(),
                resource.to_string(),
                verbs.to_vec(),
            )
        })
        .collect();
    assert_eq!(granted, used);
}

#[test]
fn rbac_grants_no_wildcards_and_never_writes_secrets_cluster_wide() {
    for doc in documents("rbac.yaml")
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        for rule in doc["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                assert!(
                    !rule[field].as_array().unwrap().iter().any(|v| v == "*"),
                    "{rule}"
                );
            }
            if doc["kind"] == "ClusterRole"
                && rule["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r == "secrets")
            {
                assert_eq!(rule["verbs"], serde_json::json!(["get", "list", "watch"]));
            }
        }
    }
}

#[test]
fn helm_chart_ships_the_same_crd_and_rbac() {
    assert_eq!(
        canonical(
            "helm/memcached-operator/charts/memcached-operator-crds/crds/memcacheds.memcached.c5c3.io.yaml"
        ),
        canonical("crd.yaml")
    );
    assert_eq!(
        canonical("helm/memcached-operator/files/rbac.yaml"),
        canonical("rbac.yaml")
    );
}
