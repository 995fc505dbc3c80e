//! Tundra frames: what any client can send a node over WebSocket.

use std::sync::OnceLock;

use crate::tundra::registry::CustomAttribute;
use crate::tundra::{AttributeType, DecodeContext, Message, ProtocolVersion, Registry};

/// Fuzzing entry point: the first byte picks the protocol version (1..=4),
/// the rest is a WebSocket frame. Decoding must not panic; a frame that
/// decodes and encodes must be stable: `encode(decode(y)) == y` for
/// `y = encode(decode(x))`. Panics only when that invariant is broken.
pub fn decode_frame(data: &[u8]) {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let protocol = ProtocolVersion(u32::from(selector % 4) + 1);
    let registry = fuzz_registry();
    let ctx = DecodeContext {
        protocol_version: protocol,
        registry,
    };
    let Ok(message) = Message::decode_frame(frame, &ctx) else {
        return;
    };
    // A decoded message may fail to encode only where decoding was lossy
    // in a way that grows the value (invalid UTF-8 replaced in a string).
    let Ok(canonical) = message.encode_frame(protocol) else {
        return;
    };
    let again = match Message::decode_frame(&canonical, &ctx) {
        Ok(m) => m,
        Err(e) => panic!(
            "canonical frame {} does not decode: {e}",
            hex::encode(&canonical)
        ),
    };
    let stable = again.encode_frame(protocol);
    assert_eq!(
        stable.as_ref().ok(),
        Some(&canonical),
        "unstable frame {}",
        hex::encode(frame)
    );
}

/// The built-in registry plus one custom type, shared by fuzz iterations.
fn fuzz_registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut r = Registry::builtin();
        r.register_custom(
            "MyComponent",
            vec![
                CustomAttribute {
                    ty: AttributeType::String,
                    id: "myString".into(),
                    name: "myString".into(),
                },
                CustomAttribute {
                    ty: AttributeType::Int,
                    id: "myInteger".into(),
                    name: "myInteger".into(),
                },
                CustomAttribute {
                    ty: AttributeType::Bool,
                    id: "myBool1".into(),
                    name: "myBool1".into(),
                },
                CustomAttribute {
                    ty: AttributeType::Bool,
                    id: "myBool2".into(),
                    name: "myBool2".into(),
                },
            ],
        );
        r
    })
}
