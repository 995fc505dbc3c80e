//! How a simulated or proxied network treats each datagram: latency,
//! jitter, loss, duplication and reordering, drawn from the caller's seeded
//! PRNG. One model for the LESS session harness (tests/less_harness), the
//! kNet UDP simulation (tests/knet_udp_sim.rs), the federation simulation
//! (tests/sim) and the real-socket impairment proxy (tests/net_common);
//! each owns its clock and its queue of datagrams.
//!
//! The draws come in a fixed order ([`LinkModel::copies`], then
//! [`LinkModel::delay`] per copy), so a seed gives the same fates on every
//! run: figures recorded for a seed depend on that order. The federation
//! simulation still draws in its own order (loss, duplication, then jitter
//! only when it is not zero, and no reorder draw), so its recorded runs
//! keep their streams.

use std::time::Duration;

use rand::Rng;

/// Link behaviour, per direction.
#[derive(Debug, Clone, Copy)]
pub struct LinkModel {
    /// Fixed one-way delay.
    pub latency: Duration,
    /// Extra delay drawn uniformly from `0..jitter` per copy; datagrams
    /// overtake each other when it exceeds their spacing.
    pub jitter: Duration,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram that is not lost arrives twice.
    pub duplicate: f64,
    /// Probability that a copy is held back by an extra 0..4 x latency.
    /// The federation simulation does not apply it (jitter alone reorders
    /// there).
    pub reorder: f64,
}

impl LinkModel {
    /// Nothing lost, duplicated or reordered; `latency` one way.
    pub const fn clean(latency: Duration) -> LinkModel {
        LinkModel {
            latency,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
        }
    }

    /// A clean 10 ms link: the federation simulation's default.
    pub const CLEAN: LinkModel = LinkModel::clean(Duration::from_millis(10));

    /// The hostile figure (20 % loss, 5 % duplication, 100 ms
    /// jitter) on a 30 ms link: the federation simulation's lossy link.
    pub const LOSSY: LinkModel = LinkModel {
        latency: Duration::from_millis(30),
        jitter: Duration::from_millis(100),
        loss: 0.2,
        duplicate: 0.05,
        reorder: 0.0,
    };

    /// A clean 20 ms link: the LESS session harness's baseline.
    pub const PERFECT: LinkModel = LinkModel::clean(Duration::from_millis(20));

    /// The LESS session harness's hostile link: 20 % loss, 10 %
    /// duplication, 10 % held back, 20 ms jitter on 30 ms.
    pub const HOSTILE: LinkModel = LinkModel {
        latency: Duration::from_millis(30),
        jitter: Duration::from_millis(20),
        loss: 0.2,
        duplicate: 0.1,
        reorder: 0.1,
    };

    /// The proxy forwards every datagram at once (loopback adds its own
    /// delay).
    pub const PASS_THROUGH: LinkModel = LinkModel::clean(Duration::ZERO);

    /// [`LinkModel::LOSSY`] through the proxy: 5 ms on top of loopback.
    pub const LOSSY_PROXY: LinkModel = LinkModel {
        latency: Duration::from_millis(5),
        ..LinkModel::LOSSY
    };

    /// How many copies of a datagram arrive: 0 (lost), 1, or 2
    /// (duplicated). Draws the loss, then (when not lost) the duplication.
    pub fn copies(&self, rng: &mut impl Rng) -> usize {
        if rng.gen_bool(self.loss) {
            0
        } else if rng.gen_bool(self.duplicate) {
            2
        } else {
            1
        }
    }

    /// When one copy arrives, after it is sent: latency, jitter, and a
    /// hold-back when the reorder draw says so. A zero jitter or reorder
    /// still draws, so a test that changes the model mid-run (heals a link)
    /// does not shift the fates that follow.
    ///
    /// Each part is cut to whole microseconds, the fake clock's resolution
    /// (`lessgate::clock::Time`), as adding them to a `Time` one by one does.
    pub fn delay(&self, rng: &mut impl Rng) -> Duration {
        let mut delay = whole_micros(self.latency) + whole_micros(self.jitter.mul_f64(rng.gen()));
        if rng.gen_bool(self.reorder) {
            delay += whole_micros(self.latency.mul_f64(4.0 * rng.gen::<f64>()));
        }
        delay
    }
}

fn whole_micros(duration: Duration) -> Duration {
    Duration::from_micros(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX))
}
