//! What a session hands out: events for the application, frames for the
//! transport, why it closed, and why a command was refused.

use std::sync::Arc;

use crate::less::ids::{InteractionId, Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::message::MethodStatus;
use crate::less::property_list::{FieldValue, PropertyValue};
use crate::less::schema::TypeSchema;
pub use crate::less::send_window::Path;
use crate::less::value::Value;

/// A frame to put on the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// [`Path::Datagram`]: send `bytes` as one UDP datagram.
    /// [`Path::Stream`]: write `bytes` (a complete length-prefixed frame) to
    /// the link's reliable stream.
    pub path: Path,
    pub bytes: Vec<u8>,
}

/// Something the peer did, in the order it takes effect.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The peer introduced a type. `schema` is `None` if this node has no
    /// schema for the URI (it cannot subscribe then).
    TypeIntroduced {
        type_id: TypeId<Remote>,
        uri: String,
        schema: Option<Arc<TypeSchema>>,
    },
    /// The peer subscribed to one of our types (or changed its
    /// subscription); entities of it are now introduced automatically.
    TypeSubscribed {
        type_id: TypeId<Local>,
        properties: Vec<PropertyKey>,
    },
    /// The peer unsubscribed from one of our types; its entities have been
    /// withdrawn from the peer automatically.
    TypeUnsubscribed { type_id: TypeId<Local> },
    /// A new entity of the peer, with the initial values that took effect.
    EntityIntroduced {
        entity: ObjectId<Remote>,
        type_id: TypeId<Remote>,
        values: Vec<PropertyValue>,
    },
    /// Property values of a peer entity that took effect (newer than what
    /// last set each property). Also produced by a repeated introduce-entity
    /// (the answer to `request_entity`).
    EntityUpdated {
        entity: ObjectId<Remote>,
        values: Vec<PropertyValue>,
    },
    /// A peer entity went away.
    EntityRemoved { entity: ObjectId<Remote> },
    /// The peer invokes a method on one of our entities. Answer exactly once
    /// with `send_method_result` (a refusal is a failure status, docs/less-wire.md §12).
    MethodInvoked {
        request: RequestId<Remote>,
        entity: ObjectId<Local>,
        method: PropertyKey,
        arguments: Vec<Value>,
    },
    /// The answer to one of our invocations.
    MethodResult {
        request: RequestId<Local>,
        status: MethodStatus,
        value: Value,
    },
    /// The peer asks to change a property of one of our entities. No answer
    /// is sent; an accepted change shows up in our later updates.
    Tweaked {
        entity: ObjectId<Local>,
        property: PropertyKey,
        value: Value,
    },
    /// An interaction the peer detected.
    Interaction {
        interaction: InteractionId,
        values: Vec<FieldValue>,
    },
    /// Connection-control values from the peer (already applied by the session).
    ConnectionControl { values: Vec<FieldValue> },
    /// The session ended; nothing more will be sent or accepted.
    Closed { reason: CloseReason },
}

/// Why a session ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CloseReason {
    #[error("closed locally")]
    Local,
    #[error("nothing authentic received for the idle timeout")]
    IdleTimeout,
    /// The peer's reliable stream carried this many consecutive frames with
    /// a bad signature (see `SessionConfig::max_bad_signature_run`).
    #[error("{0} consecutive stream frames with a bad signature")]
    BadSignatureRun(u32),
    /// The authenticated peer broke the encoding rules (docs/less-wire.md §12).
    #[error("framing error: {0}")]
    Framing(String),
    /// The authenticated peer broke the protocol's logic (unknown type,
    /// unsubscribed property, ...; docs/less-wire.md §12).
    #[error("logic error: {0}")]
    Logic(String),
}

/// Why a command was refused. Nothing was queued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("the session is closed")]
    Closed,
    #[error("no schema for type {0}")]
    UnknownSchema(String),
    #[error("unknown type")]
    UnknownType,
    #[error("unknown entity")]
    UnknownEntity,
    #[error("object id is in use or not yet safe to reuse")]
    IdInUse,
    #[error("{0} is not a property of the type")]
    UnknownProperty(PropertyKey),
    #[error("{0} is not a method of the type")]
    UnknownMethod(PropertyKey),
    #[error("value for {0} does not match its declared type")]
    TypeMismatch(String),
    #[error("unknown request")]
    UnknownRequest,
    #[error("interaction not declared by the connection schema")]
    UnknownInteraction,
    #[error("a failed result must carry a STRING")]
    FailureWithoutText,
    #[error("encoded size exceeds the largest frame")]
    TooLarge,
}
