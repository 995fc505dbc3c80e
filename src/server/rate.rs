//! A token bucket for per-client message rates.

use std::time::Duration;

use crate::clock::Time;

/// Allows `rate` messages per second on average, with bursts of up to one
/// second's worth.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    rate: f64,
    tokens: f64,
    last: Time,
}

impl RateLimiter {
    pub fn new(rate_per_second: u32, now: Time) -> Self {
        let rate = f64::from(rate_per_second.max(1));
        RateLimiter {
            rate,
            tokens: rate,
            last: now,
        }
    }

    /// Takes one token; false when the client is over its rate.
    pub fn allow(&mut self, now: Time) -> bool {
        let elapsed: Duration = now - self.last;
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refill() {
        let mut limiter = RateLimiter::new(10, Time::ZERO);
        let allowed = (0..20).filter(|_| limiter.allow(Time::ZERO)).count();
        assert_eq!(allowed, 10);
        assert!(!limiter.allow(Time::from_millis(50)));
        assert!(limiter.allow(Time::from_millis(100)));
    }

    #[test]
    fn steady_rate_holds() {
        let mut limiter = RateLimiter::new(100, Time::ZERO);
        // 100 messages per second for ten seconds, plus the first burst.
        let allowed = (0..2000)
            .filter(|i| limiter.allow(Time::from_millis(i * 5)))
            .count();
        assert!((1000..=1100).contains(&allowed), "{allowed}");
    }
}
