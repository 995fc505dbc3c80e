//! EntityReference values (such as Placeable.parentRef) arriving from the
//! world server, renumbered into the node's id space before they reach the
//! scene: a world-server id names the node entity mirrored from it (or the
//! federation entity exported to it). The outbound direction is in
//! `export.rs`.

use super::bridge::Bridge;
use super::ids::UpstreamEntity;
use crate::tundra::{AttributeValue, ComponentBody, ComponentData, EntityId};

impl Bridge {
    /// An EntityReference's text in the node's id space. A name, `0` and
    /// empty text travel as they are; an id the bridge knows no entity for
    /// (not copied yet, or never) becomes empty, since as a number it would
    /// name an unrelated node entity.
    pub(super) fn reference_in(&self, text: &str) -> String {
        match text.trim().parse::<u32>() {
            Ok(0) | Err(_) => text.to_owned(),
            Ok(id) => match self.ids.resolve(EntityId(id)) {
                UpstreamEntity::Mirrored(local) | UpstreamEntity::Exported(local) => {
                    local.0.to_string()
                }
                UpstreamEntity::Unknown => String::new(),
            },
        }
    }

    /// Renumbers `value` in place if it is an entity reference.
    pub(super) fn value_in(&self, value: &mut AttributeValue) {
        if let AttributeValue::EntityReference(text) = value {
            *text = self.reference_in(text);
        }
    }

    /// Every entity reference of a component from the world server,
    /// renumbered in place.
    pub(super) fn component_in(&self, data: &mut ComponentData) {
        if let ComponentBody::Attributes(block) = &mut data.body {
            for value in &mut block.values {
                self.value_in(value);
            }
            for dynamic in &mut block.dynamic {
                self.value_in(&mut dynamic.value);
            }
        }
    }
}
