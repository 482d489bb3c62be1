//! The outcomes of one reconcile's applies: each reported as an Event as it
//! comes, refusals and conflicts collected as [`Problem`]s for the status.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use memcached_api::Memcached;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cluster::apply::{Outcome, Owner, ensure};
use crate::cluster::cache::{self, Cached, Meta, scoped};
use crate::objects::service_monitor;
use crate::reconcile::context::{APPLY_FAILED, Context, Error, Problem, key};
use crate::reconcile::events::{self, Target};

/// Outcomes of one reconcile's applies, reported as Events as they come;
/// refusals and conflicts are collected for the status.
pub(super) struct Applied<'a> {
    pub(super) ctx: &'a Context,
    pub(super) mc: &'a Memcached,
    /// The Memcached's [`key`] and uid.
    key: String,
    pub(super) uid: String,
    pub(super) problems: Vec<Problem>,
    /// The workload or the Service belongs to someone else.
    pub(super) foreign: bool,
}

impl<'a> Applied<'a> {
    pub(super) fn new(ctx: &'a Context, mc: &'a Memcached) -> Self {
        Applied {
            ctx,
            mc,
            key: key(mc),
            uid: mc.uid().unwrap_or_default(),
            problems: Vec::new(),
            foreign: false,
        }
    }

    /// Record the outcome of an apply; a refusal (400, 403, 422) becomes a
    /// problem, any other error ends the reconcile (retried with backoff).
    pub(super) async fn record<T>(
        &mut self,
        target: &Target<'_>,
        result: Result<(Outcome, T), kube::Error>,
    ) -> Result<Option<T>, Error> {
        let (kind, name) = (target.resource.kind.as_str(), target.name);
        match result {
            Ok((outcome, object)) => {
                if outcome == Outcome::Conflict {
                    self.foreign |= matches!(kind, "Deployment" | "StatefulSet" | "Service");
                    self.problems.push(Problem {
                        reason: "ResourceConflict",
                        message: format!(
                            "a {kind} named {name} exists and is not controlled by this Memcached: left alone"
                        ),
                    });
                }
                events::report(self.ctx, self.mc, target, outcome).await;
                Ok(Some(object))
            }
            Err(kube::Error::Api(e)) if matches!(e.code, 400 | 403 | 422) => {
                let message = format!("{kind}: {} ({})", e.message, e.reason);
                let (ctx, mc) = (self.ctx, self.mc);
                events::warn(ctx, mc, APPLY_FAILED, message.clone(), Some(target)).await;
                self.problems.push(Problem {
                    reason: APPLY_FAILED,
                    message,
                });
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(super) async fn record_outcome(
        &mut self,
        target: &Target<'_>,
        result: Result<Outcome, kube::Error>,
    ) -> Result<(), Error> {
        self.record(target, result.map(|o| (o, ()))).await.map(drop)
    }

    /// Converge one optional object of kind `resource`: `live` is what the cache
    /// holds; an object the cache lacks is read from the API server when it
    /// is wanted (it may be someone else's, or newer than the watch).
    pub(super) async fn converge<K>(
        &mut self,
        resource: &ApiResource,
        api: &Api<K>,
        name: &str,
        live: Cached<Meta<K>>,
        desired: Option<&K>,
    ) -> Result<(), Error>
    where
        K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    {
        let owner = self.owner();
        let result = async {
            let live = live
                .or_fetch(desired.is_some(), api.get_metadata_opt(name))
                .await?
                .map(|m| m.metadata);
            let applied = &self.ctx.applied;
            ensure(api, applied, &owner, name, desired, live.as_ref()).await
        }
        .await;
        match result {
            // No such API (a ServiceMonitor without Prometheus Operator's
            // CRD): the next reconcile tries again.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            result => {
                let target = Target { resource, name };
                self.record_outcome(&target, result.map(|(o, _)| o)).await
            }
        }
    }

    /// [`Applied::converge`] of this Memcached's object of kind `K`, as
    /// `store` holds it.
    pub(super) async fn converge_kind<K>(
        &mut self,
        store: &Store<Meta<K>>,
        desired: Option<&K>,
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let (ns, name) = (self.mc.namespace().unwrap_or_default(), self.mc.name_any());
        let live = cache::get(store, &ns, &name);
        let api = scoped(&self.ctx.client, Some(&ns));
        self.converge(&ApiResource::erase::<K>(&()), &api, &name, live, desired)
            .await
    }

    /// [`Applied::converge`] of this Memcached's ServiceMonitor (a dynamic
    /// object: Prometheus Operator's CRD may not be installed).
    pub(super) async fn converge_service_monitor(
        &mut self,
        desired: Option<&DynamicObject>,
    ) -> Result<(), Error> {
        let (ns, name) = (self.mc.namespace().unwrap_or_default(), self.mc.name_any());
        let live = cache::service_monitor(&self.ctx.cache, &ns, &name);
        let monitor = service_monitor::api_resource();
        let monitors: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.client.clone(), &ns, &monitor);
        self.converge(&monitor, &monitors, &name, live, desired)
            .await
    }

    /// The Memcached as the objects' owner.
    pub(super) fn owner(&self) -> Owner<'_> {
        Owner {
            key: &self.key,
            uid: &self.uid,
        }
    }

    /// A preparatory write (no Event of its own): only refusals are recorded.
    pub(super) async fn check(
        &mut self,
        target: &Target<'_>,
        result: Result<(), kube::Error>,
    ) -> Result<(), Error> {
        match result {
            Ok(()) => Ok(()),
            Err(e) => self
                .record(target, Err::<(Outcome, ()), _>(e))
                .await
                .map(drop),
        }
    }
}
