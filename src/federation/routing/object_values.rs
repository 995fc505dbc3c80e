//! A scene entity and its components as the values of their LESS objects
//! (docs/federation.md §2): what an introduction or update carries.

use crate::federation::routing::link::Link;
use crate::federation::routing::references::reference_out;
use crate::federation::wire::mapping::{self, attribute_key, component, entity};
use crate::federation::wire::values::to_less;
use crate::less::ids::{Local, ObjectId, PropertyKey};
use crate::less::property_list::PropertyValue;
use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::scene::{Component, ComponentContent};
use crate::tundra::EntityId;

pub(in crate::federation) fn pv(component: u64, property: u64, value: Value) -> PropertyValue {
    PropertyValue {
        key: PropertyKey::new(component, property),
        value,
    }
}

/// The entity object's `authority` and `epoch` (docs/federation.md §7.1),
/// always sent together so a receiver sees them change at once.
pub(in crate::federation) fn authority_values(
    (authority, epoch): (uuid::Uuid, u64),
) -> [PropertyValue; 2] {
    [
        pv(entity::COMPONENT, entity::AUTHORITY, Value::Uuid(authority)),
        pv(
            entity::COMPONENT,
            entity::EPOCH,
            Value::Integer(epoch as i64),
        ),
    ]
}

pub(in crate::federation) fn parent_value(link: &Link, parent: Option<EntityId>) -> Value {
    let object = parent.and_then(|p| link.exported.object_of(p));
    Value::Standalone(Box::new(
        object.map_or(Value::Null, |o| Value::ObjectId(o.get())),
    ))
}

/// The URI and the Tundra type name of a component's LESS type.
pub(in crate::federation) fn component_type(component: &Component) -> (String, String) {
    match &component.content {
        ComponentContent::Known { schema, .. } => {
            (mapping::component_uri(schema), schema.name.clone())
        }
        ComponentContent::Opaque(_) => (
            mapping::opaque_uri(component.type_id),
            format!("opaque:{}", component.type_id),
        ),
    }
}

/// The Tundra type name of a component, as `component_type` gives it,
/// without building the URI.
pub(in crate::federation) fn type_name(component: &Component) -> std::borrow::Cow<'_, str> {
    match &component.content {
        ComponentContent::Known { schema, .. } => schema.name.as_str().into(),
        ComponentContent::Opaque(_) => format!("opaque:{}", component.type_id).into(),
    }
}

/// Every value of a component object; `transform`, when given, is the
/// value of attribute 0 (a Placeable's transform in federation
/// coordinates, `positions.rs`).
pub(in crate::federation) fn component_values(
    link: &Link,
    entity_object: ObjectId<Local>,
    component: &Component,
    transform: Option<Value>,
) -> Vec<PropertyValue> {
    let mut values = vec![
        pv(
            component::OWNER,
            component::ENTITY,
            Value::ObjectId(entity_object.get()),
        ),
        pv(
            component::OWNER,
            component::NAME,
            Value::String(component.name.clone()),
        ),
    ];
    let reference = |text: &str| reference_out(link, text);
    match &component.content {
        ComponentContent::Opaque(bytes) => values.push(pv(
            component::ATTRIBUTES,
            component::OPAQUE_BLOCK,
            Value::VariableBinary(bytes.clone()),
        )),
        ComponentContent::Known { schema, slots } => {
            if schema.dynamic_attributes {
                values.extend(dynamic_layout(component));
                for (index, slot) in slots.iter().enumerate() {
                    if let Some(attribute) = slot {
                        values.push(PropertyValue {
                            key: attribute_key(index as u8),
                            value: Value::Standalone(Box::new(to_less(
                                &attribute.value,
                                &reference,
                            ))),
                        });
                    }
                }
            } else {
                let mut transform = transform;
                for (index, slot) in slots.iter().enumerate().take(schema.attributes.len()) {
                    if let Some(attribute) = slot {
                        let value = match (index, transform.take()) {
                            (0, Some(placed)) => placed,
                            (_, unused) => {
                                transform = unused;
                                to_less(&attribute.value, &reference)
                            }
                        };
                        values.push(PropertyValue {
                            key: attribute_key(index as u8),
                            value,
                        });
                    }
                }
            }
        }
    }
    values
}

/// The layout properties of a DynamicComponent.
pub(in crate::federation) fn dynamic_layout(component: &Component) -> Vec<PropertyValue> {
    let ComponentContent::Known { slots, .. } = &component.content else {
        return Vec::new();
    };
    let types = slots
        .iter()
        .map(|s| Value::Integer(s.as_ref().map_or(0, |a| i64::from(a.ty().id()))))
        .collect();
    let names = slots
        .iter()
        .map(|s| {
            Value::String(
                s.as_ref()
                    .and_then(|a| a.dynamic_name.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
    vec![
        pv(
            component::LAYOUT,
            component::LAYOUT_TYPES,
            Value::List(ValueType::Integer, types),
        ),
        pv(
            component::LAYOUT,
            component::LAYOUT_NAMES,
            Value::List(ValueType::String, names),
        ),
    ]
}
