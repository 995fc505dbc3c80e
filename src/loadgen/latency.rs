//! When each update was sent, and how long it took to be seen.
//!
//! Writers record the send time of update `seq` of entity `index` in a
//! ring per entity; the observer looks it up when the move arrives. The
//! moved value carries only `(index, seq)` (small integers, exact in an
//! f32), so the measurement survives any encoding that keeps positions to
//! better than 0.5 units, and needs no clock inside the protocol.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sends remembered per entity: at 20 Hz this is 3.2 s of history, so
/// anything later than that is counted as stale rather than measured.
pub const RING: usize = 64;

/// Sequence numbers are carried in an f32, exact below 2^24.
pub const SEQ_LIMIT: u64 = 1 << 24;

const TIME_BITS: u32 = 40;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// Send times of every entity's recent updates, shared by writers and the
/// observer without locks.
pub struct SendTable {
    slots: Vec<AtomicU64>,
    entities: usize,
}

impl SendTable {
    pub fn new(entities: usize) -> SendTable {
        SendTable {
            slots: (0..entities * RING).map(|_| AtomicU64::new(0)).collect(),
            entities,
        }
    }

    /// Number of entities the table covers.
    pub fn entities(&self) -> usize {
        self.entities
    }

    /// Records that update `seq` (>= 1) of entity `index` left at `at_us`.
    pub fn record(&self, index: usize, seq: u64, at_us: u64) {
        if index >= self.entities {
            return;
        }
        let slot = &self.slots[index * RING + (seq as usize % RING)];
        slot.store((seq << TIME_BITS) | (at_us & TIME_MASK), Ordering::Relaxed);
    }

    /// The send time of update `seq` of entity `index`, if still remembered.
    pub fn sent_at(&self, index: usize, seq: u64) -> Option<u64> {
        if index >= self.entities || seq == 0 {
            return None;
        }
        let value = self.slots[index * RING + (seq as usize % RING)].load(Ordering::Relaxed);
        (value >> TIME_BITS == seq).then_some(value & TIME_MASK)
    }
}

/// Latency samples in microseconds, capped in memory: past the cap every
/// `stride`-th sample is kept, so percentiles stay representative.
#[derive(Debug, Default)]
pub struct Samples {
    values: Vec<u32>,
    seen: u64,
    stride: u64,
}

/// Samples kept before thinning (64 MiB of u32).
const MAX_SAMPLES: usize = 16 << 20;

impl Samples {
    pub fn push(&mut self, micros: u64) {
        self.seen += 1;
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.values.len() >= MAX_SAMPLES {
            self.stride *= 2;
            let kept: Vec<u32> = self.values.iter().step_by(2).copied().collect();
            self.values = kept;
        }
        if self.seen % self.stride == 0 {
            self.values.push(micros.min(u64::from(u32::MAX)) as u32);
        }
    }

    /// Samples pushed (not only those kept).
    pub fn count(&self) -> u64 {
        self.seen
    }

    /// p50, p99 and max in microseconds (zeros when empty).
    pub fn summary(&mut self) -> Percentiles {
        if self.values.is_empty() {
            return Percentiles::default();
        }
        self.values.sort_unstable();
        let at = |q: f64| {
            let i = ((self.values.len() as f64 - 1.0) * q).round() as usize;
            u64::from(self.values[i])
        };
        Percentiles {
            p50_us: at(0.50),
            p99_us: at(0.99),
            max_us: at(1.0),
        }
    }
}

/// Latency summary.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct Percentiles {
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_send_is_found_until_its_slot_is_reused() {
        let table = SendTable::new(2);
        table.record(1, 5, 1234);
        assert_eq!(table.sent_at(1, 5), Some(1234));
        assert_eq!(table.sent_at(0, 5), None);
        table.record(1, 5 + RING as u64, 9999);
        assert_eq!(table.sent_at(1, 5), None, "overwritten by a later seq");
        assert_eq!(table.sent_at(1, 5 + RING as u64), Some(9999));
        assert_eq!(table.sent_at(7, 1), None, "out of range");
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut samples = Samples::default();
        for v in 1..=100 {
            samples.push(v);
        }
        let p = samples.summary();
        assert_eq!(p.p50_us, 51);
        assert_eq!(p.p99_us, 99);
        assert_eq!(p.max_us, 100);
        assert_eq!(samples.count(), 100);
    }
}
