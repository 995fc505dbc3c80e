//! One kNet connection over UDP (docs/knet-wire.md §4), client or server side, as
//! a sans-IO state machine: datagrams and an explicit `now` in, datagrams,
//! timeouts and events out. No socket, no clock, no randomness.
//!
//! The parts live in their own files: duplicate detection (`received`),
//! pending acks (`acks`), the outbound queue with reliable numbering,
//! fragmentation and re-sends (`send_queue`), inbound fragment reassembly
//! (`reassembly`), pacing (`pacing`) and a peer whose port refuses our
//! datagrams (`unreachable`). This file owns the life cycle (§4.8-4.12:
//! Pending → Ok → Disconnecting / PeerClosed → Closed), pings, timeouts,
//! and the order of things inside one datagram.

pub mod acks;
pub mod pacing;
pub mod reassembly;
mod receive;
pub mod received;
pub mod send_queue;
pub mod unreachable;

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use crate::clock::Time;
use crate::knet::datagram::{
    block_len, header_len, write_datagram, BlockOut, FragmentInfo, MAX_SEND_DATAGRAM,
};
use crate::knet::error::KnetError;
use crate::knet::ids::{MessageId, PacketId, ReliableNumber};
use crate::knet::message::{OutMessage, PacketAck};
use crate::logging::RemoteText;

use acks::PendingAcks;
use pacing::Pacer;
use reassembly::{Reassembly, ReassemblyError};
use received::{PacketWindow, ReliableSet, TooFarAhead};
use send_queue::SendQueue;

/// Which end of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Created on a client's connect datagram; talks first (§4.8).
    Server,
    /// Sends the connect datagram and waits for the server (§4.8).
    Client,
}

/// Connection settings; the default is the real kNet server's behaviour.
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// PingRequest period while connected (§4.9: 3.5 s).
    pub ping_interval: Duration,
    /// Silence after which the connection is lost (§4.9: 15 s), checked
    /// continuously.
    pub timeout: Duration,
    /// Longest wait before acking a reliable datagram (§4.4: 33 ms).
    pub ack_delay: Duration,
    /// Re-send reliable messages not acked after this (§4.5: 5 s).
    pub retransmit_timeout: Duration,
    /// Datagram pacing rate (§4.6: 1000/s).
    pub datagrams_per_sec: u32,
    /// Datagrams that may leave at once after a quiet period (§4.6: ~20).
    pub burst: u32,
    /// Largest reassembled inbound message (10 MiB, like kNet's TCP cap).
    pub max_message_bytes: usize,
    /// Fragment bytes buffered per connection before it is closed.
    pub max_reassembly_bytes: usize,
    /// Fragment bytes buffered by every connection of the node together
    /// (shared by the connections given the same budget); `None`: no
    /// node-wide bound.
    pub reassembly_budget: Option<reassembly::ReassemblyBudget>,
    /// Backpressure hint: drivers stop handing over messages past this many
    /// unsent payload bytes ([`UdpConnection::unsent_bytes`]).
    pub max_unsent_bytes: usize,
    /// Client: give up if the server has not answered after this (5 s).
    pub connect_timeout: Duration,
    /// How long a closing side waits for DisconnectAck (500 ms).
    pub disconnect_linger: Duration,
    /// "Connection refused" reports (ICMP port unreachable) that end the
    /// connection when they span [`UdpConfig::refusal_span`] with nothing
    /// heard from the peer (`unreachable`): 5. Not kNet's: it waits for
    /// its silence timeout.
    pub refusals_to_close: u32,
    /// The least time such a run must cover: 1 s.
    pub refusal_span: Duration,
    /// While refusals come and the peer is silent, a PingRequest this often
    /// (each draws a refusal or an answer): 250 ms.
    pub refusal_probe: Duration,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            ping_interval: Duration::from_millis(3500),
            timeout: Duration::from_secs(15),
            ack_delay: Duration::from_millis(33),
            retransmit_timeout: Duration::from_secs(5),
            datagrams_per_sec: 1000,
            burst: 20,
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            max_reassembly_bytes: 16 * 1024 * 1024,
            reassembly_budget: None,
            max_unsent_bytes: 4 * 1024 * 1024,
            connect_timeout: Duration::from_secs(5),
            disconnect_linger: Duration::from_millis(500),
            refusals_to_close: 5,
            refusal_span: Duration::from_secs(1),
            refusal_probe: Duration::from_millis(250),
        }
    }
}

/// Something the application must know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UdpEvent {
    /// Client role: the server's first datagram arrived (Pending → Ok).
    Connected,
    /// A whole application message (ids other than the internal ones), in
    /// arrival order (§4.3: no reordering).
    Message {
        /// The kNet message id.
        id: MessageId,
        /// The payload, id excluded.
        payload: Bytes,
        /// Whether it came as a reliable message.
        reliable: bool,
    },
    /// The connection is over; nothing more will be transmitted.
    Closed {
        /// For the log.
        reason: CloseReason,
    },
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer sent Disconnect (or an unsolicited DisconnectAck).
    PeerDisconnected,
    /// [`UdpConnection::close`] was called.
    LocalDisconnect,
    /// Nothing heard for [`UdpConfig::timeout`].
    TimedOut,
    /// The peer broke the protocol (§4.11) or exceeded a bound.
    ProtocolError(UdpError),
    /// Client: no answer within [`UdpConfig::connect_timeout`].
    ConnectFailed,
    /// The peer's port answered `count` datagrams with "connection
    /// refused" over `over`, nothing heard from it meanwhile (one, for the
    /// connect datagram): nothing listens there (`unreachable`).
    Refused { count: u32, over: Duration },
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::PeerDisconnected => f.write_str("peer disconnected"),
            CloseReason::LocalDisconnect => f.write_str("closed here"),
            CloseReason::TimedOut => f.write_str("timed out"),
            CloseReason::ProtocolError(error) => write!(f, "protocol error: {error}"),
            CloseReason::ConnectFailed => f.write_str("no answer to connect"),
            CloseReason::Refused { count, over } => write!(
                f,
                "refused: {count} datagrams refused over {} ms",
                over.as_millis()
            ),
        }
    }
}

/// A protocol violation that ends the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UdpError {
    /// Malformed datagram or message (§4.11).
    #[error(transparent)]
    Codec(#[from] KnetError),
    /// A fragment bound or inconsistency.
    #[error(transparent)]
    Reassembly(#[from] ReassemblyError),
    /// Reliable numbers running too far ahead of a gap.
    #[error(transparent)]
    ReliableAhead(#[from] TooFarAhead),
}

/// Counters for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received (all, including dropped ones).
    pub datagrams_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Datagrams sent (the connect datagram included).
    pub datagrams_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Datagrams above [`MAX_RECEIVE_DATAGRAM`] dropped.
    pub oversized_dropped: u64,
    /// Datagrams whose packet id was already received.
    pub duplicate_datagrams: u64,
    /// Datagrams older than the packet-id window, dropped unacked.
    pub stale_datagrams: u64,
    /// Reliable messages skipped because their number was already received.
    pub duplicate_messages: u64,
    /// Application messages delivered.
    pub messages_in: u64,
    /// Messages handed to [`UdpConnection::send`] and queued.
    pub messages_out: u64,
    /// Messages refused by [`UdpConnection::send`] (bad id, closing).
    pub messages_refused: u64,
    /// Reliable messages re-queued after a retransmission timeout.
    pub resent_messages: u64,
    /// PacketAck messages sent.
    pub acks_sent: u64,
    /// Datagrams of ours acknowledged by the peer.
    pub acks_received: u64,
    /// Ping round-trip estimate (`0.5 new + 0.5 old`, §4.5).
    pub rtt: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Client: connect datagram (not yet) sent, no answer yet.
    Pending {
        connect_sent: bool,
    },
    Ok,
    /// Our Disconnect is queued (not yet sent).
    Closing,
    /// Our Disconnect was sent at the given time; waiting for the ack.
    Disconnecting {
        since: Time,
    },
    /// The peer's Disconnect arrived; our DisconnectAck is queued.
    PeerClosed,
    Closed,
}

/// Default cap on a reassembled message: kNet's TCP receive cap
/// (`cMaxReceivableTCPMessageSize`, §3.1), so both transports accept the same.
const DEFAULT_MAX_MESSAGE: usize = 10 * 1024 * 1024;

/// Ping replies waiting for a datagram. A peer sending PingRequests faster
/// than we may send gets the excess silently dropped (pings are
/// unreliable, §4.9).
const MAX_PING_REPLIES: usize = 8;

/// Recent PingRequests remembered for matching replies (RTT).
const PING_HISTORY: usize = 8;

/// The kNet-over-UDP state machine of one connection.
#[derive(Debug)]
pub struct UdpConnection {
    role: Role,
    config: UdpConfig,
    state: State,
    created: Time,
    last_received: Time,
    next_packet_id: PacketId,
    packets: PacketWindow,
    reliable_in: ReliableSet,
    acks: PendingAcks,
    reassembly: Reassembly,
    queue: SendQueue,
    pacer: Pacer,
    ping_replies: VecDeque<u8>,
    next_ping_id: u8,
    next_ping_at: Option<Time>,
    pings_sent: VecDeque<(u8, Time)>,
    refusals: unreachable::Refusals,
    /// The next probe while refusals come (`unreachable`).
    next_probe_at: Option<Time>,
    events: VecDeque<UdpEvent>,
    stats: UdpStats,
}

impl UdpConnection {
    /// A new connection.
    ///
    /// Server: state Ok with two PingRequests queued (the one queued at
    /// accept and the ping timer's first tick, §4.8), so the first datagram
    /// is `81 00 00 02 20 01 01 02 20 01 02` as captured.
    /// Client: Pending; the first [`poll_transmit`](Self::poll_transmit)
    /// yields the 8-zero-byte connect datagram, then nothing until the
    /// server's first datagram arrives.
    pub fn new(role: Role, config: UdpConfig, now: Time) -> Self {
        let mut connection = UdpConnection {
            role,
            state: match role {
                Role::Server => State::Ok,
                Role::Client => State::Pending {
                    connect_sent: false,
                },
            },
            created: now,
            last_received: now,
            next_packet_id: PacketId::FIRST,
            packets: PacketWindow::new(),
            reliable_in: ReliableSet::new(),
            acks: PendingAcks::new(),
            reassembly: Reassembly::new(config.max_message_bytes, config.max_reassembly_bytes)
                .with_budget(config.reassembly_budget.clone()),
            queue: SendQueue::new(),
            pacer: Pacer::new(config.datagrams_per_sec, config.burst),
            ping_replies: VecDeque::new(),
            next_ping_id: 1,
            next_ping_at: None,
            pings_sent: VecDeque::new(),
            refusals: unreachable::Refusals::new(config.refusals_to_close, config.refusal_span),
            next_probe_at: None,
            events: VecDeque::new(),
            stats: UdpStats::default(),
            config,
        };
        if role == Role::Server {
            connection.queue_ping(now);
            connection.queue_ping(now);
            connection.next_ping_at = Some(now + connection.config.ping_interval);
        }
        connection
    }

    /// Test hook: starts this side's outbound packet ids at `packet_id`
    /// and both directions' reliable numbers at `reliable` (the peer must
    /// be given the same `reliable`). Call before any traffic.
    #[doc(hidden)]
    pub fn start_counters_at(&mut self, packet_id: PacketId, reliable: ReliableNumber) {
        self.next_packet_id = packet_id;
        self.queue.set_next_reliable(reliable);
        self.reliable_in = ReliableSet::starting_at(reliable);
    }

    /// Which end this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Counters.
    pub fn stats(&self) -> &UdpStats {
        &self.stats
    }

    /// Whether the connection is over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Queued payload bytes not yet in any datagram (backpressure).
    pub fn unsent_bytes(&self) -> usize {
        self.queue.unsent_bytes()
    }

    /// Queues a message; ignored once the connection is closing.
    pub fn send(&mut self, message: OutMessage) {
        if !matches!(self.state, State::Ok | State::Pending { .. }) {
            self.stats.messages_refused += 1;
            return;
        }
        match self.queue.push(message) {
            Ok(()) => self.stats.messages_out += 1,
            Err(error) => {
                tracing::warn!(%error, "knet message not sent");
                self.stats.messages_refused += 1;
            }
        }
    }

    /// Queues a WebSocket-style Tundra frame (u16 LE id + payload) with the
    /// flags Tundra uses for that id (§5.2). Frames under 2 bytes are refused.
    pub fn send_tundra(&mut self, frame: &[u8]) {
        let Some((id, payload)) = frame.split_first_chunk::<2>() else {
            self.stats.messages_refused += 1;
            return;
        };
        let id = u16::from_le_bytes(*id);
        self.send(OutMessage::tundra(id, Bytes::copy_from_slice(payload)));
    }

    /// Starts a graceful close (§4.10): Disconnect (reliable, highest
    /// priority) goes out in the next datagram; then the connection waits for
    /// DisconnectAck at most [`UdpConfig::disconnect_linger`].
    pub fn close(&mut self, now: Time) {
        match self.state {
            State::Ok => {
                self.queue.push(OutMessage::disconnect()).ok();
                self.state = State::Closing;
            }
            // Nothing was ever sent but the connect datagram.
            State::Pending { .. } => self.finish(CloseReason::LocalDisconnect),
            _ => {}
        }
        let _ = now;
    }

    /// The socket reported "connection refused" (an ICMP port unreachable
    /// for a datagram we sent). A client whose connect datagram is refused
    /// gives up at once: nothing listens at the server's port. Otherwise a
    /// steady run of refusals ends the connection (`unreachable`).
    pub fn handle_unreachable(&mut self, now: Time) {
        match self.state {
            State::Closed
            | State::Pending {
                connect_sent: false,
            } => {}
            State::Pending { connect_sent: true } => self.finish(CloseReason::Refused {
                count: 1,
                over: Duration::ZERO,
            }),
            _ => match self.refusals.refused(now) {
                unreachable::Verdict::Lost { count, over } => {
                    self.finish(CloseReason::Refused { count, over })
                }
                unreachable::Verdict::Probe => {
                    self.next_probe_at
                        .get_or_insert(now + self.config.refusal_probe);
                }
            },
        }
    }

    /// The peer was heard from (a datagram with a new packet id): refusals
    /// so far were stray.
    pub(super) fn heard(&mut self) {
        self.refusals.heard();
        self.next_probe_at = None;
    }

    fn queue_ping(&mut self, now: Time) {
        let ping_id = self.next_ping_id;
        self.next_ping_id = self.next_ping_id.wrapping_add(1);
        self.queue.push(OutMessage::ping_request(ping_id)).ok();
        if self.pings_sent.len() >= PING_HISTORY {
            self.pings_sent.pop_front();
        }
        self.pings_sent.push_back((ping_id, now));
    }

    /// Runs the timers due at `now`: connect and idle timeouts, the
    /// disconnect linger, re-sends and pings.
    pub fn handle_timeout(&mut self, now: Time) {
        match self.state {
            State::Closed => return,
            State::Pending { .. } => {
                if now >= self.created + self.config.connect_timeout {
                    self.finish(CloseReason::ConnectFailed);
                }
                return;
            }
            State::Disconnecting { since } if now >= since + self.config.disconnect_linger => {
                self.finish(CloseReason::LocalDisconnect);
                return;
            }
            _ => {}
        }
        if now >= self.last_received + self.config.timeout {
            self.finish(CloseReason::TimedOut);
            return;
        }
        let resent = self
            .queue
            .handle_timeout(now, self.config.retransmit_timeout);
        self.stats.resent_messages += resent as u64;
        if self.state == State::Ok {
            if let Some(at) = self.next_ping_at {
                if now >= at {
                    self.queue_ping(now);
                    self.next_ping_at = Some(now + self.config.ping_interval);
                }
            }
            if self.next_probe_at.is_some_and(|at| now >= at) {
                // Refusals came and the peer is silent: ask it again.
                self.queue_ping(now);
                self.next_probe_at = Some(now + self.config.refusal_probe);
            }
        }
    }

    /// The next time [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_transmit`](Self::poll_transmit) has something to do.
    pub fn poll_timeout(&self) -> Option<Time> {
        let deadline = match self.state {
            State::Closed => return None,
            State::Pending { connect_sent } => {
                let connect = self.created + self.config.connect_timeout;
                return Some(if connect_sent { connect } else { self.created });
            }
            State::Disconnecting { since } => Some(since + self.config.disconnect_linger),
            _ => None,
        };
        let timers = [
            deadline,
            Some(self.last_received + self.config.timeout),
            self.queue.next_retransmit(self.config.retransmit_timeout),
            self.next_ping_at.filter(|_| self.state == State::Ok),
            self.next_probe_at.filter(|_| self.state == State::Ok),
        ];
        let mut earliest = timers.into_iter().flatten().min();
        let due_send = if self.has_sendable() {
            Some(self.pacer.next_send_time())
        } else {
            self.acks
                .due_at(self.config.ack_delay)
                .map(|at| at.max(self.pacer.next_send_time()))
        };
        if let Some(at) = due_send {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
        earliest
    }

    fn has_sendable(&self) -> bool {
        !self.ping_replies.is_empty() || self.queue.has_sendable()
    }

    /// Writes the next datagram into `out` (cleared first) if one is due
    /// and pacing allows; returns whether it did.
    pub fn poll_transmit(&mut self, now: Time, out: &mut Vec<u8>) -> bool {
        out.clear();
        match self.state {
            State::Closed | State::Pending { connect_sent: true } => return false,
            State::Pending {
                connect_sent: false,
            } => {
                // §4.8: 8 zero bytes, not a kNet datagram.
                out.extend_from_slice(&[0; 8]);
                self.state = State::Pending { connect_sent: true };
                self.count_sent(out.len());
                return true;
            }
            _ => {}
        }
        if !self.pacer.ready(now) {
            return false;
        }
        let acks_due = self.acks.is_due(now, self.config.ack_delay);
        if !acks_due && !self.has_sendable() {
            return false;
        }
        // Internal unreliable messages first (they outrank Tundra's 100).
        let mut internal: Vec<OutMessage> = Vec::new();
        let mut budget = MAX_SEND_DATAGRAM - header_len(Some(ReliableNumber(u32::MAX)));
        while let Some(&ping_id) = self.ping_replies.front() {
            let message = OutMessage::ping_reply(ping_id);
            let Some(rest) = budget.checked_sub(internal_len(&message)) else {
                break;
            };
            budget = rest;
            internal.push(message);
            self.ping_replies.pop_front();
        }
        if acks_due {
            while !self.acks.is_empty() && budget >= ACK_BLOCK_LEN {
                let Some(group) = self.acks.take_group() else {
                    break;
                };
                budget -= ACK_BLOCK_LEN;
                internal.push(OutMessage::packet_ack(PacketAck {
                    first: group.first,
                    mask: group.mask,
                }));
                self.stats.acks_sent += 1;
            }
        }
        let picked = self.queue.pick(budget, None);
        if internal.is_empty() && picked.is_empty() {
            return false;
        }
        let mut blocks: Vec<BlockOut<'_>> = internal
            .iter()
            .map(|m| BlockOut {
                in_order: m.in_order,
                reliable_number: None,
                fragment: FragmentInfo::Whole,
                message_id: Some(m.id),
                payload: &m.payload,
            })
            .collect();
        blocks.extend(picked.iter().map(|p| p.block()));
        let packet_id = self.next_packet_id;
        if let Err(error) = write_datagram(out, packet_id, &blocks) {
            // Only reliable numbers past 2^31 can get here (kNet asserts
            // the same): the connection cannot go on.
            out.clear();
            drop(blocks);
            self.finish(CloseReason::ProtocolError(UdpError::Codec(error)));
            return false;
        }
        let sent_disconnect = picked.iter().any(|p| p.id() == MessageId::DISCONNECT);
        let sent_disconnect_ack = picked.iter().any(|p| p.id() == MessageId::DISCONNECT_ACK);
        drop(blocks);
        self.next_packet_id = packet_id.next();
        self.queue.on_sent(packet_id, now, picked);
        self.pacer.on_sent(now);
        self.count_sent(out.len());
        if sent_disconnect_ack && self.state == State::PeerClosed {
            self.finish(CloseReason::PeerDisconnected);
        } else if sent_disconnect && self.state == State::Closing {
            // Write-closed: nothing more is sent (§4.10).
            self.queue.clear();
            self.acks.clear();
            self.ping_replies.clear();
            self.state = State::Disconnecting { since: now };
        }
        true
    }

    fn count_sent(&mut self, len: usize) {
        self.stats.datagrams_out += 1;
        self.stats.bytes_out += len as u64;
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<UdpEvent> {
        self.events.pop_front()
    }

    fn finish(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        tracing::debug!(reason = %RemoteText(&reason), "knet udp connection closed");
        self.state = State::Closed;
        self.queue.clear();
        self.acks.clear();
        self.ping_replies.clear();
        self.events.push_back(UdpEvent::Closed { reason });
    }
}

/// A PacketAck block: u16 header, id `04`, 7-byte payload.
const ACK_BLOCK_LEN: usize = 2 + 1 + 7;

fn internal_len(message: &OutMessage) -> usize {
    let block = BlockOut {
        in_order: message.in_order,
        reliable_number: None,
        fragment: FragmentInfo::Whole,
        message_id: Some(message.id),
        payload: &message.payload,
    };
    block_len(&block, None)
}

/// A Tundra message as a WebSocket-style frame: u16 LE id + payload; `None`
/// if the id does not fit 16 bits (for the drivers' inbound direction).
pub fn tundra_frame(id: MessageId, payload: &[u8]) -> Option<Bytes> {
    let id = u16::try_from(id.0).ok()?;
    let mut frame = Vec::with_capacity(2 + payload.len());
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(payload);
    Some(Bytes::from(frame))
}

#[cfg(test)]
mod tests;
