//! Events (events.k8s.io) on a Memcached: what the reconcile did to each
//! managed object and what needs attention. An Event about a managed object
//! names it in `related` and in its note, so kubectl shows one Event per
//! object instead of merging them into one series by reason.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::discovery::ApiResource;
use kube::runtime::events::{Event, EventType};
use memcached_api::Memcached;

use crate::cluster::apply::Outcome;
use crate::reconcile::context::Context;

/// The API server refuses Event notes of 1 KiB or more.
pub const MAX_NOTE_BYTES: usize = 1000;

/// A managed object of `mc`: its kind and name, for `related`.
pub struct Target<'a> {
    /// Kind and apiVersion.
    pub resource: &'a ApiResource,
    /// Name, in the Memcached's namespace.
    pub name: &'a str,
}

impl Target<'_> {
    fn reference(&self, mc: &impl Resource) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            name: Some(self.name.to_string()),
            namespace: mc.meta().namespace.clone(),
            ..Default::default()
        }
    }
}

/// Report what an apply did to `target` (nothing when it changed nothing).
pub async fn report(ctx: &Context, mc: &Memcached, target: &Target<'_>, outcome: Outcome) {
    let (kind, name) = (&target.resource.kind, target.name);
    let (reason, note, type_) = match outcome {
        Outcome::Unchanged => return,
        Outcome::Created => (
            "Created",
            format!("created {kind} {name}"),
            EventType::Normal,
        ),
        Outcome::Updated => (
            "Updated",
            format!("updated {kind} {name}"),
            EventType::Normal,
        ),
        Outcome::Deleted => (
            "Deleted",
            format!("deleted {kind} {name}: its feature is off"),
            EventType::Normal,
        ),
        Outcome::Replaced => (
            "Deleted",
            format!(
                "deleted {kind} {name}: spec.workload names the other kind, which now runs every replica ready"
            ),
            EventType::Normal,
        ),
        Outcome::Conflict => (
            "ResourceConflict",
            format!("a {kind} named {name} exists and is not owned by this Memcached: left alone"),
            EventType::Warning,
        ),
        Outcome::Held => (
            "PodTemplateHeld",
            format!(
                "{kind} {name} keeps its running pod template: this controller renders it differently, but \
                 the spec did not change; it is applied with the next spec change or a new value of the \
                 annotation memcached.c5c3.io/restart-trigger"
            ),
            EventType::Normal,
        ),
        Outcome::Terminating => (
            "Terminating",
            format!("{kind} {name} is being deleted: applied again once it is gone"),
            EventType::Normal,
        ),
    };
    tracing::info!(kind, name, ?outcome, "managed object");
    publish(ctx, mc, type_, reason, note, Some(target.reference(mc))).await;
}

/// A Normal Event about `mc`'s object `target` (not a managed one: a pod).
pub async fn inform(
    ctx: &Context,
    mc: &Memcached,
    reason: &str,
    note: String,
    target: &Target<'_>,
) {
    tracing::info!(reason, note);
    let related = Some(target.reference(mc));
    publish(ctx, mc, EventType::Normal, reason, note, related).await;
}

/// A Warning about `mc` itself, or about its managed object `target`.
pub async fn warn(
    ctx: &Context,
    mc: &impl Resource<DynamicType = ()>,
    reason: &str,
    note: String,
    target: Option<&Target<'_>>,
) {
    tracing::warn!(reason, note, "memcached needs attention");
    let related = target.map(|t| t.reference(mc));
    publish(ctx, mc, EventType::Warning, reason, note, related).await;
}

async fn publish(
    ctx: &Context,
    mc: &impl Resource<DynamicType = ()>,
    type_: EventType,
    reason: &str,
    note: String,
    related: Option<ObjectReference>,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(truncate(note, MAX_NOTE_BYTES)),
        action: "Reconcile".into(),
        secondary: related,
    };
    if let Err(e) = ctx.recorder.publish(&event, &mc.object_ref(&())).await {
        tracing::debug!(error = %e, "cannot publish event");
    }
}

/// `text` cut to at most `max` bytes at a character boundary, marked with `…`.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max - '…'.len_utf8();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push('…');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_notes_at_a_character_boundary() {
        assert_eq!(truncate("short".into(), 10), "short");
        let long = "é".repeat(600);
        let cut = truncate(long, MAX_NOTE_BYTES);
        assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
    }
}
