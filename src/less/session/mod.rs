//! One LESS session: the state of one peer link, as a deterministic core.
//!
//! Shaped like quinn-proto's `Connection`: constructed with the negotiated
//! parameters and `now`; inputs are `handle_datagram`, `handle_stream_frame`
//! and `handle_timeout`; commands queue work (types, subscriptions,
//! entities, property values coalesced until the next transmit, method calls
//! and results, tweaks, interactions, connection control); outputs are
//! `poll_transmit`, `poll_timeout` and `poll_event`. It never reads a clock,
//! touches a socket or draws randomness. The application's commands are in
//! `commands`, the input path (opening, windows, acknowledgements) in
//! `receive`, sender bookkeeping in `outgoing` and `assemble`, receiver
//! rules in `incoming` (when) and `apply` (what), output scheduling in
//! `transmit`; this file holds the state, its accessors and the timers.

mod apply;
mod assemble;
mod bulk;
mod commands;
mod config;
mod event;
mod incoming;
mod object_table;
mod outgoing;
mod receive;
mod stats;
mod transmit;

use std::collections::VecDeque;

use tracing::{debug, info, warn};

pub use bulk::{BULK_BODY_LEN, BULK_THRESHOLD};
pub use config::{ConfigError, FramingMode, SessionConfig};
pub use event::{CloseReason, CommandError, Event, Path, Transmit};
pub use outgoing::MAX_VALUE_LEN;
pub use stats::{RejectReason, Stats};

use assemble::{SentItem, OVERSIZE_CAPACITY};
use incoming::{RemoteState, Violation};
use outgoing::{LocalState, Pending};

use crate::clock::Time;
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote, TypeId};
use crate::less::message::Message;
use crate::less::receive_window::ReceiveWindow;
use crate::less::schema::TypeSchema;
use crate::less::send_window::{LossTiming, SendWindow};
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
mod tests;
