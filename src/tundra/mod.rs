//! The realXtend Tundra protocol as real Tundra peers put it on the wire
//! (docs/tundra-wire.md: what real peers do where the 2013 protocol page
//! says otherwise).
//!
//! What this module owns, bottom up:
//! - `bits`: the kNet bit stream, VLE8_16_32, S8 and U16 strings;
//! - `ids`: entity / component / user id newtypes and id ranges, protocol
//!   versions;
//! - `values`, `attribute`, `attribute_text`: the 17 attribute types, their
//!   binary and TXML text forms;
//! - `registry`: component types loaded from `schemas/tundra/*.toml`, plus
//!   custom types registered at run time;
//! - `component`, `edit_attributes`: attribute blocks of ComponentFullUpdate
//!   and EditAttributes;
//! - `quantize`, `orientation`, `rigid_body`, `rigid_body_sender`,
//!   `rigid_body_receiver`: RigidBodyUpdate codes, the server's send-type
//!   rules (bit-exact) and the client's reading of a record;
//! - `messages`: messages 100-124 and the WebSocket frame;
//! - `client_transport`: what carries a client (WebSocket, kNet UDP/TCP) and
//!   the login form that implies (JSON or XML, `login_xml`);
//! - `asset_storage`: the asset storages a server advertises in LoginReply,
//!   in both forms (`fuzz_asset_storage`: its fuzz entry point);
//! - `text_form`: the serde adapters the wire types use (exact floats, hex
//!   bytes);
//! - `txml`: scene files; `json`: the inspector's JSON form of whole frames,
//!   built on the wire types (they never depend on it).
//!
//! It is a pure codec: no sockets, clocks or randomness, and no scene state.
//! Every decoder is total (a value or a [`DecodeError`], never a panic) and
//! bounds every length it reads.

pub mod asset_storage;
pub mod attribute;
pub mod attribute_text;
pub mod bits;
#[cfg(test)]
mod bits_properties;
pub mod client_transport;
pub mod component;
pub mod edit_attributes;
pub mod error;
pub mod fuzz_asset_storage;
#[doc(hidden)]
pub mod fuzz_txml;
pub mod ids;
pub mod json;
pub mod login_xml;
pub mod messages;
pub mod orientation;
pub mod quantize;
pub mod readable;
pub mod registry;
pub mod rigid_body;
pub mod rigid_body_parts;
pub mod rigid_body_receiver;
pub mod rigid_body_sender;
pub mod schema_file;
pub mod text_form;
pub mod text_scan;
pub mod txml;
pub mod values;

pub use attribute::{AttributeType, AttributeValue};
pub use client_transport::{ClientTransport, LoginDialect};
pub use component::{AttributeBlock, ComponentBody, ComponentData, DynamicAttribute};
pub use edit_attributes::{AttributeEdit, AttributeEdits, IndexingMethod};
pub use error::{DecodeError, EncodeError};
pub use ids::{ComponentId, EntityId, IdSpace, ProtocolVersion, UserId};
pub use messages::{DecodeContext, Message};
pub use registry::{ComponentSchema, Registry};
pub use schema_file::SchemaError;

/// Fuzzing entry point: the first byte picks the protocol version (1..=4),
/// the rest is a WebSocket frame. Decoding must not panic; a frame that
/// decodes and encodes must be stable: `encode(decode(y)) == y` for
/// `y = encode(decode(x))`. Panics only when that invariant is broken.
pub fn fuzz_decode_frame(data: &[u8]) {
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
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut r = Registry::builtin();
        r.register_custom(
            "MyComponent",
            vec![
                registry::CustomAttribute {
                    ty: AttributeType::String,
                    id: "myString".into(),
                    name: "myString".into(),
                },
                registry::CustomAttribute {
                    ty: AttributeType::Int,
                    id: "myInteger".into(),
                    name: "myInteger".into(),
                },
                registry::CustomAttribute {
                    ty: AttributeType::Bool,
                    id: "myBool1".into(),
                    name: "myBool1".into(),
                },
                registry::CustomAttribute {
                    ty: AttributeType::Bool,
                    id: "myBool2".into(),
                    name: "myBool2".into(),
                },
            ],
        );
        r
    })
}
