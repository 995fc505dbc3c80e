//! The tick's commonest output: an entity the client already has, of which
//! only attribute values changed, goes out as one EditAttributes frame.
//! That frame is built here straight from the scene's values (no message,
//! no copied values, one exactly sized buffer), and within one tick it is
//! built once and shared by every client whose pending edits of the entity
//! are the same.
//!
//! Sharing is sound because the frame's bytes are a function of the scene
//! (read-only during the tick) and of the key compared before sharing: the
//! entity id (the node numbers entities, so it is the same for all of its
//! clients) and each component's set of dirty attributes. Anything else a
//! client may need of the entity (a creation, a removal, a property or
//! parent change, created or removed attributes) takes the general path in
//! `writer`, and so does anything protocol-dependent.

use bytes::Bytes;
use smallvec::SmallVec;

use super::slots::{dirty_edits, SceneSlots};
use super::sync_state::{EntitySync, Presence, SlotSet};
use crate::scene::entity_hash::EntityMap;
use crate::scene::{ComponentContent, Entity};
use crate::tundra::bits::{push_vle, vle_size, BitWriter};
use crate::tundra::edit_attributes::write_block;
use crate::tundra::messages::id::EDIT_ATTRIBUTES;
use crate::tundra::{ComponentId, EncodeError, EntityId};

/// Components with dirty attributes, and which: what the frame says.
type Key = SmallVec<[(ComponentId, SlotSet); 2]>;

/// One frame built this tick, and what it was built from.
#[derive(Debug)]
struct Built {
    key: Key,
    /// `None` when nothing was left to send (no dirty attribute exists).
    frame: Option<Bytes>,
}

/// Builds EditAttributes frames at the tick; holds scratch space between
/// frames and the frames shared within one tick.
#[derive(Debug, Default)]
pub(super) struct EditFrames {
    /// The key of the entity being looked up or built.
    key: Key,
    /// The entity's blocks back to back, each padded to whole bytes.
    blocks: BitWriter,
    /// Per block: component and end offset in `blocks`.
    spans: Vec<(ComponentId, usize)>,
    /// Frames of this tick by entity, when more than one client is written.
    shared: EntityMap<Built>,
    sharing: bool,
    /// Tests turn the edit-only path off to compare against the general one.
    #[cfg(test)]
    pub(super) general_only: bool,
}

/// What [`EditFrames::lookup`] found for an entity's pending detail.
#[derive(Debug, PartialEq)]
pub(super) enum Lookup {
    /// Not edit-only: the general path builds the messages.
    General,
    /// Edit-only, and built for another client this tick: the frame, or
    /// `None` when there is nothing to send.
    Shared(Option<Bytes>),
    /// Edit-only, to be built with [`EditFrames::build`].
    Build,
}

impl EditFrames {
    /// Starts a tick. Frames are shared only within it (the scene changes
    /// between ticks) and only when more than one client is written (one
    /// client would only pay for the bookkeeping).
    pub(super) fn start_tick(&mut self, clients: usize) {
        self.shared.clear();
        self.sharing = clients > 1;
    }

    /// Ends a tick: the frames are the clients' now (the scene will change).
    pub(super) fn finish_tick(&mut self) {
        self.shared.clear();
    }

    /// Whether `pending` holds nothing but changed attribute values, and if
    /// so whether this tick already has its frame. No scene lookup: a
    /// shared frame needs none.
    pub(super) fn lookup(&mut self, id: EntityId, pending: &EntitySync) -> Lookup {
        #[cfg(test)]
        if self.general_only {
            return Lookup::General;
        }
        if !is_edit_only(pending) {
            return Lookup::General;
        }
        if self.sharing {
            if let Some(built) = self.shared.get(&id) {
                // Compared in place: a hit (every client after the first)
                // builds no key.
                if built.key.iter().copied().eq(key_entries(pending)) {
                    return Lookup::Shared(built.frame.clone());
                }
            }
        }
        self.key.clear();
        self.key.extend(key_entries(pending));
        Lookup::Build
    }

    /// The frame for the entity of the last [`EditFrames::lookup`] that
    /// answered [`Lookup::Build`]: `Ok(None)` when none of its dirty
    /// attributes exists any more. An error (a value too long for its wire
    /// field, an internal inconsistency) leaves the entity to the general
    /// path, which logs it and skips only the block that cannot be written.
    pub(super) fn build(&mut self, entity: &Entity) -> Result<Option<Bytes>, EncodeError> {
        let frame = self.encode(entity)?;
        if self.sharing {
            self.shared.insert(
                entity.id,
                Built {
                    key: self.key.clone(),
                    frame: frame.clone(),
                },
            );
        }
        Ok(frame)
    }

    /// Encodes the frame: `u16 id`, `VLE scene 0`, `VLE entity`, then per
    /// component `VLE id, VLE size, block` (docs/tundra-wire.md §4.9), each block as
    /// Tundra's server writes it ([`write_block`]).
    fn encode(&mut self, entity: &Entity) -> Result<Option<Bytes>, EncodeError> {
        self.blocks.clear();
        self.spans.clear();
        for (component_id, dirty) in &self.key {
            let Some(component) = entity.components.get(component_id) else {
                continue;
            };
            if matches!(component.content, ComponentContent::Opaque(_)) {
                continue;
            }
            let edits = dirty_edits(component, dirty);
            if edits.is_empty() {
                continue;
            }
            write_block(&edits, &SceneSlots::of(component), &mut self.blocks)?;
            self.blocks.pad_to_byte();
            self.spans.push((*component_id, self.blocks.byte_len()));
        }
        if self.spans.is_empty() {
            return Ok(None);
        }
        let mut len = 2 + vle_size(0) + vle_size(entity.id.wire());
        let mut start = 0;
        for (component_id, end) in &self.spans {
            let size = end - start;
            len += vle_size(component_id.wire()) + vle_size(size as u32) + size;
            start = *end;
        }
        // Exactly sized, so the frame becomes `Bytes` without another
        // allocation.
        let mut frame = Vec::with_capacity(len);
        frame.extend_from_slice(&EDIT_ATTRIBUTES.to_le_bytes());
        push_vle(&mut frame, 0)?;
        push_vle(&mut frame, entity.id.wire())?;
        let blocks = self.blocks.as_bytes();
        let mut start = 0;
        for (component_id, end) in &self.spans {
            let block = blocks.get(start..*end).unwrap_or_default();
            push_vle(&mut frame, component_id.wire())?;
            push_vle(&mut frame, block.len() as u32)?;
            frame.extend_from_slice(block);
            start = *end;
        }
        Ok(Some(Bytes::from(frame)))
    }
}

/// Whether `pending` is edit-only: the entity and every replicated
/// component are known to the client, and nothing but values changed.
fn is_edit_only(pending: &EntitySync) -> bool {
    pending.presence == Presence::Known
        && !pending.temporary_dirty
        && !pending.parent_dirty
        && pending.components.iter().all(|(component_id, sync)| {
            component_id.is_local() || (sync.presence == Presence::Known && sync.only_values())
        })
}

/// The key of an edit-only `pending`: its replicated components with
/// dirty attributes, in ascending id, and which attributes.
fn key_entries(pending: &EntitySync) -> impl Iterator<Item = (ComponentId, SlotSet)> + '_ {
    pending
        .components
        .iter()
        .filter(|(component_id, sync)| !component_id.is_local() && sync.has_dirty())
        .map(|(component_id, sync)| (*component_id, sync.dirty()))
}
