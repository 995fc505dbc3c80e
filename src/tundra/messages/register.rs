//! RegisterComponentType (123) (docs/tundra-wire.md §4.17): a custom component type
//! announced to protocol >= 2 peers: `VLE typeId, S8 typeName, VLE n`,
//! n × (`u8 attrTypeId, S8 attrId, S8 attrName`).

use serde::{Deserialize, Serialize};

use crate::tundra::attribute::AttributeType;
use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::registry::{ComponentSchema, CustomAttribute, CustomRegistration, Registry};

/// The smallest attribute entry: u8 type and two empty S8 strings.
pub const MIN_ATTRIBUTE_ENTRY_BYTES: usize = 3;

/// One attribute of the announced type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredAttribute {
    #[serde(rename = "type")]
    pub ty: AttributeType,
    pub id: String,
    pub name: String,
}

/// RegisterComponentType (123).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterComponentType {
    pub type_id: u32,
    /// tundra sends `EC_` + name, tundra-urho3d the bare name; a receiver
    /// accepts both (the type id hashes the name without the prefix).
    pub type_name: String,
    pub attributes: Vec<RegisteredAttribute>,
}

impl RegisterComponentType {
    /// The announcement of a registered custom type, with the name as the
    /// tundra-urho3d server sends it: without `EC_` (docs/tundra-wire.md
    /// §4.17).
    pub fn from_schema(schema: &ComponentSchema) -> Self {
        RegisterComponentType {
            type_id: schema.type_id,
            type_name: schema.name.clone(),
            attributes: schema
                .attributes
                .iter()
                .map(|a| RegisteredAttribute {
                    ty: a.ty,
                    id: a.id.clone(),
                    name: a.name.clone(),
                })
                .collect(),
        }
    }

    /// Adds the announced type to `registry` (ignored when a static type of
    /// that name exists). The id is recomputed from the name as Tundra does;
    /// the announced `type_id` is informative.
    pub fn register(&self, registry: &mut Registry) -> CustomRegistration {
        let attributes = self
            .attributes
            .iter()
            .map(|a| CustomAttribute {
                ty: a.ty,
                id: a.id.clone(),
                name: a.name.clone(),
            })
            .collect();
        registry.register_custom(&self.type_name, attributes)
    }

    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let type_id = r.vle("component type id")?;
        let type_name = r.s8("component type name")?;
        let count = r.vle("attribute count")? as usize;
        let limit = r.bytes_left() / MIN_ATTRIBUTE_ENTRY_BYTES;
        if count > limit {
            return Err(DecodeError::LimitExceeded {
                what: "attribute count",
                value: count,
                limit,
            });
        }
        let mut attributes = Vec::with_capacity(count);
        for _ in 0..count {
            let raw = r.u8("attribute type")?;
            let ty = AttributeType::from_id(raw).ok_or(DecodeError::Invalid {
                what: "attribute type",
                value: u64::from(raw),
            })?;
            attributes.push(RegisteredAttribute {
                ty,
                id: r.s8("attribute id")?,
                name: r.s8("attribute name")?,
            });
        }
        Ok(RegisterComponentType {
            type_id,
            type_name,
            attributes,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.type_id)?;
        w.s8(&self.type_name)?;
        w.vle_len(self.attributes.len())?;
        for a in &self.attributes {
            w.u8(a.ty.id());
            w.s8(&a.id)?;
            w.s8(&a.name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::registry::CustomAttribute;

    #[test]
    fn announcement_names_the_type_as_the_real_server_does() {
        let mut registry = Registry::builtin();
        let attribute = |ty, id: &str, name: &str| CustomAttribute {
            ty,
            id: id.into(),
            name: name.into(),
        };
        registry.register_custom(
            "EC_MyComponent",
            vec![
                attribute(AttributeType::Int, "points", "Points"),
                attribute(AttributeType::Bool, "on", "On"),
            ],
        );
        let schema = registry.get_by_name("MyComponent").unwrap();
        let announcement = RegisterComponentType::from_schema(schema);
        let mut w = BitWriter::new();
        announcement.encode(&mut w).unwrap();
        // VLE 69969 (the VLE codec has its own fixtures), S8 "MyComponent"
        // (no EC_), VLE 2, then u8 type, S8 id, S8 name per attribute
        // (docs/tundra-wire.md §4.17).
        let mut expected = Vec::new();
        let mut head = BitWriter::new();
        head.vle(69969).unwrap();
        expected.extend(head.finish());
        expected.push(11);
        expected.extend(b"MyComponent");
        expected.push(2);
        expected.extend([AttributeType::Int.id(), 6]);
        expected.extend(b"points");
        expected.push(6);
        expected.extend(b"Points");
        expected.extend([AttributeType::Bool.id(), 2]);
        expected.extend(b"on");
        expected.push(2);
        expected.extend(b"On");
        assert_eq!(hex::encode(w.finish()), hex::encode(&expected));
        // Read back, the bare name registers the same type id.
        let mut fresh = Registry::builtin();
        let decoded = RegisterComponentType::decode(&mut BitReader::new(&expected)).unwrap();
        assert_eq!(decoded.type_name, "MyComponent");
        decoded.register(&mut fresh);
        assert_eq!(fresh.get_by_name("EC_MyComponent").unwrap().type_id, 69969);
    }
}
