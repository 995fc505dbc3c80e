//! The node's entity-component-attribute store.
//!
//! The scene owns the authoritative state every client and peer link is
//! synchronised from. It validates and applies changes, allocates ids in
//! Tundra's ranges, and records each change in a journal that the node drains
//! into per-client and per-link sync states. It never encodes messages and
//! never does I/O.

mod change;
mod component_map;
mod entity;
pub mod entity_hash;
mod error;
pub mod position;
mod store;
pub mod tree;
mod txml_import;

pub use change::{Change, ChangeKind, ChangeSource, ClientId};
pub use component_map::ComponentMap;
pub use entity::{Attribute, Component, ComponentContent, Entity, Origin};
pub use error::SceneError;
pub use store::{CreatedEntity, ProxiedEdit, Scene};
pub use txml_import::ImportReport;
