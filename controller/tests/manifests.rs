//! deploy/: the controller passes the restricted Pod Security profile, RBAC
//! stays least-privilege, and the Helm chart carries the same CRD and RBAC.

use serde::Deserialize;
use serde_json::Value;

fn documents(file: &str) -> Vec<Value> {
    let path = format!("{}/../deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
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

#[test]
fn rbac_grants_no_wildcards_and_never_writes_secrets() {
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
            if rule["resources"]
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
        canonical("helm/memcached-operator/crds/memcacheds.memcached.c5c3.io.yaml"),
        canonical("crd.yaml")
    );
    assert_eq!(
        canonical("helm/memcached-operator/files/rbac.yaml"),
        canonical("rbac.yaml")
    );
}
