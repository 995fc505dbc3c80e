//! Which values are positions in a world's coordinates, and so move with its
//! placement (docs/federation.md §2.7): the Placeable `transform` of an
//! entity placed in its world, not relative to another entity (no parent
//! entity, empty `parentRef`). A child's transform is relative to its
//! parent and travels as it is; so do values only the world's scripts read
//! (EntityAction parameters, DynamicComponent values).
//!
//! Whether an entity is placed in its world is decided from the values as
//! they travel on the link (the entity object's `parent`, the Placeable's
//! `parentRef`), so the sender and the receiver always agree, even where a
//! parent is not exported on that link.

use crate::less::value::Value;
use crate::tundra::AttributeValue;

/// Tundra's Placeable type id (schemas/tundra/components.toml).
pub const PLACEABLE: u32 = 20;
/// Placeable attribute 0, `transform`.
pub const TRANSFORM: u8 = 0;
/// Placeable attribute 4, `parentRef`: the entity its transform is
/// relative to.
pub const PARENT_REF: u8 = 4;

/// Whether attribute `index` of a component of type `type_id` is the
/// Placeable transform.
pub fn is_transform(type_id: u32, index: u8) -> bool {
    type_id == PLACEABLE && index == TRANSFORM
}

/// Whether a change of attribute `index` of a `type_id` component changes
/// how the transform is placed (a new `parentRef`).
pub fn moves_reference(type_id: u32, index: u8) -> bool {
    type_id == PLACEABLE && index == PARENT_REF
}

/// Whether an entity object's `parent` value and its Placeable's
/// `parentRef` value, as they travel on a link, leave its transform in
/// world coordinates: no parent, and a `parentRef` that is NULL, absent or
/// an empty name.
pub fn in_world_on_wire(parent: Option<&Value>, parent_ref: Option<&Value>) -> bool {
    let no_parent = match parent {
        None => true,
        Some(Value::Standalone(inner)) => matches!(**inner, Value::Null),
        Some(value) => matches!(value, Value::Null),
    };
    let no_reference = match parent_ref {
        None | Some(Value::Null) => true,
        Some(Value::Standalone(inner)) => matches!(**inner, Value::Null),
        Some(Value::String(name)) => name.trim().is_empty(),
        Some(_) => false,
    };
    no_parent && no_reference
}

/// The text of a scene's `parentRef` attribute value, if it is one.
pub fn reference_text(value: &AttributeValue) -> Option<&str> {
    match value {
        AttributeValue::EntityReference(text) => Some(text),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_entity_is_in_world_coordinates_and_a_child_is_not() {
        let null = Value::Standalone(Box::new(Value::Null));
        assert!(in_world_on_wire(None, None));
        assert!(in_world_on_wire(Some(&null), Some(&Value::Null)));
        assert!(in_world_on_wire(
            Some(&null),
            Some(&Value::String(" ".into()))
        ));
        let parent = Value::Standalone(Box::new(Value::ObjectId(4)));
        assert!(!in_world_on_wire(Some(&parent), None));
        assert!(!in_world_on_wire(None, Some(&Value::ObjectId(4))));
        assert!(!in_world_on_wire(None, Some(&Value::String("lamp".into()))));
    }

    #[test]
    fn only_the_placeable_transform_is_a_position() {
        assert!(is_transform(20, 0));
        assert!(!is_transform(20, 1));
        assert!(!is_transform(23, 0));
        assert!(moves_reference(20, 4));
    }
}
