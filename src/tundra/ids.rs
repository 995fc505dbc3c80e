//! Id newtypes of the Tundra protocol and their ranges (docs/tundra-wire.md §7.3,
//! tundra `UniqueIdGenerator.h`).
//!
//! Entity and component ids share one scheme: 1..=0x3FFFFFFF are replicated
//! ids given by the authority; 0x40000000..=0x7FFFFFFF are "unacked" ids a
//! client uses for content it created until the server acks it; from
//! 0x80000000 ids are local and never replicated. VLE fields carry ids masked
//! to 30 bits (so an unacked id travels as its low bits); fixed u32 fields
//! (CreateEntity parent, SetEntityParent, EntityAction) carry full ids.
//! This module only names and classifies ids; mapping between id spaces
//! belongs to the server and federation layers.

use std::fmt;

use serde::{Deserialize, Serialize};

/// `UniqueIdGenerator::LAST_REPLICATED_ID`: also the 30-bit wire mask.
pub const LAST_REPLICATED_ID: u32 = 0x3FFF_FFFF;
/// `UniqueIdGenerator::FIRST_UNACKED_ID`.
pub const FIRST_UNACKED_ID: u32 = 0x4000_0000;
/// `UniqueIdGenerator::FIRST_LOCAL_ID`.
pub const FIRST_LOCAL_ID: u32 = 0x8000_0000;

/// Which range an entity or component id falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdSpace {
    /// Id 0: "no entity" (a CreateEntity parent of 0 means none).
    None,
    /// 1..=0x3FFFFFFF, given by the authority.
    Replicated,
    /// 0x40000000..=0x7FFFFFFF, client-created and awaiting the server's id.
    Unacked,
    /// 0x80000000.., never sent over the network.
    Local,
}

impl IdSpace {
    /// Classifies a full 32-bit id.
    pub fn of(id: u32) -> IdSpace {
        match id {
            0 => IdSpace::None,
            1..=LAST_REPLICATED_ID => IdSpace::Replicated,
            FIRST_UNACKED_ID..=0x7FFF_FFFF => IdSpace::Unacked,
            _ => IdSpace::Local,
        }
    }
}

macro_rules! scene_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The range this id belongs to.
            pub fn space(self) -> IdSpace {
                IdSpace::of(self.0)
            }

            /// The value written into a VLE field: the low 30 bits
            /// (`id & LAST_REPLICATED_ID`, docs/tundra-wire.md §3 notation `mask(id)`).
            pub fn wire(self) -> u32 {
                self.0 & LAST_REPLICATED_ID
            }

            /// The unacked id a client meant when it sent `wire` in a VLE
            /// field of its own CreateEntity / CreateComponents (§4.13: the
            /// receiver ORs 0x40000000 back in).
            pub fn unacked_from_wire(wire: u32) -> Self {
                $name((wire & LAST_REPLICATED_ID) | FIRST_UNACKED_ID)
            }

            /// True for 1..=0x3FFFFFFF.
            pub fn is_replicated(self) -> bool {
                self.space() == IdSpace::Replicated
            }

            /// True for 0x40000000..=0x7FFFFFFF.
            pub fn is_unacked(self) -> bool {
                self.space() == IdSpace::Unacked
            }

            /// True for 0x80000000 and above.
            pub fn is_local(self) -> bool {
                self.space() == IdSpace::Local
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

scene_id!(
    /// A Tundra entity id (full 32 bits; see the module docs for ranges).
    EntityId
);
scene_id!(
    /// A Tundra component id, unique within its entity.
    ComponentId
);

/// A client connection id given by the server in LoginReply (§7.2: the first
/// is 1, then `max(existing)+1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub u32);

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The negotiated protocol version (§7.1). A client that sends none is 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProtocolVersion(pub u32);

impl ProtocolVersion {
    /// `ProtocolOriginal`.
    pub const ORIGINAL: ProtocolVersion = ProtocolVersion(1);
    /// `ProtocolCustomComponents`: RegisterComponentType (123).
    pub const CUSTOM_COMPONENTS: ProtocolVersion = ProtocolVersion(2);
    /// `ProtocolHierarchicScene`: CreateEntity parent u32, SetEntityParent.
    pub const HIERARCHIC_SCENE: ProtocolVersion = ProtocolVersion(3);
    /// `ProtocolWebClientRigidBodyMessage`: RigidBodyUpdate to WebSocket clients.
    pub const WEB_CLIENT_RIGID_BODY: ProtocolVersion = ProtocolVersion(4);
    /// `cHighestSupportedProtocolVersion`.
    pub const HIGHEST: ProtocolVersion = ProtocolVersion(4);

    /// The version a server accepts for a requested one: `min(requested, 4)`,
    /// 1 when the client sent none (§7.1).
    pub fn negotiate(requested: Option<u32>) -> ProtocolVersion {
        ProtocolVersion(requested.unwrap_or(1).min(Self::HIGHEST.0))
    }

    /// CreateEntity carries the u32 parent field (§4.6).
    pub fn has_entity_parent(self) -> bool {
        self >= Self::HIERARCHIC_SCENE
    }
}

impl Default for ProtocolVersion {
    fn default() -> Self {
        ProtocolVersion::HIGHEST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(EntityId(0).space(), IdSpace::None);
        assert!(EntityId(1).is_replicated());
        assert!(EntityId(0x3FFF_FFFF).is_replicated());
        assert!(EntityId(0x4000_0001).is_unacked());
        assert!(EntityId(0x7FFF_FFFF).is_unacked());
        assert!(ComponentId(0x8000_0000).is_local());
        assert!(ComponentId(0xFFFF_FFFF).is_local());
    }

    #[test]
    fn masking_and_unacked_mapping() {
        assert_eq!(EntityId(0x4000_0005).wire(), 5);
        assert_eq!(EntityId(0x8000_0007).wire(), 7);
        assert_eq!(EntityId::unacked_from_wire(5), EntityId(0x4000_0005));
        assert_eq!(
            ComponentId::unacked_from_wire(0x7FFF_FFFF),
            ComponentId(0x7FFF_FFFF)
        );
    }

    #[test]
    fn protocol_negotiation() {
        assert_eq!(ProtocolVersion::negotiate(None), ProtocolVersion::ORIGINAL);
        assert_eq!(
            ProtocolVersion::negotiate(Some(9)),
            ProtocolVersion::HIGHEST
        );
        assert!(!ProtocolVersion(2).has_entity_parent());
        assert!(ProtocolVersion(3).has_entity_parent());
    }
}
