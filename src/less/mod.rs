//! The LESS peer protocol (IETF draft-ietf-mmox-less-protocol-00; docs/less-wire.md)
//! as a deterministic core: values, messages, signed packets, the
//! acknowledgement window and one session per peer link.
//!
//! Layers, bottom up: `codec` (INTEGER and the reader), `value_type` and
//! `value`, `schema` (what type URIs mean), `property_list` and `message`,
//! `signature` and `packet` (framing), `receive_window` and `send_window`
//! (sequence bookkeeping), `rtt`, and `session`. Nothing here does I/O or
//! reads a clock: time comes in as [`crate::clock::Time`]. The normative
//! description of the wire format is docs/less-wire.md.

pub mod bulk;
pub mod codec;
pub mod encoding;
pub mod ids;
pub mod json;
pub mod limits;
pub mod message;
pub mod packet;
pub mod property_list;
pub mod property_map;
pub mod receive_window;
pub mod rtt;
pub mod schema;
pub mod schema_toml;
pub mod send_window;
pub mod session;
pub mod signature;
pub mod value;
pub mod value_type;
