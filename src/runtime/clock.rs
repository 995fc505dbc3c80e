//! The one place process time becomes protocol time. Protocol time
//! ([`Time`]) counts from the node's start; the driver reads the process
//! clock only through a [`Clock`], so every input, output and status figure
//! of a node shares one origin, and the core never sees an `Instant`.

use std::time::{Duration, Instant};

use crate::clock::Time;

/// How far a deadline beyond what the platform's clock holds is put: it is
/// never reached by a running node.
const FAR_AWAY: Duration = Duration::from_secs(365 * 86_400);

/// Maps the process clock onto protocol time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose protocol time starts now.
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The protocol time now.
    pub fn now(&self) -> Time {
        self.time_of(Instant::now())
    }

    /// The protocol time of a process instant (a timer's scheduled tick);
    /// an instant before the start is the start.
    pub fn time_of(&self, instant: Instant) -> Time {
        let since_start = instant.saturating_duration_since(self.start);
        Time::from_micros(u64::try_from(since_start.as_micros()).unwrap_or(u64::MAX))
    }

    /// The instant a protocol time falls on, for the driver's timer; a
    /// time beyond what the platform's clock holds is a year away.
    pub fn instant(&self, at: Time) -> tokio::time::Instant {
        let since_start = Duration::from_micros(at.as_micros());
        match self.start.checked_add(since_start) {
            Some(instant) => tokio::time::Instant::from_std(instant),
            None => tokio::time::Instant::now() + FAR_AWAY,
        }
    }
}

/// Seconds since the node started at protocol time `at`, as the status
/// shows times.
pub fn secs(at: Time) -> f64 {
    at.saturating_duration_since(Time::ZERO).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_times_fall_on_instants_from_the_start() {
        let clock = Clock::start();
        let start = tokio::time::Instant::from_std(clock.start);
        let at = clock.instant(Time::from_millis(5));
        assert_eq!(at - start, Duration::from_millis(5));
        // A deadline past any real clock is far away, not a panic.
        assert!(clock.instant(Time::MAX) > start + Duration::from_secs(86_400));
    }

    #[test]
    fn instants_map_back_onto_the_protocol_times_they_fall_on() {
        let clock = Clock::start();
        let at = Time::from_millis(1_234);
        assert_eq!(clock.time_of(clock.instant(at).into_std()), at);
        // Before the start is the start, not an underflow.
        let before = clock.start.checked_sub(Duration::from_millis(1));
        if let Some(before) = before {
            assert_eq!(clock.time_of(before), Time::ZERO);
        }
        assert_eq!(secs(Time::from_millis(2_500)), 2.5);
    }
}
