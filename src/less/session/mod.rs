//! One LESS session: the state of one peer link, as a deterministic core.
//!
//! Shaped like quinn-proto's `Connection`: constructed with the negotiated
//! parameters and `now`; inputs are `handle_datagram`, `handle_stream_frame`
//! and `handle_timeout`; commands queue work (types, subscriptions,
//! entities, property values coalesced until the next transmit, method calls
//! and results, tweaks, interactions, connection control); outputs are
//! `poll_transmit`, `poll_timeout` and `poll_event`. It never reads a clock,
//! touches a socket or draws randomness. Sender bookkeeping lives in
//! `outgoing` and `assemble`, receiver rules in `incoming`, output scheduling
//! in `transmit`; this file holds the state, the commands and the input path.

mod assemble;
mod bulk;
mod config;
mod event;
mod incoming;
mod object_table;
mod outgoing;
mod stats;
mod transmit;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tracing::{debug, info, trace, warn};

pub use bulk::{BULK_BODY_LEN, BULK_THRESHOLD};
pub use config::{ConfigError, FramingMode, SessionConfig};
pub use event::{CloseReason, CommandError, Event, Path, Transmit};
pub use outgoing::MAX_VALUE_LEN;
pub use stats::{RejectReason, Stats};

use assemble::{SentItem, OVERSIZE_CAPACITY};
use incoming::{RemoteState, RemoteType, Violation};
use outgoing::{check_value, LocalState, Pending};

use crate::clock::Time;
use crate::less::bulk::{open_formed_stream_datagram, FormedPacket};
use crate::less::ids::{InteractionId, Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use crate::less::limits::{MAX_HELD_BYTES, MAX_QUEUED_EVENTS};
use crate::less::message::{Message, MethodStatus};
use crate::less::packet::{
    open_datagram, open_stream_datagram, open_stream_packet, DatagramFraming, OpenError,
    OpenedPacket,
};
use crate::less::property_list::{ComponentSubscription, FieldValue, PropertyValue};
use crate::less::receive_window::{ReceiveWindow, Rejection};
use crate::less::schema::{TypeSchema, UPDATE_RATE};
use crate::less::send_window::{LossTiming, SendWindow};
use crate::less::value::Value;
use crate::logging::RemoteText;

/// One LESS peer link.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    local: LocalState,
    remote: RemoteState,
    send: SendWindow<Vec<SentItem>>,
    receive: ReceiveWindow,
    events: VecDeque<Event>,
    stats: Stats,
    closed: Option<CloseReason>,
    /// Timestamp of our last transmission.
    last_timestamp: Option<i64>,
    /// Largest timestamp of any authentic packet from the peer.
    peer_freshest: Option<i64>,
    ack_pending: bool,
    ack_deadline: Time,
    eliciting_unacked: u32,
    created: Time,
    last_send: Option<Time>,
    last_receive: Time,
    bad_signature_run: u32,
    /// The peer's update-rate request (packets per second), if any.
    peer_update_rate: Option<u32>,
    next_request: u64,
    /// Unacknowledged bulk packets: sequence and uncompressed message bytes
    /// (docs/less-wire.md §16.5).
    bulk_in_flight: Vec<(u64, usize)>,
}

fn rejection(reason: Rejection) -> RejectReason {
    match reason {
        Rejection::Duplicate => RejectReason::Duplicate,
        Rejection::OutOfWindow => RejectReason::OutOfWindow,
        Rejection::Stale => RejectReason::Stale,
    }
}

impl Session {
    /// A session on a link set up at `now`.
    pub fn new(config: SessionConfig, now: Time) -> Result<Session, ConfigError> {
        config.validate()?;
        Ok(Session {
            send: SendWindow::new(config.local_first_sequence, config.initial_rtt),
            receive: ReceiveWindow::new(config.remote_first_sequence),
            local: LocalState::with_encodings(config.encodings.clone()),
            config,
            remote: RemoteState::default(),
            events: VecDeque::new(),
            stats: Stats::default(),
            closed: None,
            last_timestamp: None,
            peer_freshest: None,
            ack_pending: false,
            ack_deadline: Time::MAX,
            eliciting_unacked: 0,
            created: now,
            last_send: None,
            last_receive: now,
            bad_signature_run: 0,
            peer_update_rate: None,
            next_request: 0,
            bulk_in_flight: Vec::new(),
        })
    }

    // ----- getters -----

    /// The configuration the session was built with.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Counters, with the current RTT estimate.
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats.clone();
        stats.values_sent = self.local.values_carried;
        stats.rtt = self.send.rtt().smoothed();
        stats.rtt_variance = self.send.rtt().variance();
        stats
    }

    /// Why the session ended, once it has.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// True once the session has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Packets sent and not yet acknowledged (datagram mode).
    pub fn in_flight(&self) -> usize {
        self.send.in_flight()
    }

    /// The highest packet sequence received so far: a mark to pass to
    /// [`Session::received_all_through`] later. On a stream link every
    /// packet arrives in order and the mark is 0.
    pub fn receive_mark(&self) -> u64 {
        match self.config.mode {
            FramingMode::Stream => 0,
            FramingMode::Datagram => self.receive.highest(),
        }
    }

    /// A mark on the sending side: every packet sent from now on has a
    /// sequence at or above it.
    pub fn send_mark(&self) -> u64 {
        match self.config.mode {
            FramingMode::Stream => 0,
            FramingMode::Datagram => self.send.next_sequence(),
        }
    }

    /// Whether the peer has acknowledged every packet below `mark` and the
    /// one at it (a [`Session::send_mark`]); a stream delivers whatever it
    /// carries.
    pub fn acknowledged_through(&self, mark: u64) -> bool {
        match self.config.mode {
            FramingMode::Stream => true,
            FramingMode::Datagram => self.send.oldest_unacked() > mark,
        }
    }

    /// Whether every packet up to `mark` (a [`Session::receive_mark`]) has
    /// arrived: re-sends keep their sequence numbers, so a gap fills unless
    /// the link dies. What those packets carried has then taken effect.
    pub fn received_all_through(&self, mark: u64) -> bool {
        match self.config.mode {
            FramingMode::Stream => true,
            FramingMode::Datagram => self.receive.lowest() > mark,
        }
    }

    /// The peer's update-rate request in force (packets per second).
    pub fn peer_update_rate(&self) -> Option<u32> {
        self.peer_update_rate
    }

    /// The URI and schema of a type the peer introduced.
    pub fn remote_type(
        &self,
        type_id: TypeId<Remote>,
    ) -> Option<(&str, Option<&std::sync::Arc<TypeSchema>>)> {
        let remote_type = self.remote.types.get(&type_id)?;
        Some((remote_type.uri.as_str(), remote_type.schema.as_ref()))
    }

    /// The type of an entity the peer introduced.
    pub fn remote_entity_type(&self, entity: ObjectId<Remote>) -> Option<TypeId<Remote>> {
        self.remote.entities.get(&entity).map(|e| e.type_id)
    }

    /// The properties of one of our types the peer is subscribed to.
    pub fn peer_subscription(&self, type_id: TypeId<Local>) -> Option<Vec<PropertyKey>> {
        let subscription = self.local.types.get(&type_id)?.subscription.as_ref()?;
        Some(subscription.iter().cloned().collect())
    }

    /// True if `entity` may be passed to `introduce_entity` now.
    pub fn object_id_available(&self, entity: ObjectId<Local>) -> bool {
        self.local.id_available(entity)
    }

    // ----- commands -----

    fn check_open(&self) -> Result<(), CommandError> {
        match self.closed {
            Some(_) => Err(CommandError::Closed),
            None => Ok(()),
        }
    }

    fn queue_message(&mut self, message: Message<Local, Remote>) -> Result<(), CommandError> {
        if message.to_bytes().len() > OVERSIZE_CAPACITY {
            return Err(CommandError::TooLarge);
        }
        self.local.pending.push_back(Pending::Message(message));
        Ok(())
    }

    /// Introduces one of our types (by schema URI) to the peer.
    pub fn introduce_type(&mut self, uri: &str) -> Result<TypeId<Local>, CommandError> {
        self.check_open()?;
        let schema = self
            .config
            .schemas
            .resolve(uri)
            .ok_or_else(|| CommandError::UnknownSchema(uri.to_string()))?;
        Ok(self.local.introduce_type(schema))
    }

    /// Subscribes to properties of a type the peer introduced (replacing any
    /// earlier subscription to it). Only these properties will be sent to us.
    pub fn subscribe_type(
        &mut self,
        type_id: TypeId<Remote>,
        properties: &[PropertyKey],
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let remote_type = self
            .remote
            .types
            .get_mut(&type_id)
            .ok_or(CommandError::UnknownType)?;
        let schema = remote_type
            .schema
            .clone()
            .ok_or_else(|| CommandError::UnknownSchema(remote_type.uri.clone()))?;
        let keys: BTreeSet<PropertyKey> = properties.iter().cloned().collect();
        if let Some(key) = keys.iter().find(|key| schema.property_type(key).is_none()) {
            return Err(CommandError::UnknownProperty(key.clone()));
        }
        let mut by_component: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for key in &keys {
            by_component
                .entry(key.component.clone())
                .or_default()
                .push(key.property);
        }
        let components = by_component
            .into_iter()
            .map(|(component, properties)| ComponentSubscription {
                component,
                properties,
            })
            .collect();
        remote_type.subscribed.iter_mut().for_each(|s| *s = false);
        for key in &keys {
            // Every key is a property of the schema (checked above).
            if let Some(index) = schema.property_index(key) {
                remote_type.subscribed[index.get()] = true;
                remote_type.ever[index.get()] = true;
            }
        }
        remote_type.was_subscribed = true;
        self.queue_message(Message::SubscribeType {
            type_id,
            components,
        })
    }

    /// Stops receiving a type; the peer removes its entities of it.
    pub fn unsubscribe_type(&mut self, type_id: TypeId<Remote>) -> Result<(), CommandError> {
        self.check_open()?;
        let remote_type: &mut RemoteType = self
            .remote
            .types
            .get_mut(&type_id)
            .ok_or(CommandError::UnknownType)?;
        remote_type.subscribed.iter_mut().for_each(|s| *s = false);
        self.queue_message(Message::UnsubscribeType { type_id })
    }

    /// Reads our object `object`'s state, so that it is in the cache when
    /// a property of it is updated (see `Scene::warm`).
    pub fn warm_object(&self, object: ObjectId<Local>) {
        let Some(entity) = self.local.entities.get(&object) else {
            return;
        };
        // The object's state spans several cache lines: read a field of
        // each part an update reads (its schema, slot indices, dirty set,
        // queue flag), not only the slots.
        std::hint::black_box((
            std::sync::Arc::as_ptr(&entity.schema),
            entity.slots.len(),
            entity.dirty.is_empty(),
            entity.queued,
            entity.slots.values().next().map(|slot| slot.last_packet),
        ));
    }

    /// An object id that is free and safe to use (never one whose removal
    /// the peer may not have seen yet).
    pub fn allocate_object_id(&mut self) -> ObjectId<Local> {
        self.local.allocate_object_id()
    }

    /// Presents a new entity; it is introduced once the peer subscribes to
    /// its type, with the subscribed properties among `values`.
    pub fn introduce_entity(
        &mut self,
        entity: ObjectId<Local>,
        type_id: TypeId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.introduce_entity(entity, type_id, values)
    }

    /// Sets property values of one of our entities; sent coalesced (latest
    /// value only) with the next transmit.
    pub fn update_entity(
        &mut self,
        entity: ObjectId<Local>,
        values: Vec<PropertyValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.set_values(entity, values)
    }

    /// [`Session::update_entity`] of one property.
    pub fn update_property(
        &mut self,
        entity: ObjectId<Local>,
        key: &PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.set_value(entity, key, value)
    }

    /// Queues the current value of every subscribed property of one of our
    /// introduced entities again, unchanged (docs/less-wire.md §16.7: "rebroadcast
    /// everything every x seconds ... if packets are lost"). Returns the
    /// plain size of the values queued, 0 for an entity the peer does not
    /// know yet (its introduction carries everything).
    pub fn refresh_entity(&mut self, entity: ObjectId<Local>) -> Result<usize, CommandError> {
        self.check_open()?;
        self.local.refresh(entity)
    }

    /// Our objects in ascending id order, starting after `after` and
    /// wrapping around once (a refresh lap, docs/less-wire.md §16.7), without collecting
    /// or sorting them.
    pub fn local_objects_after(
        &self,
        after: Option<ObjectId<Local>>,
    ) -> impl Iterator<Item = ObjectId<Local>> + '_ {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let entities = &self.local.entities;
        let (tail, head) = match after {
            Some(last) => (
                entities.ids_in((Excluded(last), Unbounded)),
                entities.ids_in((Unbounded, Included(last))),
            ),
            None => (
                entities.ids_in((Unbounded, Unbounded)),
                entities.ids_in((Unbounded, Excluded(ObjectId::new(0)))),
            ),
        };
        tail.chain(head)
    }

    /// Sets one property value (see [`Self::update_entity`]).
    pub fn set_property(
        &mut self,
        entity: ObjectId<Local>,
        key: PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.update_entity(entity, vec![PropertyValue { key, value }])
    }

    /// Removes one of our entities.
    pub fn remove_entity(&mut self, entity: ObjectId<Local>) -> Result<(), CommandError> {
        self.check_open()?;
        self.local.remove_entity(entity)?;
        self.remote
            .tweak_stamps
            .retain(|(target, _), _| *target != entity);
        Ok(())
    }

    /// Asks the peer for a fresh snapshot of one of its entities.
    pub fn request_entity(&mut self, entity: ObjectId<Remote>) -> Result<(), CommandError> {
        self.check_open()?;
        if !self.remote.entities.contains_key(&entity) {
            return Err(CommandError::UnknownEntity);
        }
        self.queue_message(Message::RequestEntity { entity })
    }

    /// Invokes a method of a peer entity; the answer arrives as
    /// [`Event::MethodResult`] with the returned request id.
    pub fn invoke_method(
        &mut self,
        entity: ObjectId<Remote>,
        method: PropertyKey,
        arguments: Vec<Value>,
    ) -> Result<RequestId<Local>, CommandError> {
        self.check_open()?;
        let target = self
            .remote
            .entities
            .get(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        let signature = target
            .schema
            .method(&method)
            .ok_or_else(|| CommandError::UnknownMethod(method.clone()))?;
        if let Some(declared) = &signature.arguments {
            let matches = declared.len() == arguments.len()
                && declared
                    .iter()
                    .zip(&arguments)
                    .all(|(t, v)| v.conforms_to(t));
            if !matches {
                return Err(CommandError::TypeMismatch(method.to_string()));
            }
        } else if !arguments.iter().all(|v| v.conforms_to(&v.value_type())) {
            return Err(CommandError::TypeMismatch(method.to_string()));
        }
        let request = RequestId::new(self.next_request + 1);
        self.queue_message(Message::MethodInvocation {
            request,
            entity,
            method,
            arguments,
        })?;
        self.next_request += 1;
        self.remote.outgoing_requests.insert(request, entity);
        Ok(request)
    }

    /// Answers an invocation from the peer, exactly once. A non-zero status
    /// (e.g. [`MethodStatus::FORBIDDEN`] for a refusal) carries a STRING.
    pub fn send_method_result(
        &mut self,
        request: RequestId<Remote>,
        status: MethodStatus,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        if !self.remote.incoming_requests.contains(&request) {
            return Err(CommandError::UnknownRequest);
        }
        if !status.is_success() && !matches!(value, Value::String(_)) {
            return Err(CommandError::FailureWithoutText);
        }
        if !value.conforms_to(&value.value_type()) {
            return Err(CommandError::TypeMismatch("return value".into()));
        }
        self.queue_message(Message::MethodResult {
            request,
            status,
            value,
        })?;
        self.remote.incoming_requests.remove(&request);
        Ok(())
    }

    /// Asks the peer to change a property of one of its entities (coalesced:
    /// only the latest tweak of a property is sent).
    pub fn tweak_entity(
        &mut self,
        entity: ObjectId<Remote>,
        property: PropertyKey,
        value: Value,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let target = self
            .remote
            .entities
            .get(&entity)
            .ok_or(CommandError::UnknownEntity)?;
        check_value(&target.schema, &property, &value)?;
        self.local.tweak(entity, property, value);
        Ok(())
    }

    /// Reports an interaction declared in the connection schema.
    pub fn send_interaction(
        &mut self,
        interaction: InteractionId,
        values: Vec<FieldValue>,
    ) -> Result<(), CommandError> {
        self.check_open()?;
        let schema = self
            .config
            .connection
            .interaction(interaction)
            .ok_or(CommandError::UnknownInteraction)?;
        for field in &values {
            let declared = schema.property(field.id).ok_or_else(|| {
                CommandError::TypeMismatch(format!("interaction property {}", field.id))
            })?;
            if !field.value.conforms_to(&declared.value_type) {
                return Err(CommandError::TypeMismatch(declared.name.clone()));
            }
        }
        self.queue_message(Message::Interaction {
            interaction,
            values,
        })
    }

    /// Sends connection-control values declared in the connection schema.
    pub fn send_connection_control(&mut self, values: Vec<FieldValue>) -> Result<(), CommandError> {
        self.check_open()?;
        for field in &values {
            let declared = self.config.connection.control(field.id).ok_or_else(|| {
                CommandError::TypeMismatch(format!("control property {}", field.id))
            })?;
            if !field.value.conforms_to(&declared.value_type) {
                return Err(CommandError::TypeMismatch(declared.name.clone()));
            }
        }
        self.queue_message(Message::ConnectionControl { values })
    }

    /// Asks the peer to send at most `packets_per_second` packets per second
    /// (0: no limit).
    pub fn request_update_rate(&mut self, packets_per_second: u32) -> Result<(), CommandError> {
        self.send_connection_control(vec![FieldValue {
            id: UPDATE_RATE,
            value: Value::Integer(i64::from(packets_per_second)),
        }])
    }

    /// Ends the session locally.
    pub fn close(&mut self) {
        self.close_with(CloseReason::Local);
    }

    fn close_with(&mut self, reason: CloseReason) {
        if self.closed.is_some() {
            return;
        }
        match &reason {
            CloseReason::Local => info!("less session closed locally"),
            CloseReason::IdleTimeout => info!("less session idle, closed"),
            other => warn!(reason = %RemoteText(&other), "less session closed: peer misbehaved"),
        }
        self.closed = Some(reason.clone());
        self.events.push_back(Event::Closed { reason });
    }

    fn violation(&mut self, violation: Violation) {
        self.close_with(match violation {
            Violation::Framing(text) => CloseReason::Framing(text),
            Violation::Logic(text) => CloseReason::Logic(text),
        });
    }

    pub(super) fn push_event(&mut self, event: Event) {
        self.events.push_back(event);
    }

    // ----- inputs -----

    /// A UDP datagram from the peer.
    pub fn handle_datagram(&mut self, now: Time, datagram: &[u8]) {
        if self.closed.is_some() {
            return;
        }
        self.stats.bytes_received += datagram.len() as u64;
        if self.config.mode == FramingMode::Stream {
            self.stats.reject(RejectReason::Malformed);
            return;
        }
        match open_datagram(&self.config.keys.receive, datagram) {
            Ok((framing, packet)) => self.receive_datagram(now, framing, packet),
            Err(error) => self.open_failed(error, Path::Datagram),
        }
    }

    /// One complete frame from the link's reliable stream, length prefix
    /// included (see [`crate::less::packet::StreamDeframer`]).
    pub fn handle_stream_frame(&mut self, now: Time, frame: &[u8]) {
        if self.closed.is_some() {
            return;
        }
        self.stats.bytes_received += frame.len() as u64;
        match self.config.mode {
            FramingMode::Datagram if self.config.bulk_packets => {
                match open_formed_stream_datagram(&self.config.keys.receive, frame) {
                    Ok((framing, FormedPacket::Plain(packet))) => {
                        self.receive_datagram(now, framing, packet)
                    }
                    Ok((framing, FormedPacket::Bulk(body))) => {
                        // Processed exactly as the packet inside it.
                        self.stats.bulk_packets_received += 1;
                        self.stats.bulk_bytes_compressed_received += body.compressed_len as u64;
                        self.stats.bulk_bytes_uncompressed_received += body.body_len() as u64;
                        self.receive_datagram(now, framing, body.packet())
                    }
                    Err(error) => self.open_failed(error, Path::Stream),
                }
            }
            FramingMode::Datagram => match open_stream_datagram(&self.config.keys.receive, frame) {
                Ok((framing, packet)) => self.receive_datagram(now, framing, packet),
                Err(error) => self.open_failed(error, Path::Stream),
            },
            FramingMode::Stream => match open_stream_packet(&self.config.keys.receive, frame) {
                Ok(packet) => self.receive_stream_packet(now, packet),
                Err(error) => self.open_failed(error, Path::Stream),
            },
        }
    }

    fn open_failed(&mut self, error: OpenError, path: Path) {
        match error {
            OpenError::Malformed(_) => self.stats.reject(RejectReason::Malformed),
            OpenError::BadSignature => {
                self.stats.reject(RejectReason::BadSignature);
                // A datagram with a bad MAC is dropped and counted, nothing
                // more: anyone who can put the peer's source address on a
                // UDP datagram can send one (a spoofer, or the other
                // connection of a simultaneous dial still using its own
                // keys), so it must cost the link nothing. Only the stream
                // comes from the TLS-authenticated peer itself, whose bad
                // MACs mean it is broken (docs/less-wire.md §12).
                if path == Path::Stream {
                    self.bad_signature_run += 1;
                    let limit = self.config.max_bad_signature_run;
                    if limit > 0 && self.bad_signature_run >= limit {
                        self.close_with(CloseReason::BadSignatureRun(self.bad_signature_run));
                    }
                }
            }
            OpenError::Framing(decode) => self.close_with(CloseReason::Framing(decode.to_string())),
        }
    }

    fn authentic(&mut self, now: Time) {
        self.bad_signature_run = 0;
        self.last_receive = now;
    }

    fn receive_stream_packet(&mut self, now: Time, packet: OpenedPacket<'_>) {
        self.authentic(now);
        if self
            .peer_freshest
            .is_some_and(|freshest| packet.timestamp <= freshest)
        {
            self.stats.reject(RejectReason::Stale);
            return;
        }
        self.peer_freshest = Some(packet.timestamp);
        self.stats.packets_received += 1;
        trace!(
            timestamp = packet.timestamp,
            messages = packet.message_count,
            "less stream packet"
        );
        if let Err(violation) =
            self.apply_in_order(packet.timestamp, packet.message_count, packet.messages)
        {
            self.violation(violation);
        }
    }

    fn receive_datagram(&mut self, now: Time, framing: DatagramFraming, packet: OpenedPacket<'_>) {
        self.authentic(now);
        let classified = self.receive.classify(framing.sequence, packet.timestamp);
        // Acknowledgements count only from a transmission fresher than any
        // before it: the peer computes them when it transmits, so the freshest
        // carries the most; a replay carries old ones.
        let honest = matches!(classified, Ok(_) | Err(Rejection::Duplicate));
        if honest
            && self
                .peer_freshest
                .map_or(true, |freshest| packet.timestamp > freshest)
        {
            self.peer_freshest = Some(packet.timestamp);
            match self.send.on_ack(framing.ack_last, framing.ack_bits, now) {
                Ok(acked) => {
                    self.stats.packets_lost = self.send.lost_transmissions();
                    self.on_acknowledged(acked)
                }
                Err(error) => return self.violation(Violation::Logic(error.to_string())),
            }
        }
        let sequence = match classified {
            Ok(sequence) => sequence,
            Err(reason) => {
                trace!(
                    sequence = framing.sequence,
                    reason = match reason {
                        Rejection::Duplicate => "duplicate",
                        Rejection::OutOfWindow => "out_of_window",
                        Rejection::Stale => "stale",
                    },
                    "less packet refused"
                );
                self.stats.reject(rejection(reason));
                if reason == Rejection::Duplicate && packet.message_count > 0 {
                    // The peer re-sent: our acknowledgement may have been lost.
                    self.schedule_duplicate_ack(now);
                }
                self.release_ids();
                return;
            }
        };
        let in_order = sequence == self.receive.lowest();
        let overloaded = self.events.len() >= MAX_QUEUED_EVENTS
            || (!in_order && self.remote.held_bytes + packet.messages.len() > MAX_HELD_BYTES);
        if overloaded {
            self.stats.reject(RejectReason::Overload);
            return;
        }
        self.stats.packets_received += 1;
        trace!(
            sequence,
            timestamp = packet.timestamp,
            messages = packet.message_count,
            in_order,
            "less packet"
        );
        let had_gap = !self.remote.held.is_empty() || !in_order;
        self.receive.insert(sequence, packet.timestamp);
        // Only packets with messages elicit an acknowledgement: promptly, and
        // at once when they open or fill a gap, since the peer's loss
        // detection waits on it. A packet without messages never does, gap
        // or not (docs/less-wire.md §7, as QUIC's ACK-only packets,
        // RFC 9000 section 13.2.1): two ends that both see a gap would
        // otherwise answer each other's empty packets at once, without end.
        // Its acknowledgement rides on the next packet sent.
        if packet.message_count > 0 {
            self.schedule_ack(now, had_gap);
        }
        let result = if in_order {
            self.apply_in_order(packet.timestamp, packet.message_count, packet.messages)
                .and_then(|()| self.release_held(sequence + 1, self.receive.lowest()))
        } else {
            self.hold_out_of_order(
                sequence,
                packet.timestamp,
                packet.message_count,
                packet.messages,
            )
        };
        if let Err(violation) = result {
            return self.violation(violation);
        }
        self.release_ids();
    }

    /// An acknowledgement within `max_ack_delay` for a duplicate with
    /// messages, never at once and not counted as eliciting. A sender whose
    /// window is full carries due acks on a re-send of its oldest packet,
    /// which the peer sees as a duplicate with messages: answered at once,
    /// by the same kind of re-send from a peer whose window is full too, the
    /// two ends exchanged re-sends as fast as they could process them (a
    /// triangle under overload measured 25 000 such packets a second each
    /// way, every one refused as a duplicate). The delay bounds that
    /// exchange to one packet per `max_ack_delay` each way.
    fn schedule_duplicate_ack(&mut self, now: Time) {
        let deadline = now + self.config.max_ack_delay;
        self.ack_deadline = if self.ack_pending {
            self.ack_deadline.min(deadline)
        } else {
            deadline
        };
        self.ack_pending = true;
    }

    fn schedule_ack(&mut self, now: Time, immediately: bool) {
        self.eliciting_unacked += 1;
        let deadline = if immediately || self.eliciting_unacked >= 2 {
            now
        } else {
            now + self.config.max_ack_delay
        };
        self.ack_deadline = if self.ack_pending {
            self.ack_deadline.min(deadline)
        } else {
            deadline
        };
        self.ack_pending = true;
    }

    fn on_acknowledged(&mut self, acked: Vec<crate::less::send_window::SentPacket<Vec<SentItem>>>) {
        for packet in acked {
            for item in packet.payload {
                if let SentItem::Tweak { entity, key, .. } = item {
                    let done = self
                        .local
                        .tweaks
                        .get(&(entity, key.clone()))
                        .is_some_and(|slot| {
                            slot.last_packet == Some(packet.sequence) && !slot.dirty
                        });
                    if done {
                        self.local.tweaks.remove(&(entity, key));
                    }
                }
            }
        }
    }

    fn release_ids(&mut self) {
        self.local.release_acknowledged(
            self.send.oldest_unacked(),
            Some(self.receive.highest()),
            self.receive.lowest(),
        );
    }

    /// Runs timers: idle timeout, loss detection, id quarantine.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.closed.is_some() {
            return;
        }
        if now >= self.last_receive + self.config.idle_timeout {
            return self.close_with(CloseReason::IdleTimeout);
        }
        match self.config.mode {
            FramingMode::Datagram => {
                let lost = self.send.detect_losses(now, &self.loss_timing());
                if lost > 0 {
                    debug!(lost, "less packets declared lost");
                }
            }
            FramingMode::Stream => self
                .local
                .release_quarantined(now, self.config.stream_id_quarantine),
        }
    }

    fn loss_timing(&self) -> LossTiming {
        LossTiming {
            max_ack_delay: self.config.max_ack_delay,
            keepalive_interval: self.config.keepalive_interval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::less::packet::open_datagram;
    use crate::less::schema::ConnectionSchema;
    use crate::less::schema_toml::types_from_toml;
    use crate::less::signature::{LinkRole, SessionKeys};
    use std::sync::Arc;

    const SECRET: [u8; 32] = [1; 32];

    fn session(mode: FramingMode) -> Session {
        let registry =
            types_from_toml(include_str!("../../../schemas/less/test-types.toml")).unwrap();
        let mut config = SessionConfig::new(
            SessionKeys::derive(&SECRET, LinkRole::Initiator),
            250,
            40,
            Arc::new(registry),
            Arc::new(ConnectionSchema::builtin()),
        );
        config.mode = mode;
        Session::new(config, Time::ZERO).unwrap()
    }

    fn peer_key() -> crate::less::signature::MacKey {
        SessionKeys::derive(&SECRET, LinkRole::Acceptor).receive
    }

    /// Drains transmits at `now`, returning (sequence, timestamp, message count).
    fn drain(session: &mut Session, now: Time) -> Vec<(u8, i64, usize)> {
        let mut out = Vec::new();
        while let Some(transmit) = session.poll_transmit(now) {
            assert_eq!(transmit.path, Path::Datagram);
            let (framing, packet) = open_datagram(&peer_key(), &transmit.bytes).unwrap();
            out.push((framing.sequence, packet.timestamp, packet.message_count));
        }
        out
    }

    #[test]
    fn sessions_can_move_between_threads() {
        fn assert_send<T: Send + 'static>() {}
        assert_send::<Session>();
        assert_send::<Event>();
    }

    #[test]
    fn keepalive_is_an_empty_packet_with_initial_acks() {
        let mut session = session(FramingMode::Datagram);
        assert!(drain(&mut session, Time::ZERO).is_empty());
        let keepalive = session.poll_timeout().unwrap();
        assert_eq!(keepalive, Time::from_millis(1000));
        let sent = session.poll_transmit(keepalive).unwrap();
        let (framing, packet) = open_datagram(&peer_key(), &sent.bytes).unwrap();
        assert_eq!(
            (framing.sequence, framing.ack_last, framing.ack_bits),
            (250, 39, u64::MAX)
        );
        assert_eq!((packet.timestamp, packet.message_count), (1000, 0));
    }

    #[test]
    fn window_caps_unacknowledged_packets_and_timestamps_always_increase() {
        let mut session = session(FramingMode::Datagram);
        session.introduce_type("urn:lessgate:test:crate").unwrap();
        for round in 0..100 {
            session
                .queue_message(Message::IntroduceType {
                    type_id: TypeId::new(1000 + round),
                    uri: "x".repeat(1000),
                })
                .unwrap();
        }
        let mut sent = drain(&mut session, Time::ZERO);
        assert_eq!(sent.len(), 64, "the window holds 64 packets");
        let mut now = Time::ZERO;
        while now < Time::from_millis(10_000) {
            now = session.poll_timeout().unwrap();
            session.handle_timeout(now);
            sent.extend(drain(&mut session, now));
        }
        assert!(!session.is_closed());
        let sequences: std::collections::BTreeSet<u8> = sent.iter().map(|s| s.0).collect();
        assert_eq!(sequences.len(), 64, "re-sends reuse their sequence numbers");
        assert!(
            sent.windows(2).all(|pair| pair[1].1 > pair[0].1),
            "timestamps strictly increase"
        );
        assert!(session.stats().packets_resent > 0);
    }

    /// The peer's first datagram, empty, acknowledging every packet up to
    /// sequence `last`.
    fn acknowledgement_up_to(last: u8) -> Vec<u8> {
        let framing = crate::less::packet::DatagramFraming {
            sequence: 40,
            ack_last: last,
            ack_bits: u64::MAX,
        };
        let key = SessionKeys::derive(&SECRET, LinkRole::Acceptor).send;
        crate::less::packet::seal_datagram(&key, &framing, 1, 0, &[])
    }

    /// Queues an IntroduceType whose uri is `len` bytes long.
    fn queue_type(session: &mut Session, id: u64, len: usize) {
        session
            .queue_message(Message::IntroduceType {
                type_id: TypeId::new(id),
                uri: "x".repeat(len),
            })
            .unwrap();
    }

    #[test]
    fn an_idle_link_sends_at_once_and_a_busy_one_sends_what_waited_together() {
        let mut session = session(FramingMode::Datagram);
        let now = Time::from_millis(1);
        // Idle, within its window: a message leaves when it is queued, alone,
        // with no timer or tick to wait for.
        queue_type(&mut session, 1000, 10);
        let counts: Vec<usize> = drain(&mut session, now).iter().map(|s| s.2).collect();
        assert_eq!(counts, [1]);
        // Busy: 63 packets of one large message each fill the window of 64;
        // what is queued then waits for acknowledgements ...
        for id in 1001..1064 {
            queue_type(&mut session, id, 1000);
        }
        assert_eq!(drain(&mut session, now).len(), 63);
        for id in 2000..2040 {
            queue_type(&mut session, id, 10);
        }
        assert!(drain(&mut session, now).is_empty(), "the window is full");
        // ... and leaves with the first one, in one packet rather than forty.
        let later = Time::from_millis(2);
        session.handle_datagram(later, &acknowledgement_up_to(57));
        let counts: Vec<usize> = drain(&mut session, later).iter().map(|s| s.2).collect();
        assert_eq!(counts, [40]);
    }

    #[test]
    fn silence_closes_after_the_idle_timeout() {
        let mut session = session(FramingMode::Stream);
        let mut now = Time::ZERO;
        while !session.is_closed() {
            now = session.poll_timeout().unwrap();
            session.handle_timeout(now);
            while session.poll_transmit(now).is_some() {}
        }
        assert_eq!(now, Time::from_millis(15_000));
        assert_eq!(session.close_reason(), Some(&CloseReason::IdleTimeout));
        assert!(matches!(session.poll_event(), Some(Event::Closed { .. })));
        assert_eq!(
            session.introduce_type("urn:lessgate:test:crate"),
            Err(CommandError::Closed)
        );
    }

    #[test]
    fn pending_events_are_listed_without_being_taken() {
        let mut session = session(FramingMode::Stream);
        assert_eq!(session.pending_events().count(), 0);
        while !session.is_closed() {
            let now = session.poll_timeout().unwrap();
            session.handle_timeout(now);
            while session.poll_transmit(now).is_some() {}
        }
        let pending: Vec<&Event> = session.pending_events().collect();
        assert!(matches!(pending[..], [Event::Closed { .. }]), "{pending:?}");
        assert_eq!(session.pending_events().count(), 1, "listing takes nothing");
        assert!(matches!(session.poll_event(), Some(Event::Closed { .. })));
        assert_eq!(session.pending_events().count(), 0);
    }

    #[test]
    fn commands_are_validated() {
        let mut session = session(FramingMode::Datagram);
        assert!(matches!(
            session.introduce_type("urn:nope"),
            Err(CommandError::UnknownSchema(_))
        ));
        let type_id = session.introduce_type("urn:lessgate:test:crate").unwrap();
        let entity = session.allocate_object_id();
        let bad = vec![PropertyValue {
            key: PropertyKey::new(2, 2),
            value: Value::String("not an integer".into()),
        }];
        assert!(matches!(
            session.introduce_entity(entity, type_id, bad),
            Err(CommandError::TypeMismatch(_))
        ));
        session.introduce_entity(entity, type_id, vec![]).unwrap();
        assert_eq!(
            session.introduce_entity(entity, type_id, vec![]),
            Err(CommandError::IdInUse)
        );
        assert!(matches!(
            session.set_property(entity, PropertyKey::new(9, 9), Value::Null),
            Err(CommandError::UnknownProperty(_))
        ));
        assert_eq!(
            session.request_entity(ObjectId::new(5)),
            Err(CommandError::UnknownEntity)
        );
        assert_eq!(
            session.send_method_result(RequestId::new(1), MethodStatus::SUCCESS, Value::Null),
            Err(CommandError::UnknownRequest)
        );
        session.remove_entity(entity).unwrap();
        // Never introduced to the peer: free again at once.
        assert!(session.object_id_available(entity));
    }
}
