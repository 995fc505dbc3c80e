//! Tundra messages 100-124 (docs/tundra-wire.md §3, §4, §6): one type per message,
//! the [`Message`] enum over all of them, and the WebSocket frame form
//! (`u16 LE messageId` + payload, one message per binary frame, §2.1).
//!
//! Decoding takes a [`DecodeContext`]: the peer's protocol version (it
//! decides CreateEntity's parent field, §4.6) and the component registry
//! (it decides how attribute blocks are read, §5.1). Encoding takes the
//! protocol version of the receiving peer. Unknown message ids are kept
//! opaque. Decoding follows Tundra's readers, which ignore bytes after the
//! last field they read; such trailing bytes are dropped, so re-encoding
//! gives the canonical form.

use serde::{Deserialize, Serialize};

use super::bits::{BitReader, BitWriter};
use super::error::{DecodeError, EncodeError};
use super::ids::{ComponentId, EntityId, ProtocolVersion};
use super::registry::Registry;
use super::rigid_body::RigidBodyUpdate;
use super::text_form::hex_bytes;

mod action;
mod attributes;
mod components;
mod entity;
mod login;
mod observer;
mod register;
#[cfg(test)]
pub(crate) mod tests;

pub use action::{exec_type, AssetDeleted, AssetDiscovery, EntityAction};
pub use attributes::{
    BlockView, CreateAttributes, EditAttributes, EditAttributesBlock, EditAttributesView,
    NewAttribute, RemoveAttributes, RemovedAttribute,
};
pub use components::{CreateComponents, CreateComponentsReply, RemoveComponents};
pub use entity::{
    CreateEntity, CreateEntityReply, EditEntityProperties, RemoveEntity, SetEntityParent,
};
pub use login::{ClientJoined, ClientLeft, Login, LoginReply};
pub use observer::ObserverPosition;
pub use register::{RegisterComponentType, RegisteredAttribute};

/// Message ids (tundra `TundraMessages.h`).
pub mod id {
    pub const LOGIN: u16 = 100;
    pub const LOGIN_REPLY: u16 = 101;
    pub const CLIENT_JOINED: u16 = 102;
    pub const CLIENT_LEFT: u16 = 103;
    pub const OBSERVER_POSITION: u16 = 105;
    pub const EDIT_ENTITY_PROPERTIES: u16 = 109;
    pub const CREATE_ENTITY: u16 = 110;
    pub const CREATE_COMPONENTS: u16 = 111;
    pub const CREATE_ATTRIBUTES: u16 = 112;
    pub const EDIT_ATTRIBUTES: u16 = 113;
    pub const REMOVE_ATTRIBUTES: u16 = 114;
    pub const REMOVE_COMPONENTS: u16 = 115;
    pub const REMOVE_ENTITY: u16 = 116;
    pub const CREATE_ENTITY_REPLY: u16 = 117;
    pub const CREATE_COMPONENTS_REPLY: u16 = 118;
    pub const RIGID_BODY_UPDATE: u16 = 119;
    pub const ENTITY_ACTION: u16 = 120;
    pub const ASSET_DISCOVERY: u16 = 121;
    pub const ASSET_DELETED: u16 = 122;
    pub const REGISTER_COMPONENT_TYPE: u16 = 123;
    pub const SET_ENTITY_PARENT: u16 = 124;
}

/// Largest payload accepted: kNet's `cMaxReceivableTCPMessageSize` (10 MiB,
/// §2.2). WebSocket frames are capped by the transport; this bounds what a
/// decoder is ever asked to look at.
pub const MAX_PAYLOAD_BYTES: usize = 10 * 1024 * 1024;

/// What decoding needs to know about the sending peer.
#[derive(Debug, Clone, Copy)]
pub struct DecodeContext<'a> {
    /// The protocol version negotiated with the peer (1 if it sent none).
    pub protocol_version: ProtocolVersion,
    /// Component layouts for attribute blocks.
    pub registry: &'a Registry,
}

/// A (sender id, new id) pair of CreateEntityReply / CreateComponentsReply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdPair {
    /// The client's unacked id (masked on the wire).
    pub sender: ComponentId,
    /// The id the server gave.
    pub id: ComponentId,
}

/// Each id pair takes at least two bytes (two one-byte VLEs).
const MIN_ID_PAIR_BYTES: usize = 2;

fn read_id_pairs(r: &mut BitReader<'_>) -> Result<Vec<IdPair>, DecodeError> {
    let count = r.vle("id pair count")? as usize;
    let limit = r.bytes_left() / MIN_ID_PAIR_BYTES;
    if count > limit {
        return Err(DecodeError::LimitExceeded {
            what: "id pair count",
            value: count,
            limit,
        });
    }
    let mut pairs = Vec::with_capacity(count);
    for _ in 0..count {
        pairs.push(IdPair {
            sender: ComponentId(r.vle("sender component id")?),
            id: ComponentId(r.vle("component id")?),
        });
    }
    Ok(pairs)
}

fn write_id_pairs(w: &mut BitWriter, pairs: &[IdPair]) -> Result<(), EncodeError> {
    w.vle_len(pairs.len())?;
    for p in pairs {
        w.vle(p.sender.wire())?;
        w.vle(p.id.wire())?;
    }
    Ok(())
}

/// Any Tundra message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Message {
    Login(Login),
    LoginReply(LoginReply),
    ClientJoined(ClientJoined),
    ClientLeft(ClientLeft),
    ObserverPosition(ObserverPosition),
    EditEntityProperties(EditEntityProperties),
    CreateEntity(CreateEntity),
    CreateComponents(CreateComponents),
    CreateAttributes(CreateAttributes),
    EditAttributes(EditAttributes),
    RemoveAttributes(RemoveAttributes),
    RemoveComponents(RemoveComponents),
    RemoveEntity(RemoveEntity),
    CreateEntityReply(CreateEntityReply),
    CreateComponentsReply(CreateComponentsReply),
    RigidBodyUpdate(RigidBodyUpdate),
    EntityAction(EntityAction),
    AssetDiscovery(AssetDiscovery),
    AssetDeleted(AssetDeleted),
    RegisterComponentType(RegisterComponentType),
    SetEntityParent(SetEntityParent),
    /// A message id this codec does not know, kept byte for byte.
    Unknown {
        id: u16,
        #[serde(with = "hex_bytes")]
        payload: Vec<u8>,
    },
}

impl Message {
    /// The message id.
    pub fn id(&self) -> u16 {
        match self {
            Message::Login(_) => id::LOGIN,
            Message::LoginReply(_) => id::LOGIN_REPLY,
            Message::ClientJoined(_) => id::CLIENT_JOINED,
            Message::ClientLeft(_) => id::CLIENT_LEFT,
            Message::ObserverPosition(_) => id::OBSERVER_POSITION,
            Message::EditEntityProperties(_) => id::EDIT_ENTITY_PROPERTIES,
            Message::CreateEntity(_) => id::CREATE_ENTITY,
            Message::CreateComponents(_) => id::CREATE_COMPONENTS,
            Message::CreateAttributes(_) => id::CREATE_ATTRIBUTES,
            Message::EditAttributes(_) => id::EDIT_ATTRIBUTES,
            Message::RemoveAttributes(_) => id::REMOVE_ATTRIBUTES,
            Message::RemoveComponents(_) => id::REMOVE_COMPONENTS,
            Message::RemoveEntity(_) => id::REMOVE_ENTITY,
            Message::CreateEntityReply(_) => id::CREATE_ENTITY_REPLY,
            Message::CreateComponentsReply(_) => id::CREATE_COMPONENTS_REPLY,
            Message::RigidBodyUpdate(_) => id::RIGID_BODY_UPDATE,
            Message::EntityAction(_) => id::ENTITY_ACTION,
            Message::AssetDiscovery(_) => id::ASSET_DISCOVERY,
            Message::AssetDeleted(_) => id::ASSET_DELETED,
            Message::RegisterComponentType(_) => id::REGISTER_COMPONENT_TYPE,
            Message::SetEntityParent(_) => id::SET_ENTITY_PARENT,
            Message::Unknown { id, .. } => *id,
        }
    }

    /// The message name, as in `TundraMessages.h` without the `c` / suffix.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Login(_) => "Login",
            Message::LoginReply(_) => "LoginReply",
            Message::ClientJoined(_) => "ClientJoined",
            Message::ClientLeft(_) => "ClientLeft",
            Message::ObserverPosition(_) => "ObserverPosition",
            Message::EditEntityProperties(_) => "EditEntityProperties",
            Message::CreateEntity(_) => "CreateEntity",
            Message::CreateComponents(_) => "CreateComponents",
            Message::CreateAttributes(_) => "CreateAttributes",
            Message::EditAttributes(_) => "EditAttributes",
            Message::RemoveAttributes(_) => "RemoveAttributes",
            Message::RemoveComponents(_) => "RemoveComponents",
            Message::RemoveEntity(_) => "RemoveEntity",
            Message::CreateEntityReply(_) => "CreateEntityReply",
            Message::CreateComponentsReply(_) => "CreateComponentsReply",
            Message::RigidBodyUpdate(_) => "RigidBodyUpdate",
            Message::EntityAction(_) => "EntityAction",
            Message::AssetDiscovery(_) => "AssetDiscovery",
            Message::AssetDeleted(_) => "AssetDeleted",
            Message::RegisterComponentType(_) => "RegisterComponentType",
            Message::SetEntityParent(_) => "SetEntityParent",
            Message::Unknown { .. } => "Unknown",
        }
    }

    /// Decodes the payload of message `id`.
    pub fn decode(
        id: u16,
        payload: &[u8],
        ctx: &DecodeContext<'_>,
    ) -> Result<Message, DecodeError> {
        check_payload_len(payload)?;
        let r = &mut BitReader::new(payload);
        Ok(match id {
            id::LOGIN => Message::Login(Login::decode(r)?),
            id::LOGIN_REPLY => Message::LoginReply(LoginReply::decode(r)?),
            id::CLIENT_JOINED => Message::ClientJoined(ClientJoined::decode(r)?),
            id::CLIENT_LEFT => Message::ClientLeft(ClientLeft::decode(r)?),
            id::OBSERVER_POSITION => Message::ObserverPosition(ObserverPosition::decode(r)?),
            id::EDIT_ENTITY_PROPERTIES => {
                Message::EditEntityProperties(EditEntityProperties::decode(r)?)
            }
            id::CREATE_ENTITY => {
                Message::CreateEntity(CreateEntity::decode(r, ctx.protocol_version, ctx.registry)?)
            }
            id::CREATE_COMPONENTS => {
                Message::CreateComponents(CreateComponents::decode(r, ctx.registry)?)
            }
            id::CREATE_ATTRIBUTES => Message::CreateAttributes(CreateAttributes::decode(r)?),
            id::EDIT_ATTRIBUTES => Message::EditAttributes(EditAttributes::decode(r)?),
            id::REMOVE_ATTRIBUTES => Message::RemoveAttributes(RemoveAttributes::decode(r)?),
            id::REMOVE_COMPONENTS => Message::RemoveComponents(RemoveComponents::decode(r)?),
            id::REMOVE_ENTITY => Message::RemoveEntity(RemoveEntity::decode(r)?),
            id::CREATE_ENTITY_REPLY => Message::CreateEntityReply(CreateEntityReply::decode(r)?),
            id::CREATE_COMPONENTS_REPLY => {
                Message::CreateComponentsReply(CreateComponentsReply::decode(r)?)
            }
            id::RIGID_BODY_UPDATE => Message::RigidBodyUpdate(RigidBodyUpdate::decode(payload)?),
            id::ENTITY_ACTION => Message::EntityAction(EntityAction::decode(r)?),
            id::ASSET_DISCOVERY => Message::AssetDiscovery(AssetDiscovery::decode(r)?),
            id::ASSET_DELETED => Message::AssetDeleted(AssetDeleted::decode(r)?),
            id::REGISTER_COMPONENT_TYPE => {
                Message::RegisterComponentType(RegisterComponentType::decode(r)?)
            }
            id::SET_ENTITY_PARENT => Message::SetEntityParent(SetEntityParent::decode(r)?),
            other => Message::Unknown {
                id: other,
                payload: payload.to_vec(),
            },
        })
    }

    /// Encodes the payload for a peer speaking `protocol`.
    pub fn encode(&self, protocol: ProtocolVersion) -> Result<Vec<u8>, EncodeError> {
        match self {
            Message::RigidBodyUpdate(m) => m.encode(),
            Message::Unknown { payload, .. } => Ok(payload.clone()),
            _ => {
                let mut w = BitWriter::with_capacity(self.size_hint());
                self.encode_into(&mut w, protocol)?;
                Ok(w.finish())
            }
        }
    }

    /// Writes the payload at the writer's (byte-aligned) position.
    fn encode_into(&self, w: &mut BitWriter, protocol: ProtocolVersion) -> Result<(), EncodeError> {
        match self {
            Message::Login(m) => m.encode(w),
            Message::LoginReply(m) => m.encode(w),
            Message::ClientJoined(m) => m.encode(w),
            Message::ClientLeft(m) => m.encode(w),
            Message::ObserverPosition(m) => m.encode(w),
            Message::EditEntityProperties(m) => m.encode(w),
            Message::CreateEntity(m) => m.encode(w, protocol),
            Message::CreateComponents(m) => m.encode(w),
            Message::CreateAttributes(m) => m.encode(w),
            Message::EditAttributes(m) => m.encode(w),
            Message::RemoveAttributes(m) => m.encode(w),
            Message::RemoveComponents(m) => m.encode(w),
            Message::RemoveEntity(m) => m.encode(w),
            Message::CreateEntityReply(m) => m.encode(w),
            Message::CreateComponentsReply(m) => m.encode(w),
            Message::RigidBodyUpdate(m) => {
                w.bytes(&m.encode()?);
                Ok(())
            }
            Message::EntityAction(m) => m.encode(w),
            Message::AssetDiscovery(m) => m.encode(w),
            Message::AssetDeleted(m) => m.encode(w),
            Message::RegisterComponentType(m) => m.encode(w),
            Message::SetEntityParent(m) => m.encode(w),
            Message::Unknown { payload, .. } => {
                w.bytes(payload);
                Ok(())
            }
        }
    }

    /// A payload size to reserve before encoding: enough for EditAttributes
    /// (the bulk of a tick), a small default for the rest, which grow as
    /// needed.
    fn size_hint(&self) -> usize {
        match self {
            Message::EditAttributes(m) => m.encoded_len(),
            Message::Unknown { payload, .. } => payload.len(),
            _ => 64,
        }
    }

    /// Decodes an EditAttributes (113) payload in place, with the checks
    /// and errors of [`Message::decode`] for that id.
    pub fn decode_edit_attributes(payload: &[u8]) -> Result<EditAttributesView<'_>, DecodeError> {
        check_payload_len(payload)?;
        EditAttributesView::decode(&mut BitReader::new(payload))
    }

    /// Decodes a WebSocket frame: `u16 LE id` + payload.
    pub fn decode_frame(frame: &[u8], ctx: &DecodeContext<'_>) -> Result<Message, DecodeError> {
        let (id, payload) = split_frame(frame)?;
        Message::decode(id, payload, ctx)
    }

    /// Encodes a WebSocket frame: `u16 LE id` + payload, written into one
    /// buffer sized up front.
    pub fn encode_frame(&self, protocol: ProtocolVersion) -> Result<Vec<u8>, EncodeError> {
        let mut w = BitWriter::with_capacity(2 + self.size_hint());
        w.u16(self.id());
        self.encode_into(&mut w, protocol)?;
        Ok(w.finish())
    }
}

fn check_payload_len(payload: &[u8]) -> Result<(), DecodeError> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(DecodeError::LimitExceeded {
            what: "payload bytes",
            value: payload.len(),
            limit: MAX_PAYLOAD_BYTES,
        });
    }
    Ok(())
}

/// The entity and first component an EditAttributes frame edits, read
/// without decoding the rest; `None` for any other message or a frame too
/// short. Lets the node look up a batch's entities before editing them.
pub fn edit_attributes_target(frame: &[u8]) -> Option<(EntityId, ComponentId)> {
    let (id::EDIT_ATTRIBUTES, payload) = split_frame(frame).ok()? else {
        return None;
    };
    let mut r = BitReader::new(payload);
    r.vle("scene id").ok()?;
    let entity = EntityId(r.vle("entity id").ok()?);
    let component = ComponentId(r.vle("component id").ok()?);
    Some((entity, component))
}

/// Splits a frame into its message id and payload.
pub fn split_frame(frame: &[u8]) -> Result<(u16, &[u8]), DecodeError> {
    match frame {
        [lo, hi, payload @ ..] => Ok((u16::from_le_bytes([*lo, *hi]), payload)),
        _ => Err(DecodeError::truncated("message id", 16, frame.len() * 8)),
    }
}
