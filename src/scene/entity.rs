//! Entities, components and attribute slots as the node holds them.

use std::sync::Arc;

use super::component_map::ComponentMap;
use crate::tundra::{AttributeType, AttributeValue, ComponentId, ComponentSchema, EntityId};

/// One attribute slot's content.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// `Some` for a dynamic attribute (its id and name are the same string);
    /// static attributes take their names from the component schema.
    pub dynamic_name: Option<String>,
    pub value: AttributeValue,
}

impl Attribute {
    pub fn ty(&self) -> AttributeType {
        self.value.attribute_type()
    }
}

/// A component's attributes, or its block carried byte for byte when the
/// node does not know the type (docs/tundra-wire.md §5.1: length-prefixed blocks
/// exist so unknown components can be skipped and forwarded).
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentContent {
    Known {
        schema: Arc<ComponentSchema>,
        /// Static attributes first, then dynamic ones; `None` is a hole left
        /// by a removed dynamic attribute, as in Tundra's attribute vector.
        slots: Vec<Option<Attribute>>,
    },
    Opaque(Vec<u8>),
}

/// One component of an entity.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    pub id: ComponentId,
    pub type_id: u32,
    /// Instance name (usually empty), not the type name.
    pub name: String,
    pub content: ComponentContent,
}

impl Component {
    /// Local components (ids in the local range) never leave the node.
    pub fn is_replicated(&self) -> bool {
        !self.id.is_local()
    }

    /// Slot types as EditAttributes decoding needs them.
    pub fn slot_types(&self) -> Vec<Option<AttributeType>> {
        match &self.content {
            ComponentContent::Known { slots, .. } => slots
                .iter()
                .map(|slot| slot.as_ref().map(Attribute::ty))
                .collect(),
            ComponentContent::Opaque(_) => Vec::new(),
        }
    }

    /// The value in slot `index`, if the slot is filled.
    pub fn attribute(&self, index: u8) -> Option<&Attribute> {
        match &self.content {
            ComponentContent::Known { slots, .. } => slots.get(usize::from(index))?.as_ref(),
            ComponentContent::Opaque(_) => None,
        }
    }

    /// Number of static attributes of the type.
    pub fn static_count(&self) -> usize {
        match &self.content {
            ComponentContent::Known { schema, .. } => schema.attributes.len(),
            ComponentContent::Opaque(_) => 0,
        }
    }
}

/// Where an entity is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Here: the node's own world or one of its clients. The node is the
    /// authority and applies client edits directly.
    Local,
    /// Another node simulates it; the node presents it read-only and turns
    /// client edits into requests to that authority.
    Remote,
}

/// One entity.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    pub id: EntityId,
    pub temporary: bool,
    pub parent: Option<EntityId>,
    pub origin: Origin,
    /// Ascending component id, the order Tundra's std::map gives.
    pub components: ComponentMap,
    pub(super) next_component_id: u32,
    pub(super) next_local_component_id: u32,
}

impl Entity {
    /// Local entities (ids in the local range) never leave the node.
    pub fn is_replicated(&self) -> bool {
        !self.id.is_local()
    }

    /// Replicated components in ascending id order.
    pub fn replicated_components(&self) -> impl Iterator<Item = &Component> {
        self.components.values().filter(|c| c.is_replicated())
    }

    /// The first component of a type, as Tundra's `GetComponent(typeId)`.
    pub fn component_of_type(&self, type_id: u32) -> Option<&Component> {
        self.components.values().find(|c| c.type_id == type_id)
    }
}
