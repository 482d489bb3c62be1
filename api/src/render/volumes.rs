//! The volumes of a Memcached's pods and where its containers mount them:
//! the Secrets of authentication and TLS, and with warm restarts the
//! memory-backed volume of memcached's memory file and the supervisor's.

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, KeyToPath, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::defaults::Defaulted;
use crate::render::args::{self, AUTH_DIR, AUTH_FILE, TLS_DIR, WARM_RESTART_DIR};
use crate::render::warm_restart;
use crate::types::MemcachedSpec;

/// Volume of the authentication Secret.
pub const AUTH_VOLUME: &str = "auth";
/// Volume of the TLS Secret.
pub const TLS_VOLUME: &str = "tls";
/// Memory-backed volume holding memcached's memory file (warm restarts).
pub const WARM_RESTART_VOLUME: &str = "warm-restart";

/// The Secret names the pods mount: (volume name, Secret name, mount path).
pub fn secret_mounts(spec: &MemcachedSpec) -> Vec<(&'static str, String, &'static str)> {
    let security = spec.security.as_ref();
    let mut mounts = Vec::new();
    if spec.sasl_enabled()
        && let Some(name) = security
            .and_then(|s| s.sasl.as_ref())
            .and_then(|s| s.credentials_secret_ref.as_ref())
    {
        mounts.push((AUTH_VOLUME, name.name.clone(), AUTH_DIR));
    }
    if spec.tls_enabled()
        && let Some(name) = security
            .and_then(|s| s.tls.as_ref())
            .and_then(|t| t.certificate_secret_ref.as_ref())
    {
        mounts.push((TLS_VOLUME, name.name.clone(), TLS_DIR));
    }
    mounts
}

/// The Secret volumes, then those of warm restarts. The authentication
/// Secret's `auth_key` is mounted as [`AUTH_FILE`], the file memcached reads;
/// the key `auth` is mounted as it is, with the Secret's other keys (as
/// before other keys were read: no pod changes).
pub(crate) fn volumes(spec: &Defaulted, auth_key: &str) -> Vec<Volume> {
    let mut volumes: Vec<Volume> = secret_mounts(spec)
        .into_iter()
        .map(|(volume, secret, _)| Volume {
            name: volume.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret),
                items: (volume == AUTH_VOLUME && auth_key != AUTH_FILE).then(|| {
                    vec![KeyToPath {
                        key: auth_key.into(),
                        path: AUTH_FILE.into(),
                        mode: None,
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    if spec.warm_restart_enabled() {
        volumes.push(warm_restart_volume(spec));
        volumes.push(warm_restart::run_volume());
    }
    volumes
}

/// tmpfs for the memory file: `maxMemoryMB` (the file's size) plus 1Mi for
/// its `.meta` file. Its pages are memcached's item memory, charged to the
/// container once, as without warm restarts.
fn warm_restart_volume(spec: &Defaulted) -> Volume {
    let max_memory_mb = spec.max_memory_mb();
    Volume {
        name: WARM_RESTART_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: Some(Quantity(format!("{}Mi", i64::from(max_memory_mb) + 1))),
        }),
        ..Default::default()
    }
}

/// memcached mounts every Secret and the warm restart volume; the exporter
/// only the TLS Secret, and only when it needs a client certificate.
pub(crate) fn volume_mounts(spec: &MemcachedSpec, memcached: bool) -> Vec<VolumeMount> {
    let mut mounts: Vec<VolumeMount> = secret_mounts(spec)
        .into_iter()
        .filter(|(volume, _, _)| {
            memcached || (*volume == TLS_VOLUME && args::client_cert_required(spec))
        })
        .map(|(volume, _, path)| VolumeMount {
            name: volume.into(),
            mount_path: path.into(),
            read_only: Some(true),
            ..Default::default()
        })
        .collect();
    if memcached && spec.warm_restart_enabled() {
        mounts.push(VolumeMount {
            name: WARM_RESTART_VOLUME.into(),
            mount_path: WARM_RESTART_DIR.into(),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: warm_restart::RUN_VOLUME.into(),
            mount_path: warm_restart::RUN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        });
    }
    mounts
}

pub(crate) fn non_empty<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}
