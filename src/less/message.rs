//! The twelve LESS messages (docs/less-wire.md §4) and their encoding.
//!
//! `Message<S, D>` is a message sent by the owner of space `S` to the owner of
//! space `D`: outgoing messages are `Message<Local, Remote>`, incoming ones
//! `Message<Remote, Local>`. Each id field carries the space the draft names
//! for it ("ID space is source of message" / "destination of message"), so a
//! tweak can only name the receiver's objects and an update only the
//! sender's. Decoding needs schemas; the receiver supplies them through
//! [`DecodeContext`]. This module owns message shapes and bytes, not the
//! rules about when a message may be sent or applied (that is the session's).

use std::sync::Arc;

use super::codec::{write_integer, write_u64, DecodeError, Reader, Unresolved};
use super::encoding::{EncodingId, LinkEncodings};
use super::ids::{
    ComponentId, ComponentPath, InteractionId, ObjectId, PropertyId, PropertyKey, RequestId, Space,
    TypeId,
};
use super::limits::MAX_ARGUMENTS;
use super::property_list::{
    decode_component_values, decode_field_values, decode_path, decode_subscriptions,
    encode_component_values, encode_field_values, encode_path, encode_subscriptions,
    encode_wire_values, ComponentSubscription, FieldValue, PropertyValue, WireValue,
};
use super::schema::{ConnectionSchema, MemberKind, TypeSchema};
use super::value::{decode_string, encode_string, Value};

/// Message codes, serialized as INTEGER. 1-11 are the draft's;
/// connection-control has none in the draft and takes 12, the first unused
/// code (docs/less-wire.md §4).
pub mod code {
    pub const INTRODUCE_TYPE: i64 = 1;
    pub const SUBSCRIBE_TYPE: i64 = 2;
    pub const UNSUBSCRIBE_TYPE: i64 = 3;
    pub const INTRODUCE_ENTITY: i64 = 4;
    pub const REMOVE_ENTITY: i64 = 5;
    pub const UPDATE_ENTITY: i64 = 6;
    pub const REQUEST_ENTITY: i64 = 7;
    pub const METHOD_INVOCATION: i64 = 8;
    pub const METHOD_RESULT: i64 = 9;
    pub const INTERACTION: i64 = 10;
    pub const TWEAK_ENTITY: i64 = 11;
    pub const CONNECTION_CONTROL: i64 = 12;
    /// update-property (docs/less-wire.md §16.8): an update-entity of one
    /// property whose key is the code minus `UPDATE_PROPERTY_FIRST`, so
    /// code and key share one INTEGER byte. Only on links that agreed the
    /// `msg:update-property/1` feature.
    pub const UPDATE_PROPERTY_FIRST: i64 = 16;
    /// The last update-property code: the last one-byte INTEGER.
    pub const UPDATE_PROPERTY_LAST: i64 = 127;
}

/// Low bits of an update-property key that hold the property id; the rest
/// hold the top-level component id. Three bits cover every Placeable
/// attribute (six) and leave room for components 0 to 13 in the 112 codes.
pub const KEY_PROPERTY_BITS: u32 = 3;

/// A method-result status (draft: "0 means success ... HTTP status codes can
/// be used for the error numbers").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MethodStatus(pub i64);

impl MethodStatus {
    pub const SUCCESS: MethodStatus = MethodStatus(0);
    /// The arguments do not match the method's declared signature.
    pub const BAD_REQUEST: MethodStatus = MethodStatus(400);
    /// The application refused the call (a permission error, docs/less-wire.md §12).
    pub const FORBIDDEN: MethodStatus = MethodStatus(403);
    /// No such entity or method.
    pub const NOT_FOUND: MethodStatus = MethodStatus(404);
    /// The call lost a race: the state it assumed has changed (an entity
    /// already handed to another node, docs/federation.md §7).
    pub const CONFLICT: MethodStatus = MethodStatus(409);
    /// The callee failed.
    pub const INTERNAL_ERROR: MethodStatus = MethodStatus(500);

    /// True for status 0.
    pub fn is_success(self) -> bool {
        self.0 == 0
    }
}

/// A LESS message sent from the owner of space `S` to the owner of space `D`.
#[derive(Clone, Debug, PartialEq)]
pub enum Message<S: Space, D: Space> {
    /// `1 typeid uri`: ID space is the source.
    IntroduceType { type_id: TypeId<S>, uri: String },
    /// `2 typeid component-property-id-list-list`: the typeid is the
    /// destination's (it introduced the type).
    SubscribeType {
        type_id: TypeId<D>,
        components: Vec<ComponentSubscription>,
    },
    /// `3 typeid`: the destination's type.
    UnsubscribeType { type_id: TypeId<D> },
    /// `4 typeid entity-id component-property-value-list-list`.
    IntroduceEntity {
        type_id: TypeId<S>,
        entity: ObjectId<S>,
        values: Vec<PropertyValue>,
    },
    /// `5 entity-id`.
    RemoveEntity { entity: ObjectId<S> },
    /// `6 entity-id component-property-value-list-list`.
    UpdateEntity {
        entity: ObjectId<S>,
        values: Vec<PropertyValue>,
    },
    /// `7 entity-id`: an object of the destination.
    RequestEntity { entity: ObjectId<D> },
    /// `8 request-id entity-id component-id-path property-id argument-list`,
    /// with exactly one argument-list (docs/less-wire.md §4). The request id is the
    /// invoker's; the entity is the destination's.
    MethodInvocation {
        request: RequestId<S>,
        entity: ObjectId<D>,
        method: PropertyKey,
        arguments: Vec<Value>,
    },
    /// `9 request-id status return-value`: answers the destination's request.
    /// A non-zero status carries a STRING describing the error.
    MethodResult {
        request: RequestId<D>,
        status: MethodStatus,
        value: Value,
    },
    /// `10 interaction-id property-value-list`.
    Interaction {
        interaction: InteractionId,
        values: Vec<FieldValue>,
    },
    /// `11 entity-id component-id-path property-id value`: a change request
    /// for an object of the destination.
    TweakEntity {
        entity: ObjectId<D>,
        property: PropertyKey,
        value: Value,
    },
    /// `12 property-value-list`, typed by the connection schema.
    ConnectionControl { values: Vec<FieldValue> },
}

/// What the receiver knows, for typing CONTEXT-DEPENDENT-VARIANT values.
/// Lookups that fail make the decoder return [`DecodeError::Unresolved`].
pub trait DecodeContext<S: Space, D: Space> {
    /// The schema of a type the sender introduced.
    fn sender_type(&self, type_id: TypeId<S>) -> Option<Arc<TypeSchema>>;
    /// The schema of the type of an entity the sender introduced.
    fn sender_entity_type(&self, entity: ObjectId<S>) -> Option<Arc<TypeSchema>>;
    /// The schema of the type of one of the receiver's own entities.
    fn receiver_entity_type(&self, entity: ObjectId<D>) -> Option<Arc<TypeSchema>>;
    /// The link's encoding of each property of a type the sender
    /// introduced, by property index ([`LinkEncodings::table`]), when the
    /// receiver keeps it; `None` looks each value's encoding up instead.
    fn sender_type_encodings(&self, _type_id: TypeId<S>) -> Option<Arc<[Option<EncodingId>]>> {
        None
    }
    /// [`DecodeContext::sender_type_encodings`] of an entity's type.
    fn sender_entity_encodings(&self, _entity: ObjectId<S>) -> Option<Arc<[Option<EncodingId>]>> {
        None
    }
    /// The connection schema.
    fn connection(&self) -> &ConnectionSchema;
    /// The link's per-property encodings (docs/less-wire.md §16); plain
    /// unless the link agreed on some.
    fn encodings(&self) -> &LinkEncodings {
        &crate::less::encoding::link::PLAIN
    }
}

impl<S: Space, D: Space> Message<S, D> {
    /// This message's code.
    pub fn code(&self) -> i64 {
        match self {
            Message::IntroduceType { .. } => code::INTRODUCE_TYPE,
            Message::SubscribeType { .. } => code::SUBSCRIBE_TYPE,
            Message::UnsubscribeType { .. } => code::UNSUBSCRIBE_TYPE,
            Message::IntroduceEntity { .. } => code::INTRODUCE_ENTITY,
            Message::RemoveEntity { .. } => code::REMOVE_ENTITY,
            Message::UpdateEntity { .. } => code::UPDATE_ENTITY,
            Message::RequestEntity { .. } => code::REQUEST_ENTITY,
            Message::MethodInvocation { .. } => code::METHOD_INVOCATION,
            Message::MethodResult { .. } => code::METHOD_RESULT,
            Message::Interaction { .. } => code::INTERACTION,
            Message::TweakEntity { .. } => code::TWEAK_ENTITY,
            Message::ConnectionControl { .. } => code::CONNECTION_CONTROL,
        }
    }

    /// True for the messages whose values follow the per-property rule and
    /// may take effect out of order (docs/less-wire.md §9): update-entity and tweak-entity.
    pub fn carries_properties_only(&self) -> bool {
        matches!(
            self,
            Message::UpdateEntity { .. } | Message::TweakEntity { .. }
        )
    }

    /// Appends the message.
    pub fn encode(&self, out: &mut Vec<u8>) {
        write_integer(out, self.code());
        match self {
            Message::IntroduceType { type_id, uri } => {
                write_u64(out, type_id.get());
                encode_string(out, uri);
            }
            Message::SubscribeType {
                type_id,
                components,
            } => {
                write_u64(out, type_id.get());
                encode_subscriptions(out, components);
            }
            Message::UnsubscribeType { type_id } => write_u64(out, type_id.get()),
            Message::IntroduceEntity {
                type_id,
                entity,
                values,
            } => {
                write_u64(out, type_id.get());
                write_u64(out, entity.get());
                encode_component_values(out, values);
            }
            Message::RemoveEntity { entity } => write_u64(out, entity.get()),
            Message::UpdateEntity { entity, values } => {
                write_u64(out, entity.get());
                encode_component_values(out, values);
            }
            Message::RequestEntity { entity } => write_u64(out, entity.get()),
            Message::MethodInvocation {
                request,
                entity,
                method,
                arguments,
            } => {
                write_u64(out, request.get());
                write_u64(out, entity.get());
                encode_path(out, &method.component);
                write_u64(out, method.property.0);
                write_integer(out, arguments.len() as i64);
                arguments
                    .iter()
                    .for_each(|argument| argument.encode_standalone(out));
            }
            Message::MethodResult {
                request,
                status,
                value,
            } => {
                write_u64(out, request.get());
                write_integer(out, status.0);
                value.encode_standalone(out);
            }
            Message::Interaction {
                interaction,
                values,
            } => {
                write_u64(out, interaction.0);
                encode_field_values(out, values);
            }
            Message::TweakEntity {
                entity,
                property,
                value,
            } => {
                write_u64(out, entity.get());
                encode_path(out, &property.component);
                write_u64(out, property.property.0);
                value.encode(out);
            }
            Message::ConnectionControl { values } => encode_field_values(out, values),
        }
    }

    /// Appends the message as a link with `encodings` carries it: an
    /// update-entity of one property of a top-level component with a small
    /// enough id goes in the keyed form when the link agreed it (16.8).
    pub fn encode_on(&self, out: &mut Vec<u8>, encodings: &LinkEncodings) {
        if let (Message::UpdateEntity { entity, values }, true) =
            (self, encodings.update_property())
        {
            if let [only] = values.as_slice() {
                let wire = WireValue {
                    key: &only.key,
                    value: &only.value,
                    encoding: None,
                };
                return encode_update(out, *entity, &[wire], encodings);
            }
        }
        self.encode(out);
    }

    /// The message as a link with `encodings` carries it.
    pub fn to_bytes_on(&self, encodings: &LinkEncodings) -> Vec<u8> {
        // Room for a typical update without regrowing.
        let mut out = Vec::with_capacity(64);
        self.encode_on(&mut out, encodings);
        out
    }

    /// The encoded message.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Reads one message. Unknown codes, undeclared properties and malformed
    /// fields are errors; missing context is [`DecodeError::Unresolved`].
    pub fn decode(
        reader: &mut Reader<'_>,
        context: &dyn DecodeContext<S, D>,
    ) -> Result<Self, DecodeError> {
        let message_code = reader.read_integer()?;
        Ok(match message_code {
            code::INTRODUCE_TYPE => Message::IntroduceType {
                type_id: TypeId::new(reader.read_u64()?),
                uri: decode_string(reader)?,
            },
            code::SUBSCRIBE_TYPE => Message::SubscribeType {
                type_id: TypeId::new(reader.read_u64()?),
                components: decode_subscriptions(reader)?,
            },
            code::UNSUBSCRIBE_TYPE => Message::UnsubscribeType {
                type_id: TypeId::new(reader.read_u64()?),
            },
            code::INTRODUCE_ENTITY => {
                let type_id = TypeId::new(reader.read_u64()?);
                let entity = ObjectId::new(reader.read_u64()?);
                let schema = context.sender_type(type_id).ok_or(DecodeError::Unresolved(
                    Unresolved::SenderType(type_id.get()),
                ))?;
                let table = context.sender_type_encodings(type_id);
                Message::IntroduceEntity {
                    type_id,
                    entity,
                    values: decode_component_values(
                        reader,
                        &schema,
                        context.encodings(),
                        table.as_deref(),
                    )?,
                }
            }
            code::REMOVE_ENTITY => Message::RemoveEntity {
                entity: ObjectId::new(reader.read_u64()?),
            },
            code::UPDATE_ENTITY => {
                let entity = ObjectId::new(reader.read_u64()?);
                let schema = sender_entity_schema(context, entity)?;
                let table = context.sender_entity_encodings(entity);
                Message::UpdateEntity {
                    entity,
                    values: decode_component_values(
                        reader,
                        &schema,
                        context.encodings(),
                        table.as_deref(),
                    )?,
                }
            }
            code::UPDATE_PROPERTY_FIRST..=code::UPDATE_PROPERTY_LAST
                if context.encodings().update_property() =>
            {
                let key = property_key_of(message_code - code::UPDATE_PROPERTY_FIRST);
                let entity = ObjectId::new(reader.read_u64()?);
                let schema = sender_entity_schema(context, entity)?;
                let value_type = match schema.member(&key).map(|member| &member.kind) {
                    Some(MemberKind::Property(value_type)) => value_type,
                    Some(_) => {
                        return Err(DecodeError::Invalid(
                            "update-property key names a method or nested component",
                        ))
                    }
                    None => return Err(DecodeError::UndeclaredProperty(key.to_string())),
                };
                let encoding = match context.sender_entity_encodings(entity) {
                    Some(table) => schema
                        .property_index(&key)
                        .and_then(|index| table.get(index.get()).copied().flatten()),
                    None => context.encodings().for_property(&schema, &key),
                };
                let value = LinkEncodings::read_value(reader, encoding, value_type)?;
                Message::UpdateEntity {
                    entity,
                    values: vec![PropertyValue { key, value }],
                }
            }
            code::REQUEST_ENTITY => Message::RequestEntity {
                entity: ObjectId::new(reader.read_u64()?),
            },
            code::METHOD_INVOCATION => {
                let request = RequestId::new(reader.read_u64()?);
                let entity = ObjectId::new(reader.read_u64()?);
                let component = decode_path(reader)?;
                let property = PropertyId(reader.read_u64()?);
                let count =
                    reader.read_count("argument count", MAX_ARGUMENTS.min(reader.remaining()))?;
                let mut arguments = Vec::with_capacity(count);
                for _ in 0..count {
                    arguments.push(Value::decode_standalone(reader)?);
                }
                Message::MethodInvocation {
                    request,
                    entity,
                    method: PropertyKey {
                        component,
                        property,
                    },
                    arguments,
                }
            }
            code::METHOD_RESULT => {
                let request = RequestId::new(reader.read_u64()?);
                let status = MethodStatus(reader.read_integer()?);
                let value = Value::decode_standalone(reader)?;
                if !status.is_success() && !matches!(value, Value::String(_)) {
                    return Err(DecodeError::Invalid(
                        "failed method-result without a STRING",
                    ));
                }
                Message::MethodResult {
                    request,
                    status,
                    value,
                }
            }
            code::INTERACTION => {
                let interaction = InteractionId(reader.read_u64()?);
                let schema = context.connection().interaction(interaction).ok_or(
                    DecodeError::Unresolved(Unresolved::Interaction(interaction.0)),
                )?;
                Message::Interaction {
                    interaction,
                    values: decode_field_values(reader, |id| {
                        schema.property(id).map(|f| &f.value_type)
                    })?,
                }
            }
            code::TWEAK_ENTITY => {
                let entity = ObjectId::new(reader.read_u64()?);
                let component = decode_path(reader)?;
                let property = PropertyKey {
                    component,
                    property: PropertyId(reader.read_u64()?),
                };
                let schema =
                    context
                        .receiver_entity_type(entity)
                        .ok_or(DecodeError::Unresolved(Unresolved::ReceiverEntity(
                            entity.get(),
                        )))?;
                let value_type = schema
                    .property_type(&property)
                    .ok_or_else(|| DecodeError::UndeclaredProperty(property.to_string()))?;
                Message::TweakEntity {
                    entity,
                    value: Value::decode(reader, value_type)?,
                    property,
                }
            }
            code::CONNECTION_CONTROL => {
                let connection = context.connection();
                Message::ConnectionControl {
                    values: decode_field_values(reader, |id| {
                        connection.control(id).map(|f| &f.value_type)
                    })?,
                }
            }
            other => return Err(DecodeError::UnknownMessageCode(other)),
        })
    }
}

/// Appends an update-entity of borrowed values as the link carries them, in
/// the keyed form (update-property, docs/less-wire.md §16.8) when the link
/// agreed it and the values are one property that has a key: the bytes
/// [`Message::encode_on`] gives for the same update, built from a sender's
/// state without a message.
pub fn encode_update<S: Space>(
    out: &mut Vec<u8>,
    entity: ObjectId<S>,
    values: &[WireValue<'_>],
    encodings: &LinkEncodings,
) {
    if let ([only], true) = (values, encodings.update_property()) {
        if let Some(key) = update_property_key(only.key) {
            write_integer(out, code::UPDATE_PROPERTY_FIRST + key);
            write_u64(out, entity.get());
            only.encode_value(out);
            return;
        }
    }
    write_integer(out, code::UPDATE_ENTITY);
    write_u64(out, entity.get());
    encode_wire_values(out, values);
}

/// Appends an introduce-entity of borrowed values as the link carries them.
pub fn encode_introduce<S: Space>(
    out: &mut Vec<u8>,
    type_id: TypeId<S>,
    entity: ObjectId<S>,
    values: &[WireValue<'_>],
) {
    write_integer(out, code::INTRODUCE_ENTITY);
    write_u64(out, type_id.get());
    write_u64(out, entity.get());
    encode_wire_values(out, values);
}

/// The schema of an entity the sender introduced, or Unresolved.
fn sender_entity_schema<S: Space, D: Space>(
    context: &dyn DecodeContext<S, D>,
    entity: ObjectId<S>,
) -> Result<Arc<TypeSchema>, DecodeError> {
    context
        .sender_entity_type(entity)
        .ok_or(DecodeError::Unresolved(Unresolved::SenderEntity(
            entity.get(),
        )))
}

/// The update-property key of a property of a top-level component, if it
/// has one: `component << 3 | property`, property below 8, key at most 111
/// (components 0 to 13).
fn update_property_key(key: &PropertyKey) -> Option<i64> {
    let [component] = key.component.elements() else {
        return None;
    };
    if key.property.0 >= 1 << KEY_PROPERTY_BITS {
        return None;
    }
    let packed = component
        .0
        .checked_mul(1 << KEY_PROPERTY_BITS)?
        .checked_add(key.property.0)?;
    let packed = i64::try_from(packed).ok()?;
    (packed <= code::UPDATE_PROPERTY_LAST - code::UPDATE_PROPERTY_FIRST).then_some(packed)
}

/// The property an update-property key (0 to 111) names.
fn property_key_of(key: i64) -> PropertyKey {
    let key = key.unsigned_abs();
    PropertyKey {
        component: ComponentPath::top(ComponentId(key >> KEY_PROPERTY_BITS)),
        property: PropertyId(key & ((1 << KEY_PROPERTY_BITS) - 1)),
    }
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
