//! Edits and actions toward the world server: what clients and peers ask
//! of the world's entities is sent upstream under the world server's ids
//! (docs/upstream.md §1 and §6), as a Tundra client sends it.
//!
//! Pure: frames are queued on the bridge; the node's copy changes only with
//! [`ChangeSource::Node`], after the edit has been sent.

use tracing::{debug, warn};

use super::bridge::Bridge;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, ProxiedEdit, Scene};
use crate::tundra::messages::{exec_type, EditAttributes, EditAttributesBlock, EntityAction};
use crate::tundra::{AttributeEdit, Message};

impl Bridge {
    /// Edits clients and peers asked for on the world server's entities:
    /// sent upstream, then applied to the node's copy as a Tundra client
    /// applies its own edits (the server does not echo them,
    /// docs/tundra-wire.md §7.5). Until logged in to the world server they are dropped.
    pub fn handle_proxied_edits(&mut self, scene: &mut Scene, edits: Vec<ProxiedEdit>) {
        for edit in edits {
            let Some(upstream) = self.ids.upstream_of(edit.entity) else {
                continue;
            };
            if self.session().is_none() {
                debug!(entity = %edit.entity, "edit dropped: world server unreachable");
                continue;
            }
            let Some(component) = scene
                .entity(edit.entity)
                .and_then(|e| e.components.get(&edit.component))
            else {
                continue;
            };
            let Some(upstream_component) = self
                .ids
                .mirrored(upstream)
                .and_then(|m| m.components.iter().find(|(_, l)| **l == edit.component))
                .map(|(u, _)| *u)
            else {
                continue;
            };
            let slots = component.slot_types();
            let block = EditAttributesBlock::encode(
                upstream_component,
                &[AttributeEdit {
                    index: edit.index,
                    value: edit.value.clone(),
                }],
                &slots,
            );
            match block {
                Ok(block) => {
                    self.send(&Message::EditAttributes(EditAttributes {
                        scene_id: 0,
                        entity_id: upstream,
                        blocks: vec![block],
                    }));
                    self.stats.edits_sent += 1;
                    let edited = scene.edit_attribute(
                        ChangeSource::Node,
                        edit.entity,
                        edit.component,
                        edit.index,
                        edit.value,
                    );
                    self.stats.scene(edited, "proxied edit not applied");
                }
                Err(error) => {
                    warn!(entity = %edit.entity, error = %RemoteText(&error), "edit does not fit its attribute")
                }
            }
        }
    }

    /// An action the node executes as authority of one of its entities, or
    /// that a local client sent for the server: the world server's entities
    /// run it there. Returns false for entities that are not the world's.
    pub fn handle_action_for_world(&mut self, action: &EntityAction) -> bool {
        if !self.ids.is_mirrored(action.entity_id) {
            return false;
        }
        // Server only: the Peers part of the same action reaches the world
        // server's clients through `handle_peers_action` (the flood path
        // delivers it here too), and Local is never sent (docs/upstream.md §6).
        self.send_action(action, exec_type::SERVER);
        true
    }

    /// An action with the Peers bit from this node's clients or another
    /// node's: the world server's clients get it too.
    pub fn handle_peers_action(&mut self, action: &EntityAction) {
        self.send_action(action, exec_type::PEERS);
    }

    fn send_action(&mut self, action: &EntityAction, execution_type: u8) {
        if self.session().is_none() {
            return;
        }
        let Some(upstream) = self.ids.upstream_of(action.entity_id) else {
            return;
        };
        let mut out = action.clone();
        out.entity_id = upstream;
        out.execution_type = execution_type;
        self.send(&Message::EntityAction(out));
        self.stats.actions_sent += 1;
    }
}
