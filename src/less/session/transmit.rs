//! The session's outputs: which frame to send next (re-sends first, then
//! new packets, then acknowledgements and keepalives, all paced by the
//! peer's update-rate), timestamps, framing, and the next timer deadline.

use std::time::Duration;

use tracing::trace;

use super::assemble::{datagram_capacity, SentItem};
use super::{Event, FramingMode, Path, Session, Transmit};
use crate::clock::Time;
use crate::less::bulk::seal_plain_formed;
use crate::less::limits::INTEGER_MAX_LEN;
use crate::less::packet::{
    seal_datagram, seal_stream_datagram, seal_stream_packet, DatagramFraming, PACKET_HEADER_MAX_LEN,
};

/// The smallest update a datagram carries (a compact transform with its
/// entity and property, docs/less-wire.md §16), for judging when waiting
/// data would fill one.
const SMALLEST_MESSAGE_BYTES: usize = 12;

impl Session {
    // ----- outputs -----

    /// The next event, in the order things took effect.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The events not yet polled, oldest first, without taking them (the
    /// application may look its objects up ahead of applying them).
    pub fn pending_events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    fn pace_time(&self) -> Option<Time> {
        let rate = self.peer_update_rate?;
        let interval = Duration::from_secs(1) / rate;
        Some(self.last_send? + interval)
    }

    /// When new data may leave under the send gap (`SessionConfig::
    /// send_gap`): at once with no gap, before anything was sent, within
    /// the burst of packets sent at the same instant, or once a datagram's
    /// worth waits; otherwise the gap's end, the first multiple of the gap
    /// on the clock after the last send (so a late send does not push the
    /// next one back, and the node's client writes, on the same multiples,
    /// go in the same wake-up).
    fn new_data_time(&self) -> Time {
        let gap = self.config.send_gap;
        match self.last_send {
            Some(last) if !gap.is_zero() && !self.fills_a_datagram() => last.next_boundary(gap),
            _ => Time::ZERO,
        }
    }

    /// Whether the data waiting would fill a datagram of the smallest
    /// updates: waiting longer would only delay it.
    fn fills_a_datagram(&self) -> bool {
        self.local.queued_messages() * SMALLEST_MESSAGE_BYTES >= datagram_capacity(self.config.mtu)
    }

    fn new_data_due(&self, now: Time) -> bool {
        now >= self.new_data_time() || self.last_send == Some(now)
    }

    fn keepalive_time(&self) -> Time {
        self.last_send.unwrap_or(self.created) + self.config.keepalive_interval
    }

    /// When `handle_timeout` (and then `poll_transmit`) should next run.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.closed.is_some() {
            return None;
        }
        let mut deadline =
            (self.last_receive + self.config.idle_timeout).min(self.keepalive_time());
        if self.ack_pending {
            deadline = deadline.min(self.ack_deadline);
        }
        match self.config.mode {
            FramingMode::Datagram => {
                if let Some(loss) = self.send.loss_deadline(&self.loss_timing()) {
                    deadline = deadline.min(loss);
                }
            }
            FramingMode::Stream => {
                if let Some(end) = self
                    .local
                    .next_quarantine_end(self.config.stream_id_quarantine)
                {
                    deadline = deadline.min(end);
                }
            }
        }
        let waiting = self.local.has_new_data() || self.send.first_lost().is_some();
        if let Some(pace) = self.pace_time().filter(|_| waiting) {
            deadline = deadline.min(pace);
        }
        // New data held by the send gap, when it could go (a full send
        // window waits for acknowledgements, not for time).
        let window_open = match self.config.mode {
            FramingMode::Datagram => self.send.can_send_new(),
            FramingMode::Stream => true,
        };
        // Only data the gap holds back has a deadline of its own: data it
        // does not hold went out with `poll_transmit` already, or waits
        // for something other than time (a subscription, the window).
        // Paced, it waits for the pace (above) whatever the gap says.
        let held =
            !self.config.send_gap.is_zero() && self.last_send.is_some() && !self.fills_a_datagram();
        if self.local.has_new_data() && window_open && held && self.pace_time().is_none() {
            deadline = deadline.min(self.new_data_time());
        }
        Some(deadline)
    }

    /// The next frame to send, if any is due at `now`.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if self.closed.is_some() || self.pace_time().is_some_and(|pace| now < pace) {
            return None;
        }
        let ack_due = self.ack_pending && now >= self.ack_deadline;
        let keepalive_due = now >= self.keepalive_time();
        match self.config.mode {
            FramingMode::Stream => {
                if (self.local.has_new_data() && self.new_data_due(now)) || keepalive_due {
                    return self.transmit_stream(now, keepalive_due);
                }
                None
            }
            FramingMode::Datagram => {
                if let Some(sequence) = self.send.first_lost() {
                    return self.transmit_resend(now, sequence);
                }
                if self.send.can_send_new() {
                    if self.local.has_new_data() && self.new_data_due(now) {
                        if let Some(transmit) = self.transmit_new(now, ack_due || keepalive_due) {
                            return Some(transmit);
                        }
                    }
                    if ack_due || keepalive_due {
                        return self.transmit_new(now, true);
                    }
                    return None;
                }
                // Window full: acknowledgements ride on a re-send.
                if ack_due || keepalive_due {
                    let oldest = self.send.oldest_datagram()?;
                    return self.transmit_resend(now, oldest);
                }
                None
            }
        }
    }

    pub(super) fn next_timestamp(&mut self, now: Time) -> i64 {
        let quantum = self.config.timestamp_quantum.as_micros().max(1);
        let clock = i64::try_from(u128::from(now.as_micros()) / quantum).unwrap_or(i64::MAX);
        let timestamp = match self.last_timestamp {
            Some(last) => clock.max(last.saturating_add(1)),
            None => clock,
        };
        self.last_timestamp = Some(timestamp);
        timestamp
    }

    pub(super) fn framing(&self, sequence: u64) -> DatagramFraming {
        let (ack_last, ack_bits) = self.receive.ack_fields();
        DatagramFraming {
            sequence: sequence as u8,
            ack_last,
            ack_bits,
        }
    }

    pub(super) fn sent(&mut self, now: Time, transmit: &Transmit, resend: bool) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += transmit.bytes.len() as u64;
        if resend {
            self.stats.packets_resent += 1;
        }
        if transmit.path == Path::Stream {
            self.stats.stream_frames_sent += 1;
        }
        self.last_send = Some(now);
        self.ack_pending = false;
        self.ack_deadline = Time::MAX;
        self.eliciting_unacked = 0;
    }

    fn transmit_new(&mut self, now: Time, allow_empty: bool) -> Option<Transmit> {
        if let Some(transmit) = self.transmit_bulk(now) {
            return Some(transmit);
        }
        let sequence = self.send.next_sequence();
        let body = self
            .local
            .assemble_new(Some(sequence), datagram_capacity(self.config.mtu), now);
        if body.count == 0 && !allow_empty {
            return None;
        }
        let timestamp = self.next_timestamp(now);
        let framing = self.framing(sequence);
        let key = &self.config.keys.send;
        let (path, bytes) = if body.oversize {
            // A link that agreed bulk packets gives every stream datagram a
            // form byte (docs/less-wire.md §16.5).
            let seal = if self.config.bulk_packets {
                seal_plain_formed
            } else {
                seal_stream_datagram
            };
            let bytes = seal(key, &framing, timestamp, body.count, &body.messages);
            (Path::Stream, bytes)
        } else {
            (
                Path::Datagram,
                seal_datagram(key, &framing, timestamp, body.count, &body.messages),
            )
        };
        self.send.on_sent_new(body.items, path, now, body.count > 0);
        trace!(
            sequence,
            timestamp,
            messages = body.count,
            path = match path {
                Path::Datagram => "datagram",
                Path::Stream => "stream",
            },
            "less packet sent"
        );
        let transmit = Transmit { path, bytes };
        self.sent(now, &transmit, false);
        Some(transmit)
    }

    fn transmit_resend(&mut self, now: Time, sequence: u64) -> Option<Transmit> {
        let items = self.send.get(sequence)?.payload.clone();
        let body = self
            .local
            .assemble_resend(sequence, &items, datagram_capacity(self.config.mtu));
        let timestamp = self.next_timestamp(now);
        let framing = self.framing(sequence);
        let bytes = seal_datagram(
            &self.config.keys.send,
            &framing,
            timestamp,
            body.count,
            &body.messages,
        );
        if let Some(packet) = self.send.get_mut(sequence) {
            packet.payload = body.items;
            packet.ack_eliciting = body.count > 0;
        }
        self.send.on_resent(sequence, now);
        trace!(
            sequence,
            timestamp,
            messages = body.count,
            "less packet re-sent"
        );
        let transmit = Transmit {
            path: Path::Datagram,
            bytes,
        };
        self.sent(now, &transmit, true);
        Some(transmit)
    }

    fn transmit_stream(&mut self, now: Time, allow_empty: bool) -> Option<Transmit> {
        let capacity = self.config.mtu - INTEGER_MAX_LEN - PACKET_HEADER_MAX_LEN;
        let body = self.local.assemble_new(None, capacity, now);
        if body.count == 0 && !allow_empty {
            return None;
        }
        // No acknowledgements on a stream: a sent tweak is done.
        for item in &body.items {
            if let SentItem::Tweak { entity, key, .. } = item {
                if self
                    .local
                    .tweaks
                    .get(&(*entity, key.clone()))
                    .is_some_and(|slot| !slot.dirty)
                {
                    self.local.tweaks.remove(&(*entity, key.clone()));
                }
            }
        }
        let timestamp = self.next_timestamp(now);
        let bytes = seal_stream_packet(
            &self.config.keys.send,
            timestamp,
            body.count,
            &body.messages,
        );
        let transmit = Transmit {
            path: Path::Stream,
            bytes,
        };
        self.sent(now, &transmit, false);
        Some(transmit)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::{Session, SessionConfig};
    use crate::clock::Time;
    use crate::less::ids::TypeId;
    use crate::less::message::Message;
    use crate::less::packet::open_datagram;
    use crate::less::schema::ConnectionSchema;
    use crate::less::schema_toml::types_from_toml;
    use crate::less::signature::{LinkRole, SessionKeys};

    const SECRET: [u8; 32] = [3; 32];

    fn session(send_gap: Duration) -> Session {
        let registry =
            types_from_toml(include_str!("../../../schemas/less/test-types.toml")).unwrap();
        let mut config = SessionConfig::new(
            SessionKeys::derive(&SECRET, LinkRole::Initiator),
            1,
            1,
            Arc::new(registry),
            Arc::new(ConnectionSchema::builtin()),
        );
        config.send_gap = send_gap;
        Session::new(config, Time::ZERO).unwrap()
    }

    fn queue(session: &mut Session, id: u64) {
        session
            .queue_message(Message::IntroduceType {
                type_id: TypeId::new(id),
                uri: "u".into(),
            })
            .unwrap();
    }

    /// The message count of every packet sent at `now`.
    fn sent(session: &mut Session, now: Time) -> Vec<usize> {
        let key = SessionKeys::derive(&SECRET, LinkRole::Acceptor).receive;
        std::iter::from_fn(|| session.poll_transmit(now))
            .map(|t| open_datagram(&key, &t.bytes).unwrap().1.message_count)
            .collect()
    }

    fn ms(n: u64) -> Time {
        Time::from_millis(n)
    }

    #[test]
    fn data_within_the_send_gap_waits_for_its_end_and_leaves_in_one_packet() {
        let mut session = session(Duration::from_millis(5));
        // Nothing sent yet: the first change leaves at once.
        queue(&mut session, 100);
        assert_eq!(sent(&mut session, ms(1)), [1]);
        // Within the gap: held, with the gap's end (the next multiple of
        // the gap on the clock) as the deadline.
        queue(&mut session, 101);
        assert!(sent(&mut session, ms(2)).is_empty());
        assert_eq!(session.poll_timeout(), Some(ms(5)));
        queue(&mut session, 102);
        assert!(sent(&mut session, ms(4)).is_empty());
        assert_eq!(sent(&mut session, ms(5)), [2], "together, at the gap's end");
        // After a quiet spell longer than the gap: at once again.
        queue(&mut session, 103);
        assert_eq!(sent(&mut session, ms(30)), [1]);
    }

    #[test]
    fn a_late_send_does_not_push_the_next_gaps_end_back() {
        // Sends that go out late (the timer's lateness) still end their
        // gaps on the clock's multiples of the gap: a steady stream leaves
        // once per gap, not once per gap plus the lateness.
        let mut session = session(Duration::from_millis(5));
        queue(&mut session, 100);
        assert_eq!(sent(&mut session, ms(1)), [1]);
        for (id, due, late) in [(101, 5, 6), (102, 10, 11), (103, 15, 16)] {
            queue(&mut session, id);
            assert_eq!(session.poll_timeout(), Some(ms(due)));
            assert_eq!(sent(&mut session, ms(late)), [1], "sent 1 ms late");
        }
    }

    #[test]
    fn without_a_gap_every_change_leaves_at_once() {
        let mut session = session(Duration::ZERO);
        for (id, at) in [(100, 1), (101, 2), (102, 3)] {
            queue(&mut session, id);
            assert_eq!(sent(&mut session, ms(at)), [1]);
        }
    }

    #[test]
    fn a_datagrams_worth_of_data_never_waits_for_the_gap() {
        let mut session = session(Duration::from_millis(5));
        queue(&mut session, 100);
        assert_eq!(sent(&mut session, ms(1)), [1]);
        let full = super::datagram_capacity(1200).div_ceil(super::SMALLEST_MESSAGE_BYTES);
        for id in 1..full as u64 {
            queue(&mut session, 200 + id);
        }
        assert!(sent(&mut session, ms(2)).is_empty(), "not yet a datagram");
        queue(&mut session, 200);
        let packets = sent(&mut session, ms(2));
        assert_eq!(packets.iter().sum::<usize>(), full, "all of it, at once");
    }

    #[test]
    fn a_keepalive_takes_the_waiting_data_along() {
        let mut session = session(Duration::from_secs(5));
        queue(&mut session, 100);
        assert_eq!(sent(&mut session, ms(1)), [1]);
        // The peer acknowledges it (no re-send timer left).
        let framing = crate::less::packet::DatagramFraming {
            sequence: 1,
            ack_last: 1,
            ack_bits: u64::MAX,
        };
        let key = SessionKeys::derive(&SECRET, LinkRole::Acceptor).send;
        let ack = crate::less::packet::seal_datagram(&key, &framing, 1, 0, &[]);
        session.handle_datagram(ms(2), &ack);
        queue(&mut session, 101);
        // The keepalive (1 s after the last packet) comes before the gap's
        // end and carries the message.
        assert_eq!(session.poll_timeout(), Some(ms(1001)));
        assert_eq!(sent(&mut session, ms(1001)), [1]);
    }
}
