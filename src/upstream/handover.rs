//! Authority hand-over across the bridge (docs/upstream.md §8): an entity
//! of the world server handed to another node leaves the world server, and
//! an entity handed to this node becomes the world server's.
//!
//! The world server knows no authority but its own, so crossing it is a
//! removal or a creation there; the node's scene, and so every client and
//! peer of the federation, keeps the entity under the same ids throughout.
//!
//! - **Out** ([`Bridge::release_world_entity`]): the copy stops being
//!   mirrored, RemoveEntity goes to the world server, and the entity is from
//!   then on a federation entity like any other, created in the world server
//!   again through the client path (docs/upstream.md §1) so the world's
//!   clients keep seeing it, now driven by its new authority.
//! - **In** ([`Bridge::adopt_into_world`]): the entity is already in the
//!   world server as the bridge's export (or is created there now); once
//!   the world server has acknowledged it and every component, and has the
//!   node's latest values, the export becomes a mirrored world entity, and
//!   the world server simulates it from then on.

use std::collections::HashMap;

use tracing::{debug, info};

use super::bridge::{Bridge, LinkState};
use super::ids::{Mirrored, UpstreamEntity};
use crate::federation::GlobalId;
use crate::scene::Scene;
use crate::tundra::messages::{CreateEntity, RemoveEntity};
use crate::tundra::{EntityId, Message};

/// A world entity this node removed from the world server on a hand-over,
/// remembered until the removal is known to have taken effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HandedOut {
    /// The session (`BridgeStats::sessions`) the RemoveEntity was sent in.
    session: u64,
    /// Its components' types and names, to tell it from an unrelated entity
    /// that a restarted world server numbers the same.
    signature: Vec<(u32, String)>,
}

/// World entities removed on hand-overs, by world-server id.
pub(super) type HandedOutEntities = HashMap<EntityId, HandedOut>;

impl Bridge {
    /// The world server's entity `entity` was handed to another node: it is
    /// removed from the world server, and exported back into it as the
    /// federation entity `key` it now is. The node's scene keeps it.
    pub fn release_world_entity(
        &mut self,
        entity: EntityId,
        key: Option<GlobalId>,
        scene: &mut Scene,
    ) {
        let Some(upstream) = self
            .ids
            .upstream_of(entity)
            .filter(|_| self.ids.is_mirrored(entity))
        else {
            return;
        };
        self.ids.remove_mirrored(upstream);
        scene.set_proxied(entity, false);
        let signature = signature_of(scene, entity);
        self.handed_out.insert(
            upstream,
            HandedOut {
                session: self.stats.sessions,
                signature,
            },
        );
        self.stats.handed_out += 1;
        if self.session().is_some() {
            self.send(&Message::RemoveEntity(RemoveEntity {
                scene_id: 0,
                entity_id: upstream,
            }));
        }
        info!(%entity, %upstream, "world entity handed to another node: removed from the world server");
        if let Some(key) = key {
            self.keys.insert(entity, key);
        }
        self.dirty.insert(entity);
        if self.ready() {
            self.flush(scene);
        }
    }

    /// This node became the authority of `entity`: the world server takes
    /// it over, as soon as it holds it with the node's latest state.
    pub fn adopt_into_world(&mut self, entity: EntityId, scene: &mut Scene) {
        if self.ids.is_mirrored(entity) {
            return;
        }
        // Its clients once removed it; a hand-over into the world brings
        // it back.
        self.declined.remove(&entity);
        self.adopting.insert(entity);
        self.dirty.insert(entity);
        if self.ready() {
            self.flush(scene);
            self.finish_adoptions(scene);
        }
    }

    /// Entities waiting to become the world server's (for status and tests).
    pub fn adopting(&self) -> usize {
        self.adopting.len()
    }

    /// Turns each waiting export the world server fully holds into a
    /// mirrored world entity (run after the bridge's inputs and after the
    /// scene changes it was shown).
    pub fn finish_adoptions(&mut self, scene: &mut Scene) {
        if self.adopting.is_empty() || !self.ready() {
            return;
        }
        let waiting: Vec<EntityId> = self.adopting.iter().copied().collect();
        for entity in waiting {
            if scene.entity(entity).is_none() || self.ids.is_mirrored(entity) {
                self.adopting.remove(&entity);
                continue;
            }
            if self.dirty.contains(&entity) || self.waiting.contains(&entity) {
                continue; // state not yet sent: the next flush comes back
            }
            let Some(export) = self.ids.exported(entity) else {
                continue;
            };
            let Some(upstream) = export.upstream else {
                continue; // CreateEntityReply to come
            };
            if export.components.values().any(|c| c.upstream.is_unacked()) {
                continue; // CreateComponentsReply to come
            }
            let mut mirrored = Mirrored::new(entity);
            mirrored.components = export
                .components
                .iter()
                .map(|(local, shadow)| (shadow.upstream, *local))
                .collect();
            self.ids.end_export(entity);
            self.ids.insert_mirrored(upstream, mirrored);
            self.keys.remove(&entity);
            self.held.remove(&entity);
            self.adopting.remove(&entity);
            scene.set_proxied(entity, true);
            self.stats.adopted += 1;
            info!(%entity, %upstream, "entity handed to this node is now the world server's");
        }
    }

    /// A CreateEntity for a world id this node removed on a hand-over. In a
    /// later session's initial scene, with the same components, it is that
    /// entity, whose removal did not take effect (the connection failed
    /// first): it is removed again and true returned. Anything else is a new
    /// entity under a reused id, mirrored as usual.
    pub(super) fn removed_again(&mut self, m: &CreateEntity) -> bool {
        let Some(handed) = self.handed_out.get(&m.entity_id) else {
            return false;
        };
        if self.ids.resolve(m.entity_id) != UpstreamEntity::Unknown {
            // The id names an entity the bridge knows (its own export got
            // it): not the one handed out.
            self.handed_out.remove(&m.entity_id);
            return false;
        }
        let earlier_session = handed.session != self.stats.sessions;
        let syncing = matches!(self.state, LinkState::Syncing { .. });
        let signature = signature(m.components.iter().map(|c| (c.type_id, c.name.as_str())));
        if earlier_session && syncing && signature == handed.signature {
            debug!(upstream = %m.entity_id, "handed-out world entity still in the world server: removed again");
            let session = self.stats.sessions;
            if let Some(handed) = self.handed_out.get_mut(&m.entity_id) {
                handed.session = session;
            }
            self.send(&Message::RemoveEntity(RemoveEntity {
                scene_id: 0,
                entity_id: m.entity_id,
            }));
            return true;
        }
        self.handed_out.remove(&m.entity_id);
        false
    }

    /// The initial scene of a session is complete: removals sent in earlier
    /// sessions whose entity did not come back took effect.
    pub(super) fn forget_confirmed_removals(&mut self) {
        let session = self.stats.sessions;
        self.handed_out.retain(|_, h| h.session == session);
    }
}

/// The sorted types and names of an entity's replicated components.
fn signature_of(scene: &Scene, entity: EntityId) -> Vec<(u32, String)> {
    let components = scene.entity(entity).into_iter().flat_map(|e| {
        e.replicated_components()
            .map(|c| (c.type_id, c.name.as_str()))
    });
    signature(components)
}

/// Component types and names, sorted: what identifies a handed-out entity.
fn signature<'a>(components: impl Iterator<Item = (u32, &'a str)>) -> Vec<(u32, String)> {
    let mut signature: Vec<(u32, String)> = components
        .map(|(type_id, name)| (type_id, name.to_owned()))
        .collect();
    signature.sort();
    signature
}
