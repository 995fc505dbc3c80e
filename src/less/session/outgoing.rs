//! Sender-side state of a session: the types we introduced and the peer's
//! subscriptions to them, our entities with their property slots, the ordered
//! queue of messages to send, pending tweaks, and object ids waiting to be
//! safe to reuse.
//!
//! docs/less-wire.md §8, quoting the draft: "properties know which packet last set them"; here every
//! slot remembers the sequence of the packet that last carried it, so a
//! re-send carries only values not superseded since. docs/less-wire.md §9: an object id
//! is reused only after its remove-entity, and every packet before it, has
//! been acknowledged (and, for tweak decoding, after every peer packet sent
//! before the peer saw that acknowledgement has arrived). This module owns
//! the state and its validation; packet building is in `assemble`.

use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::event::CommandError;
use super::object_table::ObjectTable;
use crate::clock::Time;
use crate::less::encoding::{EncodingId, LinkEncodings};
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, TypeId};
use crate::less::limits::MAX_FRAME_LEN;
use crate::less::message::Message;
use crate::less::property_list::{ComponentSubscription, PropertyValue};
use crate::less::property_map::{IndexSet, PropertyMap};
use crate::less::schema::{PropertyIndex, TypeSchema};
use crate::less::value::Value;

/// Largest encoded value a command accepts: a frame less room for headers.
pub const MAX_VALUE_LEN: usize = MAX_FRAME_LEN - 256;

/// A property value with its send state (whether it changed since it was
/// last put in a packet is its entity's `dirty` set).
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub value: Value,
    /// Sequence of the packet that last carried it (datagram mode).
    pub last_packet: Option<u64>,
}

impl Slot {
    /// A slot holding a value not sent yet.
    pub fn new(value: Value) -> Slot {
        Slot {
            value,
            last_packet: None,
        }
    }
}

/// A tweak value with its send state.
#[derive(Clone, Debug)]
pub(super) struct TweakSlot {
    pub value: Value,
    /// Changed since it was last put in a packet.
    pub dirty: bool,
    /// Sequence of the packet that last carried it (datagram mode).
    pub last_packet: Option<u64>,
}

/// Where an entity stands with the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire {
    /// Not introduced: its type is not subscribed.
    Waiting,
    /// An introduce-entity is queued.
    IntroduceQueued,
    /// The peer has been sent an introduce-entity.
    Introduced,
    /// Removed from the peer after an unsubscribe; re-introduced once the
    /// remove is acknowledged and the type is subscribed again.
    Withdrawn { remove_sequence: Option<u64> },
}

#[derive(Clone, Debug)]
pub(super) struct LocalEntity {
    pub type_id: TypeId<Local>,
    pub schema: Arc<TypeSchema>,
    /// By the property's index in `schema`.
    pub slots: PropertyMap<Slot>,
    /// Slots changed since they were last put in a packet.
    pub dirty: IndexSet,
    pub wire: Wire,
    /// In the dirty queue.
    pub queued: bool,
}

impl LocalEntity {
    /// Sets a checked value, to be sent with the next packet.
    fn store(&mut self, index: PropertyIndex, value: Value) {
        match self.slots.get_mut(index) {
            Some(slot) => slot.value = value,
            None => {
                self.slots.insert(index, Slot::new(value));
            }
        }
        self.dirty.insert(index);
    }
}

#[derive(Clone, Debug)]
pub(super) struct LocalType {
    pub schema: Arc<TypeSchema>,
    pub subscription: Option<BTreeSet<PropertyKey>>,
    /// By property index: the peer subscribes to it (follows
    /// `subscription`; every update asks, so it is kept as a set).
    pub subscribed: IndexSet,
    /// By property index: the link's encoding of it (fixed for the session).
    pub encodings: Vec<Option<EncodingId>>,
}

impl LocalType {
    /// Whether the peer subscribes to the property at `index`.
    pub fn subscribes(&self, index: PropertyIndex) -> bool {
        self.subscribed.contains(index)
    }

    /// The link's encoding of the property at `index`.
    pub fn encoding(&self, index: PropertyIndex) -> Option<EncodingId> {
        self.encodings.get(index.get()).copied().flatten()
    }
}

/// A removed object id on its way back to the free pool.
#[derive(Clone, Debug)]
pub(super) struct Retired {
    /// Kept so that a tweak the peer sent before seeing the removal decodes.
    pub schema: Arc<TypeSchema>,
    /// Sequence of the packet carrying the remove-entity, once sent. `None`
    /// with `sent` set means stream mode.
    pub remove_sequence: Option<u64>,
    pub sent: Option<Time>,
    /// The peer sequence whose acknowledgement fields first covered the remove.
    pub acknowledged_in: Option<u64>,
}

/// Ordered outgoing work.
#[derive(Clone, Debug)]
pub(super) enum Pending {
    Message(Message<Local, Remote>),
    /// Introduce an entity; `snapshot` answers a request-entity.
    Introduce {
        entity: ObjectId<Local>,
        snapshot: bool,
    },
    Remove(ObjectId<Local>),
}

#[derive(Debug, Default)]
pub(super) struct LocalState {
    pub types: BTreeMap<TypeId<Local>, LocalType>,
    next_type: u64,
    pub entities: ObjectTable<LocalEntity>,
    pub retired: BTreeMap<ObjectId<Local>, Retired>,
    /// Entities in `Wire::Withdrawn` whose remove went out in a datagram:
    /// the only ones an acknowledgement can re-introduce, kept apart so an
    /// acknowledgement costs nothing per entity the link carries.
    withdrawn_sent: BTreeSet<ObjectId<Local>>,
    free_ids: VecDeque<ObjectId<Local>>,
    next_object: u64,
    pub pending: VecDeque<Pending>,
    pub dirty: VecDeque<ObjectId<Local>>,
    pub tweaks: BTreeMap<(ObjectId<Remote>, PropertyKey), TweakSlot>,
    pub dirty_tweaks: VecDeque<(ObjectId<Remote>, PropertyKey)>,
    /// The link's per-property encodings, applied as messages are built.
    pub encodings: Arc<LinkEncodings>,
    /// Property values put in new packets so far ([`Stats::values_sent`]).
    ///
    /// [`Stats::values_sent`]: super::stats::Stats::values_sent
    pub values_carried: u64,
}

/// The property indices of a command's values, in order.
pub(super) type Indices = SmallVec<[PropertyIndex; 8]>;

/// Checks values against a schema (declared properties, conforming values,
/// bounded size) and returns their property indices.
pub(super) fn check_values(
    schema: &TypeSchema,
    values: &[PropertyValue],
) -> Result<Indices, CommandError> {
    values
        .iter()
        .map(|value| check_value(schema, &value.key, &value.value))
        .collect()
}

pub(super) fn check_value(
    schema: &TypeSchema,
    key: &PropertyKey,
    value: &Value,
) -> Result<PropertyIndex, CommandError> {
    let (index, value_type) = schema
        .property_index(key)
        .and_then(|index| Some((index, schema.property_at(index)?.1)))
        .ok_or_else(|| CommandError::UnknownProperty(key.clone()))?;
    if !value.conforms_to(value_type) {
        return Err(CommandError::TypeMismatch(key.to_string()));
    }
    if value.encoded_len() > MAX_VALUE_LEN {
        return Err(CommandError::TooLarge);
    }
    Ok(index)
}

impl LocalState {
    /// Empty state for a link with these encodings.
    pub fn with_encodings(encodings: Arc<LinkEncodings>) -> LocalState {
        LocalState {
            encodings,
            ..LocalState::default()
        }
    }

    /// Allocates a type id and queues its introduce-type.
    pub fn introduce_type(&mut self, schema: Arc<TypeSchema>) -> TypeId<Local> {
        self.next_type += 1;
        let type_id = TypeId::new(self.next_type);
        self.pending
            .push_back(Pending::Message(Message::IntroduceType {
                type_id,
                uri: schema.uri.clone(),
            }));
        let count = schema.property_count();
        let encodings = (0..count)
            .map(|i| {
                let (key, _) = schema.property_at(PropertyIndex(i as u32))?;
                self.encodings.for_property(&schema, key)
            })
            .collect();
        self.types.insert(
            type_id,
            LocalType {
                schema,
                subscription: None,
                subscribed: IndexSet::new(),
                encodings,
            },
        );
        type_id
    }

    /// An object id that is neither in use nor waiting to be safe to reuse.
    pub fn allocate_object_id(&mut self) -> ObjectId<Local> {
        while let Some(id) = self.free_ids.pop_front() {
            if self.id_available(id) {
                return id;
            }
        }
        loop {
            self.next_object += 1;
            let id = ObjectId::new(self.next_object);
            if self.id_available(id) {
                return id;
            }
        }
    }

    pub fn id_available(&self, id: ObjectId<Local>) -> bool {
        !self.entities.contains_key(&id) && !self.retired.contains_key(&id)
    }

    /// Adds an entity; it is introduced now if its type is subscribed.
    pub fn introduce_entity(
        &mut self,
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        let local_type = self.types.get(&type_id).ok_or(CommandError::UnknownType)?;
        if !self.id_available(entity) {
            return Err(CommandError::IdInUse);
        }
        let indices = check_values(&local_type.schema, &values)?;
        let dirty = indices.iter().copied().collect();
        let slots = indices
            .into_iter()
            .zip(values)
            .map(|(index, v)| (index, Slot::new(v.value)))
            .collect();
        let subscribed = local_type.subscription.is_some();
        self.entities.insert(
            entity,
            LocalEntity {
                type_id,
                schema: local_type.schema.clone(),
                slots,
                dirty,
                wire: Wire::Waiting,
                queued: false,
            },
        );
        if subscribed {
            self.queue_introduce(entity);
        }
        Ok(())
    }

    fn queue_introduce(&mut self, entity: ObjectId<Local>) {
        if let Some(state) = self.entities.get_mut(&entity) {
            state.wire = Wire::IntroduceQueued;
            self.pending.push_back(Pending::Introduce {
                entity,
                snapshot: false,
            });
        }
    }

    /// Sets property values, to be sent coalesced with the next packet.
    pub fn set_values(
        &mut self,
        entity: ObjectId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        let state = self
            .entities
            .get_mut(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        let indices = check_values(&state.schema, &values)?;
        for (index, value) in indices.into_iter().zip(values) {
            state.store(index, value.value);
        }
        if state.wire == Wire::Introduced && !state.queued {
            state.queued = true;
            self.dirty.push_back(entity);
        }
        Ok(())
    }

    /// [`Self::set_values`] of one property (no list to build).
    pub fn set_value(
        &mut self,
        entity: ObjectId<Local>,
        key: &PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        let state = self
            .entities
            .get_mut(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        let index = check_value(&state.schema, key, &value)?;
        state.store(index, value);
        if state.wire == Wire::Introduced && !state.queued {
            state.queued = true;
            self.dirty.push_back(entity);
        }
        Ok(())
    }

    /// Marks every subscribed property of an introduced entity dirty again;
    /// returns the plain size of those values.
    pub fn refresh(&mut self, entity: ObjectId<Local>) -> Result<usize, CommandError> {
        let state = self
            .entities
            .get_mut(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        if state.wire != Wire::Introduced {
            return Ok(0);
        }
        let Some(local_type) = self
            .types
            .get(&state.type_id)
            .filter(|t| t.subscription.as_ref().is_some_and(|s| !s.is_empty()))
        else {
            return Ok(0);
        };
        let mut bytes = 0;
        for (index, slot) in state.slots.iter() {
            if local_type.subscribes(index) {
                state.dirty.insert(index);
                bytes += slot.value.encoded_len();
            }
        }
        if bytes > 0 && !state.queued {
            state.queued = true;
            self.dirty.push_back(entity);
        }
        Ok(bytes)
    }

    /// Removes an entity; a remove-entity is queued if the peer knows it.
    pub fn remove_entity(&mut self, entity: ObjectId<Local>) -> Result<(), CommandError> {
        let state = self
            .entities
            .remove(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        let retired = |remove_sequence| Retired {
            schema: state.schema.clone(),
            remove_sequence,
            sent: None,
            acknowledged_in: None,
        };
        match state.wire {
            Wire::Introduced => {
                self.pending.push_back(Pending::Remove(entity));
                self.retired.insert(entity, retired(None));
            }
            Wire::Withdrawn { remove_sequence } => {
                // The remove is queued or sent already; it now retires the id.
                self.retired.insert(entity, retired(remove_sequence));
            }
            // Never on the wire (a queued introduce is skipped): free at once.
            Wire::Waiting | Wire::IntroduceQueued => self.free_ids.push_back(entity),
        }
        Ok(())
    }

    /// The peer subscribed to one of our types. Errors are logic errors.
    pub fn on_subscribe(
        &mut self,
        type_id: TypeId<Local>,
        components: &[ComponentSubscription],
    ) -> Result<Vec<PropertyKey>, String> {
        let local_type = self
            .types
            .get_mut(&type_id)
            .ok_or_else(|| format!("subscription to unknown type {type_id}"))?;
        let mut keys = BTreeSet::new();
        for subscription in components {
            // Ids this URI's schema does not declare are ignored, not
            // refused (docs/less-wire.md §10): a peer that knows a later
            // version of a type may ask for what this one never sends.
            let Some(component) = local_type.schema.component(&subscription.component) else {
                continue;
            };
            for property in &subscription.properties {
                let key = PropertyKey {
                    component: subscription.component.clone(),
                    property: *property,
                };
                match component.member(*property).map(|m| &m.kind) {
                    Some(crate::less::schema::MemberKind::Property(_)) => keys.insert(key),
                    None => false,
                    Some(_) => {
                        return Err(format!("subscription to {key}, which is not a property"))
                    }
                };
            }
        }
        let previous = local_type
            .subscription
            .replace(keys.clone())
            .unwrap_or_default();
        // By property index: subscribed now, and newly subscribed.
        let schema = local_type.schema.clone();
        let mut added = IndexSet::new();
        local_type.subscribed.clear();
        for key in &keys {
            if let Some(index) = schema.property_index(key) {
                local_type.subscribed.insert(index);
                if !previous.contains(key) {
                    added.insert(index);
                }
            }
        }
        let members: Vec<ObjectId<Local>> = self
            .entities
            .iter()
            .filter(|(_, e)| e.type_id == type_id)
            .map(|(id, _)| *id)
            .collect();
        for id in members {
            let Some(entity) = self.entities.get_mut(&id) else {
                continue;
            };
            match entity.wire {
                Wire::Waiting => self.queue_introduce(id),
                Wire::Introduced => {
                    let mut any = false;
                    for index in entity.slots.indices() {
                        if added.contains(index) {
                            entity.dirty.insert(index);
                            any = true;
                        }
                    }
                    if any && !entity.queued {
                        entity.queued = true;
                        self.dirty.push_back(id);
                    }
                }
                Wire::IntroduceQueued | Wire::Withdrawn { .. } => {}
            }
        }
        Ok(keys.into_iter().collect())
    }

    /// The peer unsubscribed from one of our types: withdraw its entities.
    pub fn on_unsubscribe(&mut self, type_id: TypeId<Local>) -> Result<(), String> {
        let local_type = self
            .types
            .get_mut(&type_id)
            .ok_or_else(|| format!("unsubscription from unknown type {type_id}"))?;
        local_type.subscription = None;
        local_type.subscribed.clear();
        let members: Vec<ObjectId<Local>> = self
            .entities
            .iter()
            .filter(|(_, e)| e.type_id == type_id)
            .map(|(id, _)| *id)
            .collect();
        for id in members {
            let Some(entity) = self.entities.get_mut(&id) else {
                continue;
            };
            match entity.wire {
                Wire::Introduced => {
                    entity.wire = Wire::Withdrawn {
                        remove_sequence: None,
                    };
                    self.pending.push_back(Pending::Remove(id));
                }
                Wire::IntroduceQueued => entity.wire = Wire::Waiting,
                Wire::Waiting | Wire::Withdrawn { .. } => {}
            }
        }
        Ok(())
    }

    /// The peer asked for a snapshot of one of our entities.
    pub fn on_request_entity(&mut self, entity: ObjectId<Local>) {
        if self
            .entities
            .get(&entity)
            .is_some_and(|e| e.wire == Wire::Introduced)
        {
            self.pending.push_back(Pending::Introduce {
                entity,
                snapshot: true,
            });
        }
    }

    /// Records that the remove-entity of `entity` went out (in packet
    /// `sequence`, or on the ordered stream when `None`).
    pub fn on_remove_sent(&mut self, entity: ObjectId<Local>, sequence: Option<u64>, now: Time) {
        if let Some(record) = self.retired.get_mut(&entity) {
            record.remove_sequence = sequence;
            record.sent = Some(now);
        } else if let Some(state) = self.entities.get_mut(&entity) {
            if let Wire::Withdrawn { .. } = state.wire {
                match sequence {
                    Some(sequence) => {
                        state.wire = Wire::Withdrawn {
                            remove_sequence: Some(sequence),
                        };
                        self.withdrawn_sent.insert(entity);
                    }
                    // On an ordered stream the peer sees the remove first.
                    None => state.wire = Wire::Waiting,
                }
                if sequence.is_none()
                    && self
                        .types
                        .get(&state.type_id)
                        .is_some_and(|t| t.subscription.is_some())
                {
                    self.queue_introduce(entity);
                }
            }
        }
    }

    /// Datagram mode: moves ids forward after acknowledgements. `oldest_unacked`
    /// is the send window's; `peer_sequence` the sequence of the peer packet
    /// whose acknowledgement fields were just processed (if any);
    /// `receive_lowest` the receive window's `L`.
    pub fn release_acknowledged(
        &mut self,
        oldest_unacked: u64,
        peer_sequence: Option<u64>,
        receive_lowest: u64,
    ) {
        let mut freed = Vec::new();
        for (id, record) in self.retired.iter_mut() {
            let acknowledged = record.remove_sequence.is_some_and(|r| r < oldest_unacked);
            if acknowledged && record.acknowledged_in.is_none() {
                record.acknowledged_in = peer_sequence;
            }
            // Every peer packet sent before the peer saw the acknowledgement
            // has arrived: no tweak of the old entity can still be in flight.
            if record.acknowledged_in.is_some_and(|a| receive_lowest > a) {
                freed.push(*id);
            }
        }
        for id in freed {
            self.retired.remove(&id);
            self.free_ids.push_back(id);
        }
        let mut reintroduce = Vec::new();
        self.withdrawn_sent.retain(|id| {
            let Some(entity) = self.entities.get_mut(id) else {
                return false;
            };
            match entity.wire {
                Wire::Withdrawn {
                    remove_sequence: Some(r),
                } if r < oldest_unacked => {
                    entity.wire = Wire::Waiting;
                    reintroduce.push(*id);
                    false
                }
                Wire::Withdrawn {
                    remove_sequence: Some(_),
                } => true,
                _ => false,
            }
        });
        for id in reintroduce {
            let subscribed = self
                .entities
                .get(&id)
                .and_then(|e| self.types.get(&e.type_id))
                .is_some_and(|t| t.subscription.is_some());
            if subscribed {
                self.queue_introduce(id);
            }
        }
    }

    /// Stream mode: frees ids whose quarantine has passed.
    pub fn release_quarantined(&mut self, now: Time, quarantine: std::time::Duration) {
        let expired: Vec<ObjectId<Local>> = self
            .retired
            .iter()
            .filter(|(_, r)| {
                r.sent
                    .is_some_and(|sent| now.saturating_duration_since(sent) >= quarantine)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.retired.remove(&id);
            self.free_ids.push_back(id);
        }
    }

    /// When the next quarantine ends (stream mode).
    pub fn next_quarantine_end(&self, quarantine: std::time::Duration) -> Option<Time> {
        self.retired
            .values()
            .filter_map(|r| r.sent)
            .min()
            .map(|sent| sent + quarantine)
    }

    /// The schema of one of our entities, or of a retired id.
    pub fn schema_of(&self, entity: ObjectId<Local>) -> Option<Arc<TypeSchema>> {
        match self.entities.get(&entity) {
            Some(state) => Some(state.schema.clone()),
            None => self.retired.get(&entity).map(|r| r.schema.clone()),
        }
    }

    /// Queues a tweak (coalesced per entity and property).
    pub fn tweak(&mut self, entity: ObjectId<Remote>, key: PropertyKey, value: Value) {
        let slot = self
            .tweaks
            .entry((entity, key.clone()))
            .or_insert(TweakSlot {
                value: Value::Null,
                dirty: false,
                last_packet: None,
            });
        slot.value = value;
        if !slot.dirty {
            slot.dirty = true;
            self.dirty_tweaks.push_back((entity, key));
        }
    }

    /// Forgets tweaks of a peer entity that went away.
    pub fn forget_tweaks(&mut self, entity: ObjectId<Remote>) {
        self.tweaks.retain(|(target, _), _| *target != entity);
        self.dirty_tweaks.retain(|(target, _)| *target != entity);
    }

    /// True if a new packet would carry something.
    pub fn has_new_data(&self) -> bool {
        !self.pending.is_empty() || !self.dirty.is_empty() || !self.dirty_tweaks.is_empty()
    }

    /// Entities with changed values, tweaks and other messages waiting: at
    /// least the number of messages the next packets carry.
    pub fn queued_messages(&self) -> usize {
        self.pending.len() + self.dirty.len() + self.dirty_tweaks.len()
    }
}
