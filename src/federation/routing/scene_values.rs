//! A peer's component object as Tundra component data, and a presented
//! DynamicComponent brought in line with its object's layout: the values a
//! copy puts into the scene (docs/federation.md §2.2, §2.4).

use crate::federation::routing::link::Link;
use crate::federation::routing::mirror::{ComponentKind, MirrorComponent};
use crate::federation::routing::positions::{copy_in_world, is_placeable, placed};
use crate::federation::routing::references::reference_in;
use crate::federation::routing::tracked::TrackedEntities;
use crate::federation::space::placement::Placement;
use crate::federation::space::position::TRANSFORM;
use crate::federation::stats::FederationStats;
use crate::federation::wire::mapping::{attribute_key, component};
use crate::federation::wire::values::from_less;
use crate::less::ids::PropertyKey;
use crate::less::value::Value;
use crate::scene::{ChangeSource, Scene};
use crate::tundra::{
    AttributeBlock, AttributeType, ComponentBody, ComponentData, ComponentId, DynamicAttribute,
    EntityId,
};

/// The ComponentData of a mirrored component object, or `None` when the
/// type is not known here. A Placeable's transform placed in the world
/// comes into this world's coordinates by `placement`
/// (`positions.rs`).
pub(in crate::federation) fn component_data(
    tracked: &TrackedEntities,
    link: &Link,
    scene: &Scene,
    object: &MirrorComponent,
    placement: &Placement,
) -> Option<ComponentData> {
    let reference = |value: &Value| reference_in(tracked, link, value);
    let placed_in_world = !placement.is_origin()
        && is_placeable(object)
        && link
            .mirror
            .owner_of(object)
            .is_some_and(|copy| copy_in_world(copy, object));
    let body = match &object.kind {
        ComponentKind::Opaque { .. } => {
            match object.value(&attribute_key(component::OPAQUE_BLOCK as u8)) {
                Some(Value::VariableBinary(bytes)) => ComponentBody::Opaque(bytes.clone()),
                _ => ComponentBody::Opaque(Vec::new()),
            }
        }
        ComponentKind::Static { type_id } => {
            let schema = scene.registry().get(*type_id)?;
            let values = schema
                .attributes
                .iter()
                .enumerate()
                .map(|(index, attribute)| {
                    let value = object
                        .value(&attribute_key(index as u8))
                        .and_then(|v| from_less(attribute.ty, v, &reference))
                        .unwrap_or_else(|| attribute.default.clone());
                    if placed_in_world && index == usize::from(TRANSFORM) {
                        placed(value, |t| placement.transform_to_local(t))
                    } else {
                        value
                    }
                })
                .collect();
            ComponentBody::Attributes(AttributeBlock {
                values,
                dynamic: Vec::new(),
                trailing: Vec::new(),
            })
        }
        ComponentKind::Dynamic { .. } => ComponentBody::Attributes(AttributeBlock {
            values: Vec::new(),
            dynamic: dynamic_attributes(object, &reference),
            trailing: Vec::new(),
        }),
    };
    Some(ComponentData {
        id: ComponentId(1),
        type_id: object.kind.type_id(),
        name: object.name.clone(),
        body,
    })
}

/// A DynamicComponent's attributes from its layout and slot values.
pub(in crate::federation) fn dynamic_attributes(
    object: &MirrorComponent,
    reference: &dyn Fn(&Value) -> String,
) -> Vec<DynamicAttribute> {
    let list = |property| match object.value(&PropertyKey::new(component::LAYOUT, property)) {
        Some(Value::List(_, items)) => items.clone(),
        _ => Vec::new(),
    };
    let types = list(component::LAYOUT_TYPES);
    let names = list(component::LAYOUT_NAMES);
    let mut attributes = Vec::new();
    for (index, ty) in types.iter().enumerate().take(256) {
        let Value::Integer(ty) = ty else { continue };
        let Some(ty) = u8::try_from(*ty).ok().and_then(AttributeType::from_id) else {
            continue;
        };
        let name = match names.get(index) {
            Some(Value::String(n)) => n.clone(),
            _ => String::new(),
        };
        let value = match object.value(&attribute_key(index as u8)) {
            Some(Value::Standalone(inner)) => from_less(ty, inner, reference),
            _ => None,
        };
        attributes.push(DynamicAttribute {
            index: index as u8,
            name,
            value: value.unwrap_or_else(|| crate::tundra::AttributeValue::default_for(ty)),
        });
    }
    attributes
}

/// Makes a presented DynamicComponent's attributes match `wanted`.
pub(in crate::federation) fn reconcile_dynamic(
    scene: &mut Scene,
    stats: &mut FederationStats,
    (source, entity, component): (ChangeSource, EntityId, ComponentId),
    wanted: Vec<DynamicAttribute>,
) {
    let Some(current) = scene
        .entity(entity)
        .and_then(|e| e.components.get(&component))
        .cloned()
    else {
        return;
    };
    let wanted_indices: std::collections::HashSet<u8> = wanted.iter().map(|a| a.index).collect();
    for index in 0..=255u8 {
        if current.attribute(index).is_some() && !wanted_indices.contains(&index) {
            let removed = scene.remove_attribute(source, entity, component, index);
            stats.scene(removed, "dynamic attribute not removed");
        }
    }
    for attribute in wanted {
        let index = attribute.index;
        match current.attribute(index) {
            Some(existing) if existing.ty() == attribute.value.attribute_type() => {
                let edited =
                    scene.edit_attribute(source, entity, component, index, attribute.value);
                stats.scene(edited, "dynamic attribute not edited");
            }
            Some(_) => {
                // Another type in the slot: the attribute is created anew.
                let removed = scene.remove_attribute(source, entity, component, index);
                stats.scene(removed, "retyped dynamic attribute not removed");
                let created = scene.create_attribute(source, entity, component, attribute);
                stats.scene(created, "retyped dynamic attribute not created");
            }
            None => {
                let created = scene.create_attribute(source, entity, component, attribute);
                stats.scene(created, "dynamic attribute not created");
            }
        }
    }
}

/// The attribute index a property of a component object stands for
/// (docs/federation.md §2.2: property i of component `attributes`).
pub(in crate::federation) fn attribute_index(key: &PropertyKey) -> Option<u8> {
    match key.component.elements() {
        [c] if c.0 == component::ATTRIBUTES => u8::try_from(key.property.0).ok(),
        _ => None,
    }
}
