//! A scene component's attribute slots as the EditAttributes codec asks for
//! them, read in place: decoding a client's edit and encoding a tick's
//! changes used to build a list of slot types per block.

use smallvec::SmallVec;

use super::sync_state::SlotSet;
use crate::scene::{Attribute, Component, ComponentContent};
use crate::tundra::edit_attributes::{EditRef, SlotTypes};
use crate::tundra::AttributeType;

/// The attributes of `component` that `dirty` names and it still holds, by
/// reference, in ascending index order: an EditAttributes block's edits.
pub(super) fn dirty_edits<'a>(
    component: &'a Component,
    dirty: &SlotSet,
) -> SmallVec<[EditRef<'a>; 8]> {
    dirty
        .iter()
        .filter_map(|index| {
            let attribute = component.attribute(index)?;
            Some(EditRef {
                index,
                value: &attribute.value,
            })
        })
        .collect()
}

/// The slots of one component; an opaque component has none (its blocks
/// are carried byte for byte, never decoded).
#[derive(Debug, Clone, Copy)]
pub(super) struct SceneSlots<'a>(&'a [Option<Attribute>]);

impl<'a> SceneSlots<'a> {
    pub(super) fn of(component: &'a Component) -> Self {
        match &component.content {
            ComponentContent::Known { slots, .. } => SceneSlots(slots),
            ComponentContent::Opaque(_) => SceneSlots(&[]),
        }
    }
}

impl SlotTypes for SceneSlots<'_> {
    fn slot_count(&self) -> usize {
        self.0.len()
    }

    fn slot_type(&self, index: usize) -> Option<Option<AttributeType>> {
        self.0
            .get(index)
            .map(|slot| slot.as_ref().map(Attribute::ty))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::{AttributeValue, ComponentId, Registry};

    fn component(content: ComponentContent) -> Component {
        Component {
            id: ComponentId(1),
            type_id: 25,
            name: String::new(),
            content,
        }
    }

    #[test]
    fn scene_slots_answer_as_the_slot_type_list() {
        let schema = Registry::builtin().get(25).unwrap().clone();
        let attribute = |value| {
            Some(Attribute {
                dynamic_name: Some("a".into()),
                value,
            })
        };
        let known = component(ComponentContent::Known {
            schema,
            slots: vec![
                attribute(AttributeValue::Bool(true)),
                None,
                attribute(AttributeValue::Int(3)),
            ],
        });
        let opaque = component(ComponentContent::Opaque(vec![1, 2]));
        for c in [&known, &opaque] {
            let list = c.slot_types();
            let slots = SceneSlots::of(c);
            assert_eq!(slots.slot_count(), list.len());
            for index in 0..5 {
                assert_eq!(
                    slots.slot_type(index),
                    list.slot_type(index),
                    "slot {index}"
                );
            }
        }
        assert_eq!(SceneSlots::of(&known).slot_type(1), Some(None));
    }
}
