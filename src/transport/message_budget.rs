//! How fast one client's messages are read: a token bucket each transport's
//! per-connection reader consults before it reads more.
//!
//! A client above its budget is slowed, not closed: its reader stops reading
//! until tokens come back, so TCP backpressure (or, for kNet UDP, the
//! connection's bounded datagram queue) slows the sender, and no other
//! client waits for it. Every message counts, whatever its kind (binary,
//! text, ping). Pure: the caller passes `now`.

use std::time::Duration;

use crate::clock::Time;

/// A client's read budget, from `limits.max_messages_per_second` and
/// `limits.max_message_burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Messages per second read on average.
    pub per_second: u32,
    /// Messages that may be read at once after a quiet spell.
    pub burst: u32,
}

impl BudgetConfig {
    /// No limit worth the name: for dialed connections, whose far end is
    /// a server we chose.
    pub const UNLIMITED: BudgetConfig = BudgetConfig {
        per_second: u32::MAX,
        burst: u32::MAX,
    };
}

/// The tokens of one connection.
#[derive(Debug, Clone)]
pub struct MessageBudget {
    per_second: f64,
    burst: f64,
    /// Negative after a read that carried more messages than were
    /// available (a kNet datagram or TCP read holds several): the debt is
    /// paid off before the next read.
    tokens: f64,
    last: Time,
}

impl MessageBudget {
    /// A budget that starts full (one burst).
    pub fn new(config: BudgetConfig, now: Time) -> MessageBudget {
        let per_second = f64::from(config.per_second.max(1));
        let burst = f64::from(config.burst.max(1));
        MessageBudget {
            per_second,
            burst,
            tokens: burst,
            last: now,
        }
    }

    fn refill(&mut self, now: Time) {
        let elapsed = now.saturating_duration_since(self.last);
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.per_second).min(self.burst);
    }

    /// Whole messages that may be read now (0 while in debt).
    pub fn available(&mut self, now: Time) -> usize {
        self.refill(now);
        if self.tokens < 1.0 {
            0
        } else {
            // Bounded by `burst`, itself a u32.
            self.tokens as usize
        }
    }

    /// `messages` were read; more than were available leaves a debt.
    pub fn spend(&mut self, now: Time, messages: usize) {
        self.refill(now);
        self.tokens -= messages as f64;
    }

    /// How long until one message may be read; `None` if one may now.
    pub fn wait(&mut self, now: Time) -> Option<Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            return None;
        }
        let missing = 1.0 - self.tokens;
        // At least a microsecond, so a caller that sleeps for it makes
        // progress even when rounding would say zero.
        Some(Duration::from_secs_f64(missing / self.per_second).max(Duration::from_micros(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(per_second: u32, burst: u32) -> MessageBudget {
        MessageBudget::new(BudgetConfig { per_second, burst }, Time::ZERO)
    }

    #[test]
    fn a_burst_then_a_wait_for_the_next_token() {
        let mut b = budget(10, 5);
        assert_eq!(b.available(Time::ZERO), 5);
        b.spend(Time::ZERO, 5);
        assert_eq!(b.available(Time::ZERO), 0);
        assert_eq!(b.wait(Time::ZERO), Some(Duration::from_millis(100)));
        assert_eq!(b.wait(Time::from_millis(100)), None);
        assert_eq!(b.available(Time::from_millis(100)), 1);
    }

    #[test]
    fn quiet_time_refills_only_up_to_the_burst() {
        let mut b = budget(1_000, 50);
        b.spend(Time::ZERO, 50);
        assert_eq!(b.available(Time::from_millis(3_600_000)), 50);
    }

    #[test]
    fn a_debt_is_paid_off_before_the_next_read() {
        let mut b = budget(100, 10);
        // One datagram carried 30 messages with 10 available.
        b.spend(Time::ZERO, 30);
        assert_eq!(b.available(Time::from_millis(100)), 0);
        assert_eq!(
            b.wait(Time::from_millis(100)),
            Some(Duration::from_millis(110))
        );
        assert_eq!(b.wait(Time::from_millis(210)), None);
    }

    #[test]
    fn a_reader_that_takes_what_is_available_reads_at_most_rate_times_time_plus_burst() {
        // Reads as often as it may, in batches of what is available, for
        // ten seconds of protocol time at uneven steps.
        let mut b = budget(2_000, 500);
        let mut now = Time::ZERO;
        let mut read = 0usize;
        let mut step = 0u64;
        while now < Time::from_millis(10_000) {
            let n = b.available(now).min(256);
            b.spend(now, n);
            read += n;
            step += 1;
            now += Duration::from_micros(137 + (step * 7919) % 3_000);
        }
        assert!(read <= 2_000 * 10 + 500, "{read}");
        assert!(read >= 2_000 * 9, "the budget is used, not lost: {read}");
    }

    #[test]
    fn zero_settings_are_held_to_one() {
        let mut b = budget(0, 0);
        assert_eq!(b.available(Time::ZERO), 1);
    }
}
