//! The sender's side of the 64-packet window: packets sent and not yet
//! acknowledged, acknowledgement processing, and loss detection.
//!
//! docs/less-wire.md §8, quoting the draft: "any packet sequence number must be re-sent if dropped";
//! a re-send keeps the sequence number and gets a new timestamp. At most
//! [`WINDOW`] packets are unacknowledged at once (docs/less-wire.md §8). A packet
//! counts as lost when (docs/less-wire.md §8) a packet transmitted three or more
//! transmissions after it has been acknowledged, when a later transmission
//! was acknowledged and 9/8 RTT have passed, or when its retransmission
//! timeout (doubling per re-send) expires; once the link is seen to reorder,
//! the count rule is off and the delay covers the longest recent round trip.
//! Packets sent on the reliable
//! stream are never declared lost. A zero bit in the peer's bitmask means
//! "not acknowledged here", never "lost". This module owns sequence and
//! timing bookkeeping; what a packet carries is the caller's `T`.
//!
//! Declaring a packet lost (to re-send it) and counting it lost (for the
//! link figures) are separate: a timeout also fires when only the
//! acknowledgement was lost or late, and such a re-send is spurious. A
//! transmission is counted lost only when the peer's acknowledgement fields
//! prove it missing: they acknowledge a later transmission and not it; the
//! count is taken back when the same transmission is acknowledged after all.

use std::collections::VecDeque;
use std::time::Duration;

use super::receive_window::{EXTENDED_BASE, WINDOW};
use super::rtt::{RttEstimator, MAX_RTO};
use crate::clock::Time;

/// Transmissions between a packet and an acknowledged later one that make it lost.
pub const PACKET_THRESHOLD: u64 = 3;

/// Backoff doublings are capped at 2^6.
const MAX_BACKOFF_SHIFT: u32 = 6;

/// Which path a packet took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// A UDP datagram (unreliable, re-sent when lost).
    Datagram,
    /// The link's reliable stream (never re-sent).
    Stream,
}

/// One sent, unacknowledged packet.
#[derive(Clone, Debug)]
pub struct SentPacket<T> {
    pub sequence: u64,
    pub payload: T,
    pub path: Path,
    pub last_sent: Time,
    pub transmissions: u32,
    /// Position of the latest transmission in the link's transmission order.
    pub send_order: u64,
    /// True if it carries messages (the receiver acknowledges promptly).
    pub ack_eliciting: bool,
    /// Declared lost and waiting to be re-sent.
    pub lost: bool,
    /// The latest transmission was counted in [`SendWindow::lost_transmissions`].
    pub loss_counted: bool,
    /// When the transmission before the latest was sent, and whether it was
    /// counted lost: an acknowledgement may answer it rather than the re-send.
    pub previous: Option<(Time, bool)>,
}

/// The peer's acknowledgement fields named a sequence never sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("acknowledgement of sequence {0} which was never sent")]
pub struct AckOfUnsent(pub u64);

/// Timing parameters for loss detection.
#[derive(Clone, Copy, Debug)]
pub struct LossTiming {
    /// The peer's longest delay before acknowledging a packet with messages.
    pub max_ack_delay: Duration,
    /// Packets without messages are acknowledged only with the peer's next
    /// packet, at the latest its keepalive; their timeout adds this.
    pub keepalive_interval: Duration,
}

/// Send-side sequence state of one direction of a link.
#[derive(Debug)]
pub struct SendWindow<T> {
    /// Oldest unacknowledged sequence (or `next` if none).
    base: u64,
    next: u64,
    packets: VecDeque<Option<SentPacket<T>>>,
    /// Highest sequence the peer has reported receiving (its `H`).
    peer_highest: u64,
    send_order: u64,
    largest_acked_order: Option<u64>,
    /// Highest sequence acknowledged so far.
    largest_acked: Option<u64>,
    /// Datagram transmissions the peer's acknowledgements proved missing.
    lost_transmissions: u64,
    /// A transmission overtaken by an acknowledged later one arrived after
    /// all: the link reorders, so overtaking alone no longer means loss.
    reordering_seen: bool,
    rtt: RttEstimator,
}

impl<T> SendWindow<T> {
    /// A window whose first packet gets wire sequence `first`.
    pub fn new(first: u8, initial_rtt: Duration) -> SendWindow<T> {
        let base = EXTENDED_BASE + u64::from(first);
        SendWindow {
            base,
            next: base,
            packets: VecDeque::new(),
            peer_highest: base - 1,
            send_order: 0,
            largest_acked_order: None,
            largest_acked: None,
            lost_transmissions: 0,
            reordering_seen: false,
            rtt: RttEstimator::new(initial_rtt),
        }
    }

    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// Datagram transmissions proven lost so far: a later transmission was
    /// acknowledged while they were not. Spurious re-sends (the original
    /// arrived, its acknowledgement was lost or late) are not counted; a
    /// transmission overtaken and acknowledged before its re-send is taken
    /// back; one overtaken and delivered only after its re-send stays.
    pub fn lost_transmissions(&self) -> u64 {
        self.lost_transmissions
    }

    /// Oldest unacknowledged sequence (the next one if all are acknowledged).
    pub fn oldest_unacked(&self) -> u64 {
        self.base
    }

    /// The sequence the next new packet gets.
    pub fn next_sequence(&self) -> u64 {
        self.next
    }

    /// Packets sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.packets.iter().filter(|p| p.is_some()).count()
    }

    /// True if a new sequence may be sent (fewer than 64 unacknowledged
    /// sequences span the window).
    pub fn can_send_new(&self) -> bool {
        self.next < self.base + WINDOW
    }

    /// The unacknowledged packet with this sequence.
    pub fn get(&self, sequence: u64) -> Option<&SentPacket<T>> {
        let index = sequence.checked_sub(self.base)?;
        self.packets.get(usize::try_from(index).ok()?)?.as_ref()
    }

    /// Mutable access to an unacknowledged packet.
    pub fn get_mut(&mut self, sequence: u64) -> Option<&mut SentPacket<T>> {
        let index = sequence.checked_sub(self.base)?;
        self.packets.get_mut(usize::try_from(index).ok()?)?.as_mut()
    }

    /// Records a new packet under the next sequence; returns that sequence.
    pub fn on_sent_new(&mut self, payload: T, path: Path, now: Time, ack_eliciting: bool) -> u64 {
        let sequence = self.next;
        self.next += 1;
        self.send_order += 1;
        self.packets.push_back(Some(SentPacket {
            sequence,
            payload,
            path,
            last_sent: now,
            transmissions: 1,
            send_order: self.send_order,
            ack_eliciting,
            lost: false,
            loss_counted: false,
            previous: None,
        }));
        sequence
    }

    /// Records a re-send of an unacknowledged packet.
    pub fn on_resent(&mut self, sequence: u64, now: Time) {
        self.send_order += 1;
        let order = self.send_order;
        if let Some(packet) = self.get_mut(sequence) {
            packet.previous = Some((packet.last_sent, packet.loss_counted));
            packet.last_sent = now;
            packet.transmissions = packet.transmissions.saturating_add(1);
            packet.send_order = order;
            packet.lost = false;
            packet.loss_counted = false;
        }
    }

    /// The lowest sequence declared lost, waiting to be re-sent.
    pub fn first_lost(&self) -> Option<u64> {
        self.packets
            .iter()
            .flatten()
            .find(|p| p.lost)
            .map(|p| p.sequence)
    }

    /// The oldest unacknowledged datagram (re-sent early to carry
    /// acknowledgements when the window is full).
    pub fn oldest_datagram(&self) -> Option<u64> {
        self.packets
            .iter()
            .flatten()
            .find(|p| p.path == Path::Datagram)
            .map(|p| p.sequence)
    }

    /// Processes the peer's acknowledgement fields (from a packet fresher than
    /// any before it). Returns the packets newly acknowledged, oldest first.
    pub fn on_ack(
        &mut self,
        ack_last: u8,
        ack_bits: u64,
        now: Time,
    ) -> Result<Vec<SentPacket<T>>, AckOfUnsent> {
        // The peer's H only grows, and cannot pass the last sequence sent,
        // which is at most 65 ahead of the last H we processed.
        let delta = u64::from(ack_last.wrapping_sub(self.peer_highest as u8));
        let highest = self.peer_highest + delta;
        if highest >= self.next {
            return Err(AckOfUnsent(highest));
        }
        self.peer_highest = highest;
        let mut acked = Vec::new();
        let mut acknowledged = |sequence: u64, window: &mut Self| {
            if let Some(index) = sequence.checked_sub(window.base) {
                if let Some(slot) = window.packets.get_mut(index as usize) {
                    if let Some(packet) = slot.take() {
                        // The transmission that arrived was counted lost: it
                        // was overtaken (reordered), not lost.
                        let counted = if window.answers_previous(&packet, now) {
                            packet.previous.is_some_and(|(_, counted)| counted)
                        } else {
                            packet.loss_counted
                        };
                        if counted {
                            window.lost_transmissions = window.lost_transmissions.saturating_sub(1);
                            window.reordering_seen = true;
                        }
                        acked.push(packet);
                    }
                }
            }
        };
        acknowledged(highest, self);
        for bit in 0..WINDOW {
            if ack_bits & (1 << bit) != 0 {
                if let Some(sequence) = highest.checked_sub(1 + bit) {
                    acknowledged(sequence, self);
                }
            }
        }
        while let Some(None) = self.packets.front() {
            self.packets.pop_front();
            self.base += 1;
        }
        if self.packets.is_empty() {
            self.base = self.next;
        }
        acked.sort_by_key(|p| p.sequence);
        if let Some(last) = acked.last() {
            self.largest_acked = Some(self.largest_acked.unwrap_or(0).max(last.sequence));
        }
        if let Some(newest) = acked.iter().max_by_key(|p| p.send_order) {
            self.largest_acked_order =
                Some(self.largest_acked_order.unwrap_or(0).max(newest.send_order));
            // Karn: only packets transmitted once give unambiguous samples;
            // packets without messages are acknowledged late by design.
            if newest.transmissions == 1 && newest.ack_eliciting {
                self.rtt
                    .update(now.saturating_duration_since(newest.last_sent));
            }
        }
        self.count_proven_losses();
        Ok(acked)
    }

    /// Whether an acknowledgement received at `now` answers the transmission
    /// before the latest one (a re-send keeps the sequence number, so the
    /// fields alone cannot say): only when it came back sooner than any round
    /// trip after the re-send. Otherwise the latest one is credited, and an
    /// earlier transmission that arrived after its re-send stays counted;
    /// the reordering window below makes such re-sends rare.
    fn answers_previous(&self, packet: &SentPacket<T>, now: Time) -> bool {
        let (Some(_), Some(min)) = (packet.previous, self.rtt.min()) else {
            return false;
        };
        now.saturating_duration_since(packet.last_sent) < min
    }

    /// Counts each unacknowledged datagram transmission older than the
    /// newest acknowledged one: the peer's fields show it missing.
    fn count_proven_losses(&mut self) {
        let Some(largest) = self.largest_acked_order else {
            return;
        };
        for packet in self.packets.iter_mut().flatten() {
            if packet.path == Path::Datagram && !packet.loss_counted && largest > packet.send_order
            {
                packet.loss_counted = true;
                self.lost_transmissions += 1;
            }
        }
    }

    /// How long an overtaken datagram waits before it is declared lost: 9/8
    /// RTT, or on a link seen to reorder, 9/8 of the longest recent round
    /// trip (RACK's reordering window, RFC 8985 section 6.2): re-sending a
    /// packet that is only late costs bandwidth and makes its
    /// acknowledgement ambiguous.
    fn reorder_delay(&self) -> Duration {
        let delay = self.rtt.loss_delay();
        match self.rtt.recent_max() {
            Some(max) if self.reordering_seen => delay.max(max * 9 / 8),
            _ => delay,
        }
    }

    /// True if this window counts later acknowledged transmissions to find
    /// losses (off once the link is seen to reorder, as in RACK).
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }

    fn timeout_of(&self, packet: &SentPacket<T>, timing: &LossTiming) -> Duration {
        let mut base = self.rtt.rto(timing.max_ack_delay);
        // A packet without messages is acknowledged with the peer's next
        // packet, at the latest its keepalive, unless a later one has been
        // acknowledged: then the peer is waiting for it and answers at once.
        let blocking = self
            .largest_acked
            .is_some_and(|largest| largest > packet.sequence);
        if !packet.ack_eliciting && !blocking {
            base += timing.keepalive_interval;
        }
        let shift = packet
            .transmissions
            .saturating_sub(1)
            .min(MAX_BACKOFF_SHIFT);
        (base * (1 << shift)).min(MAX_RTO.max(base))
    }

    /// Declares lost every datagram that meets a loss condition at `now`;
    /// returns how many were newly declared lost.
    pub fn detect_losses(&mut self, now: Time, timing: &LossTiming) -> usize {
        let loss_delay = self.reorder_delay();
        let largest = self.largest_acked_order;
        let timeouts: Vec<Duration> = self
            .packets
            .iter()
            .map(|slot| {
                slot.as_ref()
                    .map_or(Duration::ZERO, |p| self.timeout_of(p, timing))
            })
            .collect();
        let mut newly_lost = 0;
        for (slot, timeout) in self.packets.iter_mut().zip(timeouts) {
            let Some(packet) = slot.as_mut() else {
                continue;
            };
            if packet.lost || packet.path == Path::Stream {
                continue;
            }
            let since = now.saturating_duration_since(packet.last_sent);
            let overtaken = largest.is_some_and(|largest| largest > packet.send_order);
            let by_count = !self.reordering_seen
                && largest.is_some_and(|largest| largest >= packet.send_order + PACKET_THRESHOLD);
            if by_count || (overtaken && since >= loss_delay) || since >= timeout {
                packet.lost = true;
                newly_lost += 1;
            }
        }
        newly_lost
    }

    /// When [`Self::detect_losses`] should next run.
    pub fn loss_deadline(&self, timing: &LossTiming) -> Option<Time> {
        let loss_delay = self.reorder_delay();
        self.packets
            .iter()
            .flatten()
            .filter(|p| !p.lost && p.path == Path::Datagram)
            .map(|p| {
                let overtaken = self
                    .largest_acked_order
                    .is_some_and(|largest| largest > p.send_order);
                let timeout = self.timeout_of(p, timing);
                let wait = if overtaken {
                    timeout.min(loss_delay)
                } else {
                    timeout
                };
                p.last_sent + wait
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMING: LossTiming = LossTiming {
        max_ack_delay: Duration::from_millis(10),
        keepalive_interval: Duration::from_millis(500),
    };

    fn ms(millis: u64) -> Time {
        Time::from_millis(millis)
    }

    #[test]
    fn window_holds_64_and_acks_free_it() {
        let mut window: SendWindow<()> = SendWindow::new(250, Duration::from_millis(100));
        for _ in 0..64 {
            assert!(window.can_send_new());
            window.on_sent_new((), Path::Datagram, ms(0), true);
        }
        assert!(!window.can_send_new());
        // Peer received everything up to 250 + 63 (wire 57).
        let acked = window
            .on_ack(((250 + 63) % 256) as u8, u64::MAX, ms(50))
            .unwrap();
        assert_eq!(acked.len(), 64);
        assert_eq!(window.in_flight(), 0);
        assert!(window.can_send_new());
        assert_eq!(window.rtt().smoothed(), Duration::from_millis(50));
    }

    #[test]
    fn initial_ack_fields_acknowledge_nothing_and_unsent_is_an_error() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        assert!(window.on_ack(255, u64::MAX, ms(1)).unwrap().is_empty());
        assert_eq!(
            window.on_ack(0, 0, ms(1)).unwrap_err(),
            AckOfUnsent(EXTENDED_BASE)
        );
    }

    #[test]
    fn packet_threshold_and_timeouts_declare_loss() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        for i in 0..5 {
            window.on_sent_new((), Path::Datagram, ms(i), true);
        }
        // Ack sequence 3 only (H = 3, no bits): 0 is 3 transmissions older.
        window.on_ack(3, 0, ms(40)).unwrap();
        assert_eq!(window.detect_losses(ms(40), &TIMING), 1);
        assert_eq!(window.first_lost(), Some(EXTENDED_BASE));
        // 1 and 2 were overtaken: lost after 9/8 RTT (RTT sample 37 ms).
        let deadline = window.loss_deadline(&TIMING).unwrap();
        assert!(deadline > ms(40) && deadline <= ms(1 + 42));
        assert_eq!(window.detect_losses(deadline, &TIMING), 1);
        assert_eq!(window.detect_losses(ms(44), &TIMING), 1);
        // 4 is only lost by timeout.
        window.on_resent(EXTENDED_BASE, ms(50));
        assert!(!window.get(EXTENDED_BASE).unwrap().lost);
        assert_eq!(window.detect_losses(ms(1000), &TIMING), 2);
    }

    #[test]
    fn zero_bits_do_not_declare_loss_and_stream_packets_never_lose() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        window.on_sent_new((), Path::Stream, ms(0), true);
        window.on_sent_new((), Path::Datagram, ms(0), true);
        window.on_ack(1, 0, ms(10)).unwrap();
        assert_eq!(window.detect_losses(ms(100_000), &TIMING), 0);
        assert_eq!(window.in_flight(), 1);
        assert_eq!(window.oldest_datagram(), None);
    }

    #[test]
    fn only_transmissions_the_acknowledgements_prove_missing_count_as_lost() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        // Timed out and re-sent, then acknowledged: the acknowledgement was
        // late, nothing was lost.
        window.on_sent_new((), Path::Datagram, ms(0), true);
        assert_eq!(window.detect_losses(ms(1000), &TIMING), 1);
        window.on_resent(EXTENDED_BASE, ms(1000));
        window.on_ack(0, 0, ms(1001)).unwrap();
        assert_eq!(window.lost_transmissions(), 0);
        // 1 and 2 sent, only 2 acknowledged: 1 is missing.
        window.on_sent_new((), Path::Datagram, ms(1010), true);
        window.on_sent_new((), Path::Datagram, ms(1011), true);
        window.on_ack(2, 0b10, ms(1050)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
        // Counted once per transmission: a repeat of the fields adds nothing,
        // a lost re-send adds one.
        window.on_ack(2, 0b10, ms(1051)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
        window.on_resent(EXTENDED_BASE + 1, ms(1100));
        window.on_sent_new((), Path::Datagram, ms(1101), true);
        window.on_ack(3, 0b101, ms(1150)).unwrap();
        assert_eq!(window.lost_transmissions(), 2);
    }

    #[test]
    fn a_link_seen_to_reorder_waits_the_longest_recent_round_trip() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        // 0 takes 150 ms, 1..=4 take 20 ms: 0 is overtaken by four, counted
        // lost, then acknowledged before any re-send.
        for i in 0..5 {
            window.on_sent_new((), Path::Datagram, ms(i), true);
        }
        window.on_ack(4, 0b111, ms(24)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
        assert!(!window.reordering_seen());
        window.on_ack(4, 0b1111, ms(150)).unwrap();
        assert_eq!(window.lost_transmissions(), 0);
        assert!(window.reordering_seen());
        // Now four later acknowledged packets do not declare 5 lost, and it
        // waits 9/8 of the 150 ms sample, not 9/8 of the smoothed RTT.
        for i in 5..10 {
            window.on_sent_new((), Path::Datagram, ms(200 + i), true);
        }
        window.on_ack(9, 0b111, ms(230)).unwrap();
        assert_eq!(window.detect_losses(ms(230), &TIMING), 0);
        let deadline = window.loss_deadline(&TIMING).unwrap();
        assert_eq!(deadline, ms(205) + Duration::from_millis(150) * 9 / 8);
        assert_eq!(window.detect_losses(deadline, &TIMING), 1);
    }

    #[test]
    fn an_acknowledgement_sooner_than_any_round_trip_after_a_re_send_credits_the_original() {
        let mut window: SendWindow<()> = SendWindow::new(0, Duration::from_millis(100));
        for i in 0..2 {
            window.on_sent_new((), Path::Datagram, ms(i), true);
        }
        // 1 comes back in 40 ms (the minimum); 0 is counted and re-sent.
        window.on_ack(1, 0, ms(41)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
        window.on_resent(EXTENDED_BASE, ms(300));
        // 0 is acknowledged 5 ms after its re-send: too soon for the re-send
        // to have made the round trip, so the original arrived.
        window.on_ack(1, 0b1, ms(305)).unwrap();
        assert_eq!(window.lost_transmissions(), 0);
        // The same 40 ms after a re-send credits the re-send: the original
        // stays counted.
        window.on_sent_new((), Path::Datagram, ms(400), true);
        window.on_sent_new((), Path::Datagram, ms(401), true);
        window.on_ack(3, 0b10, ms(441)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
        window.on_resent(EXTENDED_BASE + 2, ms(700));
        window.on_ack(3, 0b111, ms(740)).unwrap();
        assert_eq!(window.lost_transmissions(), 1);
    }
}
