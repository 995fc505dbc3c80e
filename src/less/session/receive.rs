//! The input path: a datagram or stream frame opened and authenticated,
//! checked against the receive window, acknowledged (at once or within the
//! acknowledgement delay), its acknowledgements applied to the send window,
//! and its messages handed to the receiver rules (`incoming`).

use tracing::trace;

use super::assemble::SentItem;
use super::incoming::Violation;
use super::{CloseReason, FramingMode, Path, RejectReason, Session};
use crate::clock::Time;
use crate::less::bulk::{open_formed_stream_datagram, FormedPacket};
use crate::less::limits::{MAX_HELD_BYTES, MAX_QUEUED_EVENTS};
use crate::less::packet::{
    open_datagram, open_stream_datagram, open_stream_packet, DatagramFraming, OpenError,
    OpenedPacket,
};
use crate::less::receive_window::Rejection;

impl Session {
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
}

fn rejection(reason: Rejection) -> RejectReason {
    match reason {
        Rejection::Duplicate => RejectReason::Duplicate,
        Rejection::OutOfWindow => RejectReason::OutOfWindow,
        Rejection::Stale => RejectReason::Stale,
    }
}
