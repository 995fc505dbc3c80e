//! What the server knows of one client's unsent bytes: whether its
//! connection has drained what it was last given, for how long it has
//! not, and whether it is reading at all.
//!
//! The transport reports the bytes it still holds for a client (the node
//! asks it at each write decision and at the tick); only the core keeps
//! their history. Over [`BacklogWatch::observe`]'s threshold a client is
//! *held*: nothing more is queued for it, its sync state coalesces to the
//! latest state per entity, and `write_schedule` looks at it again after a
//! wait that grows with how long it has been held. A held client whose
//! backlog has not gone down at all for `limits.max_client_stall_secs` is
//! *stuck*: it is not reading, and the tick closes it.

use std::time::Duration;

use crate::clock::Time;

/// One client's backlog over time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BacklogWatch {
    /// Since when its backlog has been over the threshold (reset when it
    /// drains).
    held_since: Option<Time>,
    /// Since when its backlog has been over the threshold without going
    /// down (reset by any progress).
    stuck_since: Option<Time>,
    /// The backlog last observed.
    last: usize,
}

impl BacklogWatch {
    /// Records that the client's transport holds `backlog` unsent bytes at
    /// `now`; returns whether it is held (over `threshold`).
    pub fn observe(&mut self, now: Time, backlog: usize, threshold: usize) -> bool {
        let held = backlog > threshold;
        if !held {
            self.held_since = None;
            self.stuck_since = None;
        } else {
            self.held_since.get_or_insert(now);
            if backlog < self.last {
                self.stuck_since = Some(now);
            } else {
                self.stuck_since.get_or_insert(now);
            }
        }
        self.last = backlog;
        held
    }

    /// How long the client has been held at `now`; `None`: it is not.
    pub fn held_for(&self, now: Time) -> Option<Duration> {
        self.held_since.map(|since| now - since)
    }

    /// How long the held client's backlog has not gone down at `now`;
    /// `None`: it is not held.
    pub fn stuck_for(&self, now: Time) -> Option<Duration> {
        self.stuck_since.map(|since| now - since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 1000;

    fn at(ms: u64) -> Time {
        Time::from_millis(ms)
    }

    #[test]
    fn a_client_under_the_threshold_is_neither_held_nor_stuck() {
        let mut watch = BacklogWatch::default();
        assert!(!watch.observe(at(10), LIMIT, LIMIT));
        assert_eq!(watch.held_for(at(20)), None);
        assert_eq!(watch.stuck_for(at(20)), None);
    }

    #[test]
    fn held_time_counts_from_the_first_observation_over_until_it_drains() {
        let mut watch = BacklogWatch::default();
        assert!(watch.observe(at(10), LIMIT + 1, LIMIT));
        assert!(watch.observe(at(30), LIMIT + 500, LIMIT));
        assert_eq!(watch.held_for(at(40)), Some(Duration::from_millis(30)));
        assert!(!watch.observe(at(50), 0, LIMIT));
        assert_eq!(watch.held_for(at(60)), None);
        assert!(watch.observe(at(70), LIMIT + 1, LIMIT));
        assert_eq!(watch.held_for(at(75)), Some(Duration::from_millis(5)));
    }

    #[test]
    fn a_backlog_that_goes_down_is_not_stuck_one_that_does_not_is() {
        let mut watch = BacklogWatch::default();
        watch.observe(at(0), 50_000, LIMIT);
        // Reading slowly: every observation finds less.
        watch.observe(at(1_000), 40_000, LIMIT);
        watch.observe(at(2_000), 30_000, LIMIT);
        assert_eq!(watch.stuck_for(at(2_500)), Some(Duration::from_millis(500)));
        assert_eq!(
            watch.held_for(at(2_500)),
            Some(Duration::from_millis(2_500))
        );
        // Then not at all (the same, or more after a large write).
        watch.observe(at(3_000), 30_000, LIMIT);
        watch.observe(at(4_000), 35_000, LIMIT);
        assert_eq!(
            watch.stuck_for(at(5_000)),
            Some(Duration::from_millis(3_000))
        );
    }
}
