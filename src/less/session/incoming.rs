//! Receiver-side state and the rules for applying the peer's messages.
//!
//! docs/less-wire.md §9: update-entity and tweak-entity take effect on arrival when
//! their entity is known, subject to the per-property timestamp rule (draft
//! section 2: "a received older packet with a property set will not have any
//! new effect on the property in question"). Every other message, and any
//! message that cannot be decoded yet because its entity or type is not known,
//! takes effect only in sequence order: held while an earlier packet is
//! missing. A framing or logic error ends the session; a permission error
//! answers a failure method-result (docs/less-wire.md §12). This module owns the
//! peer's types and entities as this end sees them, and the held packets.

use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::event::Event;
use super::outgoing::{LocalState, Pending, Wire};
use super::Session;
use crate::less::codec::{DecodeError, Reader};
use crate::less::encoding::{EncodingId, LinkEncodings};
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::message::{DecodeContext, Message, MethodStatus};
use crate::less::property_list::PropertyValue;
use crate::less::property_map::PropertyMap;
use crate::less::schema::{ConnectionSchema, PropertyIndex, TypeSchema, UPDATE_RATE};
use crate::less::value::Value;

/// A type the peer introduced, and our subscription to it.
#[derive(Clone, Debug)]
pub(super) struct RemoteType {
    pub uri: String,
    pub schema: Option<Arc<TypeSchema>>,
    /// By property index: what we are subscribed to now (all false while
    /// unsubscribed).
    pub subscribed: Vec<bool>,
    /// By property index: every property we ever subscribed to: the peer
    /// may still send values of a property we have since dropped (they are
    /// ignored, not an error).
    pub ever: Vec<bool>,
    /// We subscribed at some time (entities may be introduced).
    pub was_subscribed: bool,
    /// The link's encoding of each property, by index (with a schema).
    pub encodings: Option<Arc<[Option<EncodingId>]>>,
}

/// An entity the peer introduced.
#[derive(Clone, Debug)]
pub(super) struct RemoteEntity {
    pub type_id: TypeId<Remote>,
    pub schema: Arc<TypeSchema>,
    /// Timestamp of the packet that last set each property, by index.
    pub stamps: PropertyMap<i64>,
    /// The type's encodings (see [`RemoteType::encodings`]).
    pub encodings: Option<Arc<[Option<EncodingId>]>>,
}

/// An out-of-order packet waiting for the ones before it.
#[derive(Clone, Debug)]
pub(super) struct Held {
    pub timestamp: i64,
    /// Decoded messages that must wait for sequence order.
    pub messages: Vec<Message<Remote, Local>>,
    /// Undecodable yet (they need an entity or type from an earlier packet):
    /// the remaining bytes and message count.
    pub rest: Option<(Vec<u8>, usize)>,
    pub size: usize,
}

#[derive(Debug, Default)]
pub(super) struct RemoteState {
    pub types: BTreeMap<TypeId<Remote>, RemoteType>,
    /// Hashed: every update looks its object up; nothing walks them.
    pub entities: foldhash::HashMap<ObjectId<Remote>, RemoteEntity>,
    /// Invocations from the peer awaiting our result.
    pub incoming_requests: BTreeSet<RequestId<Remote>>,
    /// Our invocations awaiting the peer's result.
    pub outgoing_requests: BTreeMap<RequestId<Local>, ObjectId<Remote>>,
    /// Timestamp of the last tweak applied per property of our entities.
    pub tweak_stamps: BTreeMap<(ObjectId<Local>, PropertyKey), i64>,
    pub held: BTreeMap<u64, Held>,
    pub held_bytes: usize,
}

/// The session's view for decoding the peer's messages.
pub(super) struct Context<'a> {
    pub local: &'a LocalState,
    pub remote: &'a RemoteState,
    pub connection: &'a ConnectionSchema,
    pub encodings: &'a LinkEncodings,
}

impl DecodeContext<Remote, Local> for Context<'_> {
    fn sender_type(&self, type_id: TypeId<Remote>) -> Option<Arc<TypeSchema>> {
        self.remote.types.get(&type_id)?.schema.clone()
    }
    fn sender_entity_type(&self, entity: ObjectId<Remote>) -> Option<Arc<TypeSchema>> {
        Some(self.remote.entities.get(&entity)?.schema.clone())
    }
    fn receiver_entity_type(&self, entity: ObjectId<Local>) -> Option<Arc<TypeSchema>> {
        self.local.schema_of(entity)
    }
    fn sender_type_encodings(&self, type_id: TypeId<Remote>) -> Option<Arc<[Option<EncodingId>]>> {
        self.remote.types.get(&type_id)?.encodings.clone()
    }
    fn sender_entity_encodings(
        &self,
        entity: ObjectId<Remote>,
    ) -> Option<Arc<[Option<EncodingId>]>> {
        self.remote.entities.get(&entity)?.encodings.clone()
    }
    fn connection(&self) -> &ConnectionSchema {
        self.connection
    }
    fn encodings(&self) -> &LinkEncodings {
        self.encodings
    }
}

/// A breach of the protocol by the authenticated peer.
#[derive(Debug)]
pub(super) enum Violation {
    Framing(String),
    Logic(String),
}

fn decode_violation(error: DecodeError) -> Violation {
    match error {
        DecodeError::Unresolved(what) => Violation::Logic(format!("reference to unknown {what}")),
        DecodeError::UndeclaredProperty(what) => {
            Violation::Logic(format!("undeclared property {what}"))
        }
        other => Violation::Framing(other.to_string()),
    }
}

/// The property indices of decoded values (decoded against `schema`, so
/// every key has one), in order.
fn indices_of(
    schema: &TypeSchema,
    values: &[PropertyValue],
) -> Result<SmallVec<[PropertyIndex; 8]>, Violation> {
    values
        .iter()
        .map(|value| {
            schema
                .property_index(&value.key)
                .ok_or_else(|| Violation::Logic(format!("undeclared property {}", value.key)))
        })
        .collect()
}

/// Every value must belong to a property we subscribed to at some time.
fn check_subscribed(
    ever: &[bool],
    values: &[PropertyValue],
    indices: &[PropertyIndex],
) -> Result<(), Violation> {
    match indices
        .iter()
        .position(|index| !ever.get(index.get()).copied().unwrap_or(false))
    {
        Some(position) => Err(Violation::Logic(format!(
            "value of unsubscribed property {}",
            values[position].key
        ))),
        None => Ok(()),
    }
}

/// Keeps the values newer than what last set each property (recording
/// their stamp) that we are subscribed to now.
fn apply_stamps(
    stamps: &mut PropertyMap<i64>,
    values: &mut Vec<PropertyValue>,
    indices: &[PropertyIndex],
    timestamp: i64,
    subscribed: &[bool],
) {
    let mut position = 0;
    values.retain(|_| {
        let index = indices[position];
        position += 1;
        // Equal timestamps come from one packet, where a later message wins.
        let stamp = stamps.get_or_insert_with(index, || i64::MIN);
        let newer = timestamp >= *stamp;
        if newer {
            *stamp = timestamp;
        }
        newer && subscribed.get(index.get()).copied().unwrap_or(false)
    });
}

impl Session {
    fn decode_one(&self, reader: &mut Reader<'_>) -> Result<Message<Remote, Local>, DecodeError> {
        let context = Context {
            local: &self.local,
            remote: &self.remote,
            connection: &self.config.connection,
            encodings: &self.config.encodings,
        };
        Message::decode(reader, &context)
    }

    /// Decodes and applies every message of a packet whose predecessors have
    /// all been processed.
    pub(super) fn apply_in_order(
        &mut self,
        timestamp: i64,
        count: usize,
        bytes: &[u8],
    ) -> Result<(), Violation> {
        let mut reader = Reader::new(bytes);
        for _ in 0..count {
            let message = self.decode_one(&mut reader).map_err(decode_violation)?;
            self.apply(message, timestamp)?;
        }
        reader.expect_end().map_err(decode_violation)
    }

    /// Handles a packet that arrived while an earlier one is missing.
    pub(super) fn hold_out_of_order(
        &mut self,
        sequence: u64,
        timestamp: i64,
        count: usize,
        bytes: &[u8],
    ) -> Result<(), Violation> {
        let mut reader = Reader::new(bytes);
        let mut held = Held {
            timestamp,
            messages: Vec::new(),
            rest: None,
            size: bytes.len(),
        };
        for index in 0..count {
            let start = reader.position();
            match self.decode_one(&mut reader) {
                Ok(message) if message.carries_properties_only() => {
                    self.apply(message, timestamp)?
                }
                Ok(message) => held.messages.push(message),
                Err(DecodeError::Unresolved(_)) => {
                    held.rest = Some((bytes[start..].to_vec(), count - index));
                    break;
                }
                Err(error) => return Err(decode_violation(error)),
            }
        }
        if held.rest.is_none() {
            reader.expect_end().map_err(decode_violation)?;
        }
        self.remote.held_bytes += held.size;
        self.remote.held.insert(sequence, held);
        Ok(())
    }

    /// Processes held packets with sequences in `from..to`, in order.
    pub(super) fn release_held(&mut self, from: u64, to: u64) -> Result<(), Violation> {
        for sequence in from..to {
            let Some(held) = self.remote.held.remove(&sequence) else {
                continue;
            };
            self.remote.held_bytes -= held.size;
            for message in held.messages {
                self.apply(message, held.timestamp)?;
            }
            if let Some((bytes, count)) = held.rest {
                self.apply_in_order(held.timestamp, count, &bytes)?;
            }
        }
        Ok(())
    }

    fn answer_failure(&mut self, request: RequestId<Remote>, status: MethodStatus, text: &str) {
        self.local
            .pending
            .push_back(Pending::Message(Message::MethodResult {
                request,
                status,
                value: Value::String(text.to_string()),
            }));
    }

    /// Applies one decoded message from the peer.
    pub(super) fn apply(
        &mut self,
        message: Message<Remote, Local>,
        timestamp: i64,
    ) -> Result<(), Violation> {
        match message {
            Message::IntroduceType { type_id, uri } => {
                if let Some(known) = self.remote.types.get(&type_id) {
                    if known.uri != uri {
                        return Err(Violation::Logic(format!(
                            "type {type_id} introduced again as {uri}"
                        )));
                    }
                    return Ok(());
                }
                let schema = self.config.schemas.resolve(&uri);
                let count = schema.as_ref().map_or(0, |s| s.property_count());
                self.remote.types.insert(
                    type_id,
                    RemoteType {
                        uri: uri.clone(),
                        encodings: schema.as_ref().map(|s| self.config.encodings.table(s)),
                        schema: schema.clone(),
                        subscribed: vec![false; count],
                        ever: vec![false; count],
                        was_subscribed: false,
                    },
                );
                self.push_event(Event::TypeIntroduced {
                    type_id,
                    uri,
                    schema,
                });
            }
            Message::SubscribeType {
                type_id,
                components,
            } => {
                let properties = self
                    .local
                    .on_subscribe(type_id, &components)
                    .map_err(Violation::Logic)?;
                self.push_event(Event::TypeSubscribed {
                    type_id,
                    properties,
                });
            }
            Message::UnsubscribeType { type_id } => {
                self.local
                    .on_unsubscribe(type_id)
                    .map_err(Violation::Logic)?;
                self.push_event(Event::TypeUnsubscribed { type_id });
            }
            Message::IntroduceEntity {
                type_id,
                entity,
                mut values,
            } => {
                self.stats.values_received += values.len() as u64;
                let remote_type =
                    self.remote.types.get(&type_id).ok_or_else(|| {
                        Violation::Logic(format!("entity of unknown type {type_id}"))
                    })?;
                if !remote_type.was_subscribed {
                    return Err(Violation::Logic(format!(
                        "entity {entity} of unsubscribed type {type_id}"
                    )));
                }
                let schema = remote_type
                    .schema
                    .clone()
                    .ok_or_else(|| Violation::Logic("type without schema".into()))?;
                let indices = indices_of(&schema, &values)?;
                check_subscribed(&remote_type.ever, &values, &indices)?;
                let subscribed = &remote_type.subscribed;
                match self.remote.entities.get_mut(&entity) {
                    Some(known) if known.type_id != type_id => {
                        return Err(Violation::Logic(format!(
                            "entity {entity} introduced again with another type"
                        )));
                    }
                    Some(known) => {
                        apply_stamps(
                            &mut known.stamps,
                            &mut values,
                            &indices,
                            timestamp,
                            subscribed,
                        );
                        if !values.is_empty() {
                            self.push_event(Event::EntityUpdated { entity, values });
                        }
                    }
                    None => {
                        let mut stamps = PropertyMap::with_capacity(indices.len());
                        apply_stamps(&mut stamps, &mut values, &indices, timestamp, subscribed);
                        let encodings = remote_type.encodings.clone();
                        self.remote.entities.insert(
                            entity,
                            RemoteEntity {
                                type_id,
                                schema,
                                stamps,
                                encodings,
                            },
                        );
                        self.push_event(Event::EntityIntroduced {
                            entity,
                            type_id,
                            values,
                        });
                    }
                }
            }
            Message::RemoveEntity { entity } => {
                if self.remote.entities.remove(&entity).is_none() {
                    return Err(Violation::Logic(format!(
                        "removal of unknown entity {entity}"
                    )));
                }
                self.local.forget_tweaks(entity);
                self.push_event(Event::EntityRemoved { entity });
            }
            Message::UpdateEntity { entity, mut values } => {
                self.stats.values_received += values.len() as u64;
                let Some(known) = self.remote.entities.get_mut(&entity) else {
                    return Err(Violation::Logic(format!(
                        "update of unknown entity {entity}"
                    )));
                };
                let remote_type = self
                    .remote
                    .types
                    .get(&known.type_id)
                    .ok_or_else(|| Violation::Logic("entity of a vanished type".into()))?;
                let indices = indices_of(&known.schema, &values)?;
                check_subscribed(&remote_type.ever, &values, &indices)?;
                apply_stamps(
                    &mut known.stamps,
                    &mut values,
                    &indices,
                    timestamp,
                    &remote_type.subscribed,
                );
                if !values.is_empty() {
                    self.push_event(Event::EntityUpdated { entity, values });
                }
            }
            Message::RequestEntity { entity } => self.local.on_request_entity(entity),
            Message::MethodInvocation {
                request,
                entity,
                method,
                arguments,
            } => {
                if !self.remote.incoming_requests.insert(request) {
                    return Err(Violation::Logic(format!(
                        "request id {request} reused while pending"
                    )));
                }
                let target = self
                    .local
                    .entities
                    .get(&entity)
                    .filter(|e| e.wire == Wire::Introduced);
                let Some(target) = target else {
                    self.remote.incoming_requests.remove(&request);
                    self.answer_failure(request, MethodStatus::NOT_FOUND, "no such entity");
                    return Ok(());
                };
                let Some(signature) = target.schema.method(&method) else {
                    self.remote.incoming_requests.remove(&request);
                    self.answer_failure(request, MethodStatus::NOT_FOUND, "no such method");
                    return Ok(());
                };
                if let Some(declared) = &signature.arguments {
                    let matches = declared.len() == arguments.len()
                        && declared
                            .iter()
                            .zip(&arguments)
                            .all(|(t, v)| v.conforms_to(t));
                    if !matches {
                        self.remote.incoming_requests.remove(&request);
                        self.answer_failure(
                            request,
                            MethodStatus::BAD_REQUEST,
                            "arguments do not match the method",
                        );
                        return Ok(());
                    }
                }
                self.push_event(Event::MethodInvoked {
                    request,
                    entity,
                    method,
                    arguments,
                });
            }
            Message::MethodResult {
                request,
                status,
                value,
            } => {
                if self.remote.outgoing_requests.remove(&request).is_none() {
                    return Err(Violation::Logic(format!(
                        "result for unknown request {request}"
                    )));
                }
                self.push_event(Event::MethodResult {
                    request,
                    status,
                    value,
                });
            }
            Message::Interaction {
                interaction,
                values,
            } => self.push_event(Event::Interaction {
                interaction,
                values,
            }),
            Message::TweakEntity {
                entity,
                property,
                value,
            } => {
                // A tweak of an entity we removed (sent before the peer saw the
                // removal) is dropped.
                if !self.local.entities.contains_key(&entity) {
                    return Ok(());
                }
                let stamp = self
                    .remote
                    .tweak_stamps
                    .entry((entity, property.clone()))
                    .or_insert(i64::MIN);
                if timestamp >= *stamp {
                    *stamp = timestamp;
                    self.push_event(Event::Tweaked {
                        entity,
                        property,
                        value,
                    });
                }
            }
            Message::ConnectionControl { values } => {
                for field in &values {
                    if field.id == UPDATE_RATE {
                        match field.value {
                            Value::Integer(rate) if rate >= 0 => {
                                self.peer_update_rate = u32::try_from(rate).ok().filter(|&r| r > 0);
                            }
                            _ => {
                                return Err(Violation::Logic(
                                    "update-rate must be a non-negative INTEGER".into(),
                                ))
                            }
                        }
                    }
                }
                self.push_event(Event::ConnectionControl { values });
            }
        }
        Ok(())
    }
}
