//! Building packet bodies from the sender-side state: new packets (the
//! ordered queue first, then coalesced property updates, then tweaks) and
//! re-sends (docs/less-wire.md §8, quoting the draft: "the old property set will not be part of the
//! re-send of the dropped packet").
//!
//! Every body fits the datagram capacity, except a body holding one single
//! message too large for any datagram, which is marked `oversize` and goes on
//! the reliable stream (docs/less-wire.md §6). An entity larger than one packet is
//! introduced with the properties that fit; the rest follow as update-entity
//! messages. This module owns layout decisions; it does not sign or frame.

use std::collections::BTreeSet;

use smallvec::SmallVec;

use super::outgoing::{LocalEntity, LocalState, LocalType, Pending, Wire};
use crate::clock::Time;
use crate::less::codec::integer_len;
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, TypeId};
use crate::less::limits::{INTEGER_MAX_LEN, MAX_FRAME_LEN, MAX_MESSAGES};
use crate::less::message::{encode_introduce, encode_update, Message};
use crate::less::packet::{DATAGRAM_FRAMING_MAX_LEN, PACKET_HEADER_MAX_LEN};
use crate::less::property_list::WireValue;
use crate::less::schema::PropertyIndex;
use crate::less::value::Value;

/// Properties an entity message carries or may carry, by index, ascending.
type Keys = SmallVec<[PropertyIndex; 16]>;

/// The values of an entity message as first sent, by property index: plain,
/// as the link's encoding of each property is applied again (to the same
/// bytes) when the message is rebuilt for a re-send.
pub(super) type SentValues = SmallVec<[(PropertyIndex, Value); 1]>;

/// Which entity message to build.
#[derive(Clone, Copy)]
enum EntityMessage {
    Introduce(TypeId<Local>),
    Update,
}

/// What one message of a sent packet stands for, so a re-send can rebuild it.
#[derive(Clone, Debug)]
pub(super) enum SentItem {
    /// Re-sent unchanged (structural messages, method calls and results,
    /// interactions, connection control).
    Message(Message<Local, Remote>),
    /// An introduce-entity; re-sent always, with those of the values it
    /// carried whose slot still names this packet.
    Introduce {
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        values: SentValues,
    },
    /// An update-entity; re-sent with the values still owned, or dropped.
    Update {
        entity: ObjectId<Local>,
        values: SentValues,
    },
    /// A tweak-entity; re-sent if not superseded.
    Tweak {
        entity: ObjectId<Remote>,
        key: PropertyKey,
        value: Value,
    },
}

/// A packet body ready for framing.
#[derive(Debug, Default)]
pub(super) struct Assembled {
    pub messages: Vec<u8>,
    pub count: usize,
    pub items: Vec<SentItem>,
    /// Holds one message too large for a datagram.
    pub oversize: bool,
}

/// Bytes of messages a datagram of `mtu` bytes can hold, with the headers at
/// their largest so a re-send (new timestamp, new acknowledgements) still fits.
pub(super) fn datagram_capacity(mtu: usize) -> usize {
    mtu - DATAGRAM_FRAMING_MAX_LEN - PACKET_HEADER_MAX_LEN
}

/// Bytes of messages the largest stream frame can hold.
pub(super) const OVERSIZE_CAPACITY: usize =
    MAX_FRAME_LEN - DATAGRAM_FRAMING_MAX_LEN - PACKET_HEADER_MAX_LEN - INTEGER_MAX_LEN;

/// Conservative cost of one more property in a property list: value, property
/// id, and a component header per path level when its path is new.
const PATH_LEVEL_COST: usize = 2 * INTEGER_MAX_LEN;

struct Builder {
    out: Assembled,
    capacity: usize,
    /// The entity message being fitted, reused from one to the next.
    scratch: Vec<u8>,
}

impl Builder {
    fn new(capacity: usize) -> Builder {
        Builder {
            out: Assembled {
                // A datagram's worth up front; bulk and oversize bodies grow.
                messages: Vec::with_capacity(capacity.min(2048)),
                ..Assembled::default()
            },
            capacity,
            scratch: Vec::with_capacity(256),
        }
    }

    fn room(&self) -> usize {
        // A receiver refuses more than MAX_MESSAGES messages in one packet;
        // only the large body of a bulk packet could reach it.
        if self.out.count >= MAX_MESSAGES {
            return 0;
        }
        self.capacity.saturating_sub(self.out.messages.len())
    }

    fn push(&mut self, bytes: &[u8], item: SentItem) {
        self.out.messages.extend_from_slice(bytes);
        self.out.count += 1;
        self.out.items.push(item);
    }

    /// Adds a message if it fits, or as the only message of an oversize body.
    fn try_push(&mut self, bytes: &[u8], item: SentItem) -> bool {
        if self.out.oversize {
            return false;
        }
        if bytes.len() <= self.room() {
            self.push(bytes, item);
            true
        } else if self.out.count == 0 && bytes.len() <= OVERSIZE_CAPACITY {
            self.push(bytes, item);
            self.out.oversize = true;
            true
        } else {
            false
        }
    }
}

enum Outcome {
    Sent,
    Skipped,
    Full,
}

/// Picks properties, in order, whose estimated encoding fits `budget`.
fn select(entity: &LocalEntity, candidates: &[PropertyIndex], budget: usize) -> Keys {
    let mut used = 0usize;
    let mut paths = BTreeSet::new();
    let mut selected = Keys::new();
    for &index in candidates {
        let (Some(slot), Some((key, _))) =
            (entity.slots.get(index), entity.schema.property_at(index))
        else {
            continue;
        };
        let mut cost = slot.value.encoded_len() + integer_len(key.property.0 as i64);
        if !paths.contains(&key.component) {
            cost += PATH_LEVEL_COST * key.component.elements().len();
        }
        if used + cost <= budget {
            used += cost;
            paths.insert(key.component.clone());
            selected.push(index);
        }
    }
    selected
}

/// Appends an entity message of `values` as the link carries it.
fn encode_entity_message(
    out: &mut Vec<u8>,
    state: &LocalState,
    entity: ObjectId<Local>,
    kind: EntityMessage,
    values: &[WireValue<'_>],
) {
    match kind {
        EntityMessage::Introduce(type_id) => encode_introduce(out, type_id, entity, values),
        EntityMessage::Update => encode_update(out, entity, values, &state.encodings),
    }
}

/// The values of `keys` as the link carries them, borrowed from the slots.
fn wire_values<'a>(
    entity: &'a LocalEntity,
    local_type: &LocalType,
    keys: &[PropertyIndex],
) -> SmallVec<[WireValue<'a>; 16]> {
    keys.iter()
        .filter_map(|&index| {
            let slot = entity.slots.get(index)?;
            let (key, _) = entity.schema.property_at(index)?;
            Some(WireValue {
                key,
                value: &slot.value,
                encoding: local_type.encoding(index),
            })
        })
        .collect()
}

/// The current values of `keys`, to keep for re-sends.
fn sent_values(entity: &LocalEntity, keys: &[PropertyIndex]) -> SentValues {
    keys.iter()
        .filter_map(|&index| Some((index, entity.slots.get(index)?.value.clone())))
        .collect()
}

impl LocalState {
    fn mark_carried(
        &mut self,
        entity: ObjectId<Local>,
        carried: &[PropertyIndex],
        left: &[PropertyIndex],
        sequence: Option<u64>,
    ) {
        let Some(state) = self.entities.get_mut(&entity) else {
            return;
        };
        for &index in carried {
            if let Some(slot) = state.slots.get_mut(index) {
                state.dirty.remove(index);
                slot.last_packet = sequence;
            }
        }
        let mut requeue = false;
        for &index in left {
            if state.slots.get(index).is_some() {
                state.dirty.insert(index);
                requeue = true;
            }
        }
        if requeue && state.wire == Wire::Introduced && !state.queued {
            state.queued = true;
            self.dirty.push_back(entity);
        }
    }

    /// Encodes into the builder's scratch buffer an entity message with as
    /// many of `candidates` as fit the builder; returns the properties
    /// carried and their values.
    fn fit_entity_message(
        &self,
        builder: &mut Builder,
        entity: ObjectId<Local>,
        candidates: &[PropertyIndex],
        kind: EntityMessage,
    ) -> (Keys, SentValues) {
        builder.scratch.clear();
        let (Some(state), Some(local_type)) = (
            self.entities.get(&entity),
            self.entities
                .get(&entity)
                .and_then(|e| self.types.get(&e.type_id)),
        ) else {
            return (Keys::new(), SentValues::new());
        };
        // Almost always everything fits: all candidates are tried first, and
        // only when they do not fit are they budgeted (`select`), then
        // dropped from the end one encoding at a time.
        let mut selected: Option<Keys> = None;
        loop {
            let keys = selected.as_deref().unwrap_or(candidates);
            let values = wire_values(state, local_type, keys);
            builder.scratch.clear();
            encode_entity_message(&mut builder.scratch, self, entity, kind, &values);
            if builder.scratch.len() <= builder.room() || keys.is_empty() {
                return (Keys::from_slice(keys), sent_values(state, keys));
            }
            match &mut selected {
                Some(fewer) => {
                    fewer.pop();
                }
                None => {
                    let mut header = Vec::new();
                    encode_entity_message(&mut header, self, entity, kind, &[]);
                    let budget = builder
                        .room()
                        .saturating_sub(header.len() + INTEGER_MAX_LEN);
                    selected = Some(select(state, candidates, budget));
                }
            }
        }
    }

    /// The subscribed properties of an entity (only the dirty ones if asked);
    /// `None` when its type is not subscribed.
    fn subscribed_keys(&self, entity: ObjectId<Local>, only_dirty: bool) -> Option<Keys> {
        let state = self.entities.get(&entity)?;
        let local_type = self.types.get(&state.type_id)?;
        local_type.subscription.as_ref()?;
        // The dirty set and the slots' indices: no slot is read.
        Some(if only_dirty {
            state
                .dirty
                .iter()
                .filter(|index| local_type.subscribes(*index))
                .collect()
        } else {
            state
                .slots
                .indices()
                .filter(|index| local_type.subscribes(*index))
                .collect()
        })
    }

    fn build_introduce(
        &mut self,
        builder: &mut Builder,
        entity: ObjectId<Local>,
        snapshot: bool,
        sequence: Option<u64>,
    ) -> Outcome {
        let Some(state) = self.entities.get(&entity) else {
            return Outcome::Skipped;
        };
        let expected = if snapshot {
            Wire::Introduced
        } else {
            Wire::IntroduceQueued
        };
        if state.wire != expected {
            return Outcome::Skipped;
        }
        let type_id = state.type_id;
        let Some(candidates) = self.subscribed_keys(entity, false) else {
            if let Some(state) = self.entities.get_mut(&entity) {
                state.wire = Wire::Waiting;
            }
            return Outcome::Skipped;
        };
        let kind = EntityMessage::Introduce(type_id);
        let (carried, values) = self.fit_entity_message(builder, entity, &candidates, kind);
        let bytes = std::mem::take(&mut builder.scratch);
        // An introduction is split only when it starts a packet (wire section
        // 11): squeezed in after other messages it could go out bare, and the
        // receiver could not build the object (a federation entity object
        // needs its origin and serial). The bare introduce always fits an
        // empty datagram.
        let split = carried.len() < candidates.len() || bytes.len() > builder.room();
        if split && builder.out.count > 0 {
            builder.scratch = bytes;
            return Outcome::Full;
        }
        self.values_carried += values.len() as u64;
        builder.push(
            &bytes,
            SentItem::Introduce {
                entity,
                type_id,
                values,
            },
        );
        builder.scratch = bytes;
        let left: Keys = candidates
            .into_iter()
            .filter(|k| !carried.contains(k))
            .collect();
        if let Some(state) = self.entities.get_mut(&entity) {
            state.wire = Wire::Introduced;
        }
        self.mark_carried(entity, &carried, &left, sequence);
        Outcome::Sent
    }

    fn fill_updates(&mut self, builder: &mut Builder, sequence: Option<u64>) {
        for _ in 0..self.dirty.len() {
            if builder.out.oversize {
                return;
            }
            let Some(entity) = self.dirty.pop_front() else {
                return;
            };
            let Some(state) = self.entities.get_mut(&entity) else {
                continue;
            };
            state.queued = false;
            if state.wire != Wire::Introduced {
                continue;
            }
            let candidates = self.subscribed_keys(entity, true).unwrap_or_default();
            if candidates.is_empty() {
                continue;
            }
            let kind = EntityMessage::Update;
            let (mut carried, mut values) =
                self.fit_entity_message(builder, entity, &candidates, kind);
            if carried.is_empty() {
                if builder.out.count > 0 {
                    // Packet full: this entity goes first next time.
                    if let Some(state) = self.entities.get_mut(&entity) {
                        state.queued = true;
                    }
                    self.dirty.push_front(entity);
                    return;
                }
                // One value too large for any datagram: alone, on the stream.
                carried = Keys::from_slice(&candidates[..1]);
                let Some(state) = self.entities.get(&entity) else {
                    continue;
                };
                let Some(local_type) = self.types.get(&state.type_id) else {
                    continue;
                };
                builder.scratch.clear();
                let wire = wire_values(state, local_type, &carried);
                encode_entity_message(&mut builder.scratch, self, entity, kind, &wire);
                values = sent_values(state, &carried);
            }
            let bytes = std::mem::take(&mut builder.scratch);
            let carried_values = values.len() as u64;
            let pushed = builder.try_push(&bytes, SentItem::Update { entity, values });
            if pushed {
                self.values_carried += carried_values;
            }
            builder.scratch = bytes;
            if !pushed {
                self.dirty.push_front(entity);
                if let Some(state) = self.entities.get_mut(&entity) {
                    state.queued = true;
                }
                return;
            }
            let left: Keys = candidates
                .into_iter()
                .filter(|k| !carried.contains(k))
                .collect();
            self.mark_carried(entity, &carried, &left, sequence);
        }
    }

    fn fill_tweaks(&mut self, builder: &mut Builder, sequence: Option<u64>) {
        for _ in 0..self.dirty_tweaks.len() {
            let Some((entity, key)) = self.dirty_tweaks.pop_front() else {
                return;
            };
            let Some(slot) = self.tweaks.get_mut(&(entity, key.clone())) else {
                continue;
            };
            let message: Message<Local, Remote> = Message::TweakEntity {
                entity,
                property: key.clone(),
                value: slot.value.clone(),
            };
            if builder.try_push(
                &message.to_bytes_on(&self.encodings),
                SentItem::Tweak {
                    entity,
                    key: key.clone(),
                    value: slot.value.clone(),
                },
            ) {
                slot.dirty = false;
                slot.last_packet = sequence;
            } else {
                self.dirty_tweaks.push_front((entity, key));
                return;
            }
        }
    }

    /// Builds a new packet body: ordered messages first, then updates, then
    /// tweaks. `sequence` is the packet's (None on a stream-mode link).
    pub fn assemble_new(&mut self, sequence: Option<u64>, capacity: usize, now: Time) -> Assembled {
        let mut builder = Builder::new(capacity);
        self.fill_ordered(&mut builder, sequence, now);
        self.fill_updates(&mut builder, sequence);
        if !builder.out.oversize {
            self.fill_tweaks(&mut builder, sequence);
        }
        builder.out
    }

    /// Builds the body of a bulk packet (docs/less-wire.md §16.5): messages of
    /// the ordered queue only (introductions, and whatever structural
    /// message precedes them), in queue order, up to `capacity` bytes.
    /// Property updates and tweaks stay on datagrams; an update for an entity
    /// this packet introduces waits at the receiver for the introduction
    /// (section 9), as it does behind any stream datagram.
    pub fn assemble_ordered(
        &mut self,
        sequence: Option<u64>,
        capacity: usize,
        now: Time,
    ) -> Assembled {
        let mut builder = Builder::new(capacity);
        self.fill_ordered(&mut builder, sequence, now);
        builder.out
    }

    fn fill_ordered(&mut self, builder: &mut Builder, sequence: Option<u64>, now: Time) {
        while let Some(next) = self.pending.pop_front() {
            let outcome = match next {
                Pending::Message(ref message) => {
                    if builder.try_push(
                        &message.to_bytes_on(&self.encodings),
                        SentItem::Message(message.clone()),
                    ) {
                        Outcome::Sent
                    } else {
                        Outcome::Full
                    }
                }
                Pending::Remove(entity) => {
                    let message = Message::RemoveEntity { entity };
                    if builder.try_push(
                        &message.to_bytes_on(&self.encodings),
                        SentItem::Message(message.clone()),
                    ) {
                        self.on_remove_sent(entity, sequence, now);
                        Outcome::Sent
                    } else {
                        Outcome::Full
                    }
                }
                Pending::Introduce { entity, snapshot } => {
                    self.build_introduce(builder, entity, snapshot, sequence)
                }
            };
            match outcome {
                Outcome::Sent | Outcome::Skipped => {}
                Outcome::Full => {
                    self.pending.push_front(next);
                    break;
                }
            }
            if builder.out.oversize {
                break;
            }
        }
    }

    /// Rebuilds the body of packet `sequence` for a re-send: messages
    /// unchanged, and of the property values it carried only those no later
    /// packet has carried since, with the value as first sent (a newer value
    /// goes in a new packet: the receiver may already hold this sequence, so
    /// a re-send must never be the only carrier of new data).
    pub fn assemble_resend(&self, sequence: u64, items: &[SentItem], capacity: usize) -> Assembled {
        let mut builder = Builder::new(capacity);
        for item in items {
            match item {
                SentItem::Message(message) => {
                    builder.push(&message.to_bytes_on(&self.encodings), item.clone())
                }
                SentItem::Introduce {
                    entity,
                    type_id,
                    values,
                } => {
                    let values = self.introduction_values(*entity, *type_id, values, sequence);
                    let bytes = self.encoded(
                        *entity,
                        *type_id,
                        EntityMessage::Introduce(*type_id),
                        &values,
                    );
                    let rebuilt = SentItem::Introduce {
                        entity: *entity,
                        type_id: *type_id,
                        values,
                    };
                    builder.push(&bytes, rebuilt);
                }
                SentItem::Update { entity, values } => {
                    let Some(state) = self.entities.get(entity) else {
                        continue;
                    };
                    let values: SentValues = values
                        .iter()
                        .filter(|(index, _)| {
                            state
                                .slots
                                .get(*index)
                                .is_some_and(|slot| slot.last_packet == Some(sequence))
                        })
                        .cloned()
                        .collect();
                    if values.is_empty() {
                        continue;
                    }
                    let bytes =
                        self.encoded(*entity, state.type_id, EntityMessage::Update, &values);
                    builder.push(
                        &bytes,
                        SentItem::Update {
                            entity: *entity,
                            values,
                        },
                    );
                }
                SentItem::Tweak { entity, key, value } => {
                    let owned = self
                        .tweaks
                        .get(&(*entity, key.clone()))
                        .is_some_and(|slot| slot.last_packet == Some(sequence));
                    if !owned {
                        continue;
                    }
                    let message: Message<Local, Remote> = Message::TweakEntity {
                        entity: *entity,
                        property: key.clone(),
                        value: value.clone(),
                    };
                    builder.push(&message.to_bytes_on(&self.encodings), item.clone());
                }
            }
        }
        // A subset of what fitted before, under headers sized for the worst case.
        debug_assert!(builder.out.messages.len() <= capacity);
        builder.out
    }

    /// The bytes of an entity message of `values` for an entity of `type_id`.
    fn encoded(
        &self,
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        kind: EntityMessage,
        values: &[(PropertyIndex, Value)],
    ) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(64);
        let Some(local_type) = self.types.get(&type_id) else {
            return bytes;
        };
        let wire: SmallVec<[WireValue<'_>; 16]> = values
            .iter()
            .filter_map(|(index, value)| {
                let (key, _) = local_type.schema.property_at(*index)?;
                Some(WireValue {
                    key,
                    value,
                    encoding: local_type.encoding(*index),
                })
            })
            .collect();
        encode_entity_message(&mut bytes, self, entity, kind, &wire);
        bytes
    }

    /// The values of a re-sent introduce-entity (wire section 8): every
    /// property the first sending carried, as first sent while its slot still
    /// names packet `sequence`, else at its current value. The receiver builds
    /// the object from its introduction (a federation entity object cannot
    /// exist without its origin and serial), and a later packet that carried
    /// the property since is held behind this one while the entity is unknown
    /// to the receiver, so it cannot supply the value in time. The current
    /// value is never older than anything sent before, and if it has not been
    /// sent yet its slot is dirty, so a new packet carries it too. Superseded
    /// values are kept only while the message stays within its first size,
    /// so the re-send still fits the packet it rebuilds.
    fn introduction_values(
        &self,
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        values: &[(PropertyIndex, Value)],
        sequence: u64,
    ) -> SentValues {
        let Some(state) = self.entities.get(&entity) else {
            return SentValues::new();
        };
        let kind = EntityMessage::Introduce(type_id);
        let first_len = self.encoded(entity, type_id, kind, values).len();
        let mut rebuilt = SentValues::with_capacity(values.len());
        let mut superseded = Vec::new();
        for (position, (index, value)) in values.iter().enumerate() {
            let Some(slot) = state.slots.get(*index) else {
                continue;
            };
            if slot.last_packet == Some(sequence) {
                rebuilt.push((*index, value.clone()));
            } else {
                superseded.push(position);
                rebuilt.push((*index, slot.value.clone()));
            }
        }
        // Drop superseded values, last first, until the message fits again
        // (a value that grew since; its later carrier still delivers it).
        while self.encoded(entity, type_id, kind, &rebuilt).len() > first_len {
            let Some(position) = superseded.pop() else {
                break;
            };
            let index = values[position].0;
            rebuilt.retain(|(i, _)| *i != index);
        }
        rebuilt
    }
}
