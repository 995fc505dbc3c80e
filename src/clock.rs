//! Protocol time: a [`Time`] is a count of microseconds since an origin the
//! caller chooses.
//!
//! Protocol cores never read a clock. Their callers pass `now` in, which lets
//! a simulation start at [`Time::ZERO`] and step time by hand, and lets the
//! transport map its own monotonic clock onto the same type. This module owns
//! only the arithmetic; it must not call `Instant::now()` or any other clock.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant, as microseconds since an arbitrary origin.
///
/// Arithmetic saturates instead of overflowing: a `Time` is an input from the
/// driver, and a far-future timer must never panic a protocol core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The origin.
    pub const ZERO: Time = Time(0);
    /// The largest representable instant; used as "never".
    pub const MAX: Time = Time(u64::MAX);

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros)
    }

    /// An instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis.saturating_mul(1000))
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self + duration`, or `None` past [`Time::MAX`].
    pub fn checked_add(self, duration: Duration) -> Option<Time> {
        let micros = u64::try_from(duration.as_micros()).ok()?;
        self.0.checked_add(micros).map(Time)
    }

    /// The first multiple of `period` (counted from the origin) after
    /// `self`: schedules that round to it line up, whoever computes them.
    /// A zero period counts as one microsecond.
    pub fn next_boundary(self, period: Duration) -> Time {
        let period = duration_micros(period).max(1);
        Time((self.0 / period).saturating_add(1).saturating_mul(period))
    }
}

fn duration_micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, duration: Duration) -> Time {
        Time(self.0.saturating_add(duration_micros(duration)))
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, duration: Duration) {
        *self = *self + duration;
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, duration: Duration) -> Time {
        Time(self.0.saturating_sub(duration_micros(duration)))
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturating: a later `rhs` gives zero.
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_boundary_is_strictly_after_and_a_multiple_of_the_period() {
        let gap = Duration::from_millis(5);
        assert_eq!(
            Time::from_millis(0).next_boundary(gap),
            Time::from_millis(5)
        );
        assert_eq!(
            Time::from_micros(4_999).next_boundary(gap),
            Time::from_millis(5)
        );
        assert_eq!(
            Time::from_millis(5).next_boundary(gap),
            Time::from_millis(10)
        );
        assert_eq!(
            Time::from_millis(7).next_boundary(gap),
            Time::from_millis(10)
        );
        assert_eq!(
            Time::from_micros(3).next_boundary(Duration::ZERO),
            Time::from_micros(4)
        );
        assert_eq!(Time::MAX.next_boundary(gap), Time::MAX, "saturates");
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(5);
        assert_eq!(t.as_micros(), 5_000);
        assert_eq!(t + Duration::from_micros(7), Time::from_micros(5_007));
        assert_eq!(t - Duration::from_secs(1), Time::ZERO);
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO - t, Duration::ZERO);
        assert_eq!(t - Time::from_millis(2), Duration::from_millis(3));
        assert_eq!(Time::MAX.checked_add(Duration::from_micros(1)), None);
        assert_eq!(t.to_string(), "0.005000s");
    }
}
