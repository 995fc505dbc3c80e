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
//!   in both forms;
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
