//! Keeps one party's refusals from flooding the log: the first refusal of a
//! kind is logged in full, later ones of that kind are only counted, and the
//! count comes out as one summary line per interval. A kind that stays
//! quiet for a whole interval is forgotten, so its next refusal is logged in
//! full again. Over any span of time a kind therefore costs at most one
//! line, plus one per interval elapsed. Pure: the caller passes `now`.

use std::time::Duration;

use crate::clock::Time;

/// Time between two summary lines of one kind.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// What to log for a refusal just noted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first of its kind in a while: log it in full.
    Log,
    /// Counted into the next summary.
    Counted,
}

/// A summary due: `count` refusals of `kind` since the last line about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary<K> {
    pub kind: K,
    pub count: u64,
}

#[derive(Debug, Clone)]
struct KindState<K> {
    kind: K,
    interval_start: Time,
    counted: u64,
}

/// The refusal kinds of one party (a client, a peer). Kinds are few (one
/// per request type), so a short list is searched.
#[derive(Debug, Clone)]
pub struct RefusalLog<K> {
    kinds: Vec<KindState<K>>,
}

impl<K> Default for RefusalLog<K> {
    fn default() -> Self {
        RefusalLog { kinds: Vec::new() }
    }
}

impl<K: Copy + Eq> RefusalLog<K> {
    /// One refusal of `kind` at `now`.
    pub fn note(&mut self, kind: K, now: Time) -> Verdict {
        if let Some(state) = self.kinds.iter_mut().find(|s| s.kind == kind) {
            state.counted += 1;
            return Verdict::Counted;
        }
        self.kinds.push(KindState {
            kind,
            interval_start: now,
            counted: 0,
        });
        Verdict::Log
    }

    /// The summaries due at `now`: kinds whose interval has run out with
    /// refusals counted. Kinds quiet for their whole interval are forgotten.
    pub fn poll_summaries(&mut self, now: Time, due: &mut Vec<Summary<K>>) {
        self.kinds.retain_mut(|state| {
            if now.saturating_duration_since(state.interval_start) < SUMMARY_INTERVAL {
                return true;
            }
            if state.counted == 0 {
                return false;
            }
            due.push(Summary {
                kind: state.kind,
                count: state.counted,
            });
            state.counted = 0;
            state.interval_start = now;
            true
        });
    }

    /// Every count not yet summarised (the party is leaving).
    pub fn drain(&mut self, due: &mut Vec<Summary<K>>) {
        for state in self.kinds.drain(..) {
            if state.counted > 0 {
                due.push(Summary {
                    kind: state.kind,
                    count: state.counted,
                });
            }
        }
    }

    /// Whether nothing is waiting to be summarised.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Time {
        Time::from_millis(secs * 1000)
    }

    #[test]
    fn the_first_is_logged_the_rest_counted_then_summarised() {
        let mut log = RefusalLog::default();
        assert_eq!(log.note("EditAttributes", at(0)), Verdict::Log);
        for _ in 0..999 {
            assert_eq!(log.note("EditAttributes", at(1)), Verdict::Counted);
        }
        let mut due = Vec::new();
        log.poll_summaries(at(9), &mut due);
        assert!(due.is_empty(), "not before the interval ends");
        log.poll_summaries(at(10), &mut due);
        assert_eq!(
            due,
            vec![Summary {
                kind: "EditAttributes",
                count: 999
            }]
        );
    }

    #[test]
    fn kinds_are_summarised_apart() {
        let mut log = RefusalLog::default();
        assert_eq!(log.note(1u8, at(0)), Verdict::Log);
        assert_eq!(log.note(2u8, at(0)), Verdict::Log);
        log.note(1, at(0));
        log.note(1, at(0));
        log.note(2, at(0));
        let mut due = Vec::new();
        log.poll_summaries(at(10), &mut due);
        assert_eq!(
            due,
            vec![Summary { kind: 1, count: 2 }, Summary { kind: 2, count: 1 }]
        );
    }

    #[test]
    fn a_kind_quiet_for_an_interval_is_logged_in_full_again() {
        let mut log = RefusalLog::default();
        let mut due = Vec::new();
        log.note("a", at(0));
        log.note("a", at(1));
        log.poll_summaries(at(10), &mut due);
        assert_eq!(due.len(), 1);
        // Nothing in the next interval: forgotten without a line.
        log.poll_summaries(at(20), &mut due);
        assert_eq!(due.len(), 1);
        assert!(log.is_empty());
        assert_eq!(log.note("a", at(21)), Verdict::Log);
    }

    #[test]
    fn a_steady_flood_costs_one_line_plus_one_per_interval() {
        let mut log = RefusalLog::default();
        let mut due = Vec::new();
        let mut lines = 0;
        let mut refused = 0u64;
        // 1,000 refusals a second for 100 s, summaries polled every 50 ms.
        for ms in (0..100_000u64).step_by(50) {
            let now = Time::from_millis(ms);
            for _ in 0..50 {
                refused += 1;
                if log.note("x", now) == Verdict::Log {
                    lines += 1;
                }
            }
            log.poll_summaries(now, &mut due);
        }
        log.drain(&mut due);
        lines += due.len();
        assert!(lines <= 1 + 10 + 1, "{lines} lines");
        let counted: u64 = due.iter().map(|s| s.count).sum();
        assert_eq!(counted + 1, refused, "every refusal is in a line");
    }
}
