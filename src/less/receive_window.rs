//! The receiver's sequence window: which packets have arrived, which to
//! accept, and the acknowledgement fields to send back (docs/less-wire.md §7).
//!
//! Sequences are extended from the 8-bit wire value to 64 bits internally.
//! With `L` the lowest sequence not yet received, a packet with extended
//! sequence `S` is accepted only if `L <= S <= L + 63`, `S` has not been
//! received, and its timestamp is above the *floor*: the largest timestamp of
//! any received packet with sequence `<= L - 64` (docs/less-wire.md §7). Because a
//! sender never has more than 64 packets unacknowledged, every transmission
//! of sequence `R` precedes the first transmission of `R + 64`; so a legitimate
//! packet always clears the floor, and a packet replayed from an earlier lap
//! of the 8-bit counter never does (proof in docs/less-wire.md "Replay").
//! This module owns that bookkeeping and nothing else.

/// Window size in packets (docs/less-wire.md §7, quoting the draft: "the maximum outstanding window
/// size is 64 packets").
pub const WINDOW: u64 = 64;

/// Internal sequences start at `first + EXTENDED_BASE` so that "one less than
/// the first" is representable without wrapping.
pub const EXTENDED_BASE: u64 = 256;

/// Slots for sequences `L - 63 ..= L + 63`, indexed by sequence mod 128.
const SLOTS: usize = 2 * WINDOW as usize;

/// Why a packet was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Its sequence was already received (a duplicate, or a replay of a
    /// recent packet).
    Duplicate,
    /// Its sequence is beyond the window: no honest sender sends it now.
    OutOfWindow,
    /// Its timestamp is not above the floor: a replay from an earlier lap.
    Stale,
}

/// Receive-side sequence state of one direction of a link.
#[derive(Clone, Debug)]
pub struct ReceiveWindow {
    lowest: u64,
    highest: u64,
    slots: [Option<i64>; SLOTS],
    floor: Option<i64>,
}

impl ReceiveWindow {
    /// A window expecting `first` (the negotiated first sequence) next.
    pub fn new(first: u8) -> ReceiveWindow {
        let lowest = EXTENDED_BASE + u64::from(first);
        ReceiveWindow {
            lowest,
            highest: lowest - 1,
            slots: [None; SLOTS],
            floor: None,
        }
    }

    /// `L`: the lowest sequence not yet received. Every packet before it has
    /// been received (sequences before the first count as received).
    pub fn lowest(&self) -> u64 {
        self.lowest
    }

    /// `H`: the highest sequence received (initially one less than the first).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    fn slot(sequence: u64) -> usize {
        (sequence % SLOTS as u64) as usize
    }

    /// True if `sequence` has been received. Meaningful for sequences from
    /// `L - 64` on; everything below `L` counts as received.
    pub fn is_received(&self, sequence: u64) -> bool {
        sequence < self.lowest
            || (sequence < self.lowest + WINDOW && self.slots[Self::slot(sequence)].is_some())
    }

    /// Decides whether a packet with wire sequence `wire` and `timestamp` is
    /// accepted; on success returns its extended sequence.
    pub fn classify(&self, wire: u8, timestamp: i64) -> Result<u64, Rejection> {
        let delta = u64::from(wire.wrapping_sub(self.lowest as u8));
        if delta >= WINDOW {
            // 192..=255 behind L: already received (a duplicate or a replay);
            // 64..=191 ahead: beyond anything an honest sender may send.
            return Err(if delta >= 256 - WINDOW {
                Rejection::Duplicate
            } else {
                Rejection::OutOfWindow
            });
        }
        let sequence = self.lowest + delta;
        if self.is_received(sequence) {
            return Err(Rejection::Duplicate);
        }
        if self.floor.is_some_and(|floor| timestamp <= floor) {
            return Err(Rejection::Stale);
        }
        Ok(sequence)
    }

    /// Records an accepted packet (from [`Self::classify`]) and advances `L`
    /// past every contiguous received sequence.
    pub fn insert(&mut self, sequence: u64, timestamp: i64) {
        debug_assert!(sequence >= self.lowest && sequence < self.lowest + WINDOW);
        if sequence < self.lowest || sequence >= self.lowest + WINDOW {
            return;
        }
        self.slots[Self::slot(sequence)] = Some(timestamp);
        self.highest = self.highest.max(sequence);
        while self.slots[Self::slot(self.lowest)].is_some() {
            self.lowest += 1;
            // The sequence that has just become L - 64 joins the floor; its
            // slot is free for L + 64, the next sequence to enter the window.
            let leaving = Self::slot(self.lowest - WINDOW);
            if let Some(old) = self.slots[leaving].take() {
                self.floor = Some(self.floor.map_or(old, |floor| floor.max(old)));
            }
        }
    }

    /// The floor: timestamps at or below it are refused.
    pub fn floor(&self) -> Option<i64> {
        self.floor
    }

    /// The acknowledgement fields to send: `ack-last = H mod 256` and bit i
    /// set if `H - 1 - i` was received.
    pub fn ack_fields(&self) -> (u8, u64) {
        let mut bits = 0u64;
        for index in 0..WINDOW {
            if self.is_received(self.highest - 1 - index) {
                bits |= 1 << index;
            }
        }
        (self.highest as u8, bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_acks_cover_everything_before_the_first() {
        let window = ReceiveWindow::new(10);
        assert_eq!(window.ack_fields(), (9, u64::MAX));
        assert_eq!(window.classify(10, 0), Ok(EXTENDED_BASE + 10));
    }

    #[test]
    fn gaps_show_in_the_bitmask_and_hold_l() {
        let mut window = ReceiveWindow::new(0);
        let first = EXTENDED_BASE;
        window.insert(window.classify(2, 30).unwrap(), 30);
        assert_eq!(window.lowest(), first);
        // H = 2: bit0 = seq 1 (missing), bit1 = seq 0 (missing), rest before first.
        assert_eq!(window.ack_fields(), (2, u64::MAX << 2));
        window.insert(window.classify(0, 10).unwrap(), 10);
        assert_eq!(window.lowest(), first + 1);
        assert_eq!(window.ack_fields(), (2, !0b01));
        window.insert(window.classify(1, 20).unwrap(), 20);
        assert_eq!(window.lowest(), first + 3);
        assert_eq!(window.classify(1, 99), Err(Rejection::Duplicate));
    }

    #[test]
    fn rejects_out_of_window_and_old_laps() {
        let mut window = ReceiveWindow::new(0);
        assert_eq!(window.classify(64, 1), Err(Rejection::OutOfWindow));
        assert_eq!(window.classify(191, 1), Err(Rejection::OutOfWindow));
        assert_eq!(window.classify(192, 1), Err(Rejection::Duplicate));
        // Receive 0..300 with timestamps 1000 + s, then replay lap-old packets.
        for sequence in 0..300u64 {
            let wire = sequence as u8;
            let accepted = window.classify(wire, 1000 + sequence as i64).unwrap();
            window.insert(accepted, 1000 + sequence as i64);
        }
        assert_eq!(window.lowest(), EXTENDED_BASE + 300);
        // Sequence 44 (wire 44) was received with timestamp 1044; wire 44 now
        // maps to 300 (not received) but its timestamp is below the floor.
        assert_eq!(window.floor(), Some(1000 + 300 - 64));
        assert_eq!(window.classify(44, 1044), Err(Rejection::Stale));
        assert_eq!(window.classify(44, 2000), Ok(EXTENDED_BASE + 300));
    }

    #[test]
    fn full_bitmask_after_contiguous_run() {
        let mut window = ReceiveWindow::new(250);
        for offset in 0..70u64 {
            let wire = (250 + offset) as u8;
            let sequence = window.classify(wire, offset as i64).unwrap();
            window.insert(sequence, offset as i64);
        }
        assert_eq!(window.ack_fields(), ((250u64 + 69) as u8, u64::MAX));
    }
}
