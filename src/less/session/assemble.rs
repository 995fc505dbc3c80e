//! Building packet bodies from the sender-side state: new packets (the
//! ordered queue first, then coalesced property updates, then tweaks) and
//! re-sends (draft section 2: "the old property set will not be part of the
//! re-send of the dropped packet").
//!
//! Every body fits the datagram capacity, except a body holding one single
//! message too large for any datagram, which is marked `oversize` and goes on
//! the reliable stream (decision 9). An entity larger than one packet is
//! introduced with the properties that fit; the rest follow as update-entity
//! messages. This module owns layout decisions; it does not sign or frame.

use std::collections::BTreeSet;

use super::outgoing::{LocalState, Pending, Wire};
use crate::clock::Time;
use crate::less::codec::integer_len;
use crate::less::encoding::LinkEncodings;
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, TypeId};
use crate::less::limits::{INTEGER_MAX_LEN, MAX_FRAME_LEN, MAX_MESSAGES};
use crate::less::message::Message;
use crate::less::packet::{DATAGRAM_FRAMING_MAX_LEN, PACKET_HEADER_MAX_LEN};
use crate::less::property_list::PropertyValue;
use crate::less::value::Value;

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
        values: Vec<PropertyValue>,
    },
    /// An update-entity; re-sent with the values still owned, or dropped.
    Update {
        entity: ObjectId<Local>,
        values: Vec<PropertyValue>,
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
}

impl Builder {
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

/// Picks keys, in order, whose estimated encoding fits `budget`.
fn select(
    state: &LocalState,
    entity: ObjectId<Local>,
    candidates: &[PropertyKey],
    budget: usize,
) -> Vec<PropertyKey> {
    let Some(entity_state) = state.entities.get(&entity) else {
        return Vec::new();
    };
    let mut used = 0usize;
    let mut paths = BTreeSet::new();
    let mut selected = Vec::new();
    for key in candidates {
        let Some(slot) = entity_state.slots.get(key) else {
            continue;
        };
        let mut cost = slot.value.encoded_len() + integer_len(key.property.0 as i64);
        if !paths.contains(&key.component) {
            cost += PATH_LEVEL_COST * key.component.elements().len();
        }
        if used + cost <= budget {
            used += cost;
            paths.insert(key.component.clone());
            selected.push(key.clone());
        }
    }
    selected
}

fn values_of(
    state: &LocalState,
    entity: ObjectId<Local>,
    keys: &[PropertyKey],
) -> Vec<PropertyValue> {
    let Some(entity_state) = state.entities.get(&entity) else {
        return Vec::new();
    };
    // Values go out in the link's encoding of their property (their
    // conformance to the schema was checked when they were set).
    keys.iter()
        .filter_map(|key| {
            entity_state.slots.get(key).map(|slot| PropertyValue {
                key: key.clone(),
                value: LinkEncodings::to_wire_as(slot.encoding, &slot.value),
            })
        })
        .collect()
}

impl LocalState {
    fn mark_carried(
        &mut self,
        entity: ObjectId<Local>,
        carried: &[PropertyKey],
        left: &[PropertyKey],
        sequence: Option<u64>,
    ) {
        let Some(state) = self.entities.get_mut(&entity) else {
            return;
        };
        for key in carried {
            if let Some(slot) = state.slots.get_mut(key) {
                slot.dirty = false;
                slot.last_packet = sequence;
            }
        }
        let mut requeue = false;
        for key in left {
            if let Some(slot) = state.slots.get_mut(key) {
                slot.dirty = true;
                requeue = true;
            }
        }
        if requeue && state.wire == Wire::Introduced && !state.queued {
            state.queued = true;
            self.dirty.push_back(entity);
        }
    }

    /// Encodes an entity message with as many of `candidates` as fit the
    /// builder; returns the bytes and the keys carried.
    fn fit_entity_message(
        &self,
        builder: &Builder,
        entity: ObjectId<Local>,
        candidates: &[PropertyKey],
        make: &dyn Fn(Vec<PropertyValue>) -> Message<Local, Remote>,
    ) -> (Vec<u8>, Vec<PropertyKey>, Vec<PropertyValue>) {
        // Almost always everything fits: all candidates are tried first, and
        // only when they do not fit are they budgeted (`select`), then
        // dropped from the end one encoding at a time.
        let mut selected: Option<Vec<PropertyKey>> = None;
        loop {
            let keys = selected.as_deref().unwrap_or(candidates);
            let message = make(values_of(self, entity, keys));
            let bytes = message.to_bytes_on(&self.encodings);
            if bytes.len() <= builder.room() || keys.is_empty() {
                // The values in their wire form, kept for re-sends: encoding
                // them again doubled the cost of every update.
                let values = match message {
                    Message::IntroduceEntity { values, .. }
                    | Message::UpdateEntity { values, .. } => values,
                    _ => values_of(self, entity, keys),
                };
                return (bytes, keys.to_vec(), values);
            }
            match &mut selected {
                Some(fewer) => {
                    fewer.pop();
                }
                None => {
                    let header =
                        make(Vec::new()).to_bytes_on(&self.encodings).len() + INTEGER_MAX_LEN;
                    let budget = builder.room().saturating_sub(header);
                    selected = Some(select(self, entity, candidates, budget));
                }
            }
        }
    }

    fn subscribed_keys(
        &self,
        entity: ObjectId<Local>,
        only_dirty: bool,
    ) -> Option<Vec<PropertyKey>> {
        let state = self.entities.get(&entity)?;
        self.types.get(&state.type_id)?.subscription.as_ref()?;
        Some(
            state
                .slots
                .iter()
                .filter(|(_, slot)| slot.subscribed && (!only_dirty || slot.dirty))
                .map(|(key, _)| key.clone())
                .collect(),
        )
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
        let make = |values| Message::IntroduceEntity {
            type_id,
            entity,
            values,
        };
        let (bytes, carried, values) = self.fit_entity_message(builder, entity, &candidates, &make);
        // An introduction is split only when it starts a packet (wire section
        // 11): squeezed in after other messages it could go out bare, and the
        // receiver could not build the object (a federation entity object
        // needs its origin and serial). The bare introduce always fits an
        // empty datagram.
        let split = carried.len() < candidates.len() || bytes.len() > builder.room();
        if split && builder.out.count > 0 {
            return Outcome::Full;
        }
        builder.push(
            &bytes,
            SentItem::Introduce {
                entity,
                type_id,
                values,
            },
        );
        let left: Vec<PropertyKey> = candidates
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
            let make = |values| Message::UpdateEntity { entity, values };
            let (mut bytes, mut carried, mut values) =
                self.fit_entity_message(builder, entity, &candidates, &make);
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
                carried = vec![candidates[0].clone()];
                values = values_of(self, entity, &carried);
                bytes = make(values.clone()).to_bytes_on(&self.encodings);
            }
            if !builder.try_push(&bytes, SentItem::Update { entity, values }) {
                self.dirty.push_front(entity);
                if let Some(state) = self.entities.get_mut(&entity) {
                    state.queued = true;
                }
                return;
            }
            let left: Vec<PropertyKey> = candidates
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
        let mut builder = Builder {
            out: Assembled::default(),
            capacity,
        };
        self.fill_ordered(&mut builder, sequence, now);
        self.fill_updates(&mut builder, sequence);
        if !builder.out.oversize {
            self.fill_tweaks(&mut builder, sequence);
        }
        builder.out
    }

    /// Builds the body of a bulk packet (docs/less-wire.md 16.5): messages of
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
        let mut builder = Builder {
            out: Assembled::default(),
            capacity,
        };
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
        let mut builder = Builder {
            out: Assembled::default(),
            capacity,
        };
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
                    let message: Message<Local, Remote> = Message::IntroduceEntity {
                        type_id: *type_id,
                        entity: *entity,
                        values: values.clone(),
                    };
                    let rebuilt = SentItem::Introduce {
                        entity: *entity,
                        type_id: *type_id,
                        values,
                    };
                    builder.push(&message.to_bytes_on(&self.encodings), rebuilt);
                }
                SentItem::Update { entity, values } => {
                    let values = self.still_owned(*entity, values, sequence);
                    if values.is_empty() {
                        continue;
                    }
                    let message: Message<Local, Remote> = Message::UpdateEntity {
                        entity: *entity,
                        values: values.clone(),
                    };
                    builder.push(
                        &message.to_bytes_on(&self.encodings),
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
        values: &[PropertyValue],
        sequence: u64,
    ) -> Vec<PropertyValue> {
        let Some(state) = self.entities.get(&entity) else {
            return Vec::new();
        };
        let encoded = |values: Vec<PropertyValue>| {
            let message: Message<Local, Remote> = Message::IntroduceEntity {
                type_id,
                entity,
                values,
            };
            message.to_bytes_on(&self.encodings).len()
        };
        let first_len = encoded(values.to_vec());
        let mut rebuilt = Vec::with_capacity(values.len());
        let mut superseded = Vec::new();
        for (index, value) in values.iter().enumerate() {
            let Some(slot) = state.slots.get(&value.key) else {
                continue;
            };
            if slot.last_packet == Some(sequence) {
                rebuilt.push(value.clone());
            } else if let Some(current) =
                values_of(self, entity, std::slice::from_ref(&value.key)).pop()
            {
                superseded.push(index);
                rebuilt.push(current);
            }
        }
        // Drop superseded values, last first, until the message fits again
        // (a value that grew since; its later carrier still delivers it).
        while encoded(rebuilt.clone()) > first_len {
            let Some(index) = superseded.pop() else {
                break;
            };
            let key = &values[index].key;
            rebuilt.retain(|v| &v.key != key);
        }
        rebuilt
    }

    /// The values whose slot still names packet `sequence` as the last to carry it.
    fn still_owned(
        &self,
        entity: ObjectId<Local>,
        values: &[PropertyValue],
        sequence: u64,
    ) -> Vec<PropertyValue> {
        let Some(state) = self.entities.get(&entity) else {
            return Vec::new();
        };
        values
            .iter()
            .filter(|value| {
                state
                    .slots
                    .get(&value.key)
                    .is_some_and(|slot| slot.last_packet == Some(sequence))
            })
            .cloned()
            .collect()
    }
}
