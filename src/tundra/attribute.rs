//! The 17 Tundra attribute types and their binary form (docs/tundra-wire.md §5.2,
//! tundra `IAttribute.h` / `IAttribute.cpp` `ToBinary` / `FromBinary`).
//!
//! Every binary form is a whole number of bytes; inside an EditAttributes
//! bitmask block the same bytes are simply shifted to a bit offset. Strings
//! of type `string` are U16 + UTF-8; asset and entity references, variants
//! and list items are S8 (kept as Latin-1 so each byte survives). Text forms
//! for TXML are in `attribute_text`.

use serde::{Deserialize, Serialize};

use super::bits::{BitReader, BitWriter};
use super::error::{DecodeError, EncodeError};
use super::text_form::f32_exact;
use super::values::{Color, Float2, Float3, Float4, Point, Quat, Transform};

/// An attribute type id (`cAttribute*` in tundra `IAttribute.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum AttributeType {
    String = 1,
    Int = 2,
    Real = 3,
    Color = 4,
    Float2 = 5,
    Float3 = 6,
    Float4 = 7,
    Bool = 8,
    UInt = 9,
    Quat = 10,
    AssetReference = 11,
    AssetReferenceList = 12,
    EntityReference = 13,
    Variant = 14,
    VariantList = 15,
    Transform = 16,
    Point = 17,
}

impl AttributeType {
    /// All types in id order.
    pub const ALL: [AttributeType; 17] = [
        AttributeType::String,
        AttributeType::Int,
        AttributeType::Real,
        AttributeType::Color,
        AttributeType::Float2,
        AttributeType::Float3,
        AttributeType::Float4,
        AttributeType::Bool,
        AttributeType::UInt,
        AttributeType::Quat,
        AttributeType::AssetReference,
        AttributeType::AssetReferenceList,
        AttributeType::EntityReference,
        AttributeType::Variant,
        AttributeType::VariantList,
        AttributeType::Transform,
        AttributeType::Point,
    ];

    /// The type with wire id `id` (1..=17); 0 (None) and others are `None`.
    pub fn from_id(id: u8) -> Option<AttributeType> {
        Self::ALL.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// The wire id.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Tundra's type name (TXML `type=`, RegisterComponentType).
    pub fn tundra_name(self) -> &'static str {
        match self {
            AttributeType::String => "string",
            AttributeType::Int => "int",
            AttributeType::Real => "real",
            AttributeType::Color => "Color",
            AttributeType::Float2 => "float2",
            AttributeType::Float3 => "float3",
            AttributeType::Float4 => "float4",
            AttributeType::Bool => "bool",
            AttributeType::UInt => "uint",
            AttributeType::Quat => "Quat",
            AttributeType::AssetReference => "AssetReference",
            AttributeType::AssetReferenceList => "AssetReferenceList",
            AttributeType::EntityReference => "EntityReference",
            AttributeType::Variant => "QVariant",
            AttributeType::VariantList => "QVariantList",
            AttributeType::Transform => "Transform",
            AttributeType::Point => "QPoint",
        }
    }

    /// Looks a type up by name, case-insensitively, accepting tundra names,
    /// urho names (Variant, VariantList, Point) and "float" for real.
    pub fn from_name(name: &str) -> Option<AttributeType> {
        let lower = name.trim().to_ascii_lowercase();
        let found = match lower.as_str() {
            "variant" => AttributeType::Variant,
            "variantlist" => AttributeType::VariantList,
            "point" => AttributeType::Point,
            "float" => AttributeType::Real,
            "unsigned int" => AttributeType::UInt,
            _ => {
                return Self::ALL
                    .into_iter()
                    .find(|t| t.tundra_name().eq_ignore_ascii_case(&lower))
            }
        };
        Some(found)
    }
}

/// A typed attribute value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum AttributeValue {
    String(String),
    Int(i32),
    Real(#[serde(with = "f32_exact")] f32),
    Color(Color),
    Float2(Float2),
    Float3(Float3),
    Float4(Float4),
    Bool(bool),
    UInt(u32),
    Quat(Quat),
    AssetReference(String),
    AssetReferenceList(Vec<String>),
    EntityReference(String),
    Variant(String),
    VariantList(Vec<String>),
    Transform(Transform),
    Point(Point),
}

impl AttributeValue {
    /// The type of this value.
    pub fn attribute_type(&self) -> AttributeType {
        match self {
            AttributeValue::String(_) => AttributeType::String,
            AttributeValue::Int(_) => AttributeType::Int,
            AttributeValue::Real(_) => AttributeType::Real,
            AttributeValue::Color(_) => AttributeType::Color,
            AttributeValue::Float2(_) => AttributeType::Float2,
            AttributeValue::Float3(_) => AttributeType::Float3,
            AttributeValue::Float4(_) => AttributeType::Float4,
            AttributeValue::Bool(_) => AttributeType::Bool,
            AttributeValue::UInt(_) => AttributeType::UInt,
            AttributeValue::Quat(_) => AttributeType::Quat,
            AttributeValue::AssetReference(_) => AttributeType::AssetReference,
            AttributeValue::AssetReferenceList(_) => AttributeType::AssetReferenceList,
            AttributeValue::EntityReference(_) => AttributeType::EntityReference,
            AttributeValue::Variant(_) => AttributeType::Variant,
            AttributeValue::VariantList(_) => AttributeType::VariantList,
            AttributeValue::Transform(_) => AttributeType::Transform,
            AttributeValue::Point(_) => AttributeType::Point,
        }
    }

    /// The type's default value (tundra `Attribute<T>::DefaultValue`).
    pub fn default_for(ty: AttributeType) -> AttributeValue {
        match ty {
            AttributeType::String => AttributeValue::String(String::new()),
            AttributeType::Int => AttributeValue::Int(0),
            AttributeType::Real => AttributeValue::Real(0.0),
            AttributeType::Color => AttributeValue::Color(Color::default()),
            AttributeType::Float2 => AttributeValue::Float2(Float2::default()),
            AttributeType::Float3 => AttributeValue::Float3(Float3::default()),
            AttributeType::Float4 => AttributeValue::Float4(Float4::default()),
            AttributeType::Bool => AttributeValue::Bool(false),
            AttributeType::UInt => AttributeValue::UInt(0),
            AttributeType::Quat => AttributeValue::Quat(Quat::IDENTITY),
            AttributeType::AssetReference => AttributeValue::AssetReference(String::new()),
            AttributeType::AssetReferenceList => AttributeValue::AssetReferenceList(Vec::new()),
            AttributeType::EntityReference => AttributeValue::EntityReference(String::new()),
            AttributeType::Variant => AttributeValue::Variant(String::new()),
            AttributeType::VariantList => AttributeValue::VariantList(Vec::new()),
            AttributeType::Transform => AttributeValue::Transform(Transform::default()),
            AttributeType::Point => AttributeValue::Point(Point::default()),
        }
    }

    /// Bytes of the binary form ([`AttributeValue::write`]), so encoders
    /// can size their buffer before writing. S8 text is one byte per
    /// character (Latin-1); a list or string too long for its prefix is
    /// refused by `write`, and the figure is then only an estimate.
    pub fn binary_len(&self) -> usize {
        match self {
            AttributeValue::String(s) => 2 + s.len(),
            AttributeValue::Int(_) | AttributeValue::Real(_) | AttributeValue::UInt(_) => 4,
            AttributeValue::Bool(_) => 1,
            AttributeValue::Float2(_) | AttributeValue::Point(_) => 8,
            AttributeValue::Float3(_) => 12,
            AttributeValue::Color(_) | AttributeValue::Float4(_) | AttributeValue::Quat(_) => 16,
            AttributeValue::Transform(_) => 36,
            AttributeValue::AssetReference(s)
            | AttributeValue::EntityReference(s)
            | AttributeValue::Variant(s) => 1 + s.chars().count(),
            AttributeValue::AssetReferenceList(items) | AttributeValue::VariantList(items) => {
                1 + items.iter().map(|s| 1 + s.chars().count()).sum::<usize>()
            }
        }
    }

    /// Reads a value of type `ty` at the reader's bit position (`FromBinary`).
    pub fn read(ty: AttributeType, r: &mut BitReader<'_>) -> Result<AttributeValue, DecodeError> {
        Ok(match ty {
            AttributeType::String => AttributeValue::String(r.u16_string("string attribute")?),
            AttributeType::Int => AttributeValue::Int(r.i32("int attribute")?),
            AttributeType::Real => AttributeValue::Real(r.f32("real attribute")?),
            AttributeType::Color => {
                let [r_, g, b, a] = read_f32s(r, "Color attribute")?;
                AttributeValue::Color(Color { r: r_, g, b, a })
            }
            AttributeType::Float2 => {
                let [x, y] = read_f32s(r, "float2 attribute")?;
                AttributeValue::Float2(Float2 { x, y })
            }
            AttributeType::Float3 => AttributeValue::Float3(read_float3(r, "float3 attribute")?),
            AttributeType::Float4 => {
                let [x, y, z, w] = read_f32s(r, "float4 attribute")?;
                AttributeValue::Float4(Float4 { x, y, z, w })
            }
            // "Zero for false, nonzero for true" (seed, Bool).
            AttributeType::Bool => AttributeValue::Bool(r.u8("bool attribute")? != 0),
            AttributeType::UInt => AttributeValue::UInt(r.u32("uint attribute")?),
            AttributeType::Quat => {
                let [x, y, z, w] = read_f32s(r, "Quat attribute")?;
                AttributeValue::Quat(Quat { x, y, z, w })
            }
            AttributeType::AssetReference => {
                AttributeValue::AssetReference(r.s8("asset reference")?)
            }
            AttributeType::AssetReferenceList => {
                AttributeValue::AssetReferenceList(read_s8_list(r, "asset reference list")?)
            }
            AttributeType::EntityReference => {
                AttributeValue::EntityReference(r.s8("entity reference")?)
            }
            AttributeType::Variant => AttributeValue::Variant(r.s8("variant")?),
            AttributeType::VariantList => {
                AttributeValue::VariantList(read_s8_list(r, "variant list")?)
            }
            AttributeType::Transform => {
                let [px, py, pz, rx, ry, rz, sx, sy, sz] = read_f32s(r, "Transform attribute")?;
                AttributeValue::Transform(Transform {
                    pos: Float3::new(px, py, pz),
                    rot: Float3::new(rx, ry, rz),
                    scale: Float3::new(sx, sy, sz),
                })
            }
            AttributeType::Point => {
                let x = r.i32("QPoint attribute")?;
                let y = r.i32("QPoint attribute")?;
                AttributeValue::Point(Point { x, y })
            }
        })
    }

    /// Writes the value at the writer's bit position (`ToBinary`).
    pub fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        match self {
            AttributeValue::String(s) => w.u16_string(s)?,
            AttributeValue::Int(v) => w.i32(*v),
            AttributeValue::Real(v) => w.f32(*v),
            AttributeValue::Color(c) => write_f32s(w, &[c.r, c.g, c.b, c.a]),
            AttributeValue::Float2(v) => write_f32s(w, &[v.x, v.y]),
            AttributeValue::Float3(v) => write_f32s(w, &[v.x, v.y, v.z]),
            AttributeValue::Float4(v) => write_f32s(w, &[v.x, v.y, v.z, v.w]),
            AttributeValue::Bool(b) => w.u8(u8::from(*b)),
            AttributeValue::UInt(v) => w.u32(*v),
            AttributeValue::Quat(q) => write_f32s(w, &[q.x, q.y, q.z, q.w]),
            AttributeValue::AssetReference(s)
            | AttributeValue::EntityReference(s)
            | AttributeValue::Variant(s) => w.s8(s)?,
            AttributeValue::AssetReferenceList(items) | AttributeValue::VariantList(items) => {
                write_s8_list(w, items)?
            }
            AttributeValue::Transform(t) => write_f32s(
                w,
                &[
                    t.pos.x, t.pos.y, t.pos.z, t.rot.x, t.rot.y, t.rot.z, t.scale.x, t.scale.y,
                    t.scale.z,
                ],
            ),
            AttributeValue::Point(p) => {
                w.i32(p.x);
                w.i32(p.y);
            }
        }
        Ok(())
    }
}

fn read_f32s<const N: usize>(
    r: &mut BitReader<'_>,
    what: &'static str,
) -> Result<[f32; N], DecodeError> {
    r.f32s::<N>(what)
}

fn read_float3(r: &mut BitReader<'_>, what: &'static str) -> Result<Float3, DecodeError> {
    let [x, y, z] = read_f32s(r, what)?;
    Ok(Float3 { x, y, z })
}

fn write_f32s(w: &mut BitWriter, values: &[f32]) {
    w.f32s(values);
}

/// `u8 count` + count × S8. The count is at most 255 by construction; each
/// item is bounds-checked as it is read, so nothing is allocated ahead.
fn read_s8_list(r: &mut BitReader<'_>, what: &'static str) -> Result<Vec<String>, DecodeError> {
    let count = r.u8(what)?;
    let mut items = Vec::new();
    for _ in 0..count {
        items.push(r.s8(what)?);
    }
    Ok(items)
}

fn write_s8_list(w: &mut BitWriter, items: &[String]) -> Result<(), EncodeError> {
    let count = u8::try_from(items.len()).map_err(|_| EncodeError::TooLong {
        what: "attribute list",
        len: items.len(),
        limit: usize::from(u8::MAX),
    })?;
    w.u8(count);
    for item in items {
        w.s8(item)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(v: &AttributeValue) -> String {
        let mut w = BitWriter::new();
        v.write(&mut w).unwrap();
        hex::encode(w.finish())
    }

    fn decode(ty: AttributeType, hex_bytes: &str) -> AttributeValue {
        let bytes = hex::decode(hex_bytes).unwrap();
        let mut r = BitReader::new(&bytes);
        let v = AttributeValue::read(ty, &mut r).unwrap();
        assert_eq!(r.bits_left(), 0, "{ty:?} consumed everything");
        v
    }

    /// One fixture per type, written from the layouts of docs/tundra-wire.md §5.2.
    fn fixtures() -> Vec<(AttributeValue, &'static str)> {
        vec![
            (AttributeValue::String("hé".into()), "030068c3a9"),
            (AttributeValue::Int(-2), "feffffff"),
            (AttributeValue::Real(1.5), "0000c03f"),
            (
                AttributeValue::Color(Color {
                    r: 1.0,
                    g: 0.5,
                    b: 0.0,
                    a: 1.0,
                }),
                "0000803f0000003f000000000000803f",
            ),
            (
                AttributeValue::Float2(Float2 { x: 1.0, y: -1.0 }),
                "0000803f000080bf",
            ),
            (
                AttributeValue::Float3(Float3::new(0.0, 2.0, -2.0)),
                concat!("00000000", "00000040", "000000c0"),
            ),
            (
                AttributeValue::Float4(Float4 {
                    x: 1.0,
                    y: 2.0,
                    z: 3.0,
                    w: 4.0,
                }),
                "0000803f000000400000404000008040",
            ),
            (AttributeValue::Bool(true), "01"),
            (AttributeValue::UInt(0xDEAD_BEEF), "efbeadde"),
            (
                AttributeValue::Quat(Quat::IDENTITY),
                "0000000000000000000000000000803f",
            ),
            (
                AttributeValue::AssetReference("a.mesh".into()),
                "06612e6d657368",
            ),
            (
                AttributeValue::AssetReferenceList(vec!["a".into(), "bc".into()]),
                "020161026263",
            ),
            (AttributeValue::EntityReference("12".into()), "023132"),
            (AttributeValue::Variant("x".into()), "0178"),
            (AttributeValue::VariantList(vec![]), "00"),
            (
                AttributeValue::Transform(Transform::default()),
                "0000000000000000000000000000000000000000000000000000803f0000803f0000803f",
            ),
            (
                AttributeValue::Point(Point { x: 800, y: -1 }),
                "20030000ffffffff",
            ),
        ]
    }

    #[test]
    fn all_17_types_binary_round_trip_with_fixtures() {
        let fixtures = fixtures();
        assert_eq!(fixtures.len(), 17);
        for (value, hex_bytes) in fixtures {
            let ty = value.attribute_type();
            assert_eq!(encode(&value), hex_bytes, "encode {ty:?}");
            assert_eq!(value.binary_len(), hex_bytes.len() / 2, "length of {ty:?}");
            assert_eq!(decode(ty, hex_bytes), value, "decode {ty:?}");
        }
    }

    #[test]
    fn type_ids_and_names() {
        for (i, ty) in AttributeType::ALL.iter().enumerate() {
            assert_eq!(usize::from(ty.id()), i + 1);
            assert_eq!(AttributeType::from_id(ty.id()), Some(*ty));
            assert_eq!(AttributeType::from_name(ty.tundra_name()), Some(*ty));
        }
        assert_eq!(AttributeType::from_id(0), None);
        assert_eq!(AttributeType::from_id(18), None);
        assert_eq!(
            AttributeType::from_name("VariantList"),
            Some(AttributeType::VariantList)
        );
        assert_eq!(
            AttributeType::from_name("Point"),
            Some(AttributeType::Point)
        );
        assert_eq!(
            AttributeType::from_name("color"),
            Some(AttributeType::Color)
        );
    }

    #[test]
    fn nonzero_bool_is_true_and_short_values_fail() {
        assert_eq!(
            decode(AttributeType::Bool, "07"),
            AttributeValue::Bool(true)
        );
        let mut r = BitReader::new(&[0x05, 0x61]);
        assert!(AttributeValue::read(AttributeType::AssetReference, &mut r).is_err());
        let mut r = BitReader::new(&[0, 0, 0]);
        assert!(AttributeValue::read(AttributeType::Real, &mut r).is_err());
    }

    #[test]
    fn values_at_a_bit_offset() {
        let mut w = BitWriter::new();
        w.bit(true);
        AttributeValue::Int(1).write(&mut w).unwrap();
        let bytes = w.finish();
        assert_eq!(hex::encode(&bytes), "0300000000");
        let mut r = BitReader::new(&bytes);
        assert!(r.bit("m").unwrap());
        assert_eq!(
            AttributeValue::read(AttributeType::Int, &mut r).unwrap(),
            AttributeValue::Int(1)
        );
    }
}
