//! A budget for log lines about one kind of event that a remote party can
//! cause at will (a refused connection, a failed accept): the first one is
//! logged, then at most one line per period, carrying how many were left out
//! since. A flood of refusals then costs a few lines, not one per attempt.
//!
//! Pure: the caller passes `now`; nothing here reads a clock or logs.

use std::time::Duration;

use crate::clock::Time;

/// Default spacing of the lines about one kind of event.
pub const LOG_PERIOD: Duration = Duration::from_secs(10);

/// Decides which occurrences of one event get a log line.
#[derive(Debug, Clone)]
pub struct LogBudget {
    period: Duration,
    /// When the last line was allowed; `None` before the first.
    last_line: Option<Time>,
    /// Occurrences since the last line that got none.
    left_out: u64,
}

impl LogBudget {
    /// At most one line per `period` (the first occurrence always gets one).
    pub fn new(period: Duration) -> LogBudget {
        LogBudget {
            period,
            last_line: None,
            left_out: 0,
        }
    }

    /// One more occurrence at `now`. `Some(left_out)` when it is to be
    /// logged, with the number of occurrences since the last line that were
    /// not; `None` when it is only counted.
    pub fn handle_occurrence(&mut self, now: Time) -> Option<u64> {
        let due = match self.last_line {
            None => true,
            Some(last) => now.saturating_duration_since(last) >= self.period,
        };
        if !due {
            self.left_out = self.left_out.saturating_add(1);
            return None;
        }
        self.last_line = Some(now);
        Some(std::mem::take(&mut self.left_out))
    }
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget::new(LOG_PERIOD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_occurrence_is_logged_then_one_line_per_period_with_the_count() {
        let mut budget = LogBudget::new(Duration::from_secs(10));
        assert_eq!(budget.handle_occurrence(Time::from_millis(0)), Some(0));
        // A thousand more within the period: counted, not logged.
        for i in 1..=1000 {
            assert_eq!(budget.handle_occurrence(Time::from_millis(i)), None);
        }
        assert_eq!(
            budget.handle_occurrence(Time::from_millis(10_000)),
            Some(1000)
        );
        assert_eq!(budget.handle_occurrence(Time::from_millis(10_001)), None);
        // A quiet stretch: the next occurrence is logged at once.
        assert_eq!(budget.handle_occurrence(Time::from_millis(60_000)), Some(1));
    }

    #[test]
    fn time_going_backwards_never_logs_early() {
        let mut budget = LogBudget::new(Duration::from_secs(1));
        assert_eq!(budget.handle_occurrence(Time::from_millis(5_000)), Some(0));
        assert_eq!(budget.handle_occurrence(Time::from_millis(1_000)), None);
        assert_eq!(budget.handle_occurrence(Time::from_millis(6_000)), Some(1));
    }
}
