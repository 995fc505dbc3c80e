//! Held removals (docs/upstream.md §4): when a peer link goes away,
//! the federation withdraws the entities it carried, and a replacing link
//! (two nodes dialled each other at once) presents them again moments later
//! under new node ids. The world server must not see that as a removal and
//! a new creation: the bridge holds such removals for the grace period and,
//! when an entity with the same federation identity comes back, continues
//! its export under the new node id, keeping the world server's entity and
//! component ids and sending only what differs.
//!
//! Pure bookkeeping over the id map; the removal itself (RemoveEntity) is
//! sent by the export path once the hold ends.

use std::collections::BTreeMap;

use tracing::debug;

use super::bridge::Bridge;
use super::ids::ShadowComponent;
use crate::clock::Time;
use crate::federation::GlobalId;
use crate::scene::Scene;
use crate::tundra::messages::RemoveComponents;
use crate::tundra::{ComponentId, EntityId, Message};

impl Bridge {
    /// While `on`, removals of exported entities are removals caused by a
    /// peer link going away: they are held instead of sent.
    pub fn set_holding_removals(&mut self, on: bool) {
        self.holding = on;
    }

    /// Node ids of exported entities whose removal is held.
    pub fn held_removals(&self) -> Vec<EntityId> {
        self.held.keys().copied().collect()
    }

    /// An exported entity left the scene with its link: keep its
    /// world-server copy for the grace period (none: removed at once).
    pub(super) fn hold(&mut self, local: EntityId) {
        if self.settings.grace.is_zero() {
            return;
        }
        debug!(entity = %local, "removal held: its peer link went away");
        self.held.insert(local, self.last_now);
    }

    /// A new exportable entity with federation identity `key`: if a held
    /// export has the same identity, it continues under `local`.
    pub(super) fn adopt_held(&mut self, local: EntityId, key: GlobalId, scene: &Scene) {
        let Some(old) = self
            .held
            .keys()
            .copied()
            .find(|old| self.keys.get(old) == Some(&key))
        else {
            return;
        };
        self.held.remove(&old);
        self.keys.remove(&old);
        if !self.ids.move_export(old, local) {
            return;
        }
        if self.waiting.remove(&old) {
            self.waiting.insert(local);
        }
        debug!(from = %old, to = %local, "held entity came back: its world-server copy is kept");
        let Some(entity) = scene.entity(local) else {
            return;
        };
        let Some(entry) = self.ids.exported_mut(local) else {
            return;
        };
        // The new presentation numbers its components anew: match them by
        // type and instance name; what is left over leaves the world server.
        let mut old_shadows: Vec<ShadowComponent> = std::mem::take(&mut entry.components)
            .into_values()
            .collect();
        let mut matched = BTreeMap::new();
        for component in entity.replicated_components() {
            if let Some(at) = old_shadows
                .iter()
                .position(|s| s.type_id == component.type_id && s.name == component.name)
            {
                matched.insert(component.id, old_shadows.swap_remove(at));
            }
        }
        entry.components = matched;
        let upstream = entry.upstream;
        let stale: Vec<ComponentId> = old_shadows
            .iter()
            .map(|s| s.upstream)
            .filter(|id| !id.is_unacked())
            .collect();
        if let (Some(upstream), false) = (upstream, stale.is_empty()) {
            if self.session().is_some() {
                self.send(&Message::RemoveComponents(RemoveComponents {
                    scene_id: 0,
                    entity_id: upstream,
                    component_ids: stale,
                }));
            }
        }
    }

    /// When the first held removal is due.
    pub(super) fn poll_hold_timeout(&self) -> Option<Time> {
        self.held
            .values()
            .min()
            .map(|since| *since + self.settings.grace)
    }

    /// Held removals past the grace period are removals after all.
    pub(super) fn handle_hold_timeout(&mut self, now: Time) {
        let grace = self.settings.grace;
        let due: Vec<EntityId> = self
            .held
            .iter()
            .filter(|(_, since)| now - **since >= grace)
            .map(|(local, _)| *local)
            .collect();
        for local in due {
            debug!(entity = %local, "held entity did not come back: removed from the world server");
            self.held.remove(&local);
            self.dirty.insert(local);
        }
    }
}
