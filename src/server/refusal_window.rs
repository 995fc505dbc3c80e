//! When refusals come in bulk: a client whose refused requests in one
//! minute pass `limits.max_refused_requests_per_minute` is closed. A few
//! refusals are races every client meets (an edit of an entity someone just
//! removed); a steady stream of them is a client that stays hostile. Pure:
//! the caller passes `now`.

use std::time::Duration;

use crate::clock::Time;

/// The span refusals are counted over.
pub const REFUSAL_WINDOW: Duration = Duration::from_secs(60);

/// Refusals of one client in the current window.
#[derive(Debug, Clone, Default)]
pub struct RefusalWindow {
    start: Time,
    count: u32,
}

impl RefusalWindow {
    /// One refusal at `now`; true once more than `limit` fell in one window.
    pub fn note(&mut self, now: Time, limit: u32) -> bool {
        if now.saturating_duration_since(self.start) >= REFUSAL_WINDOW {
            self.start = now;
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        self.count > limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_is_more_than_the_limit_within_one_window() {
        let mut window = RefusalWindow::default();
        let now = Time::from_millis(1_000);
        assert!((0..100).all(|_| !window.note(now, 100)));
        assert!(window.note(now, 100));
    }

    #[test]
    fn a_new_window_starts_the_count_again() {
        let mut window = RefusalWindow::default();
        for _ in 0..100 {
            window.note(Time::ZERO, 100);
        }
        assert!(!window.note(Time::from_millis(60_000), 100));
    }
}
