//! Why the scene refused a change. Tundra drops refused edits silently on the
//! wire (docs/tundra-wire.md §7.4); the node logs these reasons instead.

use crate::tundra::{ComponentId, EntityId};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SceneError {
    #[error("no entity {0}")]
    UnknownEntity(EntityId),
    #[error("entity {0} has no component {1}")]
    UnknownComponent(EntityId, ComponentId),
    #[error("entity {0} already exists")]
    EntityExists(EntityId),
    #[error("component {1} of entity {0} has an opaque body of unknown type {2}")]
    OpaqueComponent(EntityId, ComponentId, u32),
    #[error("component {1} of entity {0} has no attribute {2}")]
    UnknownAttribute(EntityId, ComponentId, u8),
    #[error("component {1} of entity {0} already has attribute {2}")]
    AttributeExists(EntityId, ComponentId, u8),
    #[error("attribute {2} of component {1} of entity {0} is static")]
    StaticAttribute(EntityId, ComponentId, u8),
    #[error("component type {0} does not take dynamic attributes")]
    NotDynamic(u32),
    #[error("attribute {2} of component {1} of entity {0} holds {expected}, got {got}", expected = .3, got = .4)]
    TypeMismatch(EntityId, ComponentId, u8, &'static str, &'static str),
    #[error("entity {0} cannot be its own ancestor")]
    ParentCycle(EntityId),
    #[error("no free {0} id left")]
    IdsExhausted(&'static str),
    #[error("entity {0} is read-only here: its authority is another node")]
    NotAuthority(EntityId),
}
