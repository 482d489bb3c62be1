//! The admission decision for one request: default, validate the defaulted
//! object, and answer accept, mutate or reject; a `scale` subresource update
//! has its replica count judged, and a scale-up its new pods' Pod Security.
//! Transport-free: the waPC glue and the tests feed it decoded requests, with
//! what it read from the cluster ([`needs_namespace`], [`needs_memcached`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::defaults::{Addition, Defaulted, IMAGE, apply_defaults};
use crate::extra_args::memory_file::ShortOfMemory;
use crate::field::{ErrorList, Path, invalid_message};
use crate::kubernetes::image::repository_name;
use crate::memcached_options::SPEC_FIELDS;
use crate::pod_changes::{
    PodSource, RESTART_TRIGGER_ANNOTATION, Restart, pod_creating_change, restart,
};
use crate::pod_security::{self, Level, Violation};
use crate::types::{
    AutoscalingSpec, GROUP, HighAvailabilitySpec, KIND, MemcachedConfig, MemcachedSpec,
    MonitoringSpec, REPLICAS_BOUNDS, SECTIONS, SecuritySpec, VERSIONS,
};
use crate::validation::{self, ObjectName, Options};

/// `Kind.group`, as Kubernetes prefixes invalid-object messages.
pub const QUALIFIED_KIND: &str = "Memcached.memcached.c5c3.io";
/// Code of every rejection: the request carries an object we cannot admit.
pub const REJECT_CODE: u16 = 400;
/// Code of a refusal by Pod Security, as Pod Security admission answers.
pub const FORBIDDEN_CODE: u16 = 403;
/// The resource (plural) whose `scale` subresource is judged.
pub const RESOURCE: &str = "memcacheds";
/// Group and kind of the object a `scale` subresource request carries.
const SCALE_GROUP: &str = "autoscaling";
const SCALE_KIND: &str = "Scale";

/// The parts of an AdmissionRequest the decision needs.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// Group of the request's kind.
    pub group: String,
    /// Version of the request's kind.
    pub version: String,
    /// The request's kind.
    pub kind: String,
    /// Group of the resource addressed.
    pub resource_group: String,
    /// The resource addressed (plural, e.g. `memcacheds`).
    pub resource: String,
    /// Subresource (`status`, `scale`), empty for the object itself.
    pub sub_resource: String,
    /// Name of the object in the request.
    pub name: String,
    /// The object as submitted.
    pub object: Value,
    /// The stored object (UPDATE).
    pub old_object: Value,
    /// The request's namespace.
    pub namespace: String,
    /// The namespace's Pod Security `enforce` label, when the caller read it.
    pub namespace_enforce: NamespaceEnforce,
    /// The stored Memcached a `scale` update addresses, when the caller read
    /// it ([`needs_memcached`]).
    pub memcached: StoredMemcached,
}

/// The `pod-security.kubernetes.io/enforce` label of the request's namespace,
/// as the caller read it from the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum NamespaceEnforce {
    /// Not read: no lookup was needed (see [`needs_namespace`]).
    #[default]
    NotRead,
    /// The label's value, `None` when the namespace has none.
    Label(Option<String>),
    /// The namespace could not be read: `restricted` is judged, with a warning.
    Unreadable(String),
}

/// The Memcached a `scale` subresource update addresses, as the caller read
/// it from the cluster (`memcached.c5c3.io/v1beta1`, the request's name and
/// namespace): the Scale says nothing of the pods it adds.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum StoredMemcached {
    /// Not read: no lookup was needed (see [`needs_memcached`]).
    #[default]
    NotRead,
    /// The object as the cluster stores it.
    Object(Value),
    /// It could not be read (RBAC not granted, not found): the scale-up is
    /// admitted with a warning.
    Unreadable(String),
}

/// How to judge.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Validation tunables.
    pub options: Options,
    /// Return the defaulted object; when false, judge it but never mutate.
    pub mutate: bool,
    /// The Pod Security level the pods must meet at least; a namespace's
    /// `enforce` label may ask for more.
    pub pod_security: Level,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            options: Options::default(),
            mutate: true,
            pod_security: Level::Restricted,
        }
    }
}

/// Whether judging `request` needs its namespace's Pod Security label: it
/// creates or updates a Memcached, or scales one up through the `scale`
/// subresource, and the settings' level is below the strictest (a label can
/// only make the judgement stricter).
pub fn needs_namespace(request: &Request, settings: &Settings) -> bool {
    settings.pod_security < Level::Restricted
        && matches!(request.operation.as_str(), "CREATE" | "UPDATE")
        && ((request.sub_resource.is_empty() && request.group == GROUP && request.kind == KIND)
            || scale_up(request))
}

/// Whether judging `request` needs the stored Memcached, once its namespace
/// was read ([`needs_namespace`]): a scale-up through the `scale`
/// subresource (more replicas than the old Scale's) whose namespace asks for
/// more than the settings' level. At `restricted` nothing is read: every
/// admitted Memcached already meets any level a namespace can ask for. A
/// namespace that could not be read counts as `restricted`, as [`review`]
/// judges an apply there.
pub fn needs_memcached(request: &Request, settings: &Settings) -> bool {
    settings.pod_security < Level::Restricted
        && scale_up(request)
        && EffectiveLevel::of(request, settings).level > settings.pod_security
}

/// The answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Admit unchanged.
    Accept {
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Admit with the defaulted object.
    Mutate {
        /// The whole object after defaulting.
        object: Value,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
    /// Refuse, listing every error.
    Reject {
        /// The message kubectl prints.
        message: String,
        /// HTTP status code.
        code: u16,
        /// Shown by kubectl.
        warnings: Vec<String>,
    },
}

impl Decision {
    fn bad_request(message: String) -> Self {
        Decision::Reject {
            message,
            code: REJECT_CODE,
            warnings: Vec::new(),
        }
    }
}

/// Judge one admission request. It is taken whole: a mutation edits its
/// object in place rather than a copy.
pub fn review(request: Request, settings: &Settings) -> Decision {
    let accept = Decision::Accept {
        warnings: Vec::new(),
    };
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE") {
        return accept;
    }
    match request.sub_resource.as_str() {
        "" => {}
        "scale" => return review_scale(request, settings),
        _ => return accept,
    }
    if request.group != GROUP || request.kind != KIND {
        return accept;
    }
    if !VERSIONS.contains(&request.version.as_str()) {
        return Decision::bad_request(format!(
            "{QUALIFIED_KIND} version {:?} is not supported by this policy (supported: {})",
            request.version,
            VERSIONS.join(", ")
        ));
    }
    let mut spec = match decode(&request.object, "object") {
        Ok(spec) => spec,
        Err(message) => return Decision::bad_request(message),
    };
    // An oversized list is refused before anything walks or copies it
    // (defaulting adds no item to a list that has any).
    let sizes = validation::limits::validate_sizes(&spec, &Path::new("spec"));
    if !sizes.is_empty() {
        return rejection(&request, &sizes, Vec::new());
    }
    let original = spec.clone();
    let mut warnings = Vec::new();
    let old = (request.operation == "UPDATE")
        .then(|| decode(&request.old_object, "oldObject").ok())
        .flatten()
        .map(|spec| Stored {
            spec,
            running: status_replicas(&request.old_object),
            restart_trigger: restart_trigger(&request.old_object),
        });
    if let Some(old) = &old {
        warnings.extend(replicas_across_autoscaling(&mut spec, old));
    }
    // Their warnings only for a spec admitted.
    let warm_restart_warning = settings
        .mutate
        .then(|| default_warm_restart(&mut spec, request.operation == "CREATE", old.as_ref()))
        .flatten();
    let warm_image_warning = old
        .as_ref()
        .and_then(|old| warm_image_change(&spec, &old.spec));
    let (replicas, warm_restart) = (spec.replicas, spec.warm_restart.clone());

    let metadata = |key: &str| {
        request
            .object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    };
    let object_name = ObjectName {
        name: metadata("name").unwrap_or(&request.name),
        generate_name: metadata("generateName").unwrap_or_default(),
    };
    let mut level = EffectiveLevel::of(&request, settings);
    let checked =
        validation::check_within_bounds_at(object_name, spec, &settings.options, level.level);
    warnings.extend(checked.warnings);
    if !checked.errors.is_empty() {
        return rejection(&request, &checked.errors, warnings);
    }
    warnings.extend(level.warning.take());
    // Like Pod Security admission, judged once the object is valid.
    let judged = Judged {
        completed: checked.spec,
        added: &checked.added,
        // The spec without what the level's defaulting added.
        plain: || {
            apply_defaults(MemcachedSpec {
                replicas,
                warm_restart: warm_restart.clone(),
                ..original.clone()
            })
        },
    };
    let spec = match judge_pod_security(&request, &level, judged, old.as_ref(), &mut warnings) {
        Ok(spec) => spec,
        Err(refusal) => {
            return Decision::Reject {
                message: format!(
                    "{QUALIFIED_KIND} {:?} is forbidden: {refusal}",
                    object_name.name
                ),
                code: FORBIDDEN_CODE,
                warnings,
            };
        }
    };
    warnings.extend(warm_restart_warning);
    warnings.extend(warm_image_warning);
    if let Some(old) = &old {
        // The spec the controller will render: the one admitted.
        let stored = if settings.mutate {
            None
        } else {
            Some(apply_defaults(original.clone()))
        };
        let admitted: &MemcachedSpec = stored.as_deref().unwrap_or(&spec);
        warnings.extend(cold_restart_warning(&request, old, admitted));
    }
    if !settings.mutate || *spec == original {
        return Decision::Accept { warnings };
    }
    match defaulted_object(request.object, &original, spec.into_inner()) {
        Ok(object) => Decision::Mutate { object, warnings },
        Err(message) => Decision::bad_request(message),
    }
}

/// The stored Memcached of an UPDATE, as far as the decision goes.
struct Stored {
    spec: MemcachedSpec,
    /// `status.replicas`: the replicas its workload runs (the controller's
    /// record of the workload's desired replicas).
    running: Option<i32>,
    /// Its [`RESTART_TRIGGER_ANNOTATION`].
    restart_trigger: Option<String>,
}

/// The warning of an UPDATE that restarts the pods cold, before it happens:
/// the field that forces it and the pods that lose their cache
/// ([`restart`]); none when the pods restart warm, not at all, or none runs.
fn cold_restart_warning(request: &Request, old: &Stored, spec: &MemcachedSpec) -> Option<String> {
    let stored = apply_defaults(old.spec.clone());
    let trigger = restart_trigger(&request.object);
    let before = PodSource {
        spec: &stored,
        restart_trigger: old.restart_trigger.as_deref(),
        running: old.running,
    };
    let after = PodSource {
        spec,
        restart_trigger: trigger.as_deref(),
        running: None,
    };
    match restart(&before, &after) {
        Restart::Cold(cold) => cold.warning(),
        Restart::None | Restart::Warm => None,
    }
}

/// `status.replicas` of an object, when it holds a count.
fn status_replicas(object: &Value) -> Option<i32> {
    let replicas = object.get("status")?.get("replicas")?.as_i64()?;
    i32::try_from(replicas).ok().filter(|r| *r >= 0)
}

/// The restart trigger annotation of an object.
fn restart_trigger(object: &Value) -> Option<String> {
    let annotations = object.get("metadata")?.get("annotations")?;
    annotations
        .get(RESTART_TRIGGER_ANNOTATION)?
        .as_str()
        .map(str::to_string)
}

/// The Pod Security level a request is judged at: the stricter of the
/// settings' and its namespace's `enforce` label.
struct EffectiveLevel {
    level: Level,
    /// The namespace's label asks for more than the settings.
    enforced_by_namespace: bool,
    /// Why the namespace could not be read.
    warning: Option<String>,
}

impl EffectiveLevel {
    fn of(request: &Request, settings: &Settings) -> Self {
        let (namespace_level, warning) = match &request.namespace_enforce {
            NamespaceEnforce::NotRead | NamespaceEnforce::Label(None) => (Level::Privileged, None),
            NamespaceEnforce::Label(Some(label)) => (Level::from_label(label), None),
            NamespaceEnforce::Unreadable(why) => (
                Level::Restricted,
                Some(format!(
                    "the Pod Security label of namespace {:?} could not be read ({why}): judged at \"restricted\"",
                    request.namespace
                )),
            ),
        };
        let labelled = matches!(request.namespace_enforce, NamespaceEnforce::Label(Some(_)));
        EffectiveLevel {
            level: settings.pod_security.max(namespace_level),
            enforced_by_namespace: labelled && namespace_level > settings.pod_security,
            warning,
        }
    }
}

/// A valid spec, defaulted for the level, before Pod Security has its say.
struct Judged<'a, F> {
    /// Defaulted and completed for the level.
    completed: Defaulted,
    /// What the completion added.
    added: &'a [Addition],
    /// Defaulted without the completion.
    plain: F,
}

/// The spec to admit, or why the pods built from it violate the Pod
/// Security level that applies, in Pod Security admission's words with the
/// spec field of each violation.
///
/// Pod Security admission judges every new pod. An UPDATE that creates no
/// pod ([`pod_creating_change`]: scaling down, the PodDisruptionBudget, the
/// NetworkPolicy, ...) may keep the violations the stored object already
/// has, so a Memcached admitted before its namespace or the settings
/// tightened can still be scaled down and edited; the violations it keeps are
/// warned about. Such an update gets the spec without the level's completion
/// when the completion alone would roll the pods out. Any other update is
/// judged as a CREATE is.
fn judge_pod_security<F: FnOnce() -> Defaulted>(
    request: &Request,
    level: &EffectiveLevel,
    judged: Judged<'_, F>,
    old: Option<&Stored>,
    warnings: &mut Vec<String>,
) -> Result<Defaulted, String> {
    let Judged {
        completed,
        added,
        plain,
    } = judged;
    let path = Path::new("spec");
    let violations = pod_security::check(&completed, level.level, &path);
    let added_warning = || {
        let added: Vec<String> = added.iter().map(ToString::to_string).collect();
        format!(
            "set for PodSecurity \"{}:latest\", which the spec left unset: {}; set them to choose other values the level allows",
            level.level,
            added.join(", ")
        )
    };
    if violations.is_empty() && added.is_empty() {
        return Ok(completed);
    }
    if let Some(old) = old {
        let stored = apply_defaults(old.spec.clone());
        let before = PodSource {
            spec: &stored,
            restart_trigger: old.restart_trigger.as_deref(),
            running: old.running,
        };
        let trigger = restart_trigger(&request.object);
        let creates = |spec: &MemcachedSpec| {
            let after = PodSource {
                spec,
                restart_trigger: trigger.as_deref(),
                running: None,
            };
            pod_creating_change(&before, &after)
        };
        let kept = pod_security::check(&stored, level.level, &path);
        let keeps = |violations: &[Violation]| violations.iter().all(|v| kept.contains(v));
        let kept_warning = |violations: &[Violation]| {
            format!(
                "existing violations of PodSecurity \"{}:latest\" kept by this update, which creates no pod: {}",
                level.level,
                joined(violations)
            )
        };
        let plain = (!added.is_empty()).then(plain);
        match creates(plain.as_ref().unwrap_or(&completed)) {
            // The user's changes create no pod: keep the pods' template, so
            // the level's completion is taken only when it changes nothing.
            None => {
                if creates(&completed).is_none() {
                    if !added.is_empty() {
                        warnings.push(added_warning());
                    }
                    if !violations.is_empty() {
                        warnings.push(kept_warning(&violations));
                    }
                    return Ok(completed);
                }
                if let Some(plain) = plain {
                    let remaining = pod_security::check(&plain, level.level, &path);
                    if keeps(&remaining) {
                        warnings.push(kept_warning(&remaining));
                        return Ok(plain);
                    }
                }
            }
            Some(field) if !violations.is_empty() && keeps(&violations) => {
                warnings.push(format!(
                    "this update changes {field}, which creates pods, and Pod Security admission judges every \
                     new pod: the violations the stored Memcached already has are refused too; fix them, or make \
                     only changes that create no pod (scaling down, the PodDisruptionBudget, the NetworkPolicy, ...)"
                ));
            }
            Some(_) => {}
        }
    }
    if violations.is_empty() {
        warnings.push(added_warning());
        return Ok(completed);
    }
    Err(format!(
        "violates PodSecurity \"{}:latest\"{}: {}",
        level.level,
        enforced_by(request, level),
        joined(&violations)
    ))
}

/// ` (enforced by namespace "<name>")` when the namespace's label set the level.
fn enforced_by(request: &Request, level: &EffectiveLevel) -> String {
    if level.enforced_by_namespace {
        format!(" (enforced by namespace {:?})", request.namespace)
    } else {
        String::new()
    }
}

/// Violations as Pod Security admission lists them: comma-separated.
fn joined(violations: &[pod_security::Violation]) -> String {
    let details: Vec<String> = violations.iter().map(ToString::to_string).collect();
    details.join(", ")
}

/// The rejection of `request` for `errors`, worded as the API server words it.
fn rejection(request: &Request, errors: &ErrorList, warnings: Vec<String>) -> Decision {
    let name = request
        .object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or(&request.name);
    Decision::Reject {
        message: invalid_message(QUALIFIED_KIND, name, errors),
        code: REJECT_CODE,
        warnings,
    }
}

/// An update of `memcacheds/scale` (`kubectl scale`, a HorizontalPodAutoscaler)
/// carries an autoscaling/v1 Scale whose `spec.replicas` the API server writes
/// into the Memcached's `spec.replicas`: judged against the same bounds, with
/// the API server's wording for the Memcached. The Scale holds nothing else of
/// the object, not even whether autoscaling is enabled, so rules that tie the
/// replica count to other fields cannot be checked here.
///
/// A scale-up creates pods, which Pod Security admission judges: when the
/// namespace asks for more than the settings, the stored Memcached the caller
/// read ([`needs_memcached`]) is judged as `kubectl apply` of the same count
/// would be ([`judge_scale_up`]). Scaling down or to the same count creates no
/// pod and is never refused for Pod Security.
fn review_scale(mut request: Request, settings: &Settings) -> Decision {
    let accept = || Decision::Accept {
        warnings: Vec::new(),
    };
    if !is_memcached_scale(&request) {
        return accept();
    }
    let replicas = match scale_replicas(&request.object) {
        Ok(replicas) => replicas,
        Err(message) => return Decision::bad_request(message),
    };
    let spec = apply_defaults(MemcachedSpec {
        replicas: Some(replicas),
        ..MemcachedSpec::default()
    });
    let replicas_path = spec_path("replicas");
    let errors: ErrorList = validation::validate(&spec, &settings.options)
        .into_iter()
        .filter(|e| e.field.to_string() == replicas_path)
        .collect();
    if !errors.is_empty() {
        return rejection(&request, &errors, Vec::new());
    }
    if !scale_up(&request) {
        return accept();
    }
    let level = EffectiveLevel::of(&request, settings);
    if level.level <= settings.pod_security {
        return accept();
    }
    match std::mem::take(&mut request.memcached) {
        StoredMemcached::NotRead => accept(),
        StoredMemcached::Object(stored) => {
            judge_scale_up(request, stored, replicas, &level, settings)
        }
        StoredMemcached::Unreadable(why) => Decision::Accept {
            warnings: level
                .warning
                .clone()
                .into_iter()
                .chain([unjudged_scale_up(&request, &level, &why)])
                .collect(),
        },
    }
}

/// The warning of a scale-up admitted without its Pod Security judgement:
/// the stored Memcached could not be read. Admitted rather than refused
/// (fail open): a cluster that did not grant the read would otherwise refuse
/// every scale-up of every HorizontalPodAutoscaler in such a namespace, while
/// Pod Security admission still refuses any pod that breaks the level.
fn unjudged_scale_up(request: &Request, level: &EffectiveLevel, why: &str) -> String {
    format!(
        "{QUALIFIED_KIND} {:?} could not be read ({why}): this scale-up was not judged against PodSecurity \
         \"{}:latest\"{}, and Pod Security admission refuses every new pod that violates it; grant Kubewarden's \
         policy-server's ServiceAccount get, list and watch on memcacheds.memcached.c5c3.io (the \
         memcached-operator chart does with policy.policyServerRBAC; with deploy/policy.yaml, add them to \
         kubewarden-defaults' policyServer.permissions)",
        request.name,
        level.level,
        enforced_by(request, level)
    )
}

/// A scale-up's Pod Security, judged as `kubectl apply` of the stored
/// Memcached with the new count would be: the same refusal, in the same
/// words (code 403). The Scale cannot carry what the apply's defaulting would
/// add for the level (the new pods are built from the stored spec as it is),
/// so a stored spec that meets the level only once completed is refused too,
/// with a warning that an apply completes it.
fn judge_scale_up(
    request: Request,
    stored: Value,
    replicas: i32,
    level: &EffectiveLevel,
    settings: &Settings,
) -> Decision {
    let Some(object) = stored.as_object() else {
        let why = format!("the host answered a {}, not an object", json_type(&stored));
        return Decision::Accept {
            warnings: vec![unjudged_scale_up(&request, level, &why)],
        };
    };
    let version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(_, version)| version)
        .filter(|version| VERSIONS.contains(version))
        .unwrap_or("v1beta1")
        .to_string();
    let mut scaled = stored.clone();
    match scaled.get_mut("spec") {
        Some(Value::Object(spec)) => {
            spec.insert("replicas".into(), replicas.into());
        }
        _ => scaled["spec"] = serde_json::json!({"replicas": replicas}),
    }
    let apply = Request {
        operation: "UPDATE".into(),
        group: GROUP.into(),
        version,
        kind: KIND.into(),
        resource_group: GROUP.into(),
        resource: RESOURCE.into(),
        sub_resource: String::new(),
        name: request.name.clone(),
        object: scaled,
        old_object: stored,
        namespace: request.namespace.clone(),
        namespace_enforce: request.namespace_enforce.clone(),
        memcached: StoredMemcached::NotRead,
    };
    let pods = decode(&apply.object, "object").map(apply_defaults);
    match (review(apply, settings), pods) {
        (
            refused @ Decision::Reject {
                code: FORBIDDEN_CODE,
                ..
            },
            _,
        ) => refused,
        // The apply is invalid for another reason (autoscaling enabled, which
        // the CRD's own rule refuses beside a count; a rule newer than the
        // object): left to the API server, as before the pods were judged.
        (Decision::Reject { .. }, _) | (_, Err(_)) => Decision::Accept {
            warnings: Vec::new(),
        },
        (Decision::Accept { .. } | Decision::Mutate { .. }, Ok(pods)) => {
            stored_pods_at(&request, &pods, level)
        }
    }
}

/// The scale-up of a Memcached whose apply is admitted: refused when the pods
/// built from the stored spec as it is (without the completion the apply
/// would add) violate the level.
fn stored_pods_at(request: &Request, pods: &MemcachedSpec, level: &EffectiveLevel) -> Decision {
    let violations = pod_security::check(pods, level.level, &Path::new("spec"));
    if violations.is_empty() {
        return Decision::Accept {
            warnings: Vec::new(),
        };
    }
    Decision::Reject {
        message: format!(
            "{QUALIFIED_KIND} {:?} is forbidden: violates PodSecurity \"{}:latest\"{}: {}",
            request.name,
            level.level,
            enforced_by(request, level),
            joined(&violations)
        ),
        code: FORBIDDEN_CODE,
        warnings: level
            .warning
            .clone()
            .into_iter()
            .chain([format!(
                "the new pods are built from the stored Memcached, whose security contexts leave unset what \
                 PodSecurity \"{}:latest\" needs: an update through the policy (`kubectl apply`, settings' mutate \
                 on) sets them; then scale",
                level.level
            )])
            .collect(),
    }
}

/// Whether `request` addresses the `scale` subresource of a Memcached.
fn is_memcached_scale(request: &Request) -> bool {
    request.sub_resource == "scale"
        && request.resource_group == GROUP
        && request.resource == RESOURCE
        && request.group == SCALE_GROUP
        && request.kind == SCALE_KIND
}

/// Whether `request` updates a Memcached's Scale to more replicas than the
/// old Scale's: the only scale that creates pods.
fn scale_up(request: &Request) -> bool {
    request.operation == "UPDATE"
        && is_memcached_scale(request)
        && matches!(
            (scale_replicas(&request.object), scale_replicas(&request.old_object)),
            (Ok(new), Ok(old)) if new > old
        )
}

/// `spec.replicas` of a Scale; absent means 0 (the API server omits a zero).
fn scale_replicas(object: &Value) -> Result<i32, String> {
    let Value::Object(map) = object else {
        return Err("the request's object is not a JSON object".to_string());
    };
    let replicas = match map.get("spec") {
        None | Some(Value::Null) => None,
        Some(Value::Object(spec)) => spec.get("replicas").filter(|r| !r.is_null()),
        Some(other) => {
            return Err(format!(
                "object cannot be decoded: spec: invalid type: {}, expected an object",
                json_type(other)
            ));
        }
    };
    replicas.map_or(Ok(0), |r| {
        i32::deserialize(r).map_err(|e| format!("object cannot be decoded: spec.replicas: {e}"))
    })
}

/// The spec of an object, or why it cannot be read.
fn decode(object: &Value, what: &str) -> Result<MemcachedSpec, String> {
    let Value::Object(map) = object else {
        return Err(format!("the request's {what} is not a JSON object"));
    };
    for (field, expected) in [("apiVersion", None), ("kind", Some(KIND))] {
        match map.get(field) {
            None => {}
            Some(Value::String(s))
                if field == "apiVersion" && s.split_once('/').is_some_and(|(g, _)| g == GROUP) => {}
            Some(Value::String(s)) if expected == Some(s.as_str()) => {}
            Some(other) => {
                return Err(format!(
                    "{what}.{field} is {other}, but this policy only judges {QUALIFIED_KIND}"
                ));
            }
        }
    }
    let spec = match map.get("spec") {
        None | Some(Value::Null) => MemcachedSpec::default(),
        Some(spec) => decode_spec(spec).map_err(|e| format!("{what} cannot be decoded: {e}"))?,
    };
    Ok(spec)
}

/// Decode a stored or requested spec; the error names the field
/// (`spec.podDisruptionBudget.minAvailable: invalid value: ...`).
pub fn decode_spec(spec: &Value) -> Result<MemcachedSpec, String> {
    // serde reads an array into a struct field by field: the spec and its
    // sections must be objects. Each section's parent is looked up once
    // (SECTIONS lists a parent before its children).
    let mut parent = ("", Some(spec));
    for path in std::iter::once("").chain(SECTIONS) {
        let found = match path.split_once('.') {
            _ if path.is_empty() => Some(spec),
            None => {
                parent = (path, spec.get(path));
                parent.1
            }
            Some((name, child)) if name == parent.0 => parent.1.and_then(|v| v.get(child)),
            Some((name, child)) => spec.get(name).and_then(|v| v.get(child)),
        };
        if let Some(value) = found.filter(|v| !v.is_object() && !v.is_null()) {
            return Err(format!(
                "{}: invalid type: {}, expected an object",
                spec_path(path),
                json_type(value)
            ));
        }
    }
    // Fast path; on error decode again, tracking the path for the message.
    MemcachedSpec::deserialize(spec).map_err(|_| {
        match serde_path_to_error::deserialize::<_, MemcachedSpec>(spec) {
            Err(e) => format!(
                "{}: {}",
                spec_path(e.path().to_string().trim_start_matches('.')),
                e.inner()
            ),
            Ok(_) => "spec cannot be decoded".to_string(),
        }
    })
}

/// `spec` or `spec.<path>`.
fn spec_path(path: &str) -> String {
    if path.is_empty() {
        "spec".to_string()
    } else {
        format!("spec.{path}")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Warm restarts are on by default for the Memcacheds created from now on,
/// and for no Memcached that exists: at CREATE an absent
/// `warmRestart.enabled` becomes true; at UPDATE it keeps the stored value,
/// so a manifest applied again without the field changes nothing, and a
/// Memcached created before this default (stored without it) runs on as it
/// does. A CREATE whose `maxMemoryMB` is below what memcached needs with its
/// memory file ([`ShortOfMemory`]) gets false instead, with a warning that
/// says why. The other warning: the default set for an image this policy
/// does not know to carry `sh`, which the warm-restart supervisor needs.
fn default_warm_restart(
    spec: &mut MemcachedSpec,
    created: bool,
    old: Option<&Stored>,
) -> Option<String> {
    if spec
        .warm_restart
        .as_ref()
        .is_some_and(|w| w.enabled.is_some())
    {
        return None;
    }
    let short = created
        .then(|| {
            ShortOfMemory::of(
                spec.memcached
                    .as_ref()
                    .unwrap_or(&MemcachedConfig::default()),
            )
        })
        .flatten();
    if let Some(short) = short {
        spec.warm_restart.get_or_insert_default().enabled = Some(false);
        return Some(format!(
            "spec.warmRestart.enabled defaulted to false: spec.memcached.maxMemoryMB is {}, and {}; set \
             maxMemoryMB to at least {} and spec.warmRestart.enabled: true for warm restarts",
            short.max_memory_mb,
            short.reason(),
            short.minimum_mb
        ));
    }
    let enabled = if created {
        true
    } else {
        old?.spec.warm_restart.as_ref()?.enabled?
    };
    spec.warm_restart.get_or_insert_default().enabled = Some(enabled);
    let image = spec.image.as_deref().unwrap_or(IMAGE);
    (created && repository_name(image) != "memcached").then(|| {
        format!(
            "spec.warmRestart.enabled defaulted to true: warm restarts run memcached under sh, which \
             spec.image {image:?} is not known to carry (the memcached images do); its pods fail to \
             start without it: set spec.warmRestart.enabled: false for an image without sh"
        )
    })
}

/// An UPDATE after which warm restarts run an image this policy does not
/// know to carry `sh`, which the warm-restart supervisor needs: a new such
/// image, or warm restarts turned on under one. The warning says what its
/// pods will do.
fn warm_image_change(spec: &MemcachedSpec, old: &MemcachedSpec) -> Option<String> {
    let image = spec.image.as_deref().unwrap_or(IMAGE);
    let old_image = old.image.as_deref().unwrap_or(IMAGE);
    let new = image != old_image || !old.warm_restart_enabled();
    (spec.warm_restart_enabled() && new && repository_name(image) != "memcached").then(|| {
        format!(
            "spec.image {image:?} is not known to carry sh, under which warm restarts run memcached (the \
             memcached images do): a pod that takes this change without it fails to start and holds the rest \
             of the change; set spec.warmRestart.enabled: false first for an image without sh"
        )
    })
}

/// `spec.replicas` on an UPDATE that turns autoscaling on or off.
fn replicas_across_autoscaling(spec: &mut MemcachedSpec, old: &Stored) -> Option<String> {
    match (old.spec.autoscaling_enabled(), spec.autoscaling_enabled()) {
        (false, true) => release_replicas_to_autoscaler(spec, &old.spec),
        (true, false) => hold_replicas_of_autoscaler(spec, old),
        _ => None,
    }
}

/// On the UPDATE that enables autoscaling, a `replicas` carried over unchanged
/// from the old object (usually put there by defaulting) is dropped so a plain
/// `kubectl apply` works; a value changed in the same request stays an error.
fn release_replicas_to_autoscaler(spec: &mut MemcachedSpec, old: &MemcachedSpec) -> Option<String> {
    let replicas = spec.replicas?;
    if old.replicas != Some(replicas) {
        return None;
    }
    spec.replicas = None;
    Some(format!(
        "spec.replicas ({replicas}) was removed: autoscaling is now enabled and the HorizontalPodAutoscaler owns the replica count"
    ))
}

/// On the UPDATE that disables autoscaling, the workload keeps the scale the
/// autoscaler left rather than the default of 1 replica: an absent
/// `replicas` becomes the old `status.replicas` (or, without one, the old
/// `minReplicas`), with a warning; a `replicas` below `status.replicas` is
/// admitted with a warning counting the pods that will go.
fn hold_replicas_of_autoscaler(spec: &mut MemcachedSpec, old: &Stored) -> Option<String> {
    let advice = "set spec.replicas to choose another count";
    if let Some(replicas) = spec.replicas {
        let running = old.running.filter(|r| replicas < *r)?;
        return Some(format!(
            "spec.replicas ({replicas}) is below the {running} replicas the HorizontalPodAutoscaler ran \
             (status.replicas): disabling autoscaling removes {} pods, and the keys they cache",
            running - replicas
        ));
    }
    let (scale, what) = match old.running {
        Some(running) => (
            running,
            format!("the HorizontalPodAutoscaler ran {running} replicas (status.replicas)"),
        ),
        None => {
            let min = old.spec.autoscaling.as_ref().and_then(|a| a.min_replicas);
            let min = min.unwrap_or(1);
            (
                min,
                format!(
                    "the autoscaler's minimum is {min} (spec.autoscaling.minReplicas; status.replicas is unset)"
                ),
            )
        }
    };
    let held = scale.clamp(0, *REPLICAS_BOUNDS.end());
    spec.replicas = Some(held);
    Some(if held < scale {
        format!(
            "spec.replicas set to {held}, its maximum, as autoscaling is now disabled: {what}, so {} pods will \
             go, and the keys they cache; {advice}",
            scale - held
        )
    } else {
        format!(
            "spec.replicas set to {held} as autoscaling is now disabled: {what}, and the default of 1 replica \
             applies only to a new Memcached; {advice}"
        )
    })
}

/// The submitted object with exactly the changes defaulting made to its spec;
/// everything else (metadata, status, unmodelled fields) is kept as sent.
///
/// Defaulting only fills: an absent (or null) field, an empty list
/// (autoscaling's metrics), fields inside an object that is there. So the
/// fields of `after` that differ from `before` are encoded alone and merged
/// into the object's spec ([`fill`]); a field `after` no longer has (the
/// replicas an enabled autoscaler takes over) is removed.
fn defaulted_object(
    object: Value,
    before: &MemcachedSpec,
    after: MemcachedSpec,
) -> Result<Value, String> {
    let (changed, removed) = changed_fields(before, after);
    let Ok(Value::Object(changed)) = serde_json::to_value(&changed) else {
        return Err("the defaulted spec cannot be encoded".to_string());
    };
    let Value::Object(mut object) = object else {
        return Err("the request's object is not a JSON object".to_string());
    };
    let spec = object
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if !spec.is_object() {
        *spec = Value::Object(Map::new());
    }
    if let Value::Object(spec) = spec {
        for key in removed {
            spec.remove(key);
        }
        fill(spec, changed);
    }
    Ok(Value::Object(object))
}

/// The top-level fields of `after` that differ from `before`'s (the others
/// `None`: they are not encoded at all), and the names of those `after` no
/// longer has. Within the sections defaulting fills, the fields equal to
/// `before`'s are left out too: defaulting filled nothing in them.
fn changed_fields(
    before: &MemcachedSpec,
    mut after: MemcachedSpec,
) -> (MemcachedSpec, Vec<&'static str>) {
    let mut removed = Vec::new();
    macro_rules! keep_changed {
        ($($field:ident: $name:literal),* $(,)?) => {
            // Exhaustive: a field added to the spec must be listed here.
            let MemcachedSpec { $($field: _),* } = &after;
            $(if before.$field == after.$field {
                after.$field = None;
            } else if after.$field.is_none() {
                removed.push($name);
            })*
        };
    }
    keep_changed!(
        replicas: "replicas",
        workload: "workload",
        server_list_config_map: "serverListConfigMap",
        image: "image",
        resources: "resources",
        memcached: "memcached",
        high_availability: "highAvailability",
        warm_restart: "warmRestart",
        autoscaling: "autoscaling",
        monitoring: "monitoring",
        security: "security",
        network_policy: "networkPolicy",
        service: "service",
        pod_labels: "podLabels",
        pod_annotations: "podAnnotations",
        node_selector: "nodeSelector",
        tolerations: "tolerations",
        image_pull_secrets: "imagePullSecrets",
    );
    /// In a section present before and after, the fields equal before and
    /// after set to `None` (defaulting never removes one).
    macro_rules! within {
        ($section:ident: $ty:ident { $($field:ident),* $(,)? }) => {
            if let (Some(before), Some(after)) = (&before.$section, &mut after.$section) {
                // Exhaustive: a field added to the section must be listed here.
                let $ty { $($field: _),* } = after;
                $(if before.$field == after.$field {
                    after.$field = None;
                })*
            }
        };
    }
    if let (Some(before), Some(after)) = (&before.memcached, &mut after.memcached) {
        // One field per row of the option table, and extraArgs.
        for field in SPEC_FIELDS.iter().filter_map(|option| option.field) {
            field.unset_if_same(before, after);
        }
        if before.extra_args == after.extra_args {
            after.extra_args = None;
        }
    }
    within!(high_availability: HighAvailabilitySpec {
        anti_affinity_preset, topology_spread_constraints, pod_disruption_budget, graceful_shutdown
    });
    within!(autoscaling: AutoscalingSpec { enabled, min_replicas, max_replicas, metrics, behavior });
    within!(monitoring: MonitoringSpec { enabled, exporter_image, exporter_resources, service_monitor });
    within!(security: SecuritySpec {
        pod_security_context, container_security_context, sasl, tls, network_policy
    });
    (after, removed)
}

/// Write into `target` what defaulting filled in `filled` (the encoding of
/// fields that differ from what `target` holds): a field `target` lacks or
/// holds as null, and an empty list, take their filled value; an object is
/// filled field by field; anything else `target` holds is the user's, kept
/// as sent. The new values are moved from `filled`, not copied.
fn fill(target: &mut Map<String, Value>, filled: Map<String, Value>) {
    for (key, new) in filled {
        match (target.get_mut(&key), new) {
            (None | Some(Value::Null), new) => {
                target.insert(key, new);
            }
            (Some(Value::Object(target)), Value::Object(new)) => fill(target, new),
            (Some(Value::Array(list)), Value::Array(new)) if list.is_empty() => *list = new,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scale_update(resource: &str, object: Value) -> Request {
        Request {
            operation: "UPDATE".into(),
            group: SCALE_GROUP.into(),
            version: "v1".into(),
            kind: SCALE_KIND.into(),
            resource_group: GROUP.into(),
            resource: resource.into(),
            sub_resource: "scale".into(),
            name: "my-cache".into(),
            object,
            ..Request::default()
        }
    }

    fn scale(spec: Value) -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "my-cache"}, "spec": spec})
    }

    fn judge(request: Request) -> Decision {
        review(request, &Settings::default())
    }

    /// An oversized list is refused with its size error alone: nothing else
    /// of the spec is walked, not even the other rules it breaks.
    #[test]
    fn an_oversized_list_is_refused_before_anything_else() {
        let spec =
            json!({"replicas": 500, "tolerations": vec![json!({"operator": "Exists"}); 101]});
        let request = Request {
            operation: "CREATE".into(),
            group: GROUP.into(),
            version: "v1beta1".into(),
            kind: KIND.into(),
            resource_group: GROUP.into(),
            resource: RESOURCE.into(),
            sub_resource: String::new(),
            name: "my-cache".into(),
            object: json!({"metadata": {"name": "my-cache"}, "spec": spec}),
            ..Request::default()
        };
        assert_eq!(
            judge(request),
            Decision::bad_request(
                r#"Memcached.memcached.c5c3.io "my-cache" is invalid: spec.tolerations: Too many: 101: must have at most 100 items"#
                    .into()
            )
        );
    }

    #[test]
    fn scale_replicas_are_judged_against_the_spec_bounds() {
        let accept = Decision::Accept { warnings: vec![] };
        for ok in [
            json!({"replicas": 0}),
            json!({"replicas": 64}),
            json!({}),
            Value::Null,
        ] {
            assert_eq!(judge(scale_update(RESOURCE, scale(ok))), accept);
        }
        assert_eq!(
            judge(scale_update(RESOURCE, scale(json!({"replicas": 65})))),
            Decision::bad_request(
                r#"Memcached.memcached.c5c3.io "my-cache" is invalid: spec.replicas: Invalid value: 65: spec.replicas in body should be less than or equal to 64"#
                    .into()
            )
        );
    }

    #[test]
    fn undecodable_scales_are_rejected_with_400() {
        for (object, expected) in [
            (json!([1]), "the request's object is not a JSON object"),
            (
                scale(json!(3)),
                "object cannot be decoded: spec: invalid type: number, expected an object",
            ),
            (
                scale(json!({"replicas": "3"})),
                "object cannot be decoded: spec.replicas: invalid type: string \"3\", expected i32",
            ),
            (
                scale(json!({"replicas": 2_147_483_648i64})),
                "object cannot be decoded: spec.replicas: invalid value: integer `2147483648`, expected i32",
            ),
        ] {
            assert_eq!(
                judge(scale_update(RESOURCE, object)),
                Decision::bad_request(expected.into())
            );
        }
    }

    #[test]
    fn other_resources_and_subresources_are_accepted_untouched() {
        let accept = Decision::Accept { warnings: vec![] };
        let too_many = scale(json!({"replicas": 500}));
        assert_eq!(judge(scale_update("deployments", too_many.clone())), accept);
        let mut status = scale_update(RESOURCE, too_many.clone());
        status.sub_resource = "status".into();
        assert_eq!(judge(status), accept);
        let mut not_a_scale = scale_update(RESOURCE, too_many);
        not_a_scale.kind = "Memcached".into();
        assert_eq!(judge(not_a_scale), accept);
    }
}
