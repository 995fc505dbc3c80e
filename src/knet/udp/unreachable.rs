//! A peer whose port refuses our datagrams (docs/knet.md, "Connection
//! refused"). When nothing listens at the peer's port any more (its process
//! died), every datagram sent there is answered by an ICMP port
//! unreachable, which a connected UDP socket reports as "connection
//! refused". kNet itself ignores these and waits for its 15 s silence
//! timeout; here a steady run of them ends the connection at once.
//!
//! One refusal alone proves little: an ICMP error can be stray (a
//! datagram of a previous connection from the same local port, a routing
//! blip on the way). So a refusal opens a *run*, and while it is open the
//! connection sends a PingRequest every [`UdpConfig::refusal_probe`] to
//! see whether the peer answers. A datagram from the peer with a new packet
//! id (what refreshes the silence timeout too) ends the run.
//! The connection is lost when the run has held
//! [`UdpConfig::refusals_to_close`] refusals spanning at least
//! [`UdpConfig::refusal_span`] with nothing heard: by default 5 refusals
//! over at least 1 s, so a dead server is noticed about 1 s after the
//! bridge next sends it anything, and a live one is never given up for
//! fewer than 5 refusals in a row that cover a whole second.
//!
//! Pure: refusals and datagrams with an explicit `now`.
//!
//! [`UdpConfig::refusal_probe`]: super::UdpConfig::refusal_probe
//! [`UdpConfig::refusals_to_close`]: super::UdpConfig::refusals_to_close
//! [`UdpConfig::refusal_span`]: super::UdpConfig::refusal_span

use std::time::Duration;

use crate::clock::Time;

/// The refusals since the peer was last heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    first: Time,
    count: u32,
}

/// What a refusal means for the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep going, probing the peer.
    Probe,
    /// The peer is gone: `count` refusals over `over`, nothing heard.
    Lost { count: u32, over: Duration },
}

/// The rule, with its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusals {
    to_close: u32,
    span: Duration,
    run: Option<Run>,
}

impl Refusals {
    pub fn new(to_close: u32, span: Duration) -> Refusals {
        Refusals {
            to_close: to_close.max(1),
            span,
            run: None,
        }
    }

    /// A "connection refused" at `now`.
    pub fn refused(&mut self, now: Time) -> Verdict {
        let run = self.run.get_or_insert(Run {
            first: now,
            count: 0,
        });
        run.count += 1;
        let over = now.saturating_duration_since(run.first);
        if run.count >= self.to_close && over >= self.span {
            Verdict::Lost {
                count: run.count,
                over,
            }
        } else {
            Verdict::Probe
        }
    }

    /// The peer was heard from: whatever was refused, it is there.
    pub fn heard(&mut self) {
        self.run = None;
    }

    /// Whether refusals came since the peer was last heard (probing).
    pub fn open(&self) -> bool {
        self.run.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn a_steady_run_over_the_span_is_a_loss() {
        let mut r = Refusals::new(5, Duration::from_secs(1));
        for ms in [0, 250, 500, 750] {
            assert_eq!(r.refused(at(ms)), Verdict::Probe);
        }
        // Five refusals, but within less than the span.
        assert_eq!(r.refused(at(999)), Verdict::Probe);
        assert_eq!(
            r.refused(at(1_000)),
            Verdict::Lost {
                count: 6,
                over: Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn many_refusals_at_once_are_not_enough() {
        let mut r = Refusals::new(5, Duration::from_secs(1));
        for _ in 0..100 {
            assert_eq!(r.refused(at(10)), Verdict::Probe);
        }
    }

    #[test]
    fn a_peer_heard_in_between_ends_the_run() {
        let mut r = Refusals::new(5, Duration::from_secs(1));
        for ms in [0, 250, 500, 750] {
            r.refused(at(ms));
        }
        r.heard();
        assert!(!r.open());
        for ms in [1_000, 1_250, 1_500, 1_750] {
            assert_eq!(r.refused(at(ms)), Verdict::Probe);
        }
        assert!(matches!(
            r.refused(at(2_000)),
            Verdict::Lost { count: 5, .. }
        ));
    }
}
