//! The wire room: how Tundra content is written as LESS (docs/federation.md
//! §2): type URIs and property ids, attribute values, the node's type
//! schemas, the compact encodings, and the connection schema's
//! interactions. Rules over data, no state: every other room builds on it.

pub mod encodings;
pub mod features;
pub mod interactions;
pub mod mapping;
pub mod schemas;
pub mod values;
