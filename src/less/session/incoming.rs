//! Receiver-side state and the rules for applying the peer's messages.
//!
//! docs/less-wire.md §9: update-entity and tweak-entity take effect on arrival when
//! their entity is known, subject to the per-property timestamp rule (the
//! LESS draft's: "a received older packet with a property set will not have
//! any new effect on the property in question"). Every other message, and any
//! message that cannot be decoded yet because its entity or type is not known,
//! takes effect only in sequence order: held while an earlier packet is
//! missing. A framing or logic error ends the session; a permission error
//! answers a failure method-result (docs/less-wire.md §12). This module owns the
//! peer's types and entities as this end sees them, and the held packets;
//! what each message does is in `apply`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::outgoing::LocalState;
use super::Session;
use crate::less::codec::{DecodeError, Reader};
use crate::less::encoding::{EncodingId, LinkEncodings};
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::message::{DecodeContext, Message};
use crate::less::property_map::PropertyMap;
use crate::less::schema::{ConnectionSchema, TypeSchema};

/// A type the peer introduced, and our subscription to it.
#[derive(Clone, Debug)]
pub(super) struct RemoteType {
    pub uri: String,
    pub schema: Option<Arc<TypeSchema>>,
    /// By property index: what we are subscribed to now (all false while
    /// unsubscribed).
    pub subscribed: Vec<bool>,
    /// By property index: every property we ever subscribed to: the peer
    /// may still send values of a property we have since dropped (they are
    /// ignored, not an error).
    pub ever: Vec<bool>,
    /// We subscribed at some time (entities may be introduced).
    pub was_subscribed: bool,
    /// The link's encoding of each property, by index (with a schema).
    pub encodings: Option<Arc<[Option<EncodingId>]>>,
}

/// An entity the peer introduced.
#[derive(Clone, Debug)]
pub(super) struct RemoteEntity {
    pub type_id: TypeId<Remote>,
    pub schema: Arc<TypeSchema>,
    /// Timestamp of the packet that last set each property, by index.
    pub stamps: PropertyMap<i64>,
    /// The type's encodings (see [`RemoteType::encodings`]).
    pub encodings: Option<Arc<[Option<EncodingId>]>>,
}

/// An out-of-order packet waiting for the ones before it.
#[derive(Clone, Debug)]
pub(super) struct Held {
    pub timestamp: i64,
    /// Decoded messages that must wait for sequence order.
    pub messages: Vec<Message<Remote, Local>>,
    /// Undecodable yet (they need an entity or type from an earlier packet):
    /// the remaining bytes and message count.
    pub rest: Option<(Vec<u8>, usize)>,
    pub size: usize,
}

#[derive(Debug, Default)]
pub(super) struct RemoteState {
    pub types: BTreeMap<TypeId<Remote>, RemoteType>,
    /// Hashed: every update looks its object up; nothing walks them.
    pub entities: foldhash::HashMap<ObjectId<Remote>, RemoteEntity>,
    /// Invocations from the peer awaiting our result.
    pub incoming_requests: BTreeSet<RequestId<Remote>>,
    /// Our invocations awaiting the peer's result.
    pub outgoing_requests: BTreeMap<RequestId<Local>, ObjectId<Remote>>,
    /// Timestamp of the last tweak applied per property of our entities.
    pub tweak_stamps: BTreeMap<(ObjectId<Local>, PropertyKey), i64>,
    pub held: BTreeMap<u64, Held>,
    pub held_bytes: usize,
}

/// The session's view for decoding the peer's messages.
pub(super) struct Context<'a> {
    pub local: &'a LocalState,
    pub remote: &'a RemoteState,
    pub connection: &'a ConnectionSchema,
    pub encodings: &'a LinkEncodings,
}

impl DecodeContext<Remote, Local> for Context<'_> {
    fn sender_type(&self, type_id: TypeId<Remote>) -> Option<Arc<TypeSchema>> {
        self.remote.types.get(&type_id)?.schema.clone()
    }
    fn sender_entity_type(&self, entity: ObjectId<Remote>) -> Option<Arc<TypeSchema>> {
        Some(self.remote.entities.get(&entity)?.schema.clone())
    }
    fn receiver_entity_type(&self, entity: ObjectId<Local>) -> Option<Arc<TypeSchema>> {
        self.local.schema_of(entity)
    }
    fn sender_type_encodings(&self, type_id: TypeId<Remote>) -> Option<Arc<[Option<EncodingId>]>> {
        self.remote.types.get(&type_id)?.encodings.clone()
    }
    fn sender_entity_encodings(
        &self,
        entity: ObjectId<Remote>,
    ) -> Option<Arc<[Option<EncodingId>]>> {
        self.remote.entities.get(&entity)?.encodings.clone()
    }
    fn connection(&self) -> &ConnectionSchema {
        self.connection
    }
    fn encodings(&self) -> &LinkEncodings {
        self.encodings
    }
}

/// A breach of the protocol by the authenticated peer.
#[derive(Debug)]
pub(super) enum Violation {
    Framing(String),
    Logic(String),
}

fn decode_violation(error: DecodeError) -> Violation {
    match error {
        DecodeError::Unresolved(what) => Violation::Logic(format!("reference to unknown {what}")),
        DecodeError::UndeclaredProperty(what) => {
            Violation::Logic(format!("undeclared property {what}"))
        }
        other => Violation::Framing(other.to_string()),
    }
}

impl Session {
    fn decode_one(&self, reader: &mut Reader<'_>) -> Result<Message<Remote, Local>, DecodeError> {
        let context = Context {
            local: &self.local,
            remote: &self.remote,
            connection: &self.config.connection,
            encodings: &self.config.encodings,
        };
        Message::decode(reader, &context)
    }

    /// Decodes and applies every message of a packet whose predecessors have
    /// all been processed.
    pub(super) fn apply_in_order(
        &mut self,
        timestamp: i64,
        count: usize,
        bytes: &[u8],
    ) -> Result<(), Violation> {
        let mut reader = Reader::new(bytes);
        for _ in 0..count {
            let message = self.decode_one(&mut reader).map_err(decode_violation)?;
            self.apply(message, timestamp)?;
        }
        reader.expect_end().map_err(decode_violation)
    }

    /// Handles a packet that arrived while an earlier one is missing.
    pub(super) fn hold_out_of_order(
        &mut self,
        sequence: u64,
        timestamp: i64,
        count: usize,
        bytes: &[u8],
    ) -> Result<(), Violation> {
        let mut reader = Reader::new(bytes);
        let mut held = Held {
            timestamp,
            messages: Vec::new(),
            rest: None,
            size: bytes.len(),
        };
        for index in 0..count {
            let start = reader.position();
            match self.decode_one(&mut reader) {
                Ok(message) if message.carries_properties_only() => {
                    self.apply(message, timestamp)?
                }
                Ok(message) => held.messages.push(message),
                Err(DecodeError::Unresolved(_)) => {
                    held.rest = Some((bytes[start..].to_vec(), count - index));
                    break;
                }
                Err(error) => return Err(decode_violation(error)),
            }
        }
        if held.rest.is_none() {
            reader.expect_end().map_err(decode_violation)?;
        }
        self.remote.held_bytes += held.size;
        self.remote.held.insert(sequence, held);
        Ok(())
    }

    /// Processes held packets with sequences in `from..to`, in order.
    pub(super) fn release_held(&mut self, from: u64, to: u64) -> Result<(), Violation> {
        for sequence in from..to {
            let Some(held) = self.remote.held.remove(&sequence) else {
                continue;
            };
            self.remote.held_bytes -= held.size;
            for message in held.messages {
                self.apply(message, held.timestamp)?;
            }
            if let Some((bytes, count)) = held.rest {
                self.apply_in_order(held.timestamp, count, &bytes)?;
            }
        }
        Ok(())
    }
}
