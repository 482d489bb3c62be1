//! A reconcile's reading of the Secrets a Memcached mounts
//! ([`crate::cluster::secrets`]): missing and invalid ones warned about, and
//! the stamp the workload carries of their data.

use kube::api::Api;
use kube::{Resource, ResourceExt};
use memcached_api::{Memcached, MemcachedSpec};

use crate::cluster::cache;
use crate::cluster::secrets::{self, Mounted, SecretData};
use crate::objects::secret_stamp::SecretStamp;
use crate::reconcile::context::{Context, Error, INVALID_AUTH_SECRET, Problem};
use crate::reconcile::events::warn;
use crate::reconcile::running::running_workload;

/// The Secrets a Memcached mounts, as read and judged.
pub(super) struct SecretsSeen {
    /// Their data, by Secret name.
    pub(super) data: SecretData,
    /// The names of those that do not exist (warned about).
    pub(super) missing: Vec<String>,
    /// An auth Secret memcached would misread (warned about).
    pub(super) invalid_auth: Option<Problem>,
    /// The pods' Secret hash and the versions it stands for; `None` when
    /// no Secret is mounted.
    pub(super) stamp: Option<SecretStamp>,
}

/// Read the Secrets `spec` mounts, warn about missing and invalid ones, and
/// stamp their data: the running workload's hash is kept while the Secret
/// versions are the same, so a new hash key (the key Secret deleted,
/// another installation) restarts no pod, and while what changed since the
/// data it was computed from is none of what a restart takes
/// ([`secrets::restart_inputs`]).
pub(super) async fn read_secrets(
    ctx: &Context,
    mc: &Memcached,
    spec: &MemcachedSpec,
) -> Result<SecretsSeen, Error> {
    let (ns, name) = (mc.namespace().unwrap_or_default(), mc.name_any());
    let Mounted {
        data,
        missing,
        versions,
        before,
    } = secrets::read(
        &Api::namespaced(ctx.client.clone(), &ns),
        &ctx.cache.secrets,
        &ctx.secret_data,
        spec,
    )
    .await?;
    if !missing.is_empty() {
        let note = format!("Secret(s) not found: {}", missing.join(", "));
        warn(ctx, mc, "SecretNotFound", note, None).await;
    }
    let invalid_auth = secrets::auth_file_problem(spec, &data).map(|message| Problem {
        reason: INVALID_AUTH_SECRET,
        message,
    });
    if let Some(problem) = &invalid_auth {
        let message = format!("{}: running pods keep their Secret", problem.message);
        warn(ctx, mc, INVALID_AUTH_SECRET, message, None).await;
    }
    let stamp = (!data.is_empty()).then(|| {
        let live = running_workload(ctx, mc.meta(), spec.stateful_set()).0;
        let restart_inputs = |data| secrets::restart_inputs(spec, data);
        let hash = match cache::secret_stamp(&ctx.cache, live, &ns, &name) {
            Some(stamp) if stamp.versions == versions => stamp.hash,
            // Changed, but none of what a restart takes (a renewed certificate).
            Some(stamp)
                if before.as_ref().is_some_and(|(earlier, earlier_versions)| {
                    stamp.versions == *earlier_versions
                        && restart_inputs(earlier) == restart_inputs(&data)
                }) =>
            {
                stamp.hash
            }
            _ => secrets::hash(&ctx.hash_key, &restart_inputs(&data)),
        };
        SecretStamp { hash, versions }
    });
    Ok(SecretsSeen {
        data,
        missing,
        invalid_auth,
        stamp,
    })
}
