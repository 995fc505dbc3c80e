//! Component-level scene messages: CreateComponents (111),
//! RemoveComponents (115), CreateComponentsReply (118) (docs/tundra-wire.md §4.7,
//! §4.11, §4.14). Lists without a count are read "while bits remain", as
//! Tundra's handlers do (docs/tundra-wire.md §4).

use serde::{Deserialize, Serialize};

use super::{read_id_pairs, write_id_pairs, IdPair};
use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::component::ComponentData;
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::ids::{ComponentId, EntityId};
use crate::tundra::registry::Registry;

/// CreateComponents (111): `VLE sceneId, VLE entityId`, then full updates
/// while more than 16 bits remain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateComponents {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub components: Vec<ComponentData>,
}

impl CreateComponents {
    pub fn decode(r: &mut BitReader<'_>, registry: &Registry) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let mut components = Vec::new();
        // "while (ds.BitsLeft() > 2 * 8)" in HandleCreateComponents.
        while r.bits_left() > 16 {
            components.push(ComponentData::read(r, registry)?);
        }
        Ok(CreateComponents {
            scene_id,
            entity_id,
            components,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        for c in &self.components {
            c.write(w)?;
        }
        Ok(())
    }
}

/// RemoveComponents (115): `VLE sceneId, VLE entityId`, then component ids
/// while at least 8 bits remain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveComponents {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub component_ids: Vec<ComponentId>,
}

impl RemoveComponents {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let mut component_ids = Vec::new();
        while r.bits_left() >= 8 {
            component_ids.push(ComponentId(r.vle("component id")?));
        }
        Ok(RemoveComponents {
            scene_id,
            entity_id,
            component_ids,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        for id in &self.component_ids {
            w.vle(id.wire())?;
        }
        Ok(())
    }
}

/// CreateComponentsReply (118): `VLE sceneId, VLE entityId, VLE n`,
/// n × (`VLE senderCompId`, `VLE newCompId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateComponentsReply {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub components: Vec<IdPair>,
}

impl CreateComponentsReply {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(CreateComponentsReply {
            scene_id: r.vle("scene id")?,
            entity_id: EntityId(r.vle("entity id")?),
            components: read_id_pairs(r)?,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        write_id_pairs(w, &self.components)
    }
}
