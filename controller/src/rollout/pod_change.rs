//! What a change in place gives a running pod, and whether the pod has
//! taken it: the memcached image (the kubelet restarts the container) and,
//! with warm restarts, the args and the Secret hash annotations the pod's
//! supervisor restarts memcached for ([`memcached_api::render::warm_restart`]). A pod has
//! taken its change once memcached itself says so: another process than
//! before the patch, running the settings its args ask for, accepting the
//! current credentials, and warm again ([`crate::rollout::pacing`]'s rule).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::ResourceExt;
use ring::digest::{SHA256, digest};
use serde_json::{Value, json};

use crate::rollout::pacing::{Peers, Waits, Warming};
use crate::stats::client::PodStats;
use memcached_api::render::args;
use memcached_api::render::containers::{MEMCACHED_CONTAINER, MEMCACHED_PORT};
use memcached_api::render::labels::{IMAGE_ANNOTATION, SECRET_HASH_ANNOTATION, VERSION_LABEL};
use memcached_api::render::warm_restart::{
    ARGS_ANNOTATION, NAPI_IDS_RAN_ANNOTATION, annotation_args,
};

/// Pod annotation: the memcached container's restart count when its image
/// was changed; the pod is restarted once the count is higher.
pub const RESTARTS_ANNOTATION: &str = "memcached.c5c3.io/in-place-restarts";
/// Pod annotation: memcached's pid when the pod was patched; it restarted
/// once another process answers. [`REFUSED`] when memcached refused every
/// credential this controller could read it with: it restarted once it
/// answers the current ones.
pub const PID_ANNOTATION: &str = "memcached.c5c3.io/in-place-pid";
/// [`PID_ANNOTATION`] of a pod patched while it refused to be read.
pub const REFUSED: &str = "refused";

/// The part of a pod template a running pod takes in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The memcached container's image.
    pub image: String,
    /// The version label that follows the image.
    version: Option<String>,
    /// The args annotation (warm restarts).
    args: Option<String>,
    /// The Secret hash annotation.
    secrets: Option<String>,
}

impl Change {
    /// The change `template` gives the pods; `None` without a memcached container.
    pub fn of(template: &PodTemplateSpec) -> Option<Self> {
        let metadata = template.metadata.clone().unwrap_or_default();
        let annotation = |key: &str| metadata.annotations.as_ref()?.get(key).cloned();
        Some(Change {
            image: template_image(template)?,
            version: metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(VERSION_LABEL))
                .cloned(),
            args: annotation(ARGS_ANNOTATION),
            secrets: annotation(SECRET_HASH_ANNOTATION),
        })
    }

    /// What marks a workload while this change goes on: the image, and a
    /// digest of the args and Secret hash when the template carries args
    /// (a template without, as an older controller rendered it, is marked
    /// by its image alone, as that controller marked it).
    pub fn mark(&self) -> String {
        match &self.args {
            None => self.image.clone(),
            Some(args) => {
                let both = format!("{args}\n{}", self.secrets.as_deref().unwrap_or_default());
                let hex: String = digest(&SHA256, both.as_bytes()).as_ref()[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("{} {hex}", self.image)
            }
        }
    }

    /// The change as a strategic merge patch of a pod template or a pod.
    pub fn patch(&self) -> Value {
        json!({
            "metadata": {
                "labels": {VERSION_LABEL: self.version},
                "annotations": {
                    ARGS_ANNOTATION: self.args,
                    SECRET_HASH_ANNOTATION: self.secrets,
                    IMAGE_ANNOTATION: self.image,
                },
            },
            "spec": {"containers": [{"name": MEMCACHED_CONTAINER, "image": self.image}]},
        })
    }

    /// `pod` has not been given this change.
    pub fn lags(&self, pod: &Pod) -> bool {
        self.new_image(pod) || self.new_config(pod)
    }

    /// `pod` was not given this change's image: by its image annotation (a
    /// webhook that rewrites images, to a registry mirror, leaves it alone),
    /// else, on a pod rendered without one, by its container's image.
    pub fn new_image(&self, pod: &Pod) -> bool {
        let given = pod.annotations().get(IMAGE_ANNOTATION).map(String::as_str);
        given.or_else(|| pod_image(pod)) != Some(self.image.as_str())
    }

    /// `patch` (of [`Change::patch`]) for `pod`: without the container's
    /// image when the pod was given it already, so a new configuration never
    /// writes back an image a webhook rewrote.
    pub fn for_pod(&self, pod: &Pod, mut patch: Value) -> Value {
        if let (false, Some(fields)) = (self.new_image(pod), patch.as_object_mut()) {
            fields.remove("spec");
        }
        patch
    }

    /// `pod`'s args or Secret hash differ from this change's.
    fn new_config(&self, pod: &Pod) -> bool {
        let annotations = pod.annotations();
        annotations.get(ARGS_ANNOTATION) != self.args.as_ref()
            || annotations.get(SECRET_HASH_ANNOTATION) != self.secrets.as_ref()
    }

    /// What the change gives `pod`, in words: `memcached image <image>`,
    /// `a new memcached configuration`, or both.
    pub fn describe(&self, pod: Option<&Pod>) -> String {
        let (image, config) =
            pod.map_or((true, false), |p| (self.new_image(p), self.new_config(p)));
        match (image, config) {
            (true, true) => format!("memcached image {} and a new configuration", self.image),
            (false, true) => "a new memcached configuration".to_string(),
            _ => format!("memcached image {}", self.image),
        }
    }

    /// The patch giving `pod` this change, recording what tells its restart:
    /// the container's restart count when its image changes (the kubelet
    /// restarts it), memcached's pid as `seen` last (another process answers
    /// once it restarted), or [`REFUSED`] when memcached refused to be read
    /// (once restarted with the Secrets it is given, it answers the current
    /// credentials). `None` for a new configuration alone while the pod was
    /// not read yet (nothing would tell when memcached restarted with it).
    pub fn patch_for(&self, pod: &Pod, seen: &Seen<'_>) -> Option<Value> {
        let new_image = self.new_image(pod);
        let pid = seen.of(pod).map(|s| s.pid.to_string());
        let pid = pid.or_else(|| seen.refuses(pod).then(|| REFUSED.to_string()));
        if pid.is_none() && !new_image {
            return None;
        }
        let restarts = memcached_status(pod).map(|s| s.restart_count.to_string());
        let mut patch = self.patch();
        let annotations = &mut patch["metadata"]["annotations"];
        annotations[RESTARTS_ANNOTATION] = json!(restarts.filter(|_| new_image));
        annotations[PID_ANNOTATION] = json!(pid);
        // The process keeps the args it runs until the supervisor restarts it:
        // what it may still run is recorded for the stats client, for good.
        let running = pod.annotations().get(ARGS_ANNOTATION);
        if running.is_some_and(|a| args::napi_ids(&annotation_args(a))) {
            annotations[NAPI_IDS_RAN_ANNOTATION] = json!("true");
        }
        Some(patch)
    }
}

/// What the last stats collected say of the pods, and what they must run.
pub struct Seen<'a> {
    /// The last stats, by pod address.
    pub stats: &'a BTreeMap<SocketAddr, PodStats>,
    /// The pods that refused to be read ([`crate::stats::client::ClusterStats::refused`]).
    pub refused: &'a BTreeSet<SocketAddr>,
    /// The `stats settings` the pods' args give ([`memcached_api::render::args::confirmed_settings`]).
    pub settings: &'a [(&'static str, String)],
    /// How long each Memcached's rollout has waited for a pod to warm, and
    /// this one's key: a pod that came back cold is waited for no longer
    /// than [`crate::rollout::pacing::WARM_TIMEOUT`].
    pub waits: (&'a Waits, &'a str),
}

impl Seen<'_> {
    /// The last stats of `pod`.
    pub fn of(&self, pod: &Pod) -> Option<&PodStats> {
        self.stats.get(&address(pod)?)
    }

    /// `pod` refused to be read at the last collection.
    pub fn refuses(&self, pod: &Pod) -> bool {
        address(pod).is_some_and(|a| self.refused.contains(&a))
    }
}

/// Where a pod stands with its change in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Restarted with it and warm: the next pod may go.
    Yes,
    /// Not yet (restarting, not Ready, not read since, warming).
    Waiting,
    /// Restarted, but memcached does not run what the change gives it: why.
    Mismatch(String),
}

/// `pod`'s memcached may be running NAPI ids (`-N`, in any spelling getopt
/// accepts: [`args::napi_ids`]), by the pod's own record, never by the
/// desired spec: its memcached container's command line, the args its
/// warm-restart supervisor reads ([`ARGS_ANNOTATION`]), or the record that
/// args it was given before ran them ([`NAPI_IDS_RAN_ANNOTATION`]: the
/// process keeps them until the supervisor restarts it).
pub fn may_run_napi_ids(pod: &Pod) -> bool {
    let annotations = pod.annotations();
    let supervised =
        (annotations.get(ARGS_ANNOTATION)).is_some_and(|a| args::napi_ids(&annotation_args(a)));
    let containers = pod.spec.iter().flat_map(|s| &s.containers);
    let container = (containers.filter(|c| c.name == MEMCACHED_CONTAINER)).any(|c| {
        let command = c.command.iter().chain(&c.args).flatten().cloned();
        args::napi_ids(&command.collect::<Vec<_>>())
    });
    annotations.contains_key(NAPI_IDS_RAN_ANNOTATION) || supervised || container
}

/// The addresses of the `pods` that cannot be running NAPI ids: those a
/// memcached release that crashes on `stats settings` with them may still
/// be asked ([`crate::stats::client::StatsClient::without_napi_ids`]).
pub fn without_napi_ids(pods: &[Pod]) -> BTreeSet<SocketAddr> {
    (pods.iter())
        .filter(|p| !may_run_napi_ids(p))
        .filter_map(address)
        .collect()
}

/// Whether `pod` has taken its change (or never had one: then Ready
/// suffices), judged by `seen`; `peers` are the other pods' numbers, for
/// the warm rule.
pub fn taken(pod: &Pod, seen: &Seen<'_>, peers: Option<Peers>) -> Taken {
    let annotations = pod.annotations();
    let recorded = |key: &str| annotations.get(key).and_then(|v| v.parse::<i64>().ok());
    let status = memcached_status(pod);
    // A new image restarts the container (memcached's pid in the container's
    // own namespace may then be what it was); new args alone restart
    // memcached in it (another pid).
    let restarts_before = recorded(RESTARTS_ANNOTATION);
    let container_restarted = restarts_before
        .is_none_or(|before| status.is_some_and(|s| i64::from(s.restart_count) > before));
    if !ready(pod) || !status.is_some_and(|s| s.ready) || !container_restarted {
        return Taken::Waiting;
    }
    let refused_before = annotations.get(PID_ANNOTATION).map(String::as_str) == Some(REFUSED);
    // Patched while it refused to be read: nothing tells its restart but
    // answering the current credentials, waited for up to the warm timeout.
    let (waits, key) = seen.waits;
    let waited_out = || waits.waited_out(key, &pod.name_any());
    let Some(now) = seen.of(pod) else {
        if refused_before && waited_out() {
            return Taken::Mismatch(
                "restarted, it still refuses the credentials or certificate of the current Secrets"
                    .to_string(),
            );
        }
        // Never patched, or a new image without stats: the restart is enough.
        let patched = recorded(PID_ANNOTATION).is_some() || refused_before;
        return if patched { Taken::Waiting } else { Taken::Yes };
    };
    let pid_before = recorded(PID_ANNOTATION);
    if restarts_before.is_none() && pid_before == Some(i64::from(now.pid)) {
        return Taken::Waiting; // the supervisor has not restarted memcached yet
    }
    if pid_before.is_none() && restarts_before.is_none() && !refused_before {
        return Taken::Yes; // never patched (an older change's pod)
    }
    if now.stale_secrets && refused_before && !waited_out() {
        return Taken::Waiting; // read as before: the process that refused may still run
    }
    if now.stale_secrets {
        return Taken::Mismatch(
            "restarted, it still accepts only the credentials or certificate it ran before"
                .to_string(),
        );
    }
    let differs: Vec<String> = (seen.settings.iter())
        .filter_map(|(name, wanted)| {
            let running = args::confirmed_value(name, now.settings.get(*name)?);
            (running != *wanted).then(|| format!("{name} {running} (not {wanted})"))
        })
        .collect();
    if !differs.is_empty() {
        return Taken::Mismatch(format!("restarted, it runs {}", differs.join(", ")));
    }
    let warming = Warming {
        pod: pod.name_any(),
        now: Some(now.clone()),
        peers,
    };
    if warming.warm() || waited_out() {
        Taken::Yes
    } else {
        Taken::Waiting
    }
}

/// Where memcached of `pod` answers.
pub fn address(pod: &Pod) -> Option<SocketAddr> {
    let ip: IpAddr = pod.status.as_ref()?.pod_ip.as_ref()?.parse().ok()?;
    Some(SocketAddr::new(ip, MEMCACHED_PORT as u16))
}

/// The memcached container's image in a pod template.
pub fn template_image(template: &PodTemplateSpec) -> Option<String> {
    let containers = &template.spec.as_ref()?.containers;
    let memcached = containers.iter().find(|c| c.name == MEMCACHED_CONTAINER)?;
    memcached.image.clone()
}

fn pod_image(pod: &Pod) -> Option<&str> {
    let containers = &pod.spec.as_ref()?.containers;
    let memcached = containers.iter().find(|c| c.name == MEMCACHED_CONTAINER)?;
    memcached.image.as_deref()
}

/// The memcached container's status.
pub fn memcached_status(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses.iter().find(|s| s.name == MEMCACHED_CONTAINER)
}

/// The pod's `Ready` condition is true.
pub fn ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str, args: Option<&str>, secrets: Option<&str>) -> PodTemplateSpec {
        let mut annotations = serde_json::Map::new();
        for (key, value) in [(ARGS_ANNOTATION, args), (SECRET_HASH_ANNOTATION, secrets)] {
            if let Some(value) = value {
                annotations.insert(key.into(), json!(value));
            }
        }
        serde_json::from_value(json!({
            "metadata": {"labels": {VERSION_LABEL: image.rsplit(':').next()},
                "annotations": annotations},
            "spec": {"containers": [{"name": "memcached", "image": image}]},
        }))
        .unwrap()
    }

    /// A Ready pod of `template`, restarted `restarts` times, with `recorded`
    /// annotations besides the template's.
    fn pod(template: &PodTemplateSpec, restarts: i32, recorded: Value) -> Pod {
        let mut annotations = json!(template.metadata.as_ref().unwrap().annotations);
        for (key, value) in recorded.as_object().unwrap() {
            annotations[key] = value.clone();
        }
        serde_json::from_value(json!({
            "metadata": {"name": "c-1", "uid": "u-1", "annotations": annotations},
            "spec": template.spec,
            "status": {"podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "memcached", "ready": true, "restartCount": restarts,
                    "image": "", "imageID": ""}]},
        }))
        .unwrap()
    }

    fn stats(pid: u32, settings: &[(&str, &str)]) -> BTreeMap<SocketAddr, PodStats> {
        let pod = PodStats {
            items: 1000,
            pid,
            settings: (settings.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        BTreeMap::from([("10.0.0.1:11211".parse().unwrap(), pod)])
    }

    #[test]
    fn a_change_carries_the_image_args_and_secrets_and_marks_them() {
        let old = Change::of(&template("m:1", Some("-t\n4"), Some("h1"))).unwrap();
        let threads = Change::of(&template("m:1", Some("-t\n2"), Some("h1"))).unwrap();
        let rotated = Change::of(&template("m:1", Some("-t\n2"), Some("h2"))).unwrap();
        assert_ne!(old.mark(), threads.mark());
        assert_ne!(threads.mark(), rotated.mark());
        assert!(threads.mark().starts_with("m:1 "));
        let legacy = Change::of(&template("m:2", None, Some("h1"))).unwrap();
        assert_eq!(
            legacy.mark(),
            "m:2",
            "marked as an older controller marked it"
        );
        let running = pod(&template("m:1", Some("-t\n4"), Some("h1")), 0, json!({}));
        assert!(!old.lags(&running));
        assert!(threads.lags(&running) && rotated.lags(&running));
        assert_eq!(
            threads.describe(Some(&running)),
            "a new memcached configuration"
        );
        let both = Change::of(&template("m:2", Some("-t\n2"), Some("h1"))).unwrap();
        assert_eq!(
            both.describe(Some(&running)),
            "memcached image m:2 and a new configuration"
        );
        assert_eq!(both.describe(None), "memcached image m:2");
    }

    #[test]
    fn a_new_configuration_waits_for_the_pid_an_image_does_not() {
        let waits = Waits::default();
        let running = pod(&template("m:1", Some("-t\n4"), None), 3, json!({}));
        let no_stats = BTreeMap::new();
        let unknown = Seen {
            stats: &no_stats,
            refused: &BTreeSet::new(),
            settings: &[],
            waits: (&waits, "ns/c"),
        };
        let threads = Change::of(&template("m:1", Some("-t\n2"), None)).unwrap();
        assert_eq!(
            threads.patch_for(&running, &unknown),
            None,
            "nothing would tell its restart"
        );
        let image = Change::of(&template("m:2", Some("-t\n4"), None)).unwrap();
        let patch = image.patch_for(&running, &unknown).unwrap();
        assert_eq!(patch["metadata"]["annotations"][RESTARTS_ANNOTATION], "3");
        assert!(patch["metadata"]["annotations"][PID_ANNOTATION].is_null());
        let known = stats(7, &[]);
        let seen = Seen {
            stats: &known,
            refused: &BTreeSet::new(),
            settings: &[],
            waits: (&waits, "ns/c"),
        };
        let patch = threads.patch_for(&running, &seen).unwrap();
        assert_eq!(patch["metadata"]["annotations"][PID_ANNOTATION], "7");
        assert_eq!(patch["metadata"]["annotations"][ARGS_ANNOTATION], "-t\n2");
        assert!(
            patch["metadata"]["annotations"]
                .get(NAPI_IDS_RAN_ANNOTATION)
                .is_none(),
            "its args never ran NAPI ids"
        );
    }

    /// `-N` removed in place: the pod records that its memcached may still
    /// run NAPI ids (the patch never removes the record).
    #[test]
    fn args_that_ran_napi_ids_are_recorded_on_the_pod_they_are_patched_away_from() {
        let waits = Waits::default();
        let known = stats(7, &[]);
        let seen = Seen {
            stats: &known,
            refused: &BTreeSet::new(),
            settings: &[],
            waits: (&waits, "ns/c"),
        };
        for napi in ["-t\n4\n-N\n1", "-t\n4\n--napi=1", "-vN\n1"] {
            let running = pod(&template("m:1", Some(napi), None), 3, json!({}));
            let removed = Change::of(&template("m:1", Some("-t\n4"), None)).unwrap();
            let patch = removed.patch_for(&running, &seen).unwrap();
            assert_eq!(
                patch["metadata"]["annotations"][NAPI_IDS_RAN_ANNOTATION], "true",
                "{napi:?}"
            );
        }
    }

    /// [`taken`] of `pod` by `stats`, none refused, beside peers of 1,000 items.
    fn judge_warm(
        pod: &Pod,
        stats: &BTreeMap<SocketAddr, PodStats>,
        wanted: &[(&'static str, String)],
        waits: &Waits,
    ) -> Taken {
        let seen = Seen {
            stats,
            refused: &BTreeSet::new(),
            settings: wanted,
            waits: (waits, "ns/c"),
        };
        let peers = Peers {
            items: 1000,
            hit_ratio: None,
        };
        taken(pod, &seen, Some(peers))
    }

    /// Taken once memcached itself says so: another process, the settings
    /// its args give, the current credentials, warm.
    #[test]
    fn a_pod_has_taken_its_change_once_memcached_says_so() {
        let waits = Waits::default();
        let given = template("m:1", Some("-t\n2"), Some("h2"));
        let patched = pod(&given, 0, json!({PID_ANNOTATION: "7"}));
        let wanted = [("num_threads", "2".to_string())];
        let judge = |stats: &_| judge_warm(&patched, stats, &wanted, &waits);
        assert_eq!(judge(&BTreeMap::new()), Taken::Waiting, "not read yet");
        assert_eq!(
            judge(&stats(7, &[("num_threads", "4")])),
            Taken::Waiting,
            "not restarted yet"
        );
        assert_eq!(judge(&stats(9, &[("num_threads", "2")])), Taken::Yes);
        assert_eq!(
            judge(&stats(9, &[("num_threads", "4")])),
            Taken::Mismatch("restarted, it runs num_threads 4 (not 2)".into())
        );
        // ASCII auth on, its file wherever the runtime mounted the Secret.
        let auth = [("auth_enabled_ascii", "yes".to_string())];
        let on = |path| stats(9, &[("auth_enabled_ascii", path)]);
        let judge_auth = |stats: &_| judge_warm(&patched, stats, &auth, &waits);
        assert_eq!(judge_auth(&on("/etc/memcached/auth/auth")), Taken::Yes);
        assert_eq!(judge_auth(&on("/var/pods/c-1/auth/auth")), Taken::Yes);
        assert_eq!(
            judge_auth(&on("no")),
            Taken::Mismatch("restarted, it runs auth_enabled_ascii no (not yes)".into())
        );
        let mut stale = stats(9, &[("num_threads", "2")]);
        stale.values_mut().for_each(|s| s.stale_secrets = true);
        assert!(
            matches!(judge(&stale), Taken::Mismatch(_)),
            "older credentials"
        );
        let mut cold = stats(9, &[("num_threads", "2")]);
        cold.values_mut().for_each(|s| s.items = 0);
        assert_eq!(judge(&cold), Taken::Waiting, "restarted cold: warming");

        let image = pod(&given, 3, json!({RESTARTS_ANNOTATION: "3"}));
        let none = BTreeMap::new();
        let seen = Seen {
            stats: &none,
            refused: &BTreeSet::new(),
            settings: &wanted,
            waits: (&waits, "ns/c"),
        };
        assert_eq!(
            taken(&image, &seen, None),
            Taken::Waiting,
            "the container not restarted yet"
        );
        let restarted = pod(&given, 4, json!({RESTARTS_ANNOTATION: "3"}));
        assert_eq!(taken(&restarted, &seen, None), Taken::Yes);
        // A new container may give memcached the pid it had: the restart count tells.
        let same_pid = pod(
            &given,
            4,
            json!({RESTARTS_ANNOTATION: "3", PID_ANNOTATION: "7"}),
        );
        let known = stats(7, &[("num_threads", "2")]);
        let seen = Seen {
            stats: &known,
            refused: &BTreeSet::new(),
            settings: &wanted,
            waits: (&waits, "ns/c"),
        };
        let peers = Some(Peers {
            items: 1000,
            hit_ratio: None,
        });
        assert_eq!(taken(&same_pid, &seen, peers), Taken::Yes);
    }

    /// A pod that refuses every credential this controller holds (the auth
    /// file it started with was fixed since, and no earlier client read it)
    /// still gets a new configuration; it has taken it once it answers the
    /// current credentials, restarted, with what its args give and warm.
    #[test]
    fn a_pod_that_refuses_to_be_read_gets_the_fixed_secrets() {
        let waits = Waits::default();
        let running = pod(&template("m:1", Some("-t\n2"), Some("h1")), 0, json!({}));
        let fixed = Change::of(&template("m:1", Some("-t\n2"), Some("h2"))).unwrap();
        let none = BTreeMap::new();
        let (unread, refused) = (BTreeSet::new(), stats(7, &[]).into_keys().collect());
        let seen = |refused| Seen {
            stats: &none,
            refused,
            settings: &[],
            waits: (&waits, "ns/c"),
        };
        assert_eq!(
            fixed.patch_for(&running, &seen(&unread)),
            None,
            "not read yet: waited for"
        );
        let patch = fixed.patch_for(&running, &seen(&refused)).unwrap();
        let annotations = &patch["metadata"]["annotations"];
        assert_eq!(annotations[PID_ANNOTATION], REFUSED);
        assert_eq!(annotations[SECRET_HASH_ANNOTATION], "h2");

        let patched = pod(
            &template("m:1", Some("-t\n2"), Some("h2")),
            0,
            json!({PID_ANNOTATION: REFUSED}),
        );
        let wanted = [("num_threads", "2".to_string())];
        let judge = |stats: &_| judge_warm(&patched, stats, &wanted, &waits);
        assert_eq!(
            judge(&none),
            Taken::Waiting,
            "still refusing, or not read yet"
        );
        let mut as_before = stats(7, &[("num_threads", "2")]);
        as_before.values_mut().for_each(|s| s.stale_secrets = true);
        assert_eq!(judge(&as_before), Taken::Waiting, "maybe not restarted yet");
        assert_eq!(judge(&stats(7, &[("num_threads", "2")])), Taken::Yes);
        assert_eq!(
            judge(&stats(7, &[("num_threads", "4")])),
            Taken::Mismatch("restarted, it runs num_threads 4 (not 2)".into())
        );
    }

    /// A webhook rewrote the pod's image to a mirror at admission: the pod
    /// was given the change's image all the same (its annotation says so), so
    /// a new configuration patches no image (no loop, no un-mirrored image
    /// written back); a new image is patched, with its annotation.
    #[test]
    fn a_mirrored_image_is_the_image_the_pod_was_given() {
        let running = template("memcached:1.6", Some("-t\n4"), None);
        let mut pod = pod(&running, 0, json!({IMAGE_ANNOTATION: "memcached:1.6"}));
        let container = &mut pod.spec.as_mut().unwrap().containers[0];
        container.image = Some("mirror.example/library/memcached:1.6".into());
        let same = Change::of(&running).unwrap();
        assert!(!same.lags(&pod), "no loop on a rewritten image");
        let threads = Change::of(&template("memcached:1.6", Some("-t\n2"), None)).unwrap();
        assert!(threads.lags(&pod));
        let patch = threads.for_pod(&pod, threads.patch());
        assert!(patch.get("spec").is_none(), "{patch}");
        assert_eq!(patch["metadata"]["annotations"][ARGS_ANNOTATION], "-t\n2");
        let bumped = Change::of(&template("memcached:1.6.45", Some("-t\n4"), None)).unwrap();
        let patch = bumped.for_pod(&pod, bumped.patch());
        assert_eq!(
            patch["spec"]["containers"][0]["image"], "memcached:1.6.45",
            "{patch}"
        );
        assert_eq!(
            patch["metadata"]["annotations"][IMAGE_ANNOTATION],
            "memcached:1.6.45"
        );
        // A pod rendered before the annotation: its container's image tells.
        let mut legacy = pod.clone();
        legacy
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(IMAGE_ANNOTATION);
        assert!(same.lags(&legacy));
    }

    /// A pod at `ip` whose memcached container has `args`, with `annotations`.
    fn running(ip: &str, args: &[&str], annotations: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "c-abc-12345", "annotations": annotations},
            "spec": {"containers": [{"name": "memcached", "args": args},
                {"name": "exporter", "args": ["-N", "1"]}]},
            "status": {"podIP": ip},
        }))
        .unwrap()
    }

    fn supervised(args: &str) -> Pod {
        running("10.0.0.1", &[], json!({ARGS_ANNOTATION: args}))
    }

    #[test]
    fn napi_ids_are_read_from_the_pods_container_args_in_every_spelling() {
        for spelling in [
            &["-N", "1"][..],
            &["-N1"],
            &["-vN", "1"],
            &["--napi=1"],
            &["--napi-ids", "1"],
        ] {
            let pod = running("10.0.0.1", spelling, json!({}));
            assert!(may_run_napi_ids(&pod), "{spelling:?}");
        }
        let plain = running("10.0.0.1", &["-m", "64", "-v"], json!({}));
        assert!(
            !may_run_napi_ids(&plain),
            "another container's -N is not memcached's"
        );
    }

    #[test]
    fn napi_ids_are_read_from_the_args_the_supervisor_reads() {
        for spelling in [
            "-m\n64\n-N\n1",
            "-N1",
            "-vN\n1",
            "--napi=1",
            "-t\n4\n--n=2\n",
        ] {
            assert!(may_run_napi_ids(&supervised(spelling)), "{spelling:?}");
        }
        let plain = supervised("-m\n64\n-e\n/var/lib/memcached/memory_file");
        assert!(!may_run_napi_ids(&plain));
        assert!(!may_run_napi_ids(&supervised("--\n-N\n1")), "an operand");
    }

    /// `-N` removed from a running pod's args: its memcached runs `-N` until
    /// the supervisor restarts it, and the pod's record says so; only the
    /// pods free of it are asked `stats settings` by a release that crashes.
    #[test]
    fn a_pod_whose_earlier_args_ran_napi_ids_may_still_run_them() {
        let removed = json!({ARGS_ANNOTATION: "-m\n64", NAPI_IDS_RAN_ANNOTATION: "true"});
        let pods = [
            running("10.0.0.1", &[], removed),
            running("10.0.0.2", &[], json!({ARGS_ANNOTATION: "-m\n64"})),
            running("10.0.0.3", &[], json!({ARGS_ANNOTATION: "-N1"})),
        ];
        assert!(may_run_napi_ids(&pods[0]));
        let free = without_napi_ids(&pods);
        let address = |ip: &str| SocketAddr::new(ip.parse().unwrap(), MEMCACHED_PORT as u16);
        assert_eq!(free, BTreeSet::from([address("10.0.0.2")]));
        let client = crate::stats::client::StatsClient {
            settings: args::CONFIRMED_SETTINGS,
            without_napi_ids: std::sync::Arc::new(free),
            ..Default::default()
        };
        assert!(!client.may_ask_settings(address("10.0.0.1"), "1.6.18"));
        assert!(client.may_ask_settings(address("10.0.0.1"), "1.6.40"));
        assert!(client.may_ask_settings(address("10.0.0.2"), "1.6.18"));
        assert!(!client.may_ask_settings(address("10.0.0.3"), "1.6.18"));
        assert!(
            !client.may_ask_settings(address("10.0.0.4"), "1.6.18"),
            "not listed"
        );
    }
}
