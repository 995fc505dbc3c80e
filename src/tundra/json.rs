//! JSON form of Tundra frames for the inspector: `{"protocol": N, "id": M,
//! "message": {...}}`. Every decoded value maps to JSON and back without
//! loss, so `frame_from_json(frame_to_json(x)) == x` for canonical frames:
//! floats are written as the shortest decimal that reads back to the same
//! f32 (non-finite values as `"0x7fc00000"`-style bit strings), opaque bytes
//! as hex strings.
//!
//! This module owns the representation only; decoding rules are in
//! `messages`.

use serde::{Deserialize, Serialize};

use super::error::{DecodeError, EncodeError};
use super::ids::ProtocolVersion;
use super::messages::{DecodeContext, Message};
use super::registry::Registry;

/// One frame as the inspector shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrameJson {
    /// Protocol version the frame was read with (decides CreateEntity's
    /// parent field).
    pub protocol: ProtocolVersion,
    /// Message id (informative; the message itself decides on encode).
    pub id: u16,
    /// Message name (informative).
    #[serde(default)]
    pub name: String,
    /// The decoded message.
    pub message: Message,
}

/// Errors of the JSON inspector functions.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

/// Decodes one WebSocket frame (u16 id + payload) into its JSON form.
pub fn frame_to_json(
    frame: &[u8],
    protocol: ProtocolVersion,
    registry: &Registry,
) -> Result<FrameJson, JsonError> {
    let ctx = DecodeContext {
        protocol_version: protocol,
        registry,
    };
    let message = Message::decode_frame(frame, &ctx)?;
    Ok(FrameJson {
        protocol,
        id: message.id(),
        name: message.name().to_string(),
        message,
    })
}

/// Encodes the JSON form of a frame back into bytes.
pub fn frame_from_json(json: &str) -> Result<Vec<u8>, JsonError> {
    let frame: FrameJson = serde_json::from_str(json)?;
    Ok(frame.message.encode_frame(frame.protocol)?)
}

/// Serde helpers for f32 fields: finite values as JSON numbers (shortest
/// round-trip decimal), other values as a hex string of their bits.
pub mod f32_exact {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    /// Serializes an f32 exactly.
    pub fn serialize<S: Serializer>(value: &f32, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f32(*value)
        } else {
            serializer.serialize_str(&format!("{:#010x}", value.to_bits()))
        }
    }

    struct F32Visitor;

    impl Visitor<'_> for F32Visitor {
        type Value = f32;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number or a \"0x........\" bit pattern")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<f32, E> {
            let digits = v
                .strip_prefix("0x")
                .ok_or_else(|| E::custom("float bit pattern must start with 0x"))?;
            u32::from_str_radix(digits, 16)
                .map(f32::from_bits)
                .map_err(|_| E::custom("bad float bit pattern"))
        }
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f32, D::Error> {
        deserializer.deserialize_any(F32Visitor)
    }
}

/// Serde helpers for byte fields shown as lowercase hex strings.
pub mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes bytes as hex.
    pub fn serialize<S: Serializer>(value: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(value))
    }

    /// Deserializes a hex string.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        hex::decode(text.trim()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::messages::tests::{bytes, FIXTURES};
    use super::super::values::Float3;
    use super::*;

    #[test]
    fn every_message_fixture_survives_json() {
        let registry = Registry::builtin();
        for &(name, protocol, hex_text) in FIXTURES {
            let frame = bytes(hex_text);
            let json = frame_to_json(&frame, ProtocolVersion(protocol), &registry).unwrap();
            assert_eq!(json.id, u16::from_le_bytes([frame[0], frame[1]]), "{name}");
            let text = serde_json::to_string_pretty(&json).unwrap();
            assert_eq!(frame_from_json(&text).unwrap(), frame, "{name}: {text}");
        }
    }

    #[test]
    fn all_attribute_types_survive_json() {
        use super::super::attribute::{AttributeType, AttributeValue};
        use super::super::bits::BitReader;
        use super::super::ids::{ComponentId, EntityId};
        use super::super::messages::{CreateAttributes, NewAttribute};
        // Every type, each value built from bytes that include a NaN payload.
        let attributes = AttributeType::ALL
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                let raw = [0x01, 0x00, 0xC1, 0x7F, 0x02, 0x00, 0x00, 0x00, 0x61, 0x62];
                let bytes: Vec<u8> = raw.iter().cycle().take(36).copied().collect();
                let value = AttributeValue::read(ty, &mut BitReader::new(&bytes))
                    .unwrap_or_else(|_| AttributeValue::default_for(ty));
                NewAttribute {
                    component_id: ComponentId(1),
                    index: i as u8,
                    name: format!("a{i}"),
                    value,
                }
            })
            .collect();
        let message = Message::CreateAttributes(CreateAttributes {
            scene_id: 0,
            entity_id: EntityId(9),
            attributes,
        });
        let frame = message.encode_frame(ProtocolVersion::HIGHEST).unwrap();
        let json = frame_to_json(&frame, ProtocolVersion::HIGHEST, &Registry::builtin()).unwrap();
        let text = serde_json::to_string(&json).unwrap();
        assert!(text.contains("0x7fc10001"), "{text}");
        assert_eq!(frame_from_json(&text).unwrap(), frame);
    }

    #[test]
    fn bad_json_is_an_error() {
        assert!(frame_from_json("{}").is_err());
        assert!(frame_from_json("{\"protocol\":4,\"id\":1,\"message\":{\"Nope\":{}}}").is_err());
    }

    #[test]
    fn floats_survive_json_exactly() {
        let samples = [
            0.1f32,
            -0.0,
            1.0e-45,
            3.4028235e38,
            f32::from_bits(0x7FC0_0001),
            f32::INFINITY,
            0.639,
            16_777_217.0,
        ];
        for &x in &samples {
            let v = Float3::new(x, -x, x * 0.5);
            let text = serde_json::to_string(&v).unwrap();
            let back: Float3 = serde_json::from_str(&text).unwrap();
            assert_eq!(back.x.to_bits(), v.x.to_bits(), "{text}");
            assert_eq!(back.y.to_bits(), v.y.to_bits(), "{text}");
            assert_eq!(back.z.to_bits(), v.z.to_bits(), "{text}");
        }
    }
}
