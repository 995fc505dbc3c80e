//! JSON form of Tundra frames for the inspector: `{"protocol": N, "id": M,
//! "message": {...}}`. Every decoded value maps to JSON and back without
//! loss, so `frame_from_json(frame_to_json(x)) == x` for canonical frames:
//! floats are written as the shortest decimal that reads back to the same
//! f32 (non-finite values as `"0x7fc00000"`-style bit strings), opaque bytes
//! as hex strings.
//!
//! This module owns the representation only; decoding rules are in
//! `messages`, the informative `readable` view in `readable`.

use serde::{Deserialize, Serialize};

use super::error::{DecodeError, EncodeError};
use super::ids::ProtocolVersion;
use super::messages::{DecodeContext, Message};
use super::readable::{readable, ComponentTypes};
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
    /// What the message means in units and names (informative; ignored when
    /// encoding): `readable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readable: Option<serde_json::Value>,
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
    frame_to_json_learning(frame, protocol, registry, &mut ComponentTypes::default())
}

/// As [`frame_to_json`], for one frame of a series: component types the
/// frame creates are learnt into `types` and name the attributes of later
/// EditAttributes.
pub fn frame_to_json_learning(
    frame: &[u8],
    protocol: ProtocolVersion,
    registry: &Registry,
    types: &mut ComponentTypes,
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
        readable: readable(&message, registry, types),
        message,
    })
}

/// Encodes the JSON form of a frame back into bytes.
pub fn frame_from_json(json: &str) -> Result<Vec<u8>, JsonError> {
    let frame: FrameJson = serde_json::from_str(json)?;
    Ok(frame.message.encode_frame(frame.protocol)?)
}

#[cfg(test)]
mod tests {
    use super::super::messages::tests::{bytes, FIXTURES};
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
}
