//! Attribute-level scene messages: CreateAttributes (112), EditAttributes
//! (113), RemoveAttributes (114) (docs/tundra-wire.md §4.8-§4.10).
//!
//! EditAttributes blocks stay raw here: decoding one needs the component's
//! attribute slots, which only the scene knows. [`EditAttributesBlock`]
//! offers `decode` / `encode` against given slots (see `edit_attributes`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::tundra::attribute::{AttributeType, AttributeValue};
use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::component::MAX_ATTRIBUTE_BLOCK_BYTES;
use crate::tundra::edit_attributes::{self, AttributeEdit, AttributeEdits};
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::ids::{ComponentId, EntityId};
use crate::tundra::text_form::hex_bytes;

/// One new dynamic attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewAttribute {
    pub component_id: ComponentId,
    pub index: u8,
    pub name: String,
    pub value: AttributeValue,
}

/// CreateAttributes (112): `VLE sceneId, VLE entityId`, then while at least
/// 24 bits remain: `VLE compId, u8 index, u8 type, S8 name, value`. An
/// unknown type stops the parse (Tundra: "aborting CreateAttributes message
/// parsing"); what follows it is dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateAttributes {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub attributes: Vec<NewAttribute>,
}

impl CreateAttributes {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let mut attributes = Vec::new();
        while r.bits_left() >= 24 {
            let component_id = ComponentId(r.vle("component id")?);
            let index = r.u8("attribute index")?;
            let Some(ty) = AttributeType::from_id(r.u8("attribute type")?) else {
                break;
            };
            let name = r.s8("attribute name")?;
            let value = AttributeValue::read(ty, r)?;
            attributes.push(NewAttribute {
                component_id,
                index,
                name,
                value,
            });
        }
        Ok(CreateAttributes {
            scene_id,
            entity_id,
            attributes,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        for a in &self.attributes {
            w.vle(a.component_id.wire())?;
            w.u8(a.index);
            w.u8(a.value.attribute_type().id());
            w.s8(&a.name)?;
            a.value.write(w)?;
        }
        Ok(())
    }
}

/// One component's EditAttributes block, kept as bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditAttributesBlock {
    pub component_id: ComponentId,
    #[serde(with = "hex_bytes")]
    pub data: Vec<u8>,
}

impl EditAttributesBlock {
    /// Builds a block the way Tundra's server does (method by size).
    pub fn encode(
        component_id: ComponentId,
        edits: &[AttributeEdit],
        slots: &[Option<AttributeType>],
    ) -> Result<Self, EncodeError> {
        Ok(EditAttributesBlock {
            component_id,
            data: edit_attributes::encode_block(edits, slots)?,
        })
    }

    /// Decodes the block against the component's current slots.
    pub fn decode(&self, slots: &[Option<AttributeType>]) -> Result<AttributeEdits, DecodeError> {
        edit_attributes::decode_block(&self.data, slots)
    }
}

/// EditAttributes (113): `VLE sceneId, VLE entityId`, then while at least 8
/// bits remain: `VLE compId, VLE blockBytes, block`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditAttributes {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub blocks: Vec<EditAttributesBlock>,
}

/// An EditAttributes message read in place: its blocks borrow the frame.
/// The server decodes client edits this way (the bulk of client traffic);
/// [`EditAttributes::decode`] is the same reader plus a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditAttributesView<'a> {
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub blocks: SmallVec<[BlockView<'a>; 2]>,
}

/// One component's block inside an [`EditAttributesView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockView<'a> {
    pub component_id: ComponentId,
    /// Borrowed: blocks start on a byte boundary (every field before them
    /// is whole bytes), so only a hostile reader state could make a copy.
    pub data: Cow<'a, [u8]>,
}

impl<'a> EditAttributesView<'a> {
    pub fn decode(r: &mut BitReader<'a>) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let mut blocks = SmallVec::new();
        while r.bits_left() >= 8 {
            let component_id = ComponentId(r.vle("component id")?);
            let size = r.vle("attribute block size")? as usize;
            if size > MAX_ATTRIBUTE_BLOCK_BYTES {
                return Err(DecodeError::LimitExceeded {
                    what: "EditAttributes block bytes",
                    value: size,
                    limit: MAX_ATTRIBUTE_BLOCK_BYTES,
                });
            }
            let data = r.bytes(size, "EditAttributes block")?;
            blocks.push(BlockView { component_id, data });
        }
        Ok(EditAttributesView {
            scene_id,
            entity_id,
            blocks,
        })
    }
}

impl EditAttributes {
    /// The message as a view borrowing its blocks.
    pub fn view(&self) -> EditAttributesView<'_> {
        EditAttributesView {
            scene_id: self.scene_id,
            entity_id: self.entity_id,
            blocks: self
                .blocks
                .iter()
                .map(|b| BlockView {
                    component_id: b.component_id,
                    data: Cow::Borrowed(&b.data[..]),
                })
                .collect(),
        }
    }

    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let view = EditAttributesView::decode(r)?;
        Ok(EditAttributes {
            scene_id: view.scene_id,
            entity_id: view.entity_id,
            blocks: view
                .blocks
                .into_iter()
                .map(|b| EditAttributesBlock {
                    component_id: b.component_id,
                    data: b.data.into_owned(),
                })
                .collect(),
        })
    }

    /// At least the payload's size in bytes (each VLE counted as 4 bytes),
    /// to size the frame buffer once.
    pub fn encoded_len(&self) -> usize {
        8 + self.blocks.iter().map(|b| 8 + b.data.len()).sum::<usize>()
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        for b in &self.blocks {
            if b.data.len() > MAX_ATTRIBUTE_BLOCK_BYTES {
                return Err(EncodeError::TooLong {
                    what: "EditAttributes block",
                    len: b.data.len(),
                    limit: MAX_ATTRIBUTE_BLOCK_BYTES,
                });
            }
            w.vle(b.component_id.wire())?;
            w.vle_len(b.data.len())?;
            w.bytes(&b.data);
        }
        Ok(())
    }
}

/// A removed dynamic attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedAttribute {
    pub component_id: ComponentId,
    pub index: u8,
}

/// RemoveAttributes (114): `VLE sceneId, VLE entityId`, then while at
/// least 8 bits remain: `VLE compId, u8 index`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAttributes {
    #[serde(default)]
    pub scene_id: u32,
    pub entity_id: EntityId,
    pub attributes: Vec<RemovedAttribute>,
}

impl RemoveAttributes {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let entity_id = EntityId(r.vle("entity id")?);
        let mut attributes = Vec::new();
        while r.bits_left() >= 8 {
            attributes.push(RemovedAttribute {
                component_id: ComponentId(r.vle("component id")?),
                index: r.u8("attribute index")?,
            });
        }
        Ok(RemoveAttributes {
            scene_id,
            entity_id,
            attributes,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        w.vle(self.entity_id.wire())?;
        for a in &self.attributes {
            w.vle(a.component_id.wire())?;
            w.u8(a.index);
        }
        Ok(())
    }
}
