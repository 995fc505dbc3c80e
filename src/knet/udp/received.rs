//! Duplicate detection on receive (docs/knet-wire.md §4.3 step 2 and 3): which
//! PacketIDs and which reliable message numbers this connection has already
//! seen.
//!
//! kNet keeps a 65 536-slot PacketID table and a reliable-number `std::set`
//! that is never pruned. Both structures here are bounded instead: a bitset
//! over the most recent [`PACKET_WINDOW`] packet ids, and a "received below
//! `base`" watermark plus a lazily grown bitset of at most
//! [`MAX_RELIABLE_AHEAD`] numbers above it. This module owns only the
//! bookkeeping; what to do with a duplicate is the connection's decision.

use std::collections::VecDeque;

use crate::knet::ids::{PacketId, ReliableNumber};

/// How many packet ids behind the newest one are remembered. A datagram older
/// than this is dropped *without* an ack: a reliable sender re-sends its
/// messages under a new packet id after 5 s (§4.5), and their reliable
/// numbers still catch true duplicates, so dropping is safe. 4096 datagrams is
/// 4 s at kNet's 1000 datagrams/s pacing.
pub const PACKET_WINDOW: u32 = 4096;

const WINDOW_WORDS: usize = (PACKET_WINDOW / 64) as usize;

/// Verdict on an inbound packet id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketVerdict {
    /// Not seen before: process the datagram.
    New,
    /// Seen before: ack it again if reliable, skip its messages.
    Duplicate,
    /// Older than the window: cannot tell, drop without acking.
    TooOld,
}

/// The received-PacketID window.
#[derive(Clone, Debug)]
pub struct PacketWindow {
    newest: Option<PacketId>,
    /// Bit `id % PACKET_WINDOW` is set when `id` (within the window) was seen.
    bits: [u64; WINDOW_WORDS],
}

impl Default for PacketWindow {
    fn default() -> Self {
        PacketWindow {
            newest: None,
            bits: [0; WINDOW_WORDS],
        }
    }
}

impl PacketWindow {
    /// An empty window: the first id is always new.
    pub fn new() -> Self {
        Self::default()
    }

    /// Classifies `id` without recording it.
    pub fn check(&self, id: PacketId) -> PacketVerdict {
        let Some(newest) = self.newest else {
            return PacketVerdict::New;
        };
        let distance = id.distance(newest);
        if distance > 0 {
            PacketVerdict::New
        } else if distance.unsigned_abs() >= PACKET_WINDOW {
            PacketVerdict::TooOld
        } else if self.bit(id) {
            PacketVerdict::Duplicate
        } else {
            PacketVerdict::New
        }
    }

    /// Classifies `id` and records it when it is new.
    pub fn insert(&mut self, id: PacketId) -> PacketVerdict {
        let verdict = self.check(id);
        if verdict != PacketVerdict::New {
            return verdict;
        }
        match self.newest {
            Some(newest) if id.distance(newest) <= 0 => {}
            Some(newest) => {
                // Slide forward: the slots of the skipped ids now belong to
                // ids that have not been received.
                let ahead = id.distance(newest).unsigned_abs();
                if ahead >= PACKET_WINDOW {
                    self.bits = [0; WINDOW_WORDS];
                } else {
                    for step in 1..=ahead {
                        self.clear_bit(newest.add(step));
                    }
                }
                self.newest = Some(id);
            }
            None => self.newest = Some(id),
        }
        self.set_bit(id);
        PacketVerdict::New
    }

    fn slot(id: PacketId) -> (usize, u64) {
        let index = id.get() % PACKET_WINDOW;
        ((index / 64) as usize, 1u64 << (index % 64))
    }

    fn bit(&self, id: PacketId) -> bool {
        let (word, mask) = Self::slot(id);
        self.bits[word] & mask != 0
    }

    fn set_bit(&mut self, id: PacketId) {
        let (word, mask) = Self::slot(id);
        self.bits[word] |= mask;
    }

    fn clear_bit(&mut self, id: PacketId) {
        let (word, mask) = Self::slot(id);
        self.bits[word] &= !mask;
    }
}

/// How far above the lowest missing reliable number a peer may run ahead.
/// kNet has no send window: after one lost datagram a sender keeps sending new
/// numbers for the 5 s until the re-send. 2^18 numbers covers 5 s of 1000
/// datagrams/s with ~50 small messages each; past it the peer is treated as
/// broken. The bitset grows only as far as the peer actually runs ahead
/// (worst case 32 KiB).
pub const MAX_RELIABLE_AHEAD: u32 = 1 << 18;

/// A reliable number too far ahead of the lowest one still missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "reliable number {number} is {ahead} past the lowest missing one (max {MAX_RELIABLE_AHEAD})"
)]
pub struct TooFarAhead {
    /// The offending number.
    pub number: u32,
    /// Its distance above the lowest missing number.
    pub ahead: u32,
}

/// The set of received reliable message numbers.
#[derive(Clone, Debug)]
pub struct ReliableSet {
    /// The lowest number not received yet; everything below (wrap-aware) was.
    base: ReliableNumber,
    /// `words[i]` bit `j` = number `aligned + 64 i + j` received, where
    /// `aligned` = `base` rounded down to a multiple of 64.
    words: VecDeque<u64>,
}

impl Default for ReliableSet {
    fn default() -> Self {
        Self::starting_at(ReliableNumber(0))
    }
}

impl ReliableSet {
    /// A set expecting the peer's first number to be 0 (§4.3).
    pub fn new() -> Self {
        Self::default()
    }

    /// A set expecting the peer's first number to be `first` (tests that
    /// start near the u32 wrap).
    pub fn starting_at(first: ReliableNumber) -> Self {
        ReliableSet {
            base: first,
            words: VecDeque::new(),
        }
    }

    /// The lowest number not yet received.
    pub fn base(&self) -> ReliableNumber {
        self.base
    }

    /// Records `number`: `Ok(true)` if new, `Ok(false)` if a duplicate.
    pub fn insert(&mut self, number: ReliableNumber) -> Result<bool, TooFarAhead> {
        if number.distance(self.base) < 0 {
            return Ok(false);
        }
        let aligned = self.base.0 & !63;
        let offset = number.0.wrapping_sub(aligned);
        if offset >= MAX_RELIABLE_AHEAD {
            return Err(TooFarAhead {
                number: number.0,
                ahead: number.0.wrapping_sub(self.base.0),
            });
        }
        let (word, mask) = ((offset / 64) as usize, 1u64 << (offset % 64));
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        if self.words[word] & mask != 0 {
            return Ok(false);
        }
        self.words[word] |= mask;
        self.advance();
        Ok(true)
    }

    /// Moves `base` past every received number at the front.
    fn advance(&mut self) {
        while let Some(&front) = self.words.front() {
            let aligned = self.base.0 & !63;
            // Numbers below `base` in the front word count as received.
            let below = self.base.0.wrapping_sub(aligned);
            let front = front | ((1u64 << below) - 1);
            if front == u64::MAX {
                self.words.pop_front();
                self.base = ReliableNumber(aligned.wrapping_add(64));
                continue;
            }
            self.base = ReliableNumber(aligned.wrapping_add(front.trailing_ones()));
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: u32) -> PacketId {
        PacketId::new(v)
    }

    #[test]
    fn packet_window_detects_duplicates_and_old_ids() {
        let mut w = PacketWindow::new();
        assert_eq!(w.insert(p(1)), PacketVerdict::New);
        assert_eq!(w.insert(p(1)), PacketVerdict::Duplicate);
        assert_eq!(w.insert(p(3)), PacketVerdict::New);
        // 2 was skipped, arrives late: new, then duplicate.
        assert_eq!(w.insert(p(2)), PacketVerdict::New);
        assert_eq!(w.insert(p(2)), PacketVerdict::Duplicate);
        assert_eq!(w.insert(p(3 + PACKET_WINDOW)), PacketVerdict::New);
        assert_eq!(w.check(p(3)), PacketVerdict::TooOld);
        assert_eq!(w.check(p(4)), PacketVerdict::New);
        assert_eq!(w.insert(p(4)), PacketVerdict::New);
        assert_eq!(w.insert(p(4)), PacketVerdict::Duplicate);
    }

    #[test]
    fn packet_window_wraps_at_22_bits() {
        let mut w = PacketWindow::new();
        let top = PacketId::MAX.get();
        assert_eq!(w.insert(p(top - 1)), PacketVerdict::New);
        assert_eq!(w.insert(p(0)), PacketVerdict::New);
        assert_eq!(w.insert(p(1)), PacketVerdict::New);
        // The id just before the wrap is older but inside the window.
        assert_eq!(w.insert(p(top)), PacketVerdict::New);
        assert_eq!(w.insert(p(top)), PacketVerdict::Duplicate);
        assert_eq!(w.insert(p(top - 1)), PacketVerdict::Duplicate);
        assert_eq!(w.insert(p(0)), PacketVerdict::Duplicate);
    }

    #[test]
    fn packet_window_sparse_jumps_clear_stale_slots() {
        let mut w = PacketWindow::new();
        assert_eq!(w.insert(p(10)), PacketVerdict::New);
        // A jump of exactly one window: slot of 10 is reused by 10 + 4096.
        assert_eq!(w.insert(p(10 + PACKET_WINDOW)), PacketVerdict::New);
        assert_eq!(w.insert(p(10 + 2 * PACKET_WINDOW)), PacketVerdict::New);
        // Ids in between were never received, even though slots were reused.
        assert_eq!(w.insert(p(11 + PACKET_WINDOW)), PacketVerdict::New);
        // Far jump over the 22-bit wrap.
        let far = p(10 + 2 * PACKET_WINDOW).add(1 << 20);
        assert_eq!(w.insert(far), PacketVerdict::New);
        assert_eq!(
            w.insert(far.add(PacketId::MAX.get() - 5)),
            PacketVerdict::New
        ); // far - 6
        assert_eq!(w.insert(far), PacketVerdict::Duplicate);
    }

    #[test]
    fn reliable_set_tracks_base_and_gaps() {
        let mut s = ReliableSet::new();
        assert_eq!(s.insert(ReliableNumber(0)), Ok(true));
        assert_eq!(s.insert(ReliableNumber(0)), Ok(false));
        assert_eq!(s.base(), ReliableNumber(1));
        assert_eq!(s.insert(ReliableNumber(100)), Ok(true));
        assert_eq!(s.insert(ReliableNumber(100)), Ok(false));
        assert_eq!(s.base(), ReliableNumber(1));
        for n in 1..100 {
            assert_eq!(s.insert(ReliableNumber(n)), Ok(true));
        }
        assert_eq!(s.base(), ReliableNumber(101));
        assert_eq!(s.words.len(), 1);
        assert_eq!(s.insert(ReliableNumber(50)), Ok(false));
    }

    #[test]
    fn reliable_set_rejects_numbers_too_far_ahead() {
        let mut s = ReliableSet::new();
        assert_eq!(s.insert(ReliableNumber(MAX_RELIABLE_AHEAD - 1)), Ok(true));
        let err = s.insert(ReliableNumber(MAX_RELIABLE_AHEAD)).unwrap_err();
        assert_eq!(err.ahead, MAX_RELIABLE_AHEAD);
        assert!(s.words.len() <= (MAX_RELIABLE_AHEAD / 64) as usize);
    }

    #[test]
    fn reliable_set_wraps_at_u32() {
        let mut s = ReliableSet::starting_at(ReliableNumber(u32::MAX - 2));
        assert_eq!(s.insert(ReliableNumber(1)), Ok(true));
        assert_eq!(s.insert(ReliableNumber(u32::MAX)), Ok(true));
        assert_eq!(s.insert(ReliableNumber(u32::MAX - 2)), Ok(true));
        assert_eq!(s.insert(ReliableNumber(u32::MAX - 1)), Ok(true));
        assert_eq!(s.base(), ReliableNumber(0));
        assert_eq!(s.insert(ReliableNumber(0)), Ok(true));
        assert_eq!(s.base(), ReliableNumber(2));
        assert_eq!(s.insert(ReliableNumber(u32::MAX)), Ok(false));
        assert_eq!(s.insert(ReliableNumber(1)), Ok(false));
    }
}
