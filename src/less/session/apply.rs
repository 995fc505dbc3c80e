//! The receiver's rules, one message at a time (docs/less-wire.md §9,
//! §12): what each message the peer sends does to this end's view of its
//! types and entities, and to this node's own entities. A logic error ends
//! the session; a request this node cannot serve is answered with a
//! failure. `incoming` decides when a message is applied (in order, or on
//! arrival).

use smallvec::SmallVec;

use super::event::Event;
use super::incoming::{RemoteEntity, RemoteType, Violation};
use super::outgoing::{Pending, Wire};
use super::Session;
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::message::{Message, MethodStatus};
use crate::less::property_list::{FieldValue, PropertyValue};
use crate::less::property_map::PropertyMap;
use crate::less::schema::{PropertyIndex, TypeSchema, UPDATE_RATE};
use crate::less::value::Value;

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
    /// Applies one decoded message from the peer.
    pub(super) fn apply(
        &mut self,
        message: Message<Remote, Local>,
        timestamp: i64,
    ) -> Result<(), Violation> {
        match message {
            Message::IntroduceType { type_id, uri } => self.on_introduce_type(type_id, uri),
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
                Ok(())
            }
            Message::UnsubscribeType { type_id } => {
                self.local
                    .on_unsubscribe(type_id)
                    .map_err(Violation::Logic)?;
                self.push_event(Event::TypeUnsubscribed { type_id });
                Ok(())
            }
            Message::IntroduceEntity {
                type_id,
                entity,
                values,
            } => self.on_introduce_entity(type_id, entity, values, timestamp),
            Message::RemoveEntity { entity } => {
                if self.remote.entities.remove(&entity).is_none() {
                    return Err(Violation::Logic(format!(
                        "removal of unknown entity {entity}"
                    )));
                }
                self.local.forget_tweaks(entity);
                self.push_event(Event::EntityRemoved { entity });
                Ok(())
            }
            Message::UpdateEntity { entity, values } => {
                self.on_update_entity(entity, values, timestamp)
            }
            Message::RequestEntity { entity } => {
                self.local.on_request_entity(entity);
                Ok(())
            }
            Message::MethodInvocation {
                request,
                entity,
                method,
                arguments,
            } => self.on_method_invocation(request, entity, method, arguments),
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
                Ok(())
            }
            Message::Interaction {
                interaction,
                values,
            } => {
                self.push_event(Event::Interaction {
                    interaction,
                    values,
                });
                Ok(())
            }
            Message::TweakEntity {
                entity,
                property,
                value,
            } => self.on_tweak(entity, property, value, timestamp),
            Message::ConnectionControl { values } => self.on_connection_control(values),
        }
    }

    /// IntroduceType: a type the peer will send entities of, with its schema
    /// if this node knows the URI; introduced again only as the same URI.
    fn on_introduce_type(&mut self, type_id: TypeId<Remote>, uri: String) -> Result<(), Violation> {
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
        Ok(())
    }

    /// IntroduceEntity: an entity of a type this node subscribed to, with the
    /// values of the properties it subscribed to (again: its newer values).
    fn on_introduce_entity(
        &mut self,
        type_id: TypeId<Remote>,
        entity: ObjectId<Remote>,
        mut values: Vec<PropertyValue>,
        timestamp: i64,
    ) -> Result<(), Violation> {
        self.stats.values_received += values.len() as u64;
        let remote_type = self
            .remote
            .types
            .get(&type_id)
            .ok_or_else(|| Violation::Logic(format!("entity of unknown type {type_id}")))?;
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
        Ok(())
    }

    /// UpdateEntity: newer values of a known entity's subscribed properties.
    fn on_update_entity(
        &mut self,
        entity: ObjectId<Remote>,
        mut values: Vec<PropertyValue>,
        timestamp: i64,
    ) -> Result<(), Violation> {
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
        Ok(())
    }

    /// MethodInvocation on one of this node's introduced entities: handed to
    /// the application, or answered with a failure (unknown entity or
    /// method, arguments that do not match).
    fn on_method_invocation(
        &mut self,
        request: RequestId<Remote>,
        entity: ObjectId<Local>,
        method: PropertyKey,
        arguments: Vec<Value>,
    ) -> Result<(), Violation> {
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
        Ok(())
    }

    /// TweakEntity: the peer's edit of one of this node's entities, newer
    /// than the last tweak of that property.
    fn on_tweak(
        &mut self,
        entity: ObjectId<Local>,
        property: PropertyKey,
        value: Value,
        timestamp: i64,
    ) -> Result<(), Violation> {
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
        Ok(())
    }

    /// ConnectionControl: the peer's connection fields (its update rate).
    fn on_connection_control(&mut self, values: Vec<FieldValue>) -> Result<(), Violation> {
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
}
