//! Compact per-property encodings (docs/less-wire.md §16):
//! named wire forms of property values that a link may agree to use in
//! place of the plain CONTEXT-DEPENDENT-VARIANT.
//!
//! This module owns the registry of encodings (name, the value type it
//! applies to, its precision) and their bytes; [`link`] owns which
//! properties of a link use which encoding. Every encoded value is
//! self-delimiting (its first byte announces its length), every decoder is
//! total, and every encoding carries a value it cannot represent compactly
//! exactly, behind a flag, rather than clamping it.

pub mod bits;
pub mod link;
pub mod position;
pub mod rotation;
pub mod transform;

use super::codec::{DecodeError, Reader};
use super::value::Value;
use super::value_type::ValueType;
use bits::{BitReader, BitWriter};
use transform::Layout;

pub use link::{EncodingRule, LinkEncodings};

/// A compact encoding this implementation knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EncodingId {
    /// VECTOR(3, FLOAT32) as 18-bit fixed point, step 1/256, range about
    /// ±512, error ≤ 1/512; plain `f32` per value outside it. 7 or 13 bytes.
    FixedPointPosition,
    /// VECTOR(4, FLOAT32) unit quaternion (x, y, z, w) as smallest-three,
    /// 10 bits per component, rotation error ≤ 0.3°; plain `f32` when not
    /// of unit length. 5 or 17 bytes.
    QuatSmallestThree,
    /// VECTOR(3, FLOAT32) as three binary16, relative error ≤ 2^-11. 6 bytes.
    Float3Half,
    /// VECTOR(9, FLOAT32) Tundra Transform, see [`transform`]; a general
    /// rotation as a quaternion (the angles arrive rewritten). 8-37 bytes.
    TundraTransform,
    /// VECTOR(9, FLOAT32) Tundra Transform with the Euler angles as
    /// written, each within 0.044°, see [`transform`]. 8-37 bytes.
    TundraTransformAngles,
}

impl EncodingId {
    /// Every encoding, in the order a node offers them.
    pub const ALL: [EncodingId; 5] = [
        EncodingId::TundraTransformAngles,
        EncodingId::TundraTransform,
        EncodingId::FixedPointPosition,
        EncodingId::QuatSmallestThree,
        EncodingId::Float3Half,
    ];

    /// The encoding's registered name (versioned: a changed layout is a new
    /// name, so two nodes never disagree on the bytes behind one name).
    pub fn name(self) -> &'static str {
        match self {
            EncodingId::FixedPointPosition => "fixed-point-position/1",
            EncodingId::QuatSmallestThree => "quat-smallest-three/1",
            EncodingId::Float3Half => "float3-half/1",
            EncodingId::TundraTransform => "tundra-transform/1",
            EncodingId::TundraTransformAngles => "tundra-transform/2",
        }
    }

    /// The encoding with this name, if this implementation knows it.
    pub fn from_name(name: &str) -> Option<EncodingId> {
        EncodingId::ALL.into_iter().find(|id| id.name() == name)
    }

    /// The value type whose values it encodes.
    pub fn value_type(self) -> ValueType {
        let floats = |n| ValueType::Vector(n, Box::new(ValueType::Float32));
        match self {
            EncodingId::FixedPointPosition | EncodingId::Float3Half => floats(3),
            EncodingId::QuatSmallestThree => floats(4),
            EncodingId::TundraTransform | EncodingId::TundraTransformAngles => floats(9),
        }
    }

    /// The encoded bytes of `value`, or `None` when it does not conform to
    /// [`EncodingId::value_type`] (the caller then sends it plain).
    pub fn encode(self, value: &Value) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(value, &mut out).then_some(out)
    }

    /// Appends the encoded bytes of `value` to `out`; false (and nothing
    /// appended) when it does not conform to [`EncodingId::value_type`].
    pub fn encode_into(self, value: &Value, out: &mut Vec<u8>) -> bool {
        match self {
            EncodingId::FixedPointPosition => floats(value)
                .map(|v| position::encode_position_into(v, out))
                .is_some(),
            EncodingId::Float3Half => floats(value)
                .map(|v| position::encode_half_into(v, out))
                .is_some(),
            EncodingId::QuatSmallestThree => {
                floats(value).map(|q| encode_quat_into(q, out)).is_some()
            }
            EncodingId::TundraTransform => floats(value)
                .map(|t| transform::encode_into(Layout::Quaternion, t, out))
                .is_some(),
            EncodingId::TundraTransformAngles => floats(value)
                .map(|t| transform::encode_into(Layout::Angles, t, out))
                .is_some(),
        }
    }

    /// Reads one encoded value and returns it as the plain value it stands
    /// for. The length comes from the first byte and is at most 37.
    pub fn decode(self, reader: &mut Reader<'_>) -> Result<Value, DecodeError> {
        reader.charge_value()?;
        let first = *reader.rest().first().ok_or(DecodeError::Truncated)?;
        let len = match self {
            EncodingId::FixedPointPosition => position::position_len(first),
            EncodingId::Float3Half => 6,
            EncodingId::QuatSmallestThree => quat_len(first),
            EncodingId::TundraTransform => transform::encoded_len(Layout::Quaternion, first)?,
            EncodingId::TundraTransformAngles => transform::encoded_len(Layout::Angles, first)?,
        };
        let bytes = reader.read_bytes(len)?;
        Ok(match self {
            EncodingId::FixedPointPosition => vector(&position::decode_position(bytes)?),
            EncodingId::Float3Half => vector(&position::decode_half(bytes)?),
            EncodingId::QuatSmallestThree => vector(&decode_quat(bytes)?),
            EncodingId::TundraTransform => vector(&transform::decode(Layout::Quaternion, bytes)?),
            EncodingId::TundraTransformAngles => vector(&transform::decode(Layout::Angles, bytes)?),
        })
    }
}

/// The floats of a VECTOR(N, FLOAT32) value.
fn floats<const N: usize>(value: &Value) -> Option<[f32; N]> {
    let Value::Floats(floats) = value else {
        return None;
    };
    floats.as_slice().try_into().ok()
}

fn vector(values: &[f32]) -> Value {
    Value::floats(values)
}

/// A quaternion this far from unit length goes plain, so values that are
/// not rotations keep their exact floats.
const UNIT_TOLERANCE: f64 = 1e-4;

/// `quat-smallest-three/1`: flag bit 0 then the 32-bit smallest-three form
/// (5 bytes), or flag 1 then four `f32` (17 bytes).
#[cfg(test)]
fn encode_quat(q: [f32; 4]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_quat_into(q, &mut out);
    out
}

fn encode_quat_into(q: [f32; 4], out: &mut Vec<u8>) {
    let q64 = q.map(f64::from);
    let norm = q64.iter().map(|c| c * c).sum::<f64>().sqrt();
    let mut w = BitWriter::continuing(std::mem::take(out));
    if norm.is_finite() && (norm - 1.0).abs() <= UNIT_TOLERANCE {
        w.write(0, 1);
        // The norm is close to 1, so normalizing succeeds.
        let _ = rotation::write_smallest_three(&mut w, q64);
    } else {
        w.write(1, 1);
        q.iter().for_each(|c| w.write_f32(*c));
    }
    *out = w.finish();
}

fn quat_len(first: u8) -> usize {
    if first & 1 == 0 {
        bits::bytes_for(1 + rotation::QUAT_BITS as usize)
    } else {
        bits::bytes_for(1 + 128)
    }
}

fn decode_quat(bytes: &[u8]) -> Result<[f32; 4], DecodeError> {
    let mut r = BitReader::new(bytes);
    let q = if r.read(1)? == 0 {
        rotation::read_smallest_three(&mut r)?.map(|c| c as f32)
    } else {
        [r.read_f32()?, r.read_f32()?, r.read_f32()?, r.read_f32()?]
    };
    r.expect_padding()?;
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_none() {
        for id in EncodingId::ALL {
            assert_eq!(EncodingId::from_name(id.name()), Some(id));
        }
        assert_eq!(
            EncodingId::from_name("tundra-transform/2"),
            Some(EncodingId::TundraTransformAngles)
        );
        assert_eq!(EncodingId::from_name("tundra-transform/3"), None);
    }

    #[test]
    fn decode_reads_exactly_one_value() {
        for id in EncodingId::ALL {
            let value = match id.value_type() {
                ValueType::Vector(3, _) => vector(&[1.0, 2.0, 3.0]),
                ValueType::Vector(4, _) => vector(&[0.0, 0.0, 0.0, 1.0]),
                _ => vector(&[1.0, 2.0, 3.0, 0.0, 90.0, 0.0, 1.0, 1.0, 1.0]),
            };
            let mut bytes = id.encode(&value).unwrap();
            let len = bytes.len();
            bytes.push(0x7f);
            let mut reader = Reader::new(&bytes);
            let back = id.decode(&mut reader).unwrap();
            assert_eq!(reader.position(), len, "{id:?}");
            assert!(back.conforms_to(&id.value_type()));
            assert_eq!(back, value, "{id:?}");
        }
    }

    #[test]
    fn quat_fixture_and_fallback() {
        let identity = encode_quat([0.0, 0.0, 0.0, 1.0]);
        assert_eq!(hex::encode(&identity), "feefbfff00");
        let scaled = encode_quat([0.0, 0.0, 0.0, 2.0]);
        assert_eq!(scaled.len(), 17);
        assert_eq!(decode_quat(&scaled), Ok([0.0, 0.0, 0.0, 2.0]));
    }

    #[test]
    fn non_conforming_values_are_not_encoded() {
        assert_eq!(EncodingId::TundraTransform.encode(&Value::Integer(1)), None);
        assert_eq!(
            EncodingId::FixedPointPosition.encode(&vector(&[1.0, 2.0])),
            None
        );
        let mut empty = Reader::new(&[]);
        assert_eq!(
            EncodingId::TundraTransform.decode(&mut empty),
            Err(DecodeError::Truncated)
        );
    }
}
