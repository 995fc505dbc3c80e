//! What a [`super::Node`] hands its driver: frames to send, each naming the
//! connection it is for, and events the driver acts on or logs.

use bytes::Bytes;

use crate::less::message::MethodStatus;
use crate::less::session::CloseReason;
use crate::less::value::Value;
use crate::link_id::LinkId;
use crate::scene::ClientId;
use crate::tundra::messages::EntityAction;
use crate::tundra::EntityId;
use crate::upstream::LinkCommand;

/// A frame to send, and where to.
#[derive(Debug, Clone, PartialEq)]
pub enum Transmit {
    /// A Tundra frame for one client connection.
    Client(ClientId, Bytes),
    /// A LESS datagram or stream frame for one peer link.
    Link(LinkId, crate::less::session::Transmit),
    /// A Tundra frame for the world server (upstream mode).
    Upstream(Vec<u8>),
}

/// Something the driver must do, or may log, that is not a frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Close a client's connection, telling it why.
    CloseClient(ClientId, String),
    /// A link's session ended: the node already dropped the link; the
    /// driver closes its transport.
    CloseLink(LinkId, CloseReason),
    /// A command for the connection to the world server.
    Upstream(LinkCommand),
    /// An EntityAction a peer sent, executed here as the entity's authority.
    ActionExecuted(EntityId, EntityAction),
    /// A remote authority answered an EntityAction one of this node's
    /// clients sent (Tundra has no reply message).
    ActionAnswered(MethodStatus, Value),
}
