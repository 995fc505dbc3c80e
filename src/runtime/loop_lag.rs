//! How late the node loop serves a timer that is due: the time from a
//! deadline to the moment the loop handles it. A loop busy with a long
//! batch, or starved of CPU, serves every client and link that late, so
//! this is the node's own queueing delay (docs/operations.md §5).
//!
//! Kept as a cumulative histogram, as Prometheus reads one: a scrape every
//! 15 s still sees a 300 ms stall that lasted one tick.

use serde::Serialize;

/// Upper bounds of the buckets, in seconds: from a healthy loop (well
/// under a millisecond) to one that has stalled for seconds.
pub const BUCKETS: [f64; 11] = [
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// Lags observed since the node started.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LoopLag {
    /// Observations at or under each of [`BUCKETS`] (cumulative).
    pub buckets: [u64; BUCKETS.len()],
    /// Every observation (the `+Inf` bucket).
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_secs: f64,
    /// The largest, in seconds.
    pub max_secs: f64,
}

impl LoopLag {
    /// Records one timer served `lag` after its deadline.
    pub fn record(&mut self, lag: std::time::Duration) {
        let secs = lag.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&mut self.buckets) {
            if secs <= *bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_secs += secs;
        self.max_secs = self.max_secs.max(secs);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_sum_and_max_follow() {
        let mut lag = LoopLag::default();
        for millis in [0, 3, 3, 40, 2_000, 9_000] {
            lag.record(Duration::from_millis(millis));
        }
        assert_eq!(lag.count, 6);
        assert_eq!(lag.buckets, [1, 1, 1, 3, 3, 3, 4, 4, 4, 4, 5]);
        assert!((lag.sum_secs - 11.046).abs() < 1e-9, "{}", lag.sum_secs);
        assert_eq!(lag.max_secs, 9.0);
        assert!(BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
