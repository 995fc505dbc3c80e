//! This node's own edits of remote entities, remembered as they leave as
//! tweaks, so that one that comes back after a later edit of the same
//! property took another route is not applied over it (docs/federation.md
//! §7.3, "Edits that come back").
//!
//! An edit sent toward an old authority that handed the entity on waits
//! there and then travels to the new authority; when this node's later
//! edits took the new route (it became the authority, or re-routed toward
//! it) they arrive first, and the waiting one would overwrite them. A tweak
//! carries nothing that names its sender, so the node recognises its own by
//! property and value: only values it sent on a route it has since left
//! for a later edit of that property are dropped.

use std::collections::HashMap;

use crate::clock::Time;
use crate::federation::ids::{GlobalId, LinkId};
use crate::tundra::{AttributeValue, ComponentId};

/// Edits remembered per property; older ones are forgotten first.
pub const MAX_OWN_EDITS_PER_PROPERTY: usize = 32;

/// How long a sent edit is remembered: an edit waiting at an old authority
/// leaves it within the hand-over timeout (it is then taken back instead).
pub const OWN_EDIT_MEMORY: std::time::Duration =
    crate::federation::authority::handover_types::HANDOVER_TIMEOUT;

/// One property of one entity.
pub(in crate::federation) type PropertyOf = (GlobalId, ComponentId, u8);

/// Where an edit went: a link toward the authority, or applied here as the
/// authority (`None`).
type Route = Option<LinkId>;

#[derive(Debug, Clone)]
struct SentEdit {
    value: AttributeValue,
    route: Route,
    /// A later edit of the property took another route.
    superseded: bool,
    /// Set by the first tick that sees the edit.
    forget_at: Option<Time>,
}

/// What a peer's tweak of a property is, seen from this node's own edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::federation) enum Returning {
    /// Not one of this node's edits, or its latest: it applies.
    Apply,
    /// One of this node's edits that a later edit of it overtook.
    Superseded,
}

/// This node's own edits of remote entities that may still come back.
#[derive(Debug, Default)]
pub(in crate::federation) struct OwnEdits {
    by_property: HashMap<PropertyOf, Vec<SentEdit>>,
}

impl OwnEdits {
    /// This node's edit of `property` left as a tweak on `link`.
    pub fn sent(&mut self, property: PropertyOf, value: &AttributeValue, link: LinkId) {
        let edits = self.by_property.entry(property).or_default();
        supersede(edits, Some(link));
        if edits.len() >= MAX_OWN_EDITS_PER_PROPERTY {
            edits.remove(0);
        }
        edits.push(SentEdit {
            value: value.clone(),
            route: Some(link),
            superseded: false,
            forget_at: None,
        });
    }

    /// This node, the authority, applied its own edit of `property`.
    pub fn edited_here(&mut self, property: PropertyOf) {
        if let Some(edits) = self.by_property.get_mut(&property) {
            supersede(edits, None);
        }
    }

    /// Whether any edit is remembered (a cheap test before a lookup).
    pub fn is_empty(&self) -> bool {
        self.by_property.is_empty()
    }

    /// A peer's tweak of `property` arrived on `link`: whether it is one of
    /// this node's own edits, sent on that link, that a later one overtook.
    /// A recognised edit is forgotten (it comes back once).
    pub fn returning(
        &mut self,
        property: PropertyOf,
        value: &AttributeValue,
        link: LinkId,
    ) -> Returning {
        let Some(edits) = self.by_property.get_mut(&property) else {
            return Returning::Apply;
        };
        let Some(at) = edits
            .iter()
            .position(|e| e.route == Some(link) && e.value == *value)
        else {
            return Returning::Apply;
        };
        let edit = edits.remove(at);
        if edits.is_empty() {
            self.by_property.remove(&property);
        }
        if edit.superseded {
            Returning::Superseded
        } else {
            Returning::Apply
        }
    }

    /// Forgets edits remembered longer than [`OWN_EDIT_MEMORY`] (the first
    /// tick that sees an edit starts its clock).
    pub fn tick(&mut self, now: Time) {
        self.by_property.retain(|_, edits| {
            edits.retain_mut(|edit| {
                let forget_at = *edit.forget_at.get_or_insert(now + OWN_EDIT_MEMORY);
                forget_at > now
            });
            !edits.is_empty()
        });
    }

    /// Properties with remembered edits.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_property.len()
    }
}

/// Edits sent on another route than `route` have been overtaken.
fn supersede(edits: &mut [SentEdit], route: Route) {
    for edit in edits.iter_mut().filter(|e| e.route != route) {
        edit.superseded = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn property() -> PropertyOf {
        let global = GlobalId {
            origin: uuid::Uuid::from_u128(7),
            serial: 1,
        };
        (global, ComponentId(3), 0)
    }

    const L: LinkId = LinkId(4);

    fn real(x: f32) -> AttributeValue {
        AttributeValue::Real(x)
    }

    #[test]
    fn an_edit_that_comes_back_after_a_later_direct_one_is_superseded() {
        let mut own = OwnEdits::default();
        own.sent(property(), &real(1.0), LinkId(4));
        own.edited_here(property());
        assert_eq!(
            own.returning(property(), &real(1.0), L),
            Returning::Superseded
        );
        // Recognised once: the same value again is someone else's.
        assert_eq!(own.returning(property(), &real(1.0), L), Returning::Apply);
    }

    #[test]
    fn an_edit_without_a_later_one_on_another_route_applies() {
        let mut own = OwnEdits::default();
        own.sent(property(), &real(1.0), LinkId(4));
        own.sent(property(), &real(2.0), LinkId(4));
        assert_eq!(own.returning(property(), &real(1.0), L), Returning::Apply);
        assert_eq!(own.returning(property(), &real(2.0), L), Returning::Apply);
        assert_eq!(own.len(), 0);
    }

    #[test]
    fn a_direct_edit_alone_remembers_nothing() {
        let mut own = OwnEdits::default();
        own.edited_here(property());
        assert!(own.is_empty());
    }

    #[test]
    fn a_rerouted_edit_supersedes_those_sent_on_the_old_route() {
        let mut own = OwnEdits::default();
        own.sent(property(), &real(1.0), L);
        own.sent(property(), &real(2.0), LinkId(5));
        // The same value from another direction is not this node's.
        assert_eq!(
            own.returning(property(), &real(1.0), LinkId(6)),
            Returning::Apply
        );
        assert_eq!(
            own.returning(property(), &real(1.0), L),
            Returning::Superseded
        );
        assert_eq!(
            own.returning(property(), &real(2.0), LinkId(5)),
            Returning::Apply
        );
    }

    #[test]
    fn edits_are_forgotten_after_the_memory() {
        let mut own = OwnEdits::default();
        own.sent(property(), &real(1.0), LinkId(4));
        own.edited_here(property());
        let start = Time::ZERO;
        own.tick(start);
        assert_eq!(own.len(), 1);
        own.tick(start + OWN_EDIT_MEMORY);
        assert_eq!(own.len(), 0);
        assert_eq!(own.returning(property(), &real(1.0), L), Returning::Apply);
    }

    #[test]
    fn at_most_so_many_edits_are_remembered_per_property() {
        let mut own = OwnEdits::default();
        for i in 0..(MAX_OWN_EDITS_PER_PROPERTY + 5) {
            own.sent(property(), &real(i as f32), LinkId(4));
        }
        own.edited_here(property());
        assert_eq!(own.returning(property(), &real(0.0), L), Returning::Apply);
        assert_eq!(
            own.returning(property(), &real(5.0), L),
            Returning::Superseded
        );
    }
}
