//! The application's commands: types introduced and subscribed, entities
//! introduced, updated, refreshed and removed, method calls and results,
//! tweaks, interactions and connection control. Each is checked and queued;
//! the values leave with the next transmit (`transmit`).

use std::collections::{BTreeMap, BTreeSet};

use super::incoming::RemoteType;
use super::outgoing::check_value;
use super::{CloseReason, CommandError, Session};
use crate::less::ids::{InteractionId, Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::message::{Message, MethodStatus};
use crate::less::property_list::{ComponentSubscription, FieldValue, PropertyValue};
use crate::less::schema::UPDATE_RATE;
use crate::less::value::Value;

impl Session {
    /// Introduces one of our types (by schema URI) to the peer.
    pub fn introduce_type(&mut self, uri: &str) -> Result<TypeId<Local>, CommandError> {
        self.check_open()?;
        let schema = self
            .config
            .schemas
            .resolve(uri)
            .ok_or_else(|| CommandError::UnknownSchema(uri.to_string()))?;
        Ok(self.local.introduce_type(schema))
    }

    /// Subscribes to properties of a type the peer introduced (replacing any
    /// earlier subscription to it). Only these properties will be sent to us.
    pub fn subscribe_type(
        &mut self,
        type_id: TypeId<Remote>,
        properties: &[PropertyKey],
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let remote_type = self
            .remote
            .types
            .get_mut(&type_id)
            .ok_or(CommandError::UnknownType)?;
        let schema = remote_type
            .schema
            .clone()
            .ok_or_else(|| CommandError::UnknownSchema(remote_type.uri.clone()))?;
        let keys: BTreeSet<PropertyKey> = properties.iter().cloned().collect();
        if let Some(key) = keys.iter().find(|key| schema.property_type(key).is_none()) {
            return Err(CommandError::UnknownProperty(key.clone()));
        }
        let mut by_component: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for key in &keys {
            by_component
                .entry(key.component.clone())
                .or_default()
                .push(key.property);
        }
        let components = by_component
            .into_iter()
            .map(|(component, properties)| ComponentSubscription {
                component,
                properties,
            })
            .collect();
        remote_type.subscribed.iter_mut().for_each(|s| *s = false);
        for key in &keys {
            // Every key is a property of the schema (checked above).
            if let Some(index) = schema.property_index(key) {
                remote_type.subscribed[index.get()] = true;
                remote_type.ever[index.get()] = true;
            }
        }
        remote_type.was_subscribed = true;
        self.queue_message(Message::SubscribeType {
            type_id,
            components,
        })
    }

    /// Stops receiving a type; the peer removes its entities of it.
    pub fn unsubscribe_type(&mut self, type_id: TypeId<Remote>) -> Result<(), CommandError> {
        self.check_open()?;
        let remote_type: &mut RemoteType = self
            .remote
            .types
            .get_mut(&type_id)
            .ok_or(CommandError::UnknownType)?;
        remote_type.subscribed.iter_mut().for_each(|s| *s = false);
        self.queue_message(Message::UnsubscribeType { type_id })
    }

    /// Reads our object `object`'s state, so that it is in the cache when
    /// a property of it is updated (see `Scene::warm`).
    pub fn warm_object(&self, object: ObjectId<Local>) {
        let Some(entity) = self.local.entities.get(&object) else {
            return;
        };
        // The object's state spans several cache lines: read a field of
        // each part an update reads (its schema, slot indices, dirty set,
        // queue flag), not only the slots.
        std::hint::black_box((
            std::sync::Arc::as_ptr(&entity.schema),
            entity.slots.len(),
            entity.dirty.is_empty(),
            entity.queued,
            entity.slots.values().next().map(|slot| slot.last_packet),
        ));
    }

    /// An object id that is free and safe to use (never one whose removal
    /// the peer may not have seen yet).
    pub fn allocate_object_id(&mut self) -> ObjectId<Local> {
        self.local.allocate_object_id()
    }

    /// Presents a new entity; it is introduced once the peer subscribes to
    /// its type, with the subscribed properties among `values`.
    pub fn introduce_entity(
        &mut self,
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.introduce_entity(entity, type_id, values)
    }

    /// Sets property values of one of our entities; sent coalesced (latest
    /// value only) with the next transmit.
    pub fn update_entity(
        &mut self,
        entity: ObjectId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.set_values(entity, values)
    }

    /// [`Session::update_entity`] of one property.
    pub fn update_property(
        &mut self,
        entity: ObjectId<Local>,
        key: &PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.set_value(entity, key, value)
    }

    /// Queues the current value of every subscribed property of one of our
    /// introduced entities again, unchanged (docs/less-wire.md §16.7: "rebroadcast
    /// everything every x seconds ... if packets are lost"). Returns the
    /// plain size of the values queued, 0 for an entity the peer does not
    /// know yet (its introduction carries everything).
    pub fn refresh_entity(&mut self, entity: ObjectId<Local>) -> Result<usize, CommandError> {
        self.check_open()?;
        self.local.refresh(entity)
    }

    /// Our objects in ascending id order, starting after `after` and
    /// wrapping around once (a refresh lap, docs/less-wire.md §16.7), without collecting
    /// or sorting them.
    pub fn local_objects_after(
        &self,
        after: Option<ObjectId<Local>>,
    ) -> impl Iterator<Item = ObjectId<Local>> + '_ {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let entities = &self.local.entities;
        let (tail, head) = match after {
            Some(last) => (
                entities.ids_in((Excluded(last), Unbounded)),
                entities.ids_in((Unbounded, Included(last))),
            ),
            None => (
                entities.ids_in((Unbounded, Unbounded)),
                entities.ids_in((Unbounded, Excluded(ObjectId::new(0)))),
            ),
        };
        tail.chain(head)
    }

    /// Sets one property value (see [`Self::update_entity`]).
    pub fn set_property(
        &mut self,
        entity: ObjectId<Local>,
        key: PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.update_entity(entity, vec![PropertyValue { key, value }])
    }

    /// Removes one of our entities.
    pub fn remove_entity(&mut self, entity: ObjectId<Local>) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.remove_entity(entity)?;
        self.remote
            .tweak_stamps
            .retain(|(target, _), _| *target != entity);
        Ok(())
    }

    /// Asks the peer for a fresh snapshot of one of its entities.
    pub fn request_entity(&mut self, entity: ObjectId<Remote>) -> Result<(), CommandError> {
        self.check_open()?;
        if !self.remote.entities.contains_key(&entity) {
            return Err(CommandError::UnknownEntity);
        }
        self.queue_message(Message::RequestEntity { entity })
    }

    /// Invokes a method of a peer entity; the answer arrives as
    /// [`Event::MethodResult`] with the returned request id.
    pub fn invoke_method(
        &mut self,
        entity: ObjectId<Remote>,
        method: PropertyKey,
        arguments: Vec<Value>,
    ) -> Result<RequestId<Local>, CommandError> {
        self.check_open()?;
        let target = self
            .remote
            .entities
            .get(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        let signature = target
            .schema
            .method(&method)
            .ok_or_else(|| CommandError::UnknownMethod(method.clone()))?;
        if let Some(declared) = &signature.arguments {
            let matches = declared.len() == arguments.len()
                && declared
                    .iter()
                    .zip(&arguments)
                    .all(|(t, v)| v.conforms_to(t));
            if !matches {
                return Err(CommandError::TypeMismatch(method.to_string()));
            }
        } else if !arguments.iter().all(|v| v.conforms_to(&v.value_type())) {
            return Err(CommandError::TypeMismatch(method.to_string()));
        }
        let request = RequestId::new(self.next_request + 1);
        self.queue_message(Message::MethodInvocation {
            request,
            entity,
            method,
            arguments,
        })?;
        self.next_request += 1;
        self.remote.outgoing_requests.insert(request, entity);
        Ok(request)
    }

    /// Answers an invocation from the peer, exactly once. A non-zero status
    /// (e.g. [`MethodStatus::FORBIDDEN`] for a refusal) carries a STRING.
    pub fn send_method_result(
        &mut self,
        request: RequestId<Remote>,
        status: MethodStatus,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        if !self.remote.incoming_requests.contains(&request) {
            return Err(CommandError::UnknownRequest);
        }
        if !status.is_success() && !matches!(value, Value::String(_)) {
            return Err(CommandError::FailureWithoutText);
        }
        if !value.conforms_to(&value.value_type()) {
            return Err(CommandError::TypeMismatch("return value".into()));
        }
        self.queue_message(Message::MethodResult {
            request,
            status,
            value,
        })?;
        self.remote.incoming_requests.remove(&request);
        Ok(())
    }

    /// Asks the peer to change a property of one of its entities (coalesced:
    /// only the latest tweak of a property is sent).
    pub fn tweak_entity(
        &mut self,
        entity: ObjectId<Remote>,
        property: PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let target = self
            .remote
            .entities
            .get(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        check_value(&target.schema, &property, &value)?;
        self.local.tweak(entity, property, value);
        Ok(())
    }

    /// Reports an interaction declared in the connection schema.
    pub fn send_interaction(
        &mut self,
        interaction: InteractionId,
        values: Vec<FieldValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let schema = self
            .config
            .connection
            .interaction(interaction)
            .ok_or(CommandError::UnknownInteraction)?;
        for field in &values {
            let declared = schema.property(field.id).ok_or_else(|| {
                CommandError::TypeMismatch(format!("interaction property {}", field.id))
            })?;
            if !field.value.conforms_to(&declared.value_type) {
                return Err(CommandError::TypeMismatch(declared.name.clone()));
            }
        }
        self.queue_message(Message::Interaction {
            interaction,
            values,
        })
    }

    /// Sends connection-control values declared in the connection schema.
    pub fn send_connection_control(&mut self, values: Vec<FieldValue>) -> Result<(), CommandError> {
        self.check_open()?;
        for field in &values {
            let declared = self.config.connection.control(field.id).ok_or_else(|| {
                CommandError::TypeMismatch(format!("control property {}", field.id))
            })?;
            if !field.value.conforms_to(&declared.value_type) {
                return Err(CommandError::TypeMismatch(declared.name.clone()));
            }
        }
        self.queue_message(Message::ConnectionControl { values })
    }

    /// Asks the peer to send at most `packets_per_second` packets per second
    /// (0: no limit).
    pub fn request_update_rate(&mut self, packets_per_second: u32) -> Result<(), CommandError> {
        self.send_connection_control(vec![FieldValue {
            id: UPDATE_RATE,
            value: Value::Integer(i64::from(packets_per_second)),
        }])
    }

    /// Ends the session locally.
    pub fn close(&mut self) {
        self.close_with(CloseReason::Local);
    }
}
