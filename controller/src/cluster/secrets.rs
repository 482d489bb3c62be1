//! The Secrets a Memcached's pods mount: read through the cache, hashed to
//! roll the pods when they change, and checked for what memcached needs.
//!
//! The cache holds every Secret's name and resourceVersion only. The data
//! of a mounted Secret is read from the API server when its version is new
//! to this controller, and kept for the next reconciles: only Secrets a
//! Memcached mounts are ever read.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use memcached_api::{AUTH_SECRET_KEYS, MemcachedSpec};
use ring::hmac;

use crate::cluster::cache::Meta;
use crate::cluster::stored::Stored;
use memcached_api::render::args::{TLS_CA_KEY, TLS_CERT_KEY};
use memcached_api::render::labels::SECRET_HASH_LENGTH;
use memcached_api::render::volumes::{AUTH_VOLUME, TLS_VOLUME, secret_mounts};

/// One Secret's data: key to bytes.
pub type Data = BTreeMap<String, Vec<u8>>;

/// Secret data the pods mount: by Secret name, then key.
pub type SecretData = BTreeMap<String, Data>;

/// The data of the Secrets read so far (by namespace and name), with the
/// resourceVersion read.
#[derive(Default)]
pub struct SecretCache(Mutex<HashMap<(String, String), Versioned>>);

/// Data and the resourceVersion it was read at.
type Versioned = (String, Arc<Data>);

impl SecretCache {
    /// The data read of `key` and its version, whichever version it is.
    fn get(&self, key: &(String, String)) -> Option<Versioned> {
        self.0.lock().ok()?.get(key).cloned()
    }

    /// Drop the data of `secret` when the watch saw it deleted.
    pub fn forget_if_deleted(&self, versions: &Store<Meta<Secret>>, secret: &Meta<Secret>) {
        let (ns, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
        if version(versions, &ns, &name).is_none() {
            self.set((ns, name), None);
        }
    }

    /// Drop the data of the Secrets no Memcached of `memcacheds` mounts.
    pub fn retain_mounted(&self, memcacheds: &Store<Stored>) {
        let mounted: HashSet<(String, String)> = memcacheds
            .state()
            .iter()
            .filter_map(|stored| stored.readable())
            .flat_map(|mc| {
                let ns = mc.namespace().unwrap_or_default();
                secret_mounts(&mc.spec)
                    .into_iter()
                    .map(move |(_, secret, _)| (ns.clone(), secret))
            })
            .collect();
        if let Ok(mut cached) = self.0.lock() {
            cached.retain(|key, _| mounted.contains(key));
        }
    }

    fn set(&self, key: (String, String), entry: Option<Versioned>) {
        if let Ok(mut cached) = self.0.lock() {
            match entry {
                Some(entry) => cached.insert(key, entry),
                None => cached.remove(&key),
            };
        }
    }
}

/// The Secrets a spec mounts, as read.
#[derive(Debug, Default)]
pub struct Mounted {
    /// Their data, by Secret name.
    pub data: SecretData,
    /// The names of those that do not exist.
    pub missing: Vec<String>,
    /// `name=resourceVersion` of each one read, comma-separated: while it
    /// stays the same, so does the data.
    pub versions: String,
    /// When one of them changed since this controller last read it: the
    /// data it had read of them (of those it had) and its
    /// [`Mounted::versions`], so the change is known exactly.
    pub before: Option<(SecretData, String)>,
}

/// The Secrets `spec` mounts.
pub async fn read(
    api: &Api<Secret>,
    versions: &Store<Meta<Secret>>,
    cached: &SecretCache,
    spec: &MemcachedSpec,
) -> Result<Mounted, kube::Error> {
    let ns = api.namespace().unwrap_or_default().to_string();
    let mut mounted = Mounted::default();
    let (mut earlier, mut changed) = (Vec::new(), false);
    for (_, name, _) in secret_mounts(spec) {
        let key = (ns.clone(), name.clone());
        let before = cached.get(&key);
        if let Some(entry) = &before {
            earlier.push((name.clone(), entry.clone()));
        }
        let current = version(versions, &ns, &name);
        changed |= before
            .as_ref()
            .is_some_and(|(v, _)| Some(v) != current.as_ref());
        let entry = match before.filter(|(v, _)| Some(v) == current.as_ref()) {
            Some(entry) => Some(entry),
            // New, changed, or not seen by the watch (yet): read it.
            None => {
                let secret = api.get_opt(&name).await?;
                let entry = secret.map(|s| {
                    let version = s.resource_version().unwrap_or_default();
                    let data = s.data.unwrap_or_default();
                    let data: Data = data.into_iter().map(|(k, v)| (k, v.0)).collect();
                    (version, Arc::new(data))
                });
                cached.set(key, entry.clone());
                entry
            }
        };
        match entry {
            Some((version, data)) => add(
                &mut mounted.data,
                &mut mounted.versions,
                &name,
                &version,
                &data,
            ),
            None => mounted.missing.push(name),
        }
    }
    // Copied only when something changed: most reconciles find nothing new.
    mounted.before = changed.then(|| {
        let (mut data, mut versions) = (SecretData::new(), String::new());
        for (name, (version, read)) in &earlier {
            add(&mut data, &mut versions, name, version, read);
        }
        (data, versions)
    });
    Ok(mounted)
}

/// Add Secret `name`'s `data` at `version` to `secrets` and `versions`
/// ([`Mounted::versions`]).
fn add(secrets: &mut SecretData, versions: &mut String, name: &str, version: &str, data: &Data) {
    if !versions.is_empty() {
        versions.push(',');
    }
    versions.push_str(&format!("{name}={version}"));
    secrets.insert(name.to_string(), data.clone());
}

/// The resourceVersion of the Secret `ns/name` as the watch saw it. A plain
/// store read: the Secret watch calls this while the cache is still syncing,
/// so it must not poll the store's readiness ([`crate::cluster::cache::get`] does).
fn version(versions: &Store<Meta<Secret>>, ns: &str, name: &str) -> Option<String> {
    versions
        .get(&ObjectRef::new(name).within(ns))
        .and_then(|s| s.resource_version())
}

/// The Memcached objects of `store` whose pods mount `secret`.
pub fn mounting(store: &Store<Stored>, secret: &Meta<Secret>) -> Vec<ObjectRef<Stored>> {
    let name = secret.name_any();
    store
        .state()
        .iter()
        .filter_map(|stored| stored.readable())
        .filter(|mc| mc.namespace() == secret.namespace())
        // Defaulting never enables TLS or authentication nor names a Secret:
        // the stored spec mounts what the effective one does.
        .filter(|mc| {
            secret_mounts(&mc.spec)
                .iter()
                .any(|(_, mounted, _)| *mounted == name)
        })
        .map(|mc| ObjectRef::new(&mc.name_any()).within(&mc.namespace().unwrap_or_default()))
        .collect()
}

/// The key of an authentication Secret's `data` that holds memcached's `-Y`
/// file: the first of [`AUTH_SECRET_KEYS`] it has (this project's `auth`,
/// the Go operator's `password-file`, the design's `memcached-sasl-db`).
pub fn auth_key(data: &Data) -> Option<&'static str> {
    AUTH_SECRET_KEYS.into_iter().find(|k| data.contains_key(*k))
}

/// The authentication Secret's data as read, when `spec` mounts one.
fn auth_secret<'a>(spec: &MemcachedSpec, secrets: &'a SecretData) -> Option<(String, &'a Data)> {
    let (_, secret, _) = secret_mounts(spec)
        .into_iter()
        .find(|(volume, _, _)| *volume == AUTH_VOLUME)?;
    let data = secrets.get(&secret)?;
    Some((secret, data))
}

/// The key the pods read memcached's `-Y` file from ([`auth_key`]); the
/// first of [`AUTH_SECRET_KEYS`] when no Secret was read or it has none of
/// them (the pods are held then: [`auth_file_problem`]).
pub fn mounted_auth_key(spec: &MemcachedSpec, secrets: &SecretData) -> &'static str {
    auth_secret(spec, secrets)
        .and_then(|(_, data)| auth_key(data))
        .unwrap_or(AUTH_SECRET_KEYS[0])
}

/// memcached's `-Y` file needs `user:password` lines, the last one
/// newline-terminated, under one of [`AUTH_SECRET_KEYS`].
pub fn auth_file_problem(spec: &MemcachedSpec, secrets: &SecretData) -> Option<String> {
    let (secret, data) = auth_secret(spec, secrets)?;
    let Some(key) = auth_key(data) else {
        let keys: Vec<String> = AUTH_SECRET_KEYS.iter().map(|k| format!("{k:?}")).collect();
        return Some(format!(
            "Secret {secret} has none of the keys {} (user:password lines)",
            keys.join(", ")
        ));
    };
    let file = data.get(key)?;
    (!file.ends_with(b"\n")).then(|| {
        format!(
            "Secret {secret} key {key:?} must end with a newline: memcached up to 1.6.31 drops the last character of an unterminated last line"
        )
    })
}

/// What of the mounted Secrets a running memcached takes only by
/// restarting: the authentication Secret's data (memcached reads its `-Y`
/// file at start only) and the TLS Secret's trust anchor (`ca.crt`, or
/// without one `tls.crt`): memcached's `refresh_certs` adds a reloaded CA to
/// those it trusts and never drops one, and the controller verifies pods
/// against the anchor it reads now. A certificate and key renewed under the
/// same anchor are loaded by the running memcached instead
/// ([`crate::stats::tls::Presented`]).
pub fn restart_inputs(spec: &MemcachedSpec, secrets: &SecretData) -> SecretData {
    let mut inputs = SecretData::new();
    for (volume, secret, _) in secret_mounts(spec) {
        let Some(data) = secrets.get(&secret) else {
            continue;
        };
        let anchor = [TLS_CA_KEY, TLS_CERT_KEY]
            .into_iter()
            .find(|key| data.contains_key(*key));
        let kept = (data.iter())
            .filter(|(key, _)| volume != TLS_VOLUME || anchor == Some(key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()));
        inputs.entry(secret).or_default().extend(kept);
    }
    inputs
}

/// An HMAC of the [`restart_inputs`] of `secrets`: a change restarts the
/// pods' memcached, and without the key (which only the controller reads)
/// the annotation cannot be used to test guesses of the Secret data.
pub fn hash(key: &hmac::Key, secrets: &SecretData) -> String {
    let mut context = hmac::Context::with_key(key);
    for (secret, data) in secrets {
        for (name, value) in data {
            for part in [secret.as_bytes(), name.as_bytes(), value.as_slice()] {
                context.update(&(part.len() as u64).to_be_bytes());
                context.update(part);
            }
        }
    }
    context
        .sign()
        .as_ref()
        .iter()
        .take(SECRET_HASH_LENGTH / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    #[test]
    fn only_the_data_of_mounted_secrets_is_kept() {
        let (store, mut writer) = reflector::store::<Stored>();
        let mc: Stored = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}}}},
        }))
        .unwrap();
        writer.apply_watcher_event(&Event::Apply(mc));
        let cache = SecretCache::default();
        for (ns, name) in [("ns", "auth"), ("ns", "tls"), ("other", "auth")] {
            cache.set(
                (ns.into(), name.into()),
                Some(("1".into(), Arc::new(Data::new()))),
            );
        }
        cache.retain_mounted(&store);
        let kept: Vec<_> = cache.0.lock().unwrap().keys().cloned().collect();
        assert_eq!(kept, [("ns".to_string(), "auth".to_string())]);
    }

    fn sasl(secret: &str) -> MemcachedSpec {
        serde_json::from_value(serde_json::json!({"security": {"sasl": {
            "enabled": true, "credentialsSecretRef": {"name": secret}}}}))
        .unwrap()
    }

    /// The Secret `auth` with `keys`, each holding `file`.
    fn auth_secret(keys: &[&str], file: &[u8]) -> SecretData {
        let data = keys
            .iter()
            .map(|k| (k.to_string(), file.to_vec()))
            .collect();
        SecretData::from([("auth".to_string(), data)])
    }

    /// Each key the auth file may be under, alone: the pods read it, the
    /// Secret is valid, and an unterminated file is named by its key.
    #[test]
    fn the_auth_file_is_read_from_each_of_its_keys() {
        for key in ["auth", "password-file", "memcached-sasl-db"] {
            let secrets = auth_secret(&[key, "other"], b"u:p\n");
            assert_eq!(auth_key(&secrets["auth"]), Some(key));
            assert_eq!(mounted_auth_key(&sasl("auth"), &secrets), key);
            assert_eq!(auth_file_problem(&sasl("auth"), &secrets), None, "{key}");
            let unterminated = auth_secret(&[key], b"u:p");
            assert_eq!(
                auth_file_problem(&sasl("auth"), &unterminated),
                Some(format!(
                    "Secret auth key {key:?} must end with a newline: memcached up to 1.6.31 drops the last character of an unterminated last line"
                ))
            );
        }
    }

    #[test]
    fn the_first_auth_key_present_wins() {
        let both = auth_secret(&["memcached-sasl-db", "password-file"], b"u:p\n");
        assert_eq!(mounted_auth_key(&sasl("auth"), &both), "password-file");
        let all = auth_secret(&["memcached-sasl-db", "password-file", "auth"], b"u:p\n");
        assert_eq!(mounted_auth_key(&sasl("auth"), &all), "auth");
    }

    #[test]
    fn a_secret_without_an_auth_key_is_invalid() {
        let secrets = auth_secret(&["password"], b"u:p\n");
        assert_eq!(auth_key(&secrets["auth"]), None);
        assert_eq!(
            auth_file_problem(&sasl("auth"), &secrets),
            Some(
                r#"Secret auth has none of the keys "auth", "password-file", "memcached-sasl-db" (user:password lines)"#
                    .to_string()
            )
        );
        // The pods are held; what they would mount is the first key.
        assert_eq!(mounted_auth_key(&sasl("auth"), &secrets), "auth");
        assert_eq!(mounted_auth_key(&sasl("other"), &secrets), "auth");
    }

    /// What a running memcached takes only by restarting: the auth file and
    /// the TLS trust anchor; a certificate and key renewed under the same
    /// anchor are none of it (the running memcached loads them).
    #[test]
    fn a_restart_takes_the_auth_file_and_the_trust_anchor() {
        let spec: MemcachedSpec = serde_json::from_value(serde_json::json!({"security": {
            "sasl": {"enabled": true, "credentialsSecretRef": {"name": "auth"}},
            "tls": {"enabled": true, "certificateSecretRef": {"name": "tls"}}}}))
        .unwrap();
        let secrets = |tls: &[(&str, &str)], leaf: &str, password: &str| {
            let mut data: Data = (tls.iter())
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect();
            data.insert("tls.crt".into(), leaf.into());
            data.insert("tls.key".into(), format!("key of {leaf}").into());
            let auth = Data::from([("auth".into(), format!("u:{password}\n").into())]);
            SecretData::from([("tls".into(), data), ("auth".into(), auth)])
        };
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"key");
        let hashed = |secrets: &SecretData| hash(&key, &restart_inputs(&spec, secrets));
        type Keys<'a> = &'a [(&'a str, &'a str)];
        let ca: Keys = &[("ca.crt", "ca")];
        let cases: [(&str, Keys, Keys, bool); 4] = [
            ("renewed under the same CA", ca, ca, true),
            ("another CA", ca, &[("ca.crt", "other ca")], false),
            ("renewed without a CA", &[], &[], false),
            ("a CA added", &[], ca, false),
        ];
        for (case, before, after, same) in cases {
            let running = hashed(&secrets(before, "leaf", "p"));
            let renewed = hashed(&secrets(after, "renewed leaf", "p"));
            assert_eq!(running == renewed, same, "{case}");
            let rotated = hashed(&secrets(before, "leaf", "rotated"));
            assert_ne!(running, rotated, "{case}: a new password");
        }
    }

    #[test]
    fn the_hash_depends_on_the_key() {
        let data = SecretData::from([(
            "auth".to_string(),
            BTreeMap::from([("auth".to_string(), b"u:p\n".to_vec())]),
        )]);
        let a = hmac::Key::new(hmac::HMAC_SHA256, b"key-a");
        let b = hmac::Key::new(hmac::HMAC_SHA256, b"key-b");
        assert_eq!(hash(&a, &data), hash(&a, &data));
        assert_ne!(hash(&a, &data), hash(&b, &data));
        assert_eq!(hash(&a, &data).len(), SECRET_HASH_LENGTH);
    }
}
