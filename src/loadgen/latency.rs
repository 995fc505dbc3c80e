//! When each update was sent, and how long it took to be seen.
//!
//! Writers record the send time of update `seq` of entity `index` in a
//! ring per entity; the observer looks it up when the move arrives. The
//! moved value carries only `(index, seq mod 512)` as small integers inside
//! +-256 on each axis (see [`position`]), so the measurement survives any
//! encoding that keeps positions to better than 0.5 units, keeps within
//! the range of the compact position encodings (docs/less-wire.md
//! §16), and needs no clock inside the protocol.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sends remembered per entity: at 20 Hz this is 3.2 s of history, so
/// anything later than that is counted as stale rather than measured.
pub const RING: usize = 64;

/// Sequence numbers are stored in 24 bits of a ring slot.
pub const SEQ_LIMIT: u64 = 1 << 24;

/// The moved position carries the sequence modulo this: a multiple of
/// [`RING`], so the ring slot follows from it, and 25 s of history at
/// 20 Hz, far beyond what the ring remembers.
pub const SEQ_MODULUS: u64 = 512;

/// Offset that centres each axis on 0 (values -256..=255).
const AXIS_OFFSET: f32 = 256.0;
const AXIS_SPAN: usize = 512;

/// The position that carries update `seq` of entity `index`: x the
/// sequence modulo [`SEQ_MODULUS`], y and z the index in base 512. Inside
/// +-256 for up to 262 144 entities (beyond that z leaves the compact
/// range and the encodings send it exactly).
pub fn position(seq: u64, index: usize) -> [f32; 3] {
    [
        (seq % SEQ_MODULUS) as f32 - AXIS_OFFSET,
        (index % AXIS_SPAN) as f32 - AXIS_OFFSET,
        (index / AXIS_SPAN) as f32 - AXIS_OFFSET,
    ]
}

/// `(index, seq mod SEQ_MODULUS)` back from a received position.
pub fn read_position(pos: [f32; 3]) -> Option<(usize, u64)> {
    let axis = |v: f32| {
        let shifted = (v + AXIS_OFFSET).round();
        (0.0..1e9).contains(&shifted).then_some(shifted as u64)
    };
    let seq = axis(pos[0]).filter(|s| *s < SEQ_MODULUS)?;
    let low = axis(pos[1]).filter(|y| (*y as usize) < AXIS_SPAN)?;
    let high = axis(pos[2])?;
    Some((high as usize * AXIS_SPAN + low as usize, seq))
}

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

    /// The send time of the remembered update of entity `index` whose
    /// sequence is `seq_mod` modulo [`SEQ_MODULUS`], if any.
    pub fn sent_at(&self, index: usize, seq_mod: u64) -> Option<u64> {
        if index >= self.entities {
            return None;
        }
        let value = self.slots[index * RING + (seq_mod as usize % RING)].load(Ordering::Relaxed);
        let stored = value >> TIME_BITS;
        // 0 is an empty slot: sequences start at 1.
        (stored != 0 && stored % SEQ_MODULUS == seq_mod).then_some(value & TIME_MASK)
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

    /// Takes in another observer's samples (kept ones; an observer that
    /// thinned its own keeps every `stride`-th, so its weight is slightly
    /// under its share only past [`MAX_SAMPLES`]).
    pub fn merge(&mut self, other: Samples) {
        self.seen += other.seen;
        self.stride = self.stride.max(other.stride).max(1);
        self.values.extend(other.values);
    }

    /// p50, p99, p999 and max in microseconds (zeros when empty).
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
            p999_us: at(0.999),
            max_us: at(1.0),
        }
    }
}

/// Latency summary.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct Percentiles {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
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
        // Looked up by the sequence modulo SEQ_MODULUS, as carried.
        table.record(0, SEQ_MODULUS * 3 + 7, 42);
        assert_eq!(table.sent_at(0, 7), Some(42));
        assert_eq!(table.sent_at(0, 8), None);
    }

    #[test]
    fn positions_carry_index_and_sequence_inside_the_compact_range() {
        for (seq, index) in [
            (1, 0),
            (511, 511),
            (512, 512),
            (70_000, 99_999),
            (3, 262_143),
        ] {
            let pos = position(seq, index);
            assert!(pos.iter().all(|v| (-256.0..256.0).contains(v)), "{pos:?}");
            assert_eq!(read_position(pos), Some((index, seq % SEQ_MODULUS)));
        }
        assert_eq!(read_position([300.0, 0.0, 0.0]), None);
        assert_eq!(read_position([0.0, f32::NAN, 0.0]), None);
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut samples = Samples::default();
        for v in 1..=1000 {
            samples.push(v);
        }
        let p = samples.summary();
        assert_eq!(p.p50_us, 501);
        assert_eq!(p.p99_us, 990);
        assert_eq!(p.p999_us, 999);
        assert_eq!(p.max_us, 1000);
        assert_eq!(samples.count(), 1000);
    }

    #[test]
    fn merged_observers_count_and_rank_together() {
        let mut first = Samples::default();
        let mut second = Samples::default();
        for v in 1..=500 {
            first.push(v * 2);
            second.push(v * 2 - 1);
        }
        first.merge(second);
        assert_eq!(first.count(), 1000);
        let p = first.summary();
        assert_eq!((p.p50_us, p.p999_us, p.max_us), (501, 999, 1000));
    }
}
