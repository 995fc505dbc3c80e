//! Reconnect delays: exponential backoff with jitter (docs/peer-link.md
//! section 8.1).
//!
//! Pure: the jitter comes from a generator seeded by the caller, so tests
//! see exact delays. The driver sleeps; this module only counts.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How a dial attempt ended, as far as the next delay cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialOutcome {
    /// A link was established (and later ended).
    Established,
    /// Refused or unreachable for a reason that may pass.
    Failed,
    /// Refused because two nodes share one node UUID
    /// ([`super::reason::ReasonCode::is_identity_conflict`]).
    IdentityConflict,
}

/// Delays between failed dial attempts to one peer.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    failures: u32,
    rng: ChaCha8Rng,
}

impl Backoff {
    /// Delays start near `min` and double per failure up to `max`.
    pub fn new(min: Duration, max: Duration, seed: u64) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            failures: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The delay before the next attempt, after one more failure: a ceiling
    /// of `min * 2^failures` capped at `max`, of which a random half is
    /// taken off ("equal jitter"), so nodes that lost each other at the same
    /// moment do not redial in lockstep.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self
            .min
            .checked_mul(1u32 << self.failures.min(30))
            .map_or(self.max, |delay| delay.min(self.max));
        self.failures = self.failures.saturating_add(1);
        let half = ceiling / 2;
        let jitter_micros = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        half + Duration::from_micros(self.rng.gen_range(0..=jitter_micros))
    }

    /// The delay before the next dial after an attempt that ended so.
    /// After a refusal no retry can mend (two nodes share one node UUID) it
    /// is the longest at once, so the pair does not flap while an operator
    /// fixes the configuration, yet links once it is fixed.
    pub fn after(&mut self, outcome: DialOutcome) -> Duration {
        match outcome {
            DialOutcome::Established => self.reset(),
            DialOutcome::Failed => {}
            DialOutcome::IdentityConflict => self.failures = self.failures.max(30),
        }
        self.next_delay()
    }

    /// Forgets failures once a link was established.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_jitter_and_cap() {
        let min = Duration::from_millis(100);
        let max = Duration::from_millis(1000);
        let mut backoff = Backoff::new(min, max, 7);
        let ceilings = [100, 200, 400, 800, 1000, 1000];
        for ceiling in ceilings {
            let ceiling = Duration::from_millis(ceiling);
            let delay = backoff.next_delay();
            assert!(
                delay >= ceiling / 2 && delay <= ceiling,
                "{delay:?} vs {ceiling:?}"
            );
        }
        backoff.reset();
        assert!(backoff.next_delay() <= min);
    }

    #[test]
    fn jitter_is_deterministic_per_seed_and_differs_between_seeds() {
        let run = |seed| {
            let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60), seed);
            (0..5).map(|_| backoff.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30), 0);
        for _ in 0..100 {
            assert!(backoff.next_delay() <= Duration::from_secs(30));
        }
        assert_eq!(backoff.failures(), 100);
    }

    /// Dial attempts in `window` of fake time when every attempt ends so.
    fn attempts_in(window: Duration, outcome: DialOutcome) -> usize {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30), 3);
        let (mut now, mut attempts) = (Duration::ZERO, 0);
        while now < window {
            attempts += 1;
            now += backoff.after(outcome);
        }
        attempts
    }

    #[test]
    fn an_identity_conflict_waits_the_longest_delay_from_the_first_refusal() {
        // With the defaults (0.5 s to 30 s): an ordinary failure is retried
        // quickly at first; a conflict at most once per 15 s from the start.
        let minute = Duration::from_secs(60);
        assert!(attempts_in(minute, DialOutcome::Failed) >= 7);
        assert!(attempts_in(minute, DialOutcome::IdentityConflict) <= 4);
        assert!(attempts_in(10 * minute, DialOutcome::IdentityConflict) <= 40);
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30), 3);
        backoff.after(DialOutcome::IdentityConflict);
        // Once linked again, failures start over from the shortest delay.
        assert!(backoff.after(DialOutcome::Established) <= Duration::from_millis(500));
    }
}
