//! Entity-level scene messages: EditEntityProperties (109), CreateEntity
//! (110), RemoveEntity (116), CreateEntityReply (117), SetEntityParent
//! (124) (docs/tundra-wire.md §4.5, §4.6, §4.12, §4.13, §4.18).
//!
//! VLE entity ids are masked to 30 bits on encode; the decoded value is the
//! wire value (a client's own CreateEntity id N means unacked 0x40000000|N,
//! which is for the server to apply). u32 fields carry full ids.

use serde::{Deserialize, Serialize};

use super::{read_id_pairs, write_id_pairs, IdPair};
use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::component::ComponentData;
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::ids::{EntityId, ProtocolVersion};
use crate::tundra::registry::Registry;

/// The smallest ComponentFullUpdate: VLE id, VLE type, S8 name, VLE size
/// (one byte each). A component count is checked against the bytes left
/// divided by this before anything is read.
pub const MIN_COMPONENT_FULL_UPDATE_BYTES: usize = 4;

/// EditEntityProperties (109): `VLE sceneId, VLE entityId, u8 temporary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditEntityProperties {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub temporary: bool,
}

impl EditEntityProperties {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(EditEntityProperties {
            scene_id: r.vle("scene id")?,
            entity_id: EntityId(r.vle("entity id")?),
            temporary: r.u8("temporary flag")? != 0,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        w.u8(u8::from(self.temporary));
        Ok(())
    }
}

/// CreateEntity (110): `VLE sceneId, VLE entityId, u8 temporary`,
/// `u32 parent` only for protocol >= 3, `VLE count`, the components.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateEntity {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub temporary: bool,
    /// Full 32-bit parent id (0 = none); written only to protocol >= 3
    /// peers, as 0 when `None`.
    #[serde(default)]
    pub parent: Option<EntityId>,
    pub components: Vec<ComponentData>,
}

impl CreateEntity {
    pub fn decode(
        r: &mut BitReader<'_>,
        protocol: ProtocolVersion,
        registry: &Registry,
    ) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let temporary = r.u8("temporary flag")? != 0;
        let parent = if protocol.has_entity_parent() {
            Some(EntityId(r.u32("parent entity id")?))
        } else {
            None
        };
        let count = r.vle("component count")? as usize;
        let limit = r.bytes_left() / MIN_COMPONENT_FULL_UPDATE_BYTES;
        if count > limit {
            return Err(DecodeError::LimitExceeded {
                what: "component count",
                value: count,
                limit,
            });
        }
        let mut components = Vec::with_capacity(count);
        for _ in 0..count {
            components.push(ComponentData::read(r, registry)?);
        }
        Ok(CreateEntity {
            scene_id,
            entity_id,
            temporary,
            parent,
            components,
        })
    }

    pub fn encode(&self, w: &mut BitWriter, protocol: ProtocolVersion) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        // "Do not write the temporary flag as a bit to not desync the byte alignment".
        w.u8(u8::from(self.temporary));
        if protocol.has_entity_parent() {
            w.u32(self.parent.map_or(0, |p| p.0));
        }
        w.vle_len(self.components.len())?;
        for c in &self.components {
            c.write(w)?;
        }
        Ok(())
    }
}

/// RemoveEntity (116): `VLE sceneId, VLE entityId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveEntity {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
}

impl RemoveEntity {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(RemoveEntity {
            scene_id: r.vle("scene id")?,
            entity_id: EntityId(r.vle("entity id")?),
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())
    }
}

/// CreateEntityReply (117): `VLE sceneId, VLE senderEntityId (masked),
/// VLE newEntityId, VLE n, n × (VLE senderCompId, VLE newCompId)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateEntityReply {
    #[serde(default)]
    pub scene_id: u32,
    /// The client's unacked id (travels masked; the client ORs 0x40000000).
    pub sender_entity_id: EntityId,
    pub entity_id: EntityId,
    pub components: Vec<IdPair>,
}

impl CreateEntityReply {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(CreateEntityReply {
            scene_id: r.vle("scene id")?,
            sender_entity_id: EntityId(r.vle("sender entity id")?),
            entity_id: EntityId(r.vle("entity id")?),
            components: read_id_pairs(r)?,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.sender_entity_id.wire())?;
        w.vle(self.entity_id.wire())?;
        write_id_pairs(w, &self.components)
    }
}

/// SetEntityParent (124): `VLE sceneId, u32 entityId, u32 parentId`
/// (full ids, 0 = unparent; protocol >= 3 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetEntityParent {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub parent_id: EntityId,
}

impl SetEntityParent {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(SetEntityParent {
            scene_id: r.vle("scene id")?,
            entity_id: EntityId(r.u32("entity id")?),
            parent_id: EntityId(r.u32("parent entity id")?),
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.u32(self.entity_id.0);
        w.u32(self.parent_id.0);
        Ok(())
    }
}
