//! Pending PacketAcks (docs/knet-wire.md §4.4): the packet ids of received reliable
//! datagrams that still have to be acknowledged, and their grouping into
//! 7-byte PacketAck messages (lowest pending id P plus a mask of P+1..P+32).
//!
//! Ids are recorded before the duplicate test, so a re-sent datagram whose
//! ack was lost is acked again. They are due once the oldest has waited
//! `ack_delay` (33 ms) or [`ACK_FLUSH_COUNT`] are pending. The set is bounded
//! by [`MAX_PENDING_ACKS`]. This module does not build datagrams.

use std::time::Duration;

use crate::clock::Time;
use crate::knet::ids::PacketId;

/// kNet flushes as soon as this many acks are pending (§4.4), which is
/// exactly one full PacketAck group.
pub const ACK_FLUSH_COUNT: usize = 33;

/// Bound on pending acks, so a peer flooding reliable datagrams faster than
/// we may send cannot grow the set. An id arriving past it is not acked; its
/// sender re-sends the messages under a new id after 5 s. 1024 ids are ~31
/// full PacketAck groups, more than one second of a real peer's traffic
/// between two flushes.
pub const MAX_PENDING_ACKS: usize = 1024;

/// One PacketAck's worth: `first` and the ids `first + 1 + i` for every set
/// bit `i` of `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckGroup {
    /// The lowest id of the group.
    pub first: PacketId,
    /// Bit `i` acknowledges `first + 1 + i`.
    pub mask: u32,
}

/// The pending acks of one connection.
#[derive(Clone, Debug, Default)]
pub struct PendingAcks {
    /// (id, receive time) in arrival order, ids distinct.
    pending: Vec<(PacketId, Time)>,
}

impl PendingAcks {
    /// No ack pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of ids pending.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Records a received reliable datagram. Returns false when the set is
    /// full and the id was not recorded.
    pub fn record(&mut self, id: PacketId, now: Time) -> bool {
        if self.pending.iter().any(|&(p, _)| p == id) {
            return true;
        }
        if self.pending.len() >= MAX_PENDING_ACKS {
            return false;
        }
        self.pending.push((id, now));
        true
    }

    /// When the pending acks must be sent, if any are pending.
    pub fn due_at(&self, ack_delay: Duration) -> Option<Time> {
        let &(_, oldest) = self.pending.first()?;
        if self.pending.len() >= ACK_FLUSH_COUNT {
            Some(oldest)
        } else {
            Some(oldest + ack_delay)
        }
    }

    /// Whether the pending acks must be sent at `now`.
    pub fn is_due(&self, now: Time, ack_delay: Duration) -> bool {
        self.due_at(ack_delay).is_some_and(|at| at <= now)
    }

    /// Removes and returns the group of the lowest pending id.
    pub fn take_group(&mut self) -> Option<AckGroup> {
        let &(anchor, _) = self.pending.first()?;
        // All pending ids passed the receive window, so they are within
        // ±2^21 of each other and the wrap-aware distance orders them.
        let first = self
            .pending
            .iter()
            .map(|&(p, _)| p)
            .min_by_key(|p| p.distance(anchor))?;
        let mut mask = 0u32;
        self.pending.retain(|&(p, _)| {
            let d = p.distance(first);
            if d == 0 {
                false
            } else if (1..=32).contains(&d) {
                mask |= 1 << (d - 1);
                false
            } else {
                true
            }
        });
        Some(AckGroup { first, mask })
    }

    /// Forgets everything (closing: nothing more is acked).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_millis(33);

    fn p(v: u32) -> PacketId {
        PacketId::new(v)
    }

    #[test]
    fn groups_match_the_f5_capture() {
        // F5: PacketAck packet 3 + mask bits 0-2 (packets 4, 5, 6).
        let mut a = PendingAcks::new();
        for id in [3, 5, 4, 6] {
            assert!(a.record(p(id), Time::from_millis(10)));
        }
        assert!(a.record(p(5), Time::from_millis(11)), "duplicate is fine");
        assert_eq!(a.len(), 4);
        assert_eq!(
            a.take_group(),
            Some(AckGroup {
                first: p(3),
                mask: 0b111
            })
        );
        assert!(a.is_empty());
        assert_eq!(a.take_group(), None);
    }

    #[test]
    fn due_after_delay_or_count() {
        let mut a = PendingAcks::new();
        assert_eq!(a.due_at(DELAY), None);
        a.record(p(7), Time::from_millis(100));
        assert!(!a.is_due(Time::from_millis(132), DELAY));
        assert!(a.is_due(Time::from_millis(133), DELAY));
        for id in 8..40 {
            a.record(p(id), Time::from_millis(101));
        }
        assert_eq!(a.len(), ACK_FLUSH_COUNT);
        assert!(a.is_due(Time::from_millis(101), DELAY));
        // 7..=39 is exactly one group.
        assert_eq!(
            a.take_group(),
            Some(AckGroup {
                first: p(7),
                mask: u32::MAX
            })
        );
        assert!(a.is_empty());
    }

    #[test]
    fn groups_split_across_gaps_and_the_wrap() {
        let mut a = PendingAcks::new();
        let top = PacketId::MAX.get();
        for id in [1, top - 1, 0, 40] {
            a.record(p(id), Time::ZERO);
        }
        // D3-like: 0x3FFFFE, then 0x000000 (bit 1), 0x000001 (bit 2).
        assert_eq!(
            a.take_group(),
            Some(AckGroup {
                first: p(top - 1),
                mask: 0b110
            })
        );
        assert_eq!(
            a.take_group(),
            Some(AckGroup {
                first: p(40),
                mask: 0
            })
        );
        assert_eq!(a.take_group(), None);
    }

    #[test]
    fn flood_is_bounded() {
        let mut a = PendingAcks::new();
        for id in 0..(MAX_PENDING_ACKS as u32 + 100) {
            a.record(p(id), Time::ZERO);
        }
        assert_eq!(a.len(), MAX_PENDING_ACKS);
        assert!(!a.record(p(5000), Time::ZERO));
        let mut groups = 0;
        while a.take_group().is_some() {
            groups += 1;
        }
        assert_eq!(groups, MAX_PENDING_ACKS.div_ceil(33));
    }
}
