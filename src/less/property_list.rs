//! The draft's nested property lists (section 3): the
//! component-property-value-list-list of introduce-entity and update-entity,
//! the flat property-value-list of interactions and connection control, and
//! the component-property-id-list-list of subscribe-type.
//!
//! Applications see flat `(PropertyKey, Value)` pairs; this module groups them
//! by component on the way out and flattens them on the way in. A nested
//! component is a member of its parent whose value is again a
//! property-value-list (draft: "It takes care of itself in the data
//! representation, recursively").

use smallvec::SmallVec;

use super::codec::{write_count, write_u64, DecodeError, Reader};
use super::encoding::{EncodingId, LinkEncodings};
use super::ids::{ComponentId, ComponentPath, PropertyId, PropertyKey};
use super::limits::{MAX_COMPONENTS, MAX_PATH_LEN, MAX_PROPERTIES};
use super::schema::{ComponentSchema, MemberKind, TypeSchema};
use super::value::Value;
use super::value_type::ValueType;

/// One property's value, addressed by its full key.
#[derive(Clone, Debug, PartialEq)]
pub struct PropertyValue {
    pub key: PropertyKey,
    pub value: Value,
}

/// One value of a flat property-value-list (interaction, connection control).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldValue {
    pub id: PropertyId,
    pub value: Value,
}

/// One entry of a subscribe-type message: a component path and the
/// properties of that component the subscriber wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentSubscription {
    pub component: ComponentPath,
    pub properties: Vec<PropertyId>,
}

/// A property value as a link carries it, borrowed from the sender's state:
/// plain, or in the compact encoding the link agreed for its property
/// (docs/less-wire.md §16), written straight into the message.
#[derive(Clone, Copy, Debug)]
pub struct WireValue<'a> {
    pub key: &'a PropertyKey,
    pub value: &'a Value,
    pub encoding: Option<EncodingId>,
}

impl WireValue<'_> {
    /// Appends the value as carried.
    pub fn encode_value(&self, out: &mut Vec<u8>) {
        // A value conforming to its property's type always encodes; the
        // plain fallback is never reached for checked values.
        if !self
            .encoding
            .is_some_and(|encoding| encoding.encode_into(self.value, out))
        {
            self.value.encode(out);
        }
    }
}

type Item<'a> = (&'a [ComponentId], PropertyId, WireValue<'a>);

/// Appends `component-count (component-id property-value-list)*`, grouping
/// values by component in order of first appearance.
pub fn encode_component_values(out: &mut Vec<u8>, values: &[PropertyValue]) {
    let wire: SmallVec<[WireValue<'_>; 8]> = values
        .iter()
        .map(|v| WireValue {
            key: &v.key,
            value: &v.value,
            encoding: None,
        })
        .collect();
    encode_wire_values(out, &wire);
}

/// [`encode_component_values`] of borrowed values as a link carries them.
pub fn encode_wire_values(out: &mut Vec<u8>, values: &[WireValue<'_>]) {
    // The usual list: top-level properties whose components come in runs
    // (a sender's slots ascend by key). Grouping by first appearance then
    // gives the runs themselves, written without building the groups.
    let top_level_runs = values.iter().all(|v| v.key.component.elements().len() == 1)
        && values
            .windows(2)
            .all(|pair| pair[0].key.component <= pair[1].key.component);
    if top_level_runs {
        let runs = 1 + values
            .windows(2)
            .filter(|pair| pair[0].key.component != pair[1].key.component)
            .count();
        write_count(out, if values.is_empty() { 0 } else { runs });
        for run in values.chunk_by(|a, b| a.key.component == b.key.component) {
            write_u64(out, run[0].key.component.elements()[0].0);
            write_count(out, run.len());
            for value in run {
                write_u64(out, value.key.property.0);
                value.encode_value(out);
            }
        }
        return;
    }
    let items: Vec<Item<'_>> = values
        .iter()
        .map(|v| (v.key.component.elements(), v.key.property, *v))
        .collect();
    let groups = group_by_head(&items);
    write_count(out, groups.len());
    for (component, members) in groups {
        write_u64(out, component.0);
        encode_member_list(out, &members);
    }
}

/// Groups items by the first path element; the rest of each path is kept.
fn group_by_head<'a>(items: &[Item<'a>]) -> Vec<(ComponentId, Vec<Item<'a>>)> {
    let mut groups: Vec<(ComponentId, Vec<Item<'a>>)> = Vec::new();
    for &(path, property, value) in items {
        let Some((head, rest)) = path.split_first() else {
            continue; // paths are never empty (ComponentPath invariant)
        };
        match groups.iter_mut().find(|(id, _)| id == head) {
            Some((_, members)) => members.push((rest, property, value)),
            None => groups.push((*head, vec![(rest, property, value)])),
        }
    }
    groups
}

/// Appends a property-value-list for items relative to one component: items
/// with an empty remaining path are its own properties, the others belong to
/// nested components and are written as one member each.
fn encode_member_list(out: &mut Vec<u8>, items: &[Item<'_>]) {
    let direct: Vec<&Item<'_>> = items.iter().filter(|(rest, ..)| rest.is_empty()).collect();
    let nested_items: Vec<Item<'_>> = items
        .iter()
        .copied()
        .filter(|(rest, ..)| !rest.is_empty())
        .collect();
    let nested = group_by_head(&nested_items);
    write_count(out, direct.len() + nested.len());
    for (_, property, value) in direct {
        write_u64(out, property.0);
        value.encode_value(out);
    }
    for (member, members) in nested {
        write_u64(out, member.0);
        encode_member_list(out, &members);
    }
}

/// Reads a component-property-value-list-list, typing each value by `schema`
/// and reading the properties the link encodes in their encoding
/// (docs/less-wire.md §16): from `table` (by property index,
/// [`LinkEncodings::table`]) when the reader keeps one, else looked up in
/// `encodings`. Unknown components, unknown members and method ids are
/// errors.
pub fn decode_component_values(
    reader: &mut Reader<'_>,
    schema: &TypeSchema,
    encodings: &LinkEncodings,
    table: Option<&[Option<EncodingId>]>,
) -> Result<Vec<PropertyValue>, DecodeError> {
    // Every entry takes at least one byte, so the input bounds the count too.
    let count = reader.read_count("component count", MAX_COMPONENTS.min(reader.remaining()))?;
    let mut out = Vec::new();
    for _ in 0..count {
        let path = ComponentPath::top(ComponentId(reader.read_u64()?));
        let component = schema.component(&path).ok_or_else(|| {
            DecodeError::UndeclaredProperty(format!("component {path} of {}", schema.uri))
        })?;
        let typed = Typed {
            schema,
            encodings,
            table,
        };
        decode_member_list(reader, &typed, component, &path, &mut out)?;
    }
    Ok(out)
}

/// What a property value is read against.
struct Typed<'a> {
    schema: &'a TypeSchema,
    encodings: &'a LinkEncodings,
    table: Option<&'a [Option<EncodingId>]>,
}

impl Typed<'_> {
    /// The link's encoding of the property `key`.
    fn encoding(&self, key: &PropertyKey) -> Option<EncodingId> {
        match self.table {
            Some(table) => self
                .schema
                .property_index(key)
                .and_then(|index| table.get(index.get()).copied().flatten()),
            None => self.encodings.for_property(self.schema, key),
        }
    }
}

fn decode_member_list(
    reader: &mut Reader<'_>,
    typed: &Typed<'_>,
    component: &ComponentSchema,
    path: &ComponentPath,
    out: &mut Vec<PropertyValue>,
) -> Result<(), DecodeError> {
    let count = reader.read_count("property count", MAX_PROPERTIES.min(reader.remaining()))?;
    for _ in 0..count {
        let property = PropertyId(reader.read_u64()?);
        let member = component
            .member(property)
            .ok_or_else(|| DecodeError::UndeclaredProperty(format!("{path}.{property}")))?;
        match &member.kind {
            MemberKind::Property(value_type) => {
                let key = PropertyKey {
                    component: path.clone(),
                    property,
                };
                let value = LinkEncodings::read_value(reader, typed.encoding(&key), value_type)?;
                out.push(PropertyValue { key, value });
            }
            MemberKind::Component(nested) => {
                let child = path.child(nested.id).ok_or(DecodeError::TooDeep)?;
                decode_member_list(reader, typed, nested, &child, out)?;
            }
            MemberKind::Method(_) => {
                return Err(DecodeError::Invalid("method id in a property-value-list"))
            }
        }
    }
    Ok(())
}

/// Appends a flat property-value-list.
pub fn encode_field_values(out: &mut Vec<u8>, values: &[FieldValue]) {
    write_count(out, values.len());
    for field in values {
        write_u64(out, field.id.0);
        field.value.encode(out);
    }
}

/// Reads a flat property-value-list, typing each value with `lookup`.
pub fn decode_field_values<'s>(
    reader: &mut Reader<'_>,
    lookup: impl Fn(PropertyId) -> Option<&'s ValueType>,
) -> Result<Vec<FieldValue>, DecodeError> {
    let count = reader.read_count("property count", MAX_PROPERTIES.min(reader.remaining()))?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let id = PropertyId(reader.read_u64()?);
        let value_type =
            lookup(id).ok_or_else(|| DecodeError::UndeclaredProperty(format!("field {id}")))?;
        out.push(FieldValue {
            id,
            value: Value::decode(reader, value_type)?,
        });
    }
    Ok(out)
}

/// Appends a component-id-path: `path-length (component-id)*`.
pub fn encode_path(out: &mut Vec<u8>, path: &ComponentPath) {
    write_count(out, path.elements().len());
    for element in path.elements() {
        write_u64(out, element.0);
    }
}

/// Reads a component-id-path (1..=[`MAX_PATH_LEN`] elements).
pub fn decode_path(reader: &mut Reader<'_>) -> Result<ComponentPath, DecodeError> {
    let len = reader.read_count("path length", MAX_PATH_LEN)?;
    let mut elements = Vec::with_capacity(len);
    for _ in 0..len {
        elements.push(ComponentId(reader.read_u64()?));
    }
    ComponentPath::new(elements).ok_or(DecodeError::Invalid("empty component-id-path"))
}

/// Appends `component-count (component-id-path property-id-list)*`.
pub fn encode_subscriptions(out: &mut Vec<u8>, subscriptions: &[ComponentSubscription]) {
    write_count(out, subscriptions.len());
    for subscription in subscriptions {
        encode_path(out, &subscription.component);
        write_count(out, subscription.properties.len());
        for property in &subscription.properties {
            write_u64(out, property.0);
        }
    }
}

/// Reads a component-property-id-list-list (schema checks are the session's).
pub fn decode_subscriptions(
    reader: &mut Reader<'_>,
) -> Result<Vec<ComponentSubscription>, DecodeError> {
    let count = reader.read_count("component count", MAX_COMPONENTS.min(reader.remaining()))?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let component = decode_path(reader)?;
        let properties_len =
            reader.read_count("property count", MAX_PROPERTIES.min(reader.remaining()))?;
        let mut properties = Vec::with_capacity(properties_len);
        for _ in 0..properties_len {
            properties.push(PropertyId(reader.read_u64()?));
        }
        out.push(ComponentSubscription {
            component,
            properties,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::schema_toml::types_from_toml;

    fn crate_schema() -> std::sync::Arc<TypeSchema> {
        let registry = types_from_toml(include_str!("../../schemas/less/test-types.toml")).unwrap();
        registry.get("urn:lessgate:test:crate").unwrap().clone()
    }

    #[test]
    fn groups_by_component_and_nests_sub_components() {
        let schema = crate_schema();
        let colour = schema
            .key_by_name(&["info", "appearance"], "colour")
            .unwrap();
        let values = vec![
            PropertyValue {
                key: PropertyKey::new(2, 2),
                value: Value::Integer(5),
            },
            PropertyValue {
                key: PropertyKey::new(1, 3),
                value: Value::Float64(0.5),
            },
            PropertyValue {
                key: colour,
                value: Value::FixedBinary(vec![1, 2, 3, 4]),
            },
        ];
        let mut out = Vec::new();
        encode_component_values(&mut out, &values);
        // 2 components; component 2: 2 members (2 = INTEGER 5; 7 = nested list
        // of 1 member: 1 = fixed-binary 01020304); component 1: 1 member (3 = float64 0.5).
        assert_eq!(
            hex::encode(&out),
            concat!(
                "02",
                "0202",
                "0205",
                "07010101020304",
                "0101",
                "03000000000000e03f"
            )
        );
        let decoded = decode_component_values(
            &mut Reader::new(&out),
            &schema,
            &LinkEncodings::plain(),
            None,
        )
        .unwrap();
        let order: Vec<String> = decoded.iter().map(|v| v.key.to_string()).collect();
        assert_eq!(order, ["2.2", "2/7.1", "1.3"]);
        assert_eq!(decoded[1].value, Value::FixedBinary(vec![1, 2, 3, 4]));
    }

    #[test]
    fn rejects_undeclared_members_and_methods() {
        let schema = crate_schema();
        // component 2, one member: id 9 is a method.
        let method = [0x01, 0x02, 0x01, 0x09];
        assert_eq!(
            decode_component_values(
                &mut Reader::new(&method),
                &schema,
                &LinkEncodings::plain(),
                None
            ),
            Err(DecodeError::Invalid("method id in a property-value-list"))
        );
        let unknown = [0x01, 0x05, 0x00];
        assert!(matches!(
            decode_component_values(
                &mut Reader::new(&unknown),
                &schema,
                &LinkEncodings::plain(),
                None
            ),
            Err(DecodeError::UndeclaredProperty(_))
        ));
    }

    #[test]
    fn subscriptions_and_paths_round_trip() {
        let subscriptions = vec![
            ComponentSubscription {
                component: ComponentPath::top(ComponentId(1)),
                properties: vec![PropertyId(1), PropertyId(2)],
            },
            ComponentSubscription {
                component: ComponentPath::new(vec![ComponentId(2), ComponentId(7)]).unwrap(),
                properties: vec![PropertyId(300)],
            },
        ];
        let mut out = Vec::new();
        encode_subscriptions(&mut out, &subscriptions);
        assert_eq!(
            hex::encode(&out),
            concat!("02", "0101", "020102", "020207", "01ac04")
        );
        assert_eq!(
            decode_subscriptions(&mut Reader::new(&out)),
            Ok(subscriptions)
        );
        assert_eq!(
            decode_path(&mut Reader::new(&[0x00])),
            Err(DecodeError::Invalid("empty component-id-path"))
        );
    }
}
