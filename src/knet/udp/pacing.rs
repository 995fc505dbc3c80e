//! Datagram pacing (docs/knet-wire.md §4.6): at most `rate` datagrams per second,
//! with credit for a burst of up to `burst` datagrams after a quiet period.
//!
//! kNet sends when `now - lastSendTime >= 1/rate` and then advances
//! `lastSendTime` by `1/rate` unless it lags 20 intervals or more. This is the
//! same token bucket written with a virtual send time: it is clamped to at
//! most `burst` intervals in the past, so an idle connection may send `burst`
//! datagrams at once and then one per interval. This module owns only the
//! arithmetic; what is sent is the connection's business.

use std::time::Duration;

use crate::clock::Time;

/// The pacing state of one connection.
#[derive(Clone, Debug)]
pub struct Pacer {
    interval: Duration,
    burst: u32,
    /// Virtual time of the last datagram; `None` before the first.
    last: Option<Time>,
}

impl Pacer {
    /// A pacer for `rate` datagrams per second (at least 1) with bursts of
    /// up to `burst` datagrams (at least 1).
    pub fn new(rate: u32, burst: u32) -> Pacer {
        Pacer {
            interval: Duration::from_micros(1_000_000 / u64::from(rate.max(1))),
            burst: burst.max(1),
            last: None,
        }
    }

    /// The earliest time the next datagram may leave.
    pub fn next_send_time(&self) -> Time {
        match self.last {
            Some(last) => last + self.interval,
            None => Time::ZERO,
        }
    }

    /// Whether a datagram may be sent at `now`.
    pub fn ready(&self, now: Time) -> bool {
        now >= self.next_send_time()
    }

    /// Records that a datagram was sent at `now`.
    pub fn on_sent(&mut self, now: Time) {
        // max(last, now - burst·interval) + interval, written so that the
        // saturation of `Time` near the origin only ever reduces the burst.
        let floor = now - self.interval * (self.burst - 1);
        let last = self
            .last
            .map_or(floor, |last| (last + self.interval).max(floor));
        self.last = Some(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_all(p: &mut Pacer, now: Time) -> u32 {
        let mut sent = 0;
        while p.ready(now) && sent < 1000 {
            p.on_sent(now);
            sent += 1;
        }
        sent
    }

    #[test]
    fn bursts_then_paces_at_the_rate() {
        let mut p = Pacer::new(1000, 20);
        let start = Time::from_millis(10_000);
        assert_eq!(send_all(&mut p, start), 20);
        assert_eq!(p.next_send_time(), start + Duration::from_millis(1));
        assert_eq!(send_all(&mut p, start + Duration::from_micros(999)), 0);
        assert_eq!(send_all(&mut p, start + Duration::from_millis(1)), 1);
        assert_eq!(send_all(&mut p, start + Duration::from_millis(5)), 4);
        // After a quiet second the burst credit is back, but not more.
        assert_eq!(send_all(&mut p, start + Duration::from_secs(1)), 20);
    }

    #[test]
    fn degenerate_settings_are_clamped() {
        let mut p = Pacer::new(0, 0);
        assert!(p.ready(Time::ZERO));
        p.on_sent(Time::ZERO);
        assert!(!p.ready(Time::from_millis(999)));
        assert!(p.ready(Time::from_millis(1000)));
    }
}
