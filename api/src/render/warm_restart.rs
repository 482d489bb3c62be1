//! How a pod restarts memcached warm, in its own container.
//!
//! With warm restarts memcached keeps its items in a memory file on a
//! memory-backed volume (`-e`); on SIGUSR1 it saves and exits, and the next
//! start with the same memory geometry restores every item. The container
//! runs a small shell supervisor as PID 1 ([`command`]), which starts
//! memcached with the args it reads from the pod's own annotations (a
//! downward API volume, [`run_volume`]):
//!
//! * when the pod's args or Secret hash annotations change (the controller
//!   patches one pod at a time, see [`crate::rollout::in_place`]), it saves memcached
//!   and starts it again with the new args and the Secret files the kubelet
//!   refreshed meanwhile: a configuration change or a rotated credential
//!   without a new pod;
//! * the preStop hook ([`SAVE_AND_WAIT`]) has it save and stop memcached,
//!   and returns once that is done, so the kubelet's SIGTERM after the hook
//!   never cuts a save short and the hook never fails;
//! * a SIGTERM without the hook saves too; memcached exiting on its own
//!   ends the container with its status, as if memcached were PID 1.
//!
//! memcached restores a save only when the wall clock has moved on a second
//! since it (its `stop_time` check), so a start after a save waits a second.
//! A new Secret hash waits for the kubelet's refreshed Secret files (by
//! content, at most [`SECRET_FILES_WAIT_SECONDS`]) before the save, and
//! restarts memcached once more if they come later.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, DownwardAPIVolumeSource, ObjectFieldSelector, Volume,
};

use crate::render::args::{
    AUTH_DIR, MEMORY_FILE, TLS_CA_KEY, TLS_CERT_KEY, TLS_DIR, WARM_RESTART_DIR,
};
use crate::render::labels::SECRET_HASH_ANNOTATION;

/// Pod annotation: memcached's args, one per line (what the pod runs).
pub const ARGS_ANNOTATION: &str = "memcached.c5c3.io/args";
/// Pod annotation, `"true"`: the pod's memcached may still run NAPI ids
/// (`-N`) whatever [`ARGS_ANNOTATION`] says now. The controller sets it when
/// it patches the args of a pod whose args ran them (the process keeps its
/// args until the supervisor restarts it), and never removes it: for the
/// pod's life, `stats settings` goes to it only when its version does not
/// crash on that command with NAPI ids.
pub const NAPI_IDS_RAN_ANNOTATION: &str = "memcached.c5c3.io/napi-ids-ran";
/// The downward API volume with the pod's args and Secret hash.
pub const RUN_VOLUME: &str = "run";
/// Where it is mounted.
pub const RUN_DIR: &str = "/etc/memcached/run";
/// The file the supervisor creates once a save for the preStop hook is done.
pub const SAVED: &str = "saved";

/// The preStop hook, after any graceful shutdown delay: the supervisor
/// (PID 1) saves and stops memcached; the hook returns once it has.
pub fn save_and_wait() -> String {
    format!("kill -USR1 1 && while [ ! -e {WARM_RESTART_DIR}/{SAVED} ]; do sleep 1; done")
}

/// The memcached container's command: the supervisor.
pub fn command() -> Vec<String> {
    // The same text for every pod: written once per process.
    static SCRIPT: OnceLock<String> = OnceLock::new();
    let script = SCRIPT.get_or_init(script);
    vec!["/bin/sh".into(), "-c".into(), script.clone()]
}

/// How long the supervisor waits, after the Secret hash changed, for the
/// kubelet to refresh the mounted Secret files before it restarts memcached
/// anyway (it restarts it again once they change).
pub const SECRET_FILES_WAIT_SECONDS: u32 = 60;

/// The supervisor (POSIX sh: dash, busybox).
///
/// A new Secret hash restarts memcached once the mounted files it hashes
/// (the controller's `cluster::secrets::restart_inputs`: the auth file, the TLS trust
/// anchor) differ (by content: `cat`, which every image's shell has,
/// busybox's as a builtin) from those it started with, or after
/// [`SECRET_FILES_WAIT_SECONDS`]; restarted before they did, it restarts it
/// again when they do. Files that change while the hash does not (the
/// kubelet refreshes every pod's at once; a renewed certificate, which the
/// controller has memcached load in place) restart nothing: the controller
/// gives pods a new hash one at a time.
fn script() -> String {
    format!(
        r#"run={RUN_DIR} data={WARM_RESTART_DIR}
rm -f "$data/{SAVED}"
saved= stale=
config() {{ cat "$run/args" "$run/secrets" 2>/dev/null; }}
files() {{ cat {AUTH_DIR}/* 2>/dev/null; cat {TLS_DIR}/{TLS_CA_KEY} 2>/dev/null || cat {TLS_DIR}/{TLS_CERT_KEY} 2>/dev/null; }}
stop() {{ kill -USR1 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }}
trap 'stop; saved=1; touch "$data/{SAVED}"' USR1
trap 'stop; exit 0' TERM
while :; do
  started=$(config) secrets=$(cat "$run/secrets" 2>/dev/null) mounted=$(files)
  if [ -e "$data/{MEMORY_FILE}.meta" ]; then sleep 1; fi
  set -f; IFS='
'
  memcached $(cat "$run/args") &
  pid=$!
  set +f; unset IFS
  while [ -z "$saved" ] && kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$(config)" != "$started" ]; then
      if [ "$(cat "$run/secrets" 2>/dev/null)" != "$secrets" ]; then
        waited=0
        while [ -z "$saved" ] && [ "$(files)" = "$mounted" ] && [ "$waited" -lt {SECRET_FILES_WAIT_SECONDS} ]; do
          sleep 1; waited=$((waited + 1))
        done
        if [ "$(files)" = "$mounted" ]; then stale=1; else stale=; fi
      fi
      if [ -z "$saved" ]; then stop; continue 2; fi
    elif [ -n "$stale" ] && [ "$(files)" != "$mounted" ]; then
      stale=
      if [ -z "$saved" ]; then stop; continue 2; fi
    fi
  done
  if [ -n "$saved" ]; then while :; do sleep 1; done; fi
  wait "$pid"
  exit $?
done"#
    )
}

/// The downward API volume the supervisor reads: `args` from
/// [`ARGS_ANNOTATION`], `secrets` from the Secret hash annotation (empty
/// without one). The kubelet updates it when the pod's annotations change.
pub fn run_volume() -> Volume {
    let item = |path: &str, annotation: &str| DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            field_path: format!("metadata.annotations['{annotation}']"),
            ..Default::default()
        }),
        ..Default::default()
    };
    Volume {
        name: RUN_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![
                item("args", ARGS_ANNOTATION),
                item("secrets", SECRET_HASH_ANNOTATION),
            ]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// [`ARGS_ANNOTATION`]'s value for `args`.
pub fn args_annotation(args: &[String]) -> String {
    args.join("\n")
}

/// The args in an [`ARGS_ANNOTATION`] value, as the supervisor splits them
/// (at newlines only, empty lines dropped: IFS whitespace).
pub fn annotation_args(value: &str) -> Vec<String> {
    (value.split('\n').filter(|a| !a.is_empty()))
        .map(String::from)
        .collect()
}
