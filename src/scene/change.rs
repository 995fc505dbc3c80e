//! The scene's change journal: what changed and who changed it.

use crate::tundra::{ComponentId, EntityId};

/// One Tundra client connection, numbered by the node for its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// Who made a change. A change is never echoed back to the client that made
/// it (docs/tundra-wire.md §7.5: "so that we do not echo the change back").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeSource {
    /// The node itself: its scene file, a simulation, an authority decision.
    Node,
    /// A local Tundra client.
    Client(ClientId),
    /// State that arrived over a peer link (its `LinkId` number).
    Peer(u64),
}

/// What changed. Attribute indices are slot indices within the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    EntityCreated(EntityId),
    EntityRemoved(EntityId),
    ComponentCreated(EntityId, ComponentId),
    ComponentRemoved(EntityId, ComponentId),
    AttributeCreated(EntityId, ComponentId, u8),
    AttributeRemoved(EntityId, ComponentId, u8),
    AttributeChanged(EntityId, ComponentId, u8),
    TemporaryChanged(EntityId),
    ParentChanged(EntityId),
}

impl ChangeKind {
    /// The component the change belongs to, if it is about one.
    pub fn component(self) -> Option<ComponentId> {
        match self {
            ChangeKind::ComponentCreated(_, c)
            | ChangeKind::ComponentRemoved(_, c)
            | ChangeKind::AttributeCreated(_, c, _)
            | ChangeKind::AttributeRemoved(_, c, _)
            | ChangeKind::AttributeChanged(_, c, _) => Some(c),
            _ => None,
        }
    }

    /// The entity the change belongs to.
    pub fn entity(self) -> EntityId {
        match self {
            ChangeKind::EntityCreated(e)
            | ChangeKind::EntityRemoved(e)
            | ChangeKind::ComponentCreated(e, _)
            | ChangeKind::ComponentRemoved(e, _)
            | ChangeKind::AttributeCreated(e, _, _)
            | ChangeKind::AttributeRemoved(e, _, _)
            | ChangeKind::AttributeChanged(e, _, _)
            | ChangeKind::TemporaryChanged(e)
            | ChangeKind::ParentChanged(e) => e,
        }
    }
}

/// One journal entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub source: ChangeSource,
    pub kind: ChangeKind,
}
