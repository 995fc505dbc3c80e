//! ComponentFullUpdate (docs/tundra-wire.md §5.1): a component's id, type, instance
//! name and its attribute block, as CreateEntity (110) and CreateComponents
//! (111) carry it.
//!
//! The attribute block is length-prefixed so that a peer can skip what it
//! does not understand, and it is always decoded in its own reader:
//! - a known type reads its static attributes while at least 8 bits remain
//!   ("allow component version mismatches"), so a shorter block from an
//!   older peer is a prefix; a value cut in the middle is an error, as the
//!   C++ reader throws there;
//! - DynamicComponent then reads dynamic attributes (u8 index, u8 type, S8
//!   name, value) while more than 16 bits remain, stopping at an unknown type
//!   as Tundra's `CreateAttribute` failure does;
//! - whatever is left is kept as `trailing` bytes (Tundra ignores them), so
//!   re-encoding gives back the same block;
//! - an unknown type id is carried opaque, byte for byte.
//!
//! Blocks are capped at 16 KiB: tundra reads them into a 16 KiB buffer.

use serde::{Deserialize, Serialize};

use super::attribute::{AttributeType, AttributeValue};
use super::bits::{BitReader, BitWriter};
use super::error::{DecodeError, EncodeError};
use super::ids::ComponentId;
use super::registry::{ComponentSchema, Registry};
use super::text_form::hex_bytes;

/// Largest attribute block (`char attrDataBuffer_[16 * 1024]`, docs/tundra-wire.md §4.9).
pub const MAX_ATTRIBUTE_BLOCK_BYTES: usize = 16 * 1024;

/// A dynamic attribute of a DynamicComponent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamicAttribute {
    /// Slot index within the component.
    pub index: u8,
    /// Attribute name (also its id).
    pub name: String,
    /// Typed value; its type is the attribute's type.
    pub value: AttributeValue,
}

impl DynamicAttribute {
    /// Writes `u8 index, u8 type, S8 name, value` (§5.1, §4.8).
    pub fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.u8(self.index);
        w.u8(self.value.attribute_type().id());
        w.s8(&self.name)?;
        self.value.write(w)
    }
}

/// A decoded attribute block of a known component type.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AttributeBlock {
    /// Static attribute values in index order; may be a prefix of the
    /// type's layout.
    pub values: Vec<AttributeValue>,
    /// Dynamic attributes (DynamicComponent only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dynamic: Vec<DynamicAttribute>,
    /// Bytes after the last attribute that the reader skipped.
    #[serde(default, with = "hex_bytes", skip_serializing_if = "Vec::is_empty")]
    pub trailing: Vec<u8>,
}

impl AttributeBlock {
    /// Decodes `data` with the layout of `schema`.
    pub fn decode(data: &[u8], schema: &ComponentSchema) -> Result<AttributeBlock, DecodeError> {
        let mut r = BitReader::new(data);
        let mut block = AttributeBlock::default();
        for attribute in &schema.attributes {
            if r.bits_left() < 8 {
                break;
            }
            block
                .values
                .push(AttributeValue::read(attribute.ty, &mut r)?);
        }
        if schema.dynamic_attributes {
            // "while (attrDs.BitsLeft() > 2 * 8)" in HandleCreateEntity.
            while r.bits_left() > 16 {
                let mark = r.clone();
                let index = r.u8("dynamic attribute index")?;
                let Some(ty) = AttributeType::from_id(r.u8("dynamic attribute type")?) else {
                    r = mark;
                    break;
                };
                let name = r.s8("dynamic attribute name")?;
                let value = AttributeValue::read(ty, &mut r)?;
                block.dynamic.push(DynamicAttribute { index, name, value });
            }
        }
        // Every value is whole bytes, so the reader is byte aligned here.
        block.trailing = r.rest_aligned().unwrap_or_default().to_vec();
        Ok(block)
    }

    /// Encodes the block bytes (without the length prefix).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = BitWriter::new();
        for value in &self.values {
            value.write(&mut w)?;
        }
        for attribute in &self.dynamic {
            attribute.write(&mut w)?;
        }
        w.bytes(&self.trailing);
        Ok(w.finish())
    }
}

/// The attribute data of a component: decoded, or opaque for a type the
/// registry does not know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentBody {
    Attributes(AttributeBlock),
    Opaque(#[serde(with = "hex_bytes")] Vec<u8>),
}

/// One ComponentFullUpdate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentData {
    /// Component id (sent masked to 30 bits).
    pub id: ComponentId,
    /// Component type id.
    pub type_id: u32,
    /// Instance name (usually empty), not the type name.
    #[serde(default)]
    pub name: String,
    /// Attribute block.
    pub body: ComponentBody,
}

impl ComponentData {
    /// A full update of a known type with the given static values.
    pub fn with_values(
        id: ComponentId,
        schema: &ComponentSchema,
        values: Vec<AttributeValue>,
    ) -> Self {
        ComponentData {
            id,
            type_id: schema.type_id,
            name: String::new(),
            body: ComponentBody::Attributes(AttributeBlock {
                values,
                ..AttributeBlock::default()
            }),
        }
    }

    /// Reads `VLE id, VLE type, S8 name, VLE size, size bytes`.
    pub fn read(r: &mut BitReader<'_>, registry: &Registry) -> Result<ComponentData, DecodeError> {
        let id = ComponentId(r.vle("component id")?);
        let type_id = r.vle("component type id")?;
        let name = r.s8("component name")?;
        let size = r.vle("attribute block size")? as usize;
        if size > MAX_ATTRIBUTE_BLOCK_BYTES {
            return Err(DecodeError::LimitExceeded {
                what: "attribute block bytes",
                value: size,
                limit: MAX_ATTRIBUTE_BLOCK_BYTES,
            });
        }
        let data = r.bytes(size, "attribute block")?;
        let body = match registry.get(type_id) {
            Some(schema) => ComponentBody::Attributes(AttributeBlock::decode(&data, schema)?),
            None => ComponentBody::Opaque(data.into_owned()),
        };
        Ok(ComponentData {
            id,
            type_id,
            name,
            body,
        })
    }

    /// Writes the full update; the id is masked to 30 bits.
    pub fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.id.wire())?;
        w.vle(self.type_id)?;
        w.s8(&self.name)?;
        let block = match &self.body {
            ComponentBody::Attributes(block) => block.encode()?,
            ComponentBody::Opaque(bytes) => bytes.clone(),
        };
        if block.len() > MAX_ATTRIBUTE_BLOCK_BYTES {
            return Err(EncodeError::TooLong {
                what: "attribute block",
                len: block.len(),
                limit: MAX_ATTRIBUTE_BLOCK_BYTES,
            });
        }
        w.vle_len(block.len())?;
        w.bytes(&block);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::values::Transform;

    fn roundtrip(hex_in: &str, registry: &Registry) -> ComponentData {
        let bytes = hex::decode(hex_in).unwrap();
        let mut r = BitReader::new(&bytes);
        let c = ComponentData::read(&mut r, registry).unwrap();
        assert_eq!(r.bits_left(), 0);
        let mut w = BitWriter::new();
        c.write(&mut w).unwrap();
        assert_eq!(hex::encode(w.finish()), hex_in);
        c
    }

    #[test]
    fn name_component_full_update() {
        // id 3, type 26 (Name), name "", 7 bytes: three U16 strings "a", "", "".
        let c = roundtrip("031a000701006100000000", &Registry::builtin());
        let ComponentBody::Attributes(block) = c.body else {
            panic!("known type")
        };
        assert_eq!(
            block.values,
            vec![
                AttributeValue::String("a".into()),
                AttributeValue::String(String::new()),
                AttributeValue::String(String::new()),
            ]
        );
        assert!(block.trailing.is_empty());
    }

    #[test]
    fn prefix_and_longer_blocks_are_tolerated() {
        let registry = Registry::builtin();
        // Placeable with only its transform (36 bytes): a prefix.
        let transform = hex::encode({
            let mut w = BitWriter::new();
            AttributeValue::Transform(Transform::default())
                .write(&mut w)
                .unwrap();
            w.finish()
        });
        let c = roundtrip(&format!("0114{}24{}", "00", transform), &registry);
        let ComponentBody::Attributes(block) = c.body else {
            panic!("known type")
        };
        assert_eq!(block.values.len(), 1);
        // Name with one extra byte after its three strings: kept as trailing.
        let c = roundtrip("011a0007000000000000ff", &registry);
        let ComponentBody::Attributes(block) = c.body else {
            panic!("known type")
        };
        assert_eq!(block.values.len(), 3);
        assert_eq!(block.trailing, vec![0xFF]);
    }

    #[test]
    fn value_cut_in_the_middle_is_an_error() {
        // Placeable block of 3 bytes: a Transform needs 36.
        let bytes = hex::decode("01140003000000").unwrap();
        let mut r = BitReader::new(&bytes);
        assert!(ComponentData::read(&mut r, &Registry::builtin()).is_err());
    }

    #[test]
    fn unknown_type_is_opaque_and_dynamic_component_parses() {
        let registry = Registry::builtin();
        let c = roundtrip("05e8070003010203", &registry);
        assert_eq!(c.type_id, 1000);
        assert_eq!(c.body, ComponentBody::Opaque(vec![1, 2, 3]));
        // DynamicComponent: index 0, type bool, name "on", value 1.
        let c = roundtrip("021900060008026f6e01", &registry);
        let ComponentBody::Attributes(block) = c.body else {
            panic!("known type")
        };
        assert_eq!(
            block.dynamic,
            vec![DynamicAttribute {
                index: 0,
                name: "on".into(),
                value: AttributeValue::Bool(true),
            }]
        );
    }

    #[test]
    fn oversized_block_is_rejected() {
        let mut w = BitWriter::new();
        w.vle(1).unwrap();
        w.vle(1000).unwrap();
        w.s8("").unwrap();
        w.vle(16 * 1024 + 1).unwrap();
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        assert!(matches!(
            ComponentData::read(&mut r, &Registry::builtin()),
            Err(DecodeError::LimitExceeded { .. })
        ));
    }
}
