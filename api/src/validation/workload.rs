//! `spec.replicas`, `spec.workload` and `spec.serverListConfigMap`: how many
//! pods run under which kind of workload, the name bound a StatefulSet puts on
//! the object, and the ConfigMap the server list is published in.

use super::options::ObjectName;
use super::schema::{one_of, within};
use crate::field::{ErrorList, FieldError, Path, Stage};
use crate::kubernetes::names::is_dns1123_subdomain;
use crate::types::{CLIENT_HASHINGS, MemcachedSpec, REPLICAS_BOUNDS, STATEFUL_SET, WORKLOADS};

/// Longest name a StatefulSet's pods can be created for: every pod carries
/// the label `controller-revision-hash: <name>-<hash>`, the hash up to 10
/// characters and a label value at most 63.
pub const MAX_STATEFUL_SET_NAME: usize = 52;
/// Characters the API server appends to a `generateName`.
const GENERATED_SUFFIX: usize = 5;

/// `spec.replicas`, within the schema's bounds.
pub fn validate_replicas(replicas: i32, path: &Path) -> ErrorList {
    within(replicas, &REPLICAS_BOUNDS, path.clone())
}

/// `spec.workload`, one of the schema's enum.
pub fn validate_workload(workload: &str, path: &Path) -> ErrorList {
    one_of(workload, &WORKLOADS, path.clone())
}

/// `spec.clientHashing`, one of [`CLIENT_HASHINGS`].
pub fn validate_client_hashing(hashing: &str, path: &Path) -> ErrorList {
    one_of(hashing, &CLIENT_HASHINGS, path.clone())
}

/// `spec.serverListConfigMap` is a ConfigMap name (a DNS-1123 subdomain),
/// listed with the schema's checks.
pub fn validate_server_list_config_map(name: &str, path: &Path) -> ErrorList {
    is_dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), name, m).at(Stage::Schema))
        .collect()
}

/// In StatefulSet mode the name (or a name generated from `generateName`)
/// must leave room for the revision hash in the pods' labels: the API
/// server accepts a longer StatefulSet but refuses every one of its pods.
pub fn validate_name(object: ObjectName<'_>, spec: &MemcachedSpec, path: &Path) -> ErrorList {
    if !spec.stateful_set() {
        return ErrorList::new();
    }
    let (field, value, max) = if object.name.is_empty() {
        (
            path.child("generateName"),
            object.generate_name,
            MAX_STATEFUL_SET_NAME - GENERATED_SUFFIX,
        )
    } else {
        (path.child("name"), object.name, MAX_STATEFUL_SET_NAME)
    };
    if value.len() <= max {
        return ErrorList::new();
    }
    vec![FieldError::invalid(
        field,
        value,
        format!(
            "must be no more than {max} characters with spec.workload {STATEFUL_SET}: its pods carry the \
             label controller-revision-hash=<name>-<hash of up to 10 characters>, which must fit in 63"
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DEPLOYMENT;

    fn spec(workload: &str) -> MemcachedSpec {
        MemcachedSpec {
            workload: Some(workload.into()),
            ..Default::default()
        }
    }

    fn messages(errors: ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn an_unknown_workload_is_not_supported() {
        let errors = |s: MemcachedSpec| {
            messages(crate::validation::validate(
                &crate::apply_defaults(s),
                &Default::default(),
            ))
        };
        assert_eq!(
            errors(spec("DaemonSet")),
            [
                r#"spec.workload: Unsupported value: "DaemonSet": supported values: "Deployment", "StatefulSet""#
            ]
        );
        assert!(errors(spec(STATEFUL_SET)).is_empty());
    }

    #[test]
    fn the_config_map_name_is_a_subdomain() {
        let errors = messages(validate_server_list_config_map(
            "Servers_List",
            &Path::new("spec.serverListConfigMap"),
        ));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(r#"spec.serverListConfigMap: Invalid value: "Servers_List": a lowercase RFC 1123 subdomain"#),
            "{errors:?}"
        );
    }

    #[test]
    fn stateful_set_names_leave_room_for_the_revision_hash() {
        let at_bound = "a".repeat(MAX_STATEFUL_SET_NAME);
        let over = "a".repeat(MAX_STATEFUL_SET_NAME + 1);
        let named = |name| ObjectName {
            name,
            generate_name: "",
        };
        let path = Path::new("metadata");
        assert!(validate_name(named(&at_bound), &spec(STATEFUL_SET), &path).is_empty());
        assert!(validate_name(named(&over), &spec(DEPLOYMENT), &path).is_empty());
        let errors = messages(validate_name(named(&over), &spec(STATEFUL_SET), &path));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(&format!(
                "metadata.name: Invalid value: \"{over}\": must be no more than 52 characters"
            )),
            "{errors:?}"
        );
        let generated = ObjectName {
            name: "",
            generate_name: &"g".repeat(48),
        };
        let errors = messages(validate_name(generated, &spec(STATEFUL_SET), &path));
        assert!(
            errors[0].starts_with("metadata.generateName: Invalid value:")
                && errors[0].contains("no more than 47 characters"),
            "{errors:?}"
        );
    }
}
