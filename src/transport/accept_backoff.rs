//! How long a listener waits after a failed `accept`. The usual failure is
//! running out of file descriptors (EMFILE, ENFILE); retrying at once spins
//! a core and fills the log, so the wait grows while accepts keep failing
//! and starts again from the shortest after one succeeds.
//!
//! Pure: it hands out durations; the listener does the waiting.

use std::time::Duration;

/// The first wait after a failure: short, since a descriptor is often freed
/// within milliseconds by a closing connection.
pub const FIRST_DELAY: Duration = Duration::from_millis(10);

/// The longest wait: a node out of descriptors still tries once a second.
pub const MAX_DELAY: Duration = Duration::from_secs(1);

/// The growing wait between failed accepts.
#[derive(Debug, Clone, Default)]
pub struct AcceptBackoff {
    /// The wait after the next failure; `None` after a success.
    next: Option<Duration>,
}

impl AcceptBackoff {
    /// An accept failed: the time to wait before the next one (10 ms,
    /// doubling up to 1 s).
    pub fn handle_failure(&mut self) -> Duration {
        let delay = self.next.unwrap_or(FIRST_DELAY);
        self.next = Some((delay * 2).min(MAX_DELAY));
        delay
    }

    /// An accept succeeded: the next failure waits the shortest time again.
    pub fn handle_success(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_ten_milliseconds_to_one_second_and_reset_on_success() {
        let mut backoff = AcceptBackoff::default();
        let waits: Vec<u128> = (0..10)
            .map(|_| backoff.handle_failure().as_millis())
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        backoff.handle_success();
        assert_eq!(backoff.handle_failure(), FIRST_DELAY);
    }
}
