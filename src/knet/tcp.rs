//! One kNet connection over TCP (docs/knet-wire.md §3), sans-IO: the framing of
//! both directions (§3.1), the keep-alive pings and the silence timeout
//! (§3.2). Both roles behave alike: there is no handshake, the connection is
//! open as soon as the TCP connection exists.
//!
//! Bytes and an explicit `now` go in; bytes to write, the next timer and
//! events come out. This module must not touch a socket or a clock, and it
//! does not write FIN: closing a kNet TCP connection is `shutdown(SHUT_WR)`,
//! which the driver (`crate::transport::knet::tcp`) does once the bytes
//! handed out by [`TcpConnection::poll_transmit`] are written.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use super::error::KnetError;
use super::ids::MessageId;
use super::reader::vle8_16_32_len;
use super::stream::{write_stream_message, StreamDecoder, MAX_STREAM_MESSAGE};
use crate::clock::Time;

/// kNet's `pingIntervalMSecs`: each side sends a PingRequest this often (§3.2).
pub const PING_INTERVAL: Duration = Duration::from_millis(3500);

/// kNet's `connectionLostTimeout`: a connection that received nothing for
/// this long is closed (§3.2). kNet checks only at each ping tick (15-18.5 s
/// in effect); we close at exactly this much silence, the earliest kNet may.
pub const CONNECTION_LOST_TIMEOUT: Duration = Duration::from_secs(15);

/// How the close reason of a connection that broke the framing starts:
/// the drivers count those as the peer's misbehaviour.
pub const PROTOCOL_ERROR: &str = "bad kNet stream";

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Time between two PingRequests.
    pub ping_interval: Duration,
    /// Silence after which the connection is closed.
    pub timeout: Duration,
    /// Largest message content (id VLE + payload) accepted from the peer;
    /// above it the connection is closed, as kNet does above its 10 MiB
    /// (§3.1). Outbound messages are held to kNet's own 10 MiB
    /// ([`MAX_STREAM_MESSAGE`]) instead: that is what a real peer accepts.
    pub max_message_bytes: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            ping_interval: PING_INTERVAL,
            timeout: CONNECTION_LOST_TIMEOUT,
            max_message_bytes: MAX_STREAM_MESSAGE,
        }
    }
}

/// What the connection reports to its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpEvent {
    /// An application message, in arrival order. On TCP only PingRequest
    /// and PingReply are consumed by kNet; ids 3, 4 and the disconnect ids
    /// are application messages here (§3.2), and so come out as events.
    Message { id: MessageId, payload: Bytes },
    /// The connection is over (bad framing, silence or the peer's FIN);
    /// reported once, after every message that came before it.
    Closed { reason: String },
}

/// One kNet TCP connection, either role.
///
/// Memory is bounded by the callers' read size: the inbound buffer holds at
/// most one incomplete message (≤ `max_message_bytes`) plus the bytes of one
/// [`TcpConnection::handle_bytes`] call, and complete messages become events
/// at once. A peer that announces a large message and then trickles its
/// bytes is not cut by a deadline of its own: every byte it sends is a sign
/// of life to kNet too, and the size cap already bounds what it can make us
/// hold. Only silence (no byte for `timeout`) closes the connection.
#[derive(Debug)]
pub struct TcpConnection {
    config: TcpConfig,
    decoder: StreamDecoder,
    /// Ping messages to write: they leave before queued application data,
    /// as kNet's priority queue puts them ahead of Tundra messages (§2).
    control: Vec<u8>,
    /// Application messages to write, coalesced.
    data: Vec<u8>,
    events: VecDeque<TcpEvent>,
    last_received: Time,
    next_ping: Time,
    /// Id of the last PingRequest sent (kNet's u8 counter; 0 = none yet).
    ping_id: u8,
    /// The last PingRequest and when it left, to time its reply.
    ping_sent: Option<(u8, Time)>,
    rtt: Option<Duration>,
    closed: bool,
}

impl TcpConnection {
    /// A connection that has just been established at `now`. The first
    /// PingRequest is due at once (kNet sends it on its first update).
    pub fn new(config: TcpConfig, now: Time) -> Self {
        let decoder = StreamDecoder::new(config.max_message_bytes);
        TcpConnection {
            config,
            decoder,
            control: Vec::new(),
            data: Vec::new(),
            events: VecDeque::new(),
            last_received: now,
            next_ping: now,
            ping_id: 0,
            ping_sent: None,
            rtt: None,
            closed: false,
        }
    }

    /// Bytes read from the socket (pass at most one read's worth at a time:
    /// the inbound buffer grows by `data.len()`). Any byte refreshes the
    /// silence timer. A framing error closes the connection (§3.1: kNet
    /// closes the socket on contentLength 0, above 10 MiB, or a bad id VLE).
    pub fn handle_bytes(&mut self, now: Time, data: &[u8]) {
        if self.closed || data.is_empty() {
            return;
        }
        self.last_received = now;
        self.decoder.push(data);
        loop {
            match self.decoder.next_message() {
                Ok(Some((id, payload))) => self.handle_message(now, id, payload),
                Ok(None) => break,
                Err(error) => {
                    self.fail(format!("{PROTOCOL_ERROR}: {error}"));
                    break;
                }
            }
        }
    }

    /// The peer closed its side (read returned EOF). Tundra then closes its
    /// own side at once (§3.2); the driver does so after writing what is
    /// still queued.
    pub fn handle_eof(&mut self) {
        if self.closed {
            return;
        }
        let buffered = self.decoder.buffered();
        if buffered == 0 {
            self.fail("closed by peer".to_owned());
        } else {
            self.fail(format!(
                "closed by peer inside a message ({buffered} bytes unread)"
            ));
        }
    }

    /// Queues one application message. Refuses what the wire cannot carry
    /// or a kNet peer would refuse: ids above 2^30-1, kNet's internal ids
    /// (§7: never send 3, 4 or the disconnect ids on TCP; 1 and 2 would be
    /// taken for pings), and content above [`MAX_STREAM_MESSAGE`]. After the
    /// connection closed, messages are dropped.
    pub fn send(&mut self, id: MessageId, payload: &[u8]) -> Result<(), KnetError> {
        if id.0 > MessageId::MAX {
            return Err(KnetError::MessageIdTooLarge(id.0));
        }
        if id.is_transport_internal() {
            return Err(KnetError::OutOfRange {
                what: "message id reserved by kNet",
                value: u64::from(id.0),
            });
        }
        let len = vle8_16_32_len(id.0).saturating_add(payload.len());
        if len > MAX_STREAM_MESSAGE {
            return Err(KnetError::TooLarge {
                what: "kNet TCP message",
                len,
                max: MAX_STREAM_MESSAGE,
            });
        }
        if !self.closed {
            write_stream_message(&mut self.data, id, payload);
        }
        Ok(())
    }

    /// Queues one Tundra frame (u16 LE message id + payload, the form every
    /// transport of this crate uses) as a kNet message.
    pub fn send_tundra(&mut self, frame: &[u8]) -> Result<(), KnetError> {
        match frame {
            [lo, hi, payload @ ..] => {
                let id = u16::from_le_bytes([*lo, *hi]);
                self.send(MessageId(u32::from(id)), payload)
            }
            _ => Err(KnetError::Truncated {
                what: "tundra frame id",
            }),
        }
    }

    /// Timer input: sends the due PingRequest, or closes the connection
    /// after `timeout` of silence (nothing is sent then, §3.2).
    pub fn handle_timeout(&mut self, now: Time) {
        if self.closed {
            return;
        }
        if now >= self.last_received + self.config.timeout {
            let silence = now - self.last_received;
            self.fail(format!(
                "connection lost: nothing received for {:.1} s",
                silence.as_secs_f64()
            ));
            return;
        }
        if now >= self.next_ping {
            // kNet's pingId is a u8 counter from 1 that wraps (§3.2).
            self.ping_id = self.ping_id.wrapping_add(1);
            write_stream_message(&mut self.control, MessageId::PING_REQUEST, &[self.ping_id]);
            self.ping_sent = Some((self.ping_id, now));
            self.next_ping = now + self.config.ping_interval;
        }
    }

    /// When [`TcpConnection::handle_timeout`] is next due; `None` once closed.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.closed {
            return None;
        }
        Some(self.next_ping.min(self.last_received + self.config.timeout))
    }

    /// Bytes to write, pings first, each call's bytes a run of whole
    /// messages. Still yields what was queued before a close, so the driver
    /// can flush before its FIN.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        for buffer in [&mut self.control, &mut self.data] {
            if !buffer.is_empty() {
                return Some(Bytes::from(std::mem::take(buffer)));
            }
        }
        None
    }

    /// The next event, in order.
    pub fn poll_event(&mut self) -> Option<TcpEvent> {
        self.events.pop_front()
    }

    /// Bytes queued and not yet handed out by `poll_transmit`.
    pub fn unsent_bytes(&self) -> usize {
        self.control.len() + self.data.len()
    }

    /// Bytes received that do not yet make a whole message.
    pub fn buffered_bytes(&self) -> usize {
        self.decoder.buffered()
    }

    /// The round trip of the last answered PingRequest.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    /// Closes the connection at the owner's request: no more pings, reads
    /// or timeouts, and no `Closed` event (the owner knows why). What is
    /// already queued is still handed out by `poll_transmit`.
    pub fn close(&mut self) {
        self.closed = true;
        self.ping_sent = None;
    }

    /// Whether the connection is over (for any reason).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    fn handle_message(&mut self, now: Time, id: MessageId, payload: Bytes) {
        match id {
            // A ping whose payload is not the 1-byte id is ignored (§4.9,
            // `MessageConnection::HandlePingRequestMessage`).
            MessageId::PING_REQUEST => {
                if let [ping_id] = payload[..] {
                    write_stream_message(&mut self.control, MessageId::PING_REPLY, &[ping_id]);
                } else {
                    tracing::trace!(len = payload.len(), "malformed ping request ignored");
                }
            }
            MessageId::PING_REPLY => match (&payload[..], self.ping_sent) {
                ([ping_id], Some((sent_id, sent_at))) if *ping_id == sent_id => {
                    self.rtt = Some(now - sent_at);
                    self.ping_sent = None;
                }
                // kNet only logs an unmatched reply.
                _ => tracing::trace!(len = payload.len(), "unmatched ping reply ignored"),
            },
            _ => self.events.push_back(TcpEvent::Message { id, payload }),
        }
    }

    fn fail(&mut self, reason: String) {
        self.closed = true;
        self.ping_sent = None;
        // Nothing more will be read: free the partial message now.
        self.decoder = StreamDecoder::new(self.config.max_message_bytes);
        self.events.push_back(TcpEvent::Closed { reason });
    }
}

#[cfg(test)]
#[path = "tcp_tests.rs"]
mod tests;
