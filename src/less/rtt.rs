//! Round-trip time estimation (RFC 6298's smoothed RTT and variance) and the
//! timeouts derived from it. Owns arithmetic only; samples come from the
//! send window.

use std::time::Duration;

/// Timer granularity: no timeout is shorter than this.
pub const GRANULARITY: Duration = Duration::from_millis(1);
/// Smallest retransmission timeout. Loopback and LAN round trips are a
/// millisecond, but a receiver that is busy with its own work (a scene tick
/// writing thousands of entities to its clients) acknowledges tens of
/// milliseconds late; at 10 ms the whole window was declared lost and re-sent
/// while every packet had arrived (measured: a third of all packets at
/// 10 000 entities x 20 Hz). 200 ms is Linux TCP's floor; losses followed by
/// acknowledged packets are still found after 9/8 RTT.
pub const MIN_RTO: Duration = Duration::from_millis(200);
/// Largest retransmission timeout, backoff included.
pub const MAX_RTO: Duration = Duration::from_secs(10);

/// Samples kept for the recent maximum.
const RECENT_SAMPLES: usize = 32;

/// Smoothed RTT and variance of one link, plus the extremes that tell which
/// transmission an acknowledgement answers.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    smoothed: Option<Duration>,
    variance: Duration,
    latest: Duration,
    initial: Duration,
    /// Smallest sample ever taken: no acknowledgement comes back sooner.
    min: Option<Duration>,
    /// The last [`RECENT_SAMPLES`] samples, oldest overwritten first.
    recent: [Duration; RECENT_SAMPLES],
    recent_len: usize,
    recent_next: usize,
}

impl RttEstimator {
    /// An estimator that assumes `initial` until the first sample.
    pub fn new(initial: Duration) -> RttEstimator {
        RttEstimator {
            smoothed: None,
            variance: initial / 2,
            latest: initial,
            initial,
            min: None,
            recent: [Duration::ZERO; RECENT_SAMPLES],
            recent_len: 0,
            recent_next: 0,
        }
    }

    /// Adds one sample.
    pub fn update(&mut self, sample: Duration) {
        self.latest = sample;
        self.min = Some(self.min.map_or(sample, |min| min.min(sample)));
        self.recent[self.recent_next] = sample;
        self.recent_next = (self.recent_next + 1) % RECENT_SAMPLES;
        self.recent_len = (self.recent_len + 1).min(RECENT_SAMPLES);
        match self.smoothed {
            None => {
                self.smoothed = Some(sample);
                self.variance = sample / 2;
            }
            Some(smoothed) => {
                let deviation = if smoothed > sample {
                    smoothed - sample
                } else {
                    sample - smoothed
                };
                self.variance = (self.variance * 3 + deviation) / 4;
                self.smoothed = Some((smoothed * 7 + sample) / 8);
            }
        }
    }

    /// The smoothed RTT (the initial guess before any sample).
    pub fn smoothed(&self) -> Duration {
        self.smoothed.unwrap_or(self.initial)
    }

    /// The RTT variance.
    pub fn variance(&self) -> Duration {
        self.variance
    }

    /// The most recent sample.
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// The smallest sample so far (`None` before the first).
    pub fn min(&self) -> Option<Duration> {
        self.min
    }

    /// The largest of the last 32 samples (`None` before the first).
    pub fn recent_max(&self) -> Option<Duration> {
        self.recent[..self.recent_len].iter().copied().max()
    }

    /// True once a sample has been taken.
    pub fn has_samples(&self) -> bool {
        self.smoothed.is_some()
    }

    /// Retransmission timeout: `srtt + max(4 * rttvar, granularity) +
    /// max_ack_delay`, within [`MIN_RTO`]..=[`MAX_RTO`].
    pub fn rto(&self, max_ack_delay: Duration) -> Duration {
        (self.smoothed() + (self.variance * 4).max(GRANULARITY) + max_ack_delay)
            .clamp(MIN_RTO, MAX_RTO)
    }

    /// How long after a later packet is acknowledged an earlier unacknowledged
    /// one counts as lost: 9/8 of the larger of smoothed and latest RTT.
    pub fn loss_delay(&self) -> Duration {
        (self.smoothed().max(self.latest) * 9 / 8).max(GRANULARITY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_rfc6298() {
        let mut rtt = RttEstimator::new(Duration::from_millis(200));
        assert_eq!(rtt.smoothed(), Duration::from_millis(200));
        rtt.update(Duration::from_millis(100));
        assert_eq!(rtt.smoothed(), Duration::from_millis(100));
        assert_eq!(rtt.variance(), Duration::from_millis(50));
        rtt.update(Duration::from_millis(180));
        // var = (3*50 + 80)/4 = 57.5 ms; srtt = (7*100 + 180)/8 = 110 ms.
        assert_eq!(rtt.variance(), Duration::from_micros(57_500));
        assert_eq!(rtt.smoothed(), Duration::from_millis(110));
        assert_eq!(
            rtt.rto(Duration::from_millis(20)),
            Duration::from_millis(110 + 230 + 20)
        );
        assert_eq!(rtt.loss_delay(), Duration::from_micros(202_500));
    }

    #[test]
    fn keeps_the_minimum_and_the_recent_maximum() {
        let mut rtt = RttEstimator::new(Duration::from_millis(200));
        assert_eq!((rtt.min(), rtt.recent_max()), (None, None));
        rtt.update(Duration::from_millis(300));
        rtt.update(Duration::from_millis(20));
        assert_eq!(rtt.min(), Some(Duration::from_millis(20)));
        assert_eq!(rtt.recent_max(), Some(Duration::from_millis(300)));
        // The 300 ms sample ages out after 32 newer ones; the minimum stays.
        for _ in 0..RECENT_SAMPLES {
            rtt.update(Duration::from_millis(40));
        }
        assert_eq!(rtt.recent_max(), Some(Duration::from_millis(40)));
        assert_eq!(rtt.min(), Some(Duration::from_millis(20)));
    }

    #[test]
    fn timeouts_are_clamped() {
        let mut rtt = RttEstimator::new(Duration::from_millis(1));
        rtt.update(Duration::ZERO);
        assert_eq!(rtt.rto(Duration::ZERO), MIN_RTO);
        rtt.update(Duration::from_secs(100));
        assert_eq!(rtt.rto(Duration::ZERO), MAX_RTO);
    }
}
