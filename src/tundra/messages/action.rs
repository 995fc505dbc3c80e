//! EntityAction (120), AssetDiscovery (121), AssetDeleted (122)
//! (docs/tundra-wire.md §4.15, §4.16; generated `MsgEntityAction.h` and friends).
//! Strings are 8-bit text kept byte for byte (Latin-1).

use serde::{Deserialize, Serialize};

use crate::tundra::bits::{latin1_decode, latin1_encode, BitReader, BitWriter};
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::ids::EntityId;

/// EntityAction execution-type bits (`EntityAction.h`).
pub mod exec_type {
    /// Execute where received.
    pub const LOCAL: u8 = 1;
    /// Execute on the server.
    pub const SERVER: u8 = 2;
    /// Forward to every other client (as Local).
    pub const PEERS: u8 = 4;
}

/// EntityAction (120): `u32 entityId` (fixed, full id), `u8 len` + name,
/// `u8 executionType`, `u8 numParams`, numParams × (`VLE len` + bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityAction {
    pub entity_id: EntityId,
    pub name: String,
    /// Bitmask of [`exec_type`] values, kept as sent.
    pub execution_type: u8,
    pub parameters: Vec<String>,
}

impl EntityAction {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let entity_id = EntityId(r.u32("entity id")?);
        let name = r.s8("action name")?;
        let execution_type = r.u8("execution type")?;
        let count = r.u8("parameter count")?;
        let mut parameters = Vec::new();
        for _ in 0..count {
            // The length is bounded by the bytes left: `bytes` checks it
            // before allocating.
            let len = r.vle("parameter length")? as usize;
            parameters.push(latin1_decode(&r.bytes(len, "parameter")?));
        }
        Ok(EntityAction {
            entity_id,
            name,
            execution_type,
            parameters,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.u32(self.entity_id.0);
        w.s8(&self.name)?;
        w.u8(self.execution_type);
        let count = u8::try_from(self.parameters.len()).map_err(|_| EncodeError::TooLong {
            what: "action parameters",
            len: self.parameters.len(),
            limit: usize::from(u8::MAX),
        })?;
        w.u8(count);
        for p in &self.parameters {
            let bytes = latin1_encode(p);
            w.vle_len(bytes.len())?;
            w.bytes(&bytes);
        }
        Ok(())
    }
}

/// AssetDiscovery (121): `u8 len` + asset ref, `u8 len` + asset type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetDiscovery {
    pub asset_ref: String,
    pub asset_type: String,
}

impl AssetDiscovery {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(AssetDiscovery {
            asset_ref: r.s8("asset ref")?,
            asset_type: r.s8("asset type")?,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.s8(&self.asset_ref)?;
        w.s8(&self.asset_type)
    }
}

/// AssetDeleted (122): `u8 len` + asset ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetDeleted {
    pub asset_ref: String,
}

impl AssetDeleted {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(AssetDeleted {
            asset_ref: r.s8("asset ref")?,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.s8(&self.asset_ref)
    }
}
