//! Echo suppression: the bridge keeps, per component it created in the world
//! server, the values the world server holds (a shadow), and sends only what
//! differs from it. A value the world server sent is written into the shadow
//! first, so it is never sent back; a federation update equal to what the
//! world server has is never sent again, nor is the world server's value as
//! it reads after a lossy link (a quantized copy of it, not a client's
//! edit). The world server's own entities are never exported at all (the
//! bridge skips every id it mirrors). A value the world server set and the
//! bridge forwarded to the entity's authority is not sent back while the
//! authority has not answered (see [`super::forwarded`]).
//!
//! Pure functions over slot vectors; no ids, no messages.

use std::collections::BTreeMap;

use super::forwarded::Forwarded;
use crate::clock::Time;
use crate::federation::encodings::is_link_copy;
use crate::scene::{Attribute, Component, ComponentContent};
use crate::tundra::{
    AttributeEdit, AttributeValue, ComponentBody, ComponentData, DynamicAttribute,
};

/// What one component's world-server copy needs to match the node's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlotDiff {
    /// Existing slots whose value differs.
    pub edits: Vec<AttributeEdit>,
    /// Dynamic attributes the world server does not have.
    pub created: Vec<DynamicAttribute>,
    /// Dynamic attribute indices the node no longer has.
    pub removed: Vec<u8>,
}

impl SlotDiff {
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty() && self.created.is_empty() && self.removed.is_empty()
    }
}

/// The slot values of a node component (empty for an opaque one: its bytes
/// are sent whole at creation and cannot be edited attribute by attribute).
pub fn shadow_of(component: &Component) -> Vec<Option<AttributeValue>> {
    match &component.content {
        ComponentContent::Known { slots, .. } => slots
            .iter()
            .map(|slot| slot.as_ref().map(|a| a.value.clone()))
            .collect(),
        ComponentContent::Opaque(_) => Vec::new(),
    }
}

/// The slot values a full update (CreateEntity / CreateComponents) carries:
/// static values by position, dynamic ones at their index.
pub fn shadow_of_data(data: &ComponentData) -> Vec<Option<AttributeValue>> {
    let ComponentBody::Attributes(block) = &data.body else {
        return Vec::new();
    };
    let mut slots: Vec<Option<AttributeValue>> = block.values.iter().cloned().map(Some).collect();
    for dynamic in &block.dynamic {
        let index = usize::from(dynamic.index);
        if slots.len() <= index {
            slots.resize(index + 1, None);
        }
        slots[index] = Some(dynamic.value.clone());
    }
    slots
}

/// Compares the world server's copy (`shadow`) with the node's slots and
/// returns what to send; `shadow` is updated to what will have been sent.
/// `statics` is the number of static attributes (never created or removed).
/// An attribute with world edits still on their way to the authority
/// (`forwarded`) is left alone until they are settled at `now`.
pub fn diff_slots(
    shadow: &mut Vec<Option<AttributeValue>>,
    current: &[Option<Attribute>],
    statics: usize,
    forwarded: &mut BTreeMap<u8, Forwarded>,
    now: Time,
) -> SlotDiff {
    let mut diff = SlotDiff::default();
    let len = shadow.len().max(current.len());
    shadow.resize(len, None);
    for (index, slot) in current.iter().enumerate() {
        let Ok(index_u8) = u8::try_from(index) else {
            break; // Tundra's indices are u8 (docs/tundra-wire.md §4.8)
        };
        if let Some(waiting) = forwarded.get_mut(&index_u8) {
            if slot
                .as_ref()
                .is_some_and(|new| waiting.holds_back(&new.value, now))
            {
                continue; // the authority has not answered the world's edit
            }
            forwarded.remove(&index_u8);
        }
        match (shadow[index].as_ref(), slot) {
            (_, None) => {}
            (Some(old), Some(new)) if *old == new.value => {}
            // The world server's value come back through a lossy link (its
            // edit went to the authority, whose update crossed a link): no
            // client set it, so the world server keeps its own (section 5).
            (Some(old), Some(new)) if is_link_copy(old, &new.value) => {}
            (Some(old), Some(new))
                if index < statics || old.attribute_type() == new.value.attribute_type() =>
            {
                diff.edits.push(AttributeEdit {
                    index: index_u8,
                    value: new.value.clone(),
                });
                shadow[index] = Some(new.value.clone());
            }
            (_, Some(new)) if index >= statics => {
                if shadow[index].is_some() {
                    diff.removed.push(index_u8); // type changed: remove, create
                }
                diff.created.push(DynamicAttribute {
                    index: index_u8,
                    name: new.dynamic_name.clone().unwrap_or_default(),
                    value: new.value.clone(),
                });
                shadow[index] = Some(new.value.clone());
            }
            (None, Some(new)) => {
                // A static slot the world server's copy lacked (a prefix
                // block, section 5.1): an edit fills it.
                diff.edits.push(AttributeEdit {
                    index: index_u8,
                    value: new.value.clone(),
                });
                shadow[index] = Some(new.value.clone());
            }
            (Some(_), Some(_)) => {}
        }
    }
    for (index, slot) in shadow.iter_mut().enumerate().skip(statics) {
        let gone = !matches!(current.get(index), Some(Some(_)));
        if gone && slot.is_some() {
            if let Ok(index_u8) = u8::try_from(index) {
                diff.removed.push(index_u8);
            }
            *slot = None;
        }
    }
    while shadow.len() > statics && shadow.last().is_some_and(Option::is_none) {
        shadow.pop();
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(value: AttributeValue) -> Option<Attribute> {
        Some(Attribute {
            dynamic_name: None,
            value,
        })
    }

    fn dynamic(name: &str, value: AttributeValue) -> Option<Attribute> {
        Some(Attribute {
            dynamic_name: Some(name.into()),
            value,
        })
    }

    #[test]
    fn equal_values_are_not_sent_again() {
        let current = vec![
            slot(AttributeValue::Int(1)),
            slot(AttributeValue::Bool(true)),
        ];
        let mut shadow = vec![
            Some(AttributeValue::Int(1)),
            Some(AttributeValue::Bool(true)),
        ];
        assert!(diff_slots(&mut shadow, &current, 2, &mut BTreeMap::new(), Time::ZERO).is_empty());
    }

    #[test]
    fn a_changed_static_value_is_one_edit_and_updates_the_shadow() {
        let current = vec![
            slot(AttributeValue::Int(5)),
            slot(AttributeValue::Bool(true)),
        ];
        let mut shadow = vec![
            Some(AttributeValue::Int(1)),
            Some(AttributeValue::Bool(true)),
        ];
        let diff = diff_slots(&mut shadow, &current, 2, &mut BTreeMap::new(), Time::ZERO);
        assert_eq!(
            diff.edits,
            vec![AttributeEdit {
                index: 0,
                value: AttributeValue::Int(5)
            }]
        );
        assert_eq!(shadow[0], Some(AttributeValue::Int(5)));
        assert!(
            diff_slots(&mut shadow, &current, 2, &mut BTreeMap::new(), Time::ZERO).is_empty(),
            "sent once"
        );
    }

    #[test]
    fn dynamic_attributes_are_created_and_removed() {
        let mut shadow = vec![Some(AttributeValue::Int(1))];
        let current = vec![None, dynamic("speed", AttributeValue::Real(2.0))];
        let diff = diff_slots(&mut shadow, &current, 0, &mut BTreeMap::new(), Time::ZERO);
        assert_eq!(diff.removed, vec![0]);
        assert_eq!(diff.created.len(), 1);
        assert_eq!(diff.created[0].index, 1);
        assert_eq!(diff.created[0].name, "speed");
        assert_eq!(shadow, vec![None, Some(AttributeValue::Real(2.0))]);
    }

    #[test]
    fn a_lossy_copy_of_the_world_servers_value_is_not_written_back() {
        use crate::tundra::values::{Float3, Transform};
        let rotated = |y: f32| {
            AttributeValue::Transform(Transform {
                rot: Float3::new(0.0, y, 0.0),
                ..Transform::default()
            })
        };
        // The world server holds 30 (one of its clients set it); the
        // federation's copy came back as 29.970703125.
        let mut shadow = vec![Some(rotated(30.0))];
        let copy = vec![slot(rotated(30.0 - 15.0 / 512.0))];
        assert!(diff_slots(&mut shadow, &copy, 1, &mut BTreeMap::new(), Time::ZERO).is_empty());
        assert_eq!(shadow, vec![Some(rotated(30.0))], "the world's value stays");
        // A federation client's edit is sent.
        let edit = vec![slot(rotated(45.0))];
        assert_eq!(
            diff_slots(&mut shadow, &edit, 1, &mut BTreeMap::new(), Time::ZERO)
                .edits
                .len(),
            1
        );
    }

    #[test]
    fn a_value_the_world_server_sent_is_not_echoed() {
        // The world server's edit lands in the shadow before the node's scene
        // takes it from the federation: nothing to send.
        let mut shadow = vec![Some(AttributeValue::Int(9))];
        let current = vec![slot(AttributeValue::Int(9))];
        assert!(diff_slots(&mut shadow, &current, 1, &mut BTreeMap::new(), Time::ZERO).is_empty());
    }
}
