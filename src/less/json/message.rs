//! JSON form of LESS messages (docs/less-wire.md §4) for the
//! inspector, read straight from the wire tree so that re-encoding gives the
//! same bytes: property lists keep their grouping by component and nesting.
//!
//! Ids are shown as the raw numbers on the wire. Values are typed by the
//! schemas the inspector knows ([`Schemas`]) and by what the sender
//! introduced earlier ([`SpaceKnowledge`]); a value whose type cannot be
//! known stops decoding (CONTEXT-DEPENDENT-VARIANTs carry no length) and the
//! packet's remaining bytes are shown raw by the caller. This module owns the
//! message view; framing and signatures are `packet`'s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::features::LinkFeatures;
use super::value::TypedValue;
use crate::less::codec::{write_count, write_integer, write_u64, DecodeError, Reader};
use crate::less::encoding::{EncodingId, LinkEncodings};
use crate::less::ids::{ComponentId, ComponentPath, InteractionId, PropertyId, PropertyKey};
use crate::less::limits::{MAX_ARGUMENTS, MAX_COMPONENTS, MAX_PROPERTIES};
use crate::less::message::{code, KEY_PROPERTY_BITS};
use crate::less::property_list::{
    decode_path, decode_subscriptions, encode_path, encode_subscriptions, ComponentSubscription,
};
use crate::less::schema::{
    ComponentSchema, ConnectionSchema, MemberKind, SchemaRegistry, TypeSchema,
};
use crate::less::value::{decode_string, encode_string, Value};
use crate::less::value_type::ValueType;

/// The schemas values are typed by: the node's type registry (by URI), the
/// link's connection schema, and what the link agreed (compact encodings,
/// keyed updates, bulk packets), or `None` when nobody said: values are then
/// read plain and a keyed update is reported as needing that context.
#[derive(Clone, Copy, Debug)]
pub struct Schemas<'a> {
    pub types: &'a SchemaRegistry,
    pub connection: &'a ConnectionSchema,
    pub link: Option<&'a LinkFeatures>,
}

/// What one side of a link has introduced, as far as the inspector has seen
/// or been told: type ids (with their URIs) and objects (with their type ids).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceKnowledge {
    pub types: BTreeMap<u64, String>,
    pub entities: BTreeMap<u64, u64>,
}

/// One message. `offset` (informative) is where it starts in the frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageJson {
    #[serde(default)]
    pub offset: usize,
    #[serde(flatten)]
    pub body: MessageBody,
}

/// The twelve messages, tagged by `kind`. `uri` and `name` fields are
/// informative (from the schemas) and ignored when encoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MessageBody {
    IntroduceType {
        type_id: u64,
        uri: String,
    },
    SubscribeType {
        type_id: u64,
        components: Vec<SubscriptionJson>,
    },
    UnsubscribeType {
        type_id: u64,
    },
    IntroduceEntity {
        type_id: u64,
        entity: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
        components: Vec<ComponentJson>,
    },
    RemoveEntity {
        entity: u64,
    },
    UpdateEntity {
        entity: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
        components: Vec<ComponentJson>,
    },
    /// A keyed update (docs/less-wire.md §16.8): the message code is 16 +
    /// `component` × 8 + `property`, computed from those two when encoding.
    UpdateProperty {
        entity: u64,
        component: u64,
        property: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        value: TypedValue,
        #[serde(flatten)]
        compact: Compact,
    },
    RequestEntity {
        entity: u64,
    },
    MethodInvocation {
        request: u64,
        entity: u64,
        path: Vec<u64>,
        method: u64,
        arguments: Vec<TypedValue>,
    },
    MethodResult {
        request: u64,
        status: i64,
        value: TypedValue,
    },
    Interaction {
        interaction: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        properties: Vec<FieldJson>,
    },
    TweakEntity {
        entity: u64,
        path: Vec<u64>,
        property: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        value: TypedValue,
    },
    ConnectionControl {
        properties: Vec<FieldJson>,
    },
}

/// One entry of subscribe-type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionJson {
    pub path: Vec<u64>,
    pub properties: Vec<u64>,
}

/// One top-level component of a component-property-value-list-list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComponentJson {
    pub component: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub properties: Vec<MemberJson>,
}

/// One member of a property-value-list: a value (`type` and `value`) or a
/// nested component (`properties`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberJson {
    pub property: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub value: Option<TypedValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<Vec<MemberJson>>,
    #[serde(flatten)]
    pub compact: Compact,
}

/// How a value in a compact encoding (docs/less-wire.md §16.3) travelled:
/// the encoding's name and the bytes as sent. `value` shows what they
/// decode to (a lossy encoding's value, not the sender's exact one), so
/// encoding writes `encoded` unchanged, or encodes `value` in `encoding`
/// when `encoded` is absent. Both absent: the value is plain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Compact {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoded: Option<String>,
}

/// One value of a flat property-value-list (interaction, connection control).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldJson {
    pub property: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub value: TypedValue,
}

/// Why a message could not be shown.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The bytes break the wire format.
    Malformed(DecodeError),
    /// A value's type depends on something this packet does not say.
    NeedsContext(String),
}

impl From<DecodeError> for Stop {
    fn from(error: DecodeError) -> Stop {
        Stop::Malformed(error)
    }
}

/// Where decoding of the current message got to, for the error report.
#[derive(Debug, Default, Clone)]
pub struct Trail {
    pub kind: Option<&'static str>,
    /// The property whose value was being read (`component/path.property`).
    pub property: Option<String>,
}

/// Reads one message, learning introductions into `sender`. Tweaks name the
/// receiver's objects, typed by `receiver`.
pub fn decode_message(
    reader: &mut Reader<'_>,
    schemas: Schemas<'_>,
    sender: &mut SpaceKnowledge,
    receiver: &SpaceKnowledge,
    trail: &mut Trail,
) -> Result<MessageBody, Stop> {
    let message_code = reader.read_integer()?;
    trail.kind = kind_name(message_code);
    Ok(match message_code {
        code::INTRODUCE_TYPE => {
            let type_id = reader.read_u64()?;
            let uri = decode_string(reader)?;
            sender.types.insert(type_id, uri.clone());
            MessageBody::IntroduceType { type_id, uri }
        }
        code::SUBSCRIBE_TYPE => MessageBody::SubscribeType {
            type_id: reader.read_u64()?,
            components: decode_subscriptions(reader)?
                .into_iter()
                .map(|s| SubscriptionJson {
                    path: path_ids(&s.component),
                    properties: s.properties.iter().map(|p| p.0).collect(),
                })
                .collect(),
        },
        code::UNSUBSCRIBE_TYPE => MessageBody::UnsubscribeType {
            type_id: reader.read_u64()?,
        },
        code::INTRODUCE_ENTITY => {
            let type_id = reader.read_u64()?;
            let entity = reader.read_u64()?;
            sender.entities.insert(entity, type_id);
            let (uri, components) = decode_components(reader, schemas, sender, entity, trail)?;
            MessageBody::IntroduceEntity {
                type_id,
                entity,
                uri,
                components,
            }
        }
        code::REMOVE_ENTITY => MessageBody::RemoveEntity {
            entity: reader.read_u64()?,
        },
        code::UPDATE_ENTITY => {
            let entity = reader.read_u64()?;
            let (uri, components) = decode_components(reader, schemas, sender, entity, trail)?;
            MessageBody::UpdateEntity {
                entity,
                uri,
                components,
            }
        }
        code::UPDATE_PROPERTY_FIRST..=code::UPDATE_PROPERTY_LAST => {
            decode_update_property(reader, schemas, sender, message_code, trail)?
        }
        code::REQUEST_ENTITY => MessageBody::RequestEntity {
            entity: reader.read_u64()?,
        },
        code::METHOD_INVOCATION => {
            let request = reader.read_u64()?;
            let entity = reader.read_u64()?;
            let path = path_ids(&decode_path(reader)?);
            let method = reader.read_u64()?;
            let count =
                reader.read_count("argument count", MAX_ARGUMENTS.min(reader.remaining()))?;
            let mut arguments = Vec::with_capacity(count);
            for _ in 0..count {
                arguments.push(TypedValue::of(&Value::decode_standalone(reader)?));
            }
            MessageBody::MethodInvocation {
                request,
                entity,
                path,
                method,
                arguments,
            }
        }
        code::METHOD_RESULT => MessageBody::MethodResult {
            request: reader.read_u64()?,
            status: reader.read_integer()?,
            value: TypedValue::of(&Value::decode_standalone(reader)?),
        },
        code::INTERACTION => {
            let interaction = reader.read_u64()?;
            let schema = schemas
                .connection
                .interaction(InteractionId(interaction))
                .ok_or_else(|| {
                    Stop::NeedsContext(format!(
                        "interaction {interaction} is not in connection schema {}",
                        schemas.connection.uri
                    ))
                })?;
            let fields = schema
                .properties
                .iter()
                .map(|f| (f.id.0, (f.name.as_str(), &f.value_type)));
            MessageBody::Interaction {
                interaction,
                name: Some(schema.name.clone()),
                properties: decode_fields(reader, &fields.collect(), trail)?,
            }
        }
        code::TWEAK_ENTITY => {
            let entity = reader.read_u64()?;
            let path = decode_path(reader)?;
            let property = reader.read_u64()?;
            let key = PropertyKey {
                component: path.clone(),
                property: PropertyId(property),
            };
            trail.property = Some(key.to_string());
            let (_, schema) = entity_schema(schemas, receiver, entity, "receiver")?;
            let member = schema
                .component(&path)
                .and_then(|c| c.member(PropertyId(property)));
            let (name, value_type) = match member.map(|m| (&m.name, &m.kind)) {
                Some((name, MemberKind::Property(value_type))) => (name.clone(), value_type),
                _ => {
                    let what = format!("property {key} of {}", schema.uri);
                    return Err(DecodeError::UndeclaredProperty(what).into());
                }
            };
            MessageBody::TweakEntity {
                entity,
                path: path_ids(&path),
                property,
                name: Some(name),
                value: TypedValue::new(&Value::decode(reader, value_type)?, value_type),
            }
        }
        code::CONNECTION_CONTROL => {
            let fields = schemas
                .connection
                .control
                .iter()
                .map(|f| (f.id.0, (f.name.as_str(), &f.value_type)));
            MessageBody::ConnectionControl {
                properties: decode_fields(reader, &fields.collect(), trail)?,
            }
        }
        other => return Err(DecodeError::UnknownMessageCode(other).into()),
    })
}

/// A keyed update, on a link that agreed `msg:update-property/1`; elsewhere
/// its code is unknown (malformed), or, when nobody said what the link
/// agreed, a question of context.
fn decode_update_property(
    reader: &mut Reader<'_>,
    schemas: Schemas<'_>,
    sender: &SpaceKnowledge,
    message_code: i64,
    trail: &mut Trail,
) -> Result<MessageBody, Stop> {
    let link = match schemas.link {
        Some(link) if link.encodings.update_property() => link,
        Some(_) => return Err(DecodeError::UnknownMessageCode(message_code).into()),
        None => {
            return Err(Stop::NeedsContext(format!(
                "message code {message_code} is a keyed update (update-property) if the link agreed msg:update-property/1, as default nodes do; give the link's features with --features default or a key log that records them"
            )))
        }
    };
    trail.kind = Some("update-property");
    let key = message_code.unsigned_abs() - code::UPDATE_PROPERTY_FIRST.unsigned_abs();
    let component = key >> KEY_PROPERTY_BITS;
    let property = key & ((1 << KEY_PROPERTY_BITS) - 1);
    let path = ComponentPath::top(ComponentId(component));
    let key = PropertyKey {
        component: path.clone(),
        property: PropertyId(property),
    };
    trail.property = Some(key.to_string());
    let entity = reader.read_u64()?;
    let (uri, schema) = entity_schema(schemas, sender, entity, "sender")?;
    let member = schema
        .component(&path)
        .and_then(|c| c.member(PropertyId(property)));
    let (name, value_type) = match member.map(|m| (&m.name, &m.kind)) {
        Some((name, MemberKind::Property(value_type))) => (name.clone(), value_type),
        Some(_) => {
            return Err(DecodeError::Invalid(
                "update-property key names a method or nested component",
            )
            .into())
        }
        None => {
            let what = format!("property {key} of {}", schema.uri);
            return Err(DecodeError::UndeclaredProperty(what).into());
        }
    };
    let encoding = link.encodings.for_property(&schema, &key);
    let (value, compact) = read_value(reader, encoding, value_type)?;
    Ok(MessageBody::UpdateProperty {
        entity,
        component,
        property,
        uri: Some(uri),
        name: Some(name),
        value,
        compact,
    })
}

/// Reads one property value, in its compact encoding if it has one.
fn read_value(
    reader: &mut Reader<'_>,
    encoding: Option<EncodingId>,
    value_type: &ValueType,
) -> Result<(TypedValue, Compact), DecodeError> {
    let Some(encoding) = encoding else {
        let value = Value::decode(reader, value_type)?;
        return Ok((TypedValue::new(&value, value_type), Compact::default()));
    };
    let before = reader.rest();
    let value = encoding.decode(reader)?;
    let used = before.len() - reader.rest().len();
    let compact = Compact {
        encoding: Some(encoding.name().to_owned()),
        encoded: Some(hex::encode(&before[..used])),
    };
    Ok((TypedValue::new(&value, value_type), compact))
}

/// The wire name of a message code.
pub fn kind_name(message_code: i64) -> Option<&'static str> {
    Some(match message_code {
        code::INTRODUCE_TYPE => "introduce-type",
        code::SUBSCRIBE_TYPE => "subscribe-type",
        code::UNSUBSCRIBE_TYPE => "unsubscribe-type",
        code::INTRODUCE_ENTITY => "introduce-entity",
        code::REMOVE_ENTITY => "remove-entity",
        code::UPDATE_ENTITY => "update-entity",
        code::REQUEST_ENTITY => "request-entity",
        code::METHOD_INVOCATION => "method-invocation",
        code::METHOD_RESULT => "method-result",
        code::INTERACTION => "interaction",
        code::TWEAK_ENTITY => "tweak-entity",
        code::CONNECTION_CONTROL => "connection-control",
        _ => return None,
    })
}

fn path_ids(path: &ComponentPath) -> Vec<u64> {
    path.elements().iter().map(|c| c.0).collect()
}

/// The URI and schema of an object, through the knowledge of the side that
/// introduced it.
fn entity_schema(
    schemas: Schemas<'_>,
    side: &SpaceKnowledge,
    entity: u64,
    whose: &str,
) -> Result<(String, std::sync::Arc<crate::less::schema::TypeSchema>), Stop> {
    let type_id = side.entities.get(&entity).ok_or_else(|| {
        Stop::NeedsContext(format!(
            "the {whose}'s object {entity} was introduced in an earlier packet; give its type with --entity {entity}=TYPE"
        ))
    })?;
    let uri = side.types.get(type_id).ok_or_else(|| {
        Stop::NeedsContext(format!(
            "the {whose}'s type {type_id} was introduced in an earlier packet; give its URI with --type {type_id}=URI"
        ))
    })?;
    let schema = schemas.types.resolve(uri).ok_or_else(|| {
        Stop::NeedsContext(format!("no schema for {uri}; load it with --schema FILE"))
    })?;
    Ok((uri.clone(), schema))
}

fn decode_components(
    reader: &mut Reader<'_>,
    schemas: Schemas<'_>,
    sender: &SpaceKnowledge,
    entity: u64,
    trail: &mut Trail,
) -> Result<(Option<String>, Vec<ComponentJson>), Stop> {
    let count = reader.read_count("component count", MAX_COMPONENTS.min(reader.remaining()))?;
    if count == 0 {
        // Nothing to type: an empty list needs no schema.
        let uri = entity_schema(schemas, sender, entity, "sender").map(|(uri, _)| uri);
        return Ok((uri.ok(), Vec::new()));
    }
    let (uri, schema) = match entity_schema(schemas, sender, entity, "sender") {
        Ok(found) => found,
        Err(stop) => {
            // Component and property ids need no schema: read up to the
            // first value so the report names the property it belongs to.
            let mut first = || -> Result<String, DecodeError> {
                let component = reader.read_u64()?;
                reader.read_count("property count", MAX_PROPERTIES)?;
                Ok(format!("{component}.{}", reader.read_u64()?))
            };
            trail.property = first().ok();
            return Err(stop);
        }
    };
    // Values typed by the entity's schema may travel compact (docs/less-wire.md §16.1).
    let encodings = schemas.link.map(|link| (&link.encodings, schema.as_ref()));
    let mut components = Vec::with_capacity(count);
    for _ in 0..count {
        let id = reader.read_u64()?;
        let path = ComponentPath::top(ComponentId(id));
        trail.property = Some(format!("{path}"));
        let component = schema.component(&path).ok_or_else(|| {
            DecodeError::UndeclaredProperty(format!("component {path} of {}", schema.uri))
        })?;
        components.push(ComponentJson {
            component: id,
            name: Some(component.name.clone()),
            properties: decode_members(reader, component, &path, encodings, trail)?,
        });
    }
    Ok((Some(uri), components))
}

fn decode_members(
    reader: &mut Reader<'_>,
    component: &ComponentSchema,
    path: &ComponentPath,
    encodings: Option<(&LinkEncodings, &TypeSchema)>,
    trail: &mut Trail,
) -> Result<Vec<MemberJson>, Stop> {
    let count = reader.read_count("property count", MAX_PROPERTIES.min(reader.remaining()))?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let id = PropertyId(reader.read_u64()?);
        trail.property = Some(format!("{path}.{id}"));
        let member = component
            .member(id)
            .ok_or_else(|| DecodeError::UndeclaredProperty(format!("{path}.{id}")))?;
        let (value, properties, compact) = match &member.kind {
            MemberKind::Property(value_type) => {
                let key = PropertyKey {
                    component: path.clone(),
                    property: id,
                };
                let encoding = encodings.and_then(|(link, schema)| link.for_property(schema, &key));
                let (value, compact) = read_value(reader, encoding, value_type)?;
                (Some(value), None, compact)
            }
            MemberKind::Component(nested) => {
                let child = path.child(nested.id).ok_or(DecodeError::TooDeep)?;
                let nested = decode_members(reader, nested, &child, encodings, trail)?;
                (None, Some(nested), Compact::default())
            }
            MemberKind::Method(_) => {
                return Err(DecodeError::Invalid("method id in a property-value-list").into())
            }
        };
        members.push(MemberJson {
            property: id.0,
            name: Some(member.name.clone()),
            value,
            properties,
            compact,
        });
    }
    Ok(members)
}

fn decode_fields(
    reader: &mut Reader<'_>,
    fields: &BTreeMap<u64, (&str, &ValueType)>,
    trail: &mut Trail,
) -> Result<Vec<FieldJson>, Stop> {
    let count = reader.read_count("property count", MAX_PROPERTIES.min(reader.remaining()))?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let id = reader.read_u64()?;
        trail.property = Some(format!("field {id}"));
        let (name, value_type) = fields
            .get(&id)
            .ok_or_else(|| DecodeError::UndeclaredProperty(format!("field {id}")))?;
        out.push(FieldJson {
            property: id,
            name: Some((*name).to_owned()),
            value: TypedValue::new(&Value::decode(reader, value_type)?, value_type),
        });
    }
    Ok(out)
}

/// Appends the bytes of a message in its JSON form. Values are typed by
/// their own `type` fields, so no schema is needed.
pub fn encode_message(out: &mut Vec<u8>, body: &MessageBody) -> Result<(), String> {
    match body {
        MessageBody::IntroduceType { type_id, uri } => {
            write_integer(out, code::INTRODUCE_TYPE);
            write_u64(out, *type_id);
            if !Value::String(uri.clone()).conforms_to(&ValueType::String) {
                return Err("uri is too long or holds a NUL".into());
            }
            encode_string(out, uri);
        }
        MessageBody::SubscribeType {
            type_id,
            components,
        } => {
            write_integer(out, code::SUBSCRIBE_TYPE);
            write_u64(out, *type_id);
            let subscriptions = components
                .iter()
                .map(|s| {
                    Ok(ComponentSubscription {
                        component: json_path(&s.path)?,
                        properties: s.properties.iter().map(|&p| PropertyId(p)).collect(),
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            encode_subscriptions(out, &subscriptions);
        }
        MessageBody::UnsubscribeType { type_id } => {
            write_integer(out, code::UNSUBSCRIBE_TYPE);
            write_u64(out, *type_id);
        }
        MessageBody::IntroduceEntity {
            type_id,
            entity,
            components,
            ..
        } => {
            write_integer(out, code::INTRODUCE_ENTITY);
            write_u64(out, *type_id);
            write_u64(out, *entity);
            encode_components(out, components)?;
        }
        MessageBody::RemoveEntity { entity } => {
            write_integer(out, code::REMOVE_ENTITY);
            write_u64(out, *entity);
        }
        MessageBody::UpdateEntity {
            entity, components, ..
        } => {
            write_integer(out, code::UPDATE_ENTITY);
            write_u64(out, *entity);
            encode_components(out, components)?;
        }
        MessageBody::UpdateProperty {
            entity,
            component,
            property,
            value,
            compact,
            ..
        } => {
            let key = component
                .checked_mul(1 << KEY_PROPERTY_BITS)
                .and_then(|key| key.checked_add(*property))
                .filter(|key| *property < 1 << KEY_PROPERTY_BITS && *key <= 111)
                .ok_or_else(|| {
                    format!("property {component}.{property} has no update-property key")
                })?;
            write_u64(out, code::UPDATE_PROPERTY_FIRST.unsigned_abs() + key);
            write_u64(out, *entity);
            encode_value(out, value, compact)?;
        }
        MessageBody::RequestEntity { entity } => {
            write_integer(out, code::REQUEST_ENTITY);
            write_u64(out, *entity);
        }
        MessageBody::MethodInvocation {
            request,
            entity,
            path,
            method,
            arguments,
        } => {
            write_integer(out, code::METHOD_INVOCATION);
            write_u64(out, *request);
            write_u64(out, *entity);
            encode_path(out, &json_path(path)?);
            write_u64(out, *method);
            write_count(out, arguments.len());
            for argument in arguments {
                argument.to_value()?.0.encode_standalone(out);
            }
        }
        MessageBody::MethodResult {
            request,
            status,
            value,
        } => {
            write_integer(out, code::METHOD_RESULT);
            write_u64(out, *request);
            write_integer(out, *status);
            value.to_value()?.0.encode_standalone(out);
        }
        MessageBody::Interaction {
            interaction,
            properties,
            ..
        } => {
            write_integer(out, code::INTERACTION);
            write_u64(out, *interaction);
            encode_fields(out, properties)?;
        }
        MessageBody::TweakEntity {
            entity,
            path,
            property,
            value,
            ..
        } => {
            write_integer(out, code::TWEAK_ENTITY);
            write_u64(out, *entity);
            encode_path(out, &json_path(path)?);
            write_u64(out, *property);
            value.to_value()?.0.encode(out);
        }
        MessageBody::ConnectionControl { properties } => {
            write_integer(out, code::CONNECTION_CONTROL);
            encode_fields(out, properties)?;
        }
    }
    Ok(())
}

fn json_path(path: &[u64]) -> Result<ComponentPath, String> {
    ComponentPath::new(path.iter().map(|&c| ComponentId(c)).collect())
        .ok_or_else(|| format!("component path {path:?} must have 1 to 8 elements"))
}

fn encode_components(out: &mut Vec<u8>, components: &[ComponentJson]) -> Result<(), String> {
    write_count(out, components.len());
    for component in components {
        write_u64(out, component.component);
        encode_members(out, &component.properties)?;
    }
    Ok(())
}

fn encode_members(out: &mut Vec<u8>, members: &[MemberJson]) -> Result<(), String> {
    write_count(out, members.len());
    for member in members {
        write_u64(out, member.property);
        match (&member.value, &member.properties) {
            (Some(value), None) => encode_value(out, value, &member.compact)?,
            (None, Some(nested)) => encode_members(out, nested)?,
            _ => {
                return Err(format!(
                    "property {} needs either type and value or nested properties",
                    member.property
                ))
            }
        }
    }
    Ok(())
}

/// A property value: its bytes as sent, `value` in its encoding, or plain.
fn encode_value(out: &mut Vec<u8>, value: &TypedValue, compact: &Compact) -> Result<(), String> {
    match (&compact.encoded, &compact.encoding) {
        (Some(encoded), _) => {
            out.extend(hex::decode(encoded).map_err(|e| format!("encoded bytes: {e}"))?)
        }
        (None, Some(name)) => {
            let encoding =
                EncodingId::from_name(name).ok_or_else(|| format!("unknown encoding {name:?}"))?;
            let bytes = encoding
                .encode(&value.to_value()?.0)
                .ok_or_else(|| format!("the value does not fit encoding {name}"))?;
            out.extend(bytes);
        }
        (None, None) => value.to_value()?.0.encode(out),
    }
    Ok(())
}

fn encode_fields(out: &mut Vec<u8>, fields: &[FieldJson]) -> Result<(), String> {
    write_count(out, fields.len());
    for field in fields {
        write_u64(out, field.property);
        field.value.to_value()?.0.encode(out);
    }
    Ok(())
}
