//! Reconnect reconciliation (docs/upstream.md section 4): after a new login
//! the world server sends its whole scene again. Each entity is matched to
//! the old mapping by id (or, for the world's own entities, by Name when the
//! server renumbered them) and only differences reach the node's scene, so
//! peers see no remove-and-recreate storm. Once the initial scene is
//! complete, world entities that did not come back leave, and federation
//! entities the world server lost are created in it again.
//!
//! Also the end of the grace period: the world's entities leave the scene.

use tracing::debug;

use super::bridge::Bridge;
use super::export::is_exportable;
use crate::scene::{ChangeSource, Scene};
use crate::tundra::EntityId;

impl Bridge {
    /// Runs when the initial scene of a session is complete.
    pub(super) fn reconcile(&mut self, scene: &mut Scene) {
        let stale: Vec<(EntityId, EntityId)> = self
            .ids
            .mirrored_entries()
            .filter(|(_, m)| !m.seen)
            .map(|(upstream, m)| (*upstream, m.local))
            .collect();
        for (upstream, local) in stale {
            debug!(%upstream, entity = %local, "world entity gone after reconnect");
            self.ids.remove_mirrored(upstream);
            scene.set_proxied(local, false);
            let _ = scene.remove_entity(ChangeSource::Node, local);
        }
        for local in self.ids.exported_ids() {
            let lost = self.ids.exported(local).is_some_and(|e| !e.seen);
            if lost {
                // The world server does not have it (it restarted): forget the
                // old ids; the flush below creates it again.
                self.ids.end_export(local);
            }
            self.dirty.insert(local);
        }
        // Federation entities that arrived while the link was down.
        for entity in scene.entities().filter(|e| is_exportable(e)) {
            self.dirty.insert(entity.id);
        }
    }

    /// The world server stayed away past the grace period.
    pub(super) fn drop_mirrored(&mut self, scene: &mut Scene) {
        let all: Vec<(EntityId, EntityId)> = self
            .ids
            .mirrored_entries()
            .map(|(upstream, m)| (*upstream, m.local))
            .collect();
        for (upstream, local) in all {
            self.ids.remove_mirrored(upstream);
            scene.set_proxied(local, false);
            let _ = scene.remove_entity(ChangeSource::Node, local);
        }
        for local in self.ids.exported_ids() {
            // What the world server had of them is unknown by the next login.
            if let Some(entry) = self.ids.exported_mut(local) {
                entry.seen = false;
            }
        }
    }
}
