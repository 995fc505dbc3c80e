//! The timer of a connection loop that asks for its protocol's next
//! deadline on every turn.
//!
//! A fresh `tokio::time::sleep_until` per turn is an insertion into the
//! runtime's timer wheel when polled and a removal when dropped, two locked
//! operations per datagram or read, and a write to the I/O driver's wake-up
//! descriptor whenever it is sooner than the driver's next wake. One `Sleep`
//! kept across turns is moved only when the deadline changes, and moving it
//! later is a single atomic store.

use std::pin::Pin;

use tokio::time::{Instant, Sleep};

/// One registered `Sleep`, armed at the deadline given last.
pub struct LoopTimer {
    sleep: Pin<Box<Sleep>>,
    /// Whether `sleep` is waiting for a deadline the loop still wants.
    armed: bool,
}

impl LoopTimer {
    pub fn new() -> Self {
        LoopTimer {
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            armed: false,
        }
    }

    /// Arms the timer at `at`, or disarms it (`None`: no deadline).
    pub fn set(&mut self, at: Option<Instant>) {
        match at {
            Some(at) => {
                if !self.armed || self.sleep.deadline() != at {
                    self.sleep.as_mut().reset(at);
                }
                self.armed = true;
            }
            None => self.armed = false,
        }
    }

    /// Completes at the armed deadline, and never while disarmed. Safe to
    /// drop unfinished (in a `select!`): the timer stays armed.
    pub async fn fired(&mut self) {
        if !self.armed {
            return std::future::pending().await;
        }
        self.sleep.as_mut().await;
        self.armed = false;
    }
}

impl Default for LoopTimer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fires_at_the_deadline_given_last_and_not_again_until_rearmed() {
        let start = Instant::now();
        let mut timer = LoopTimer::new();
        timer.set(Some(start + Duration::from_millis(50)));
        timer.set(Some(start + Duration::from_millis(20)));
        timer.fired().await;
        assert_eq!(Instant::now(), start + Duration::from_millis(20));
        // Fired: not armed again by itself.
        let again = tokio::time::timeout(Duration::from_secs(1), timer.fired()).await;
        assert!(again.is_err(), "a fired timer waits to be set again");
        // The same deadline after it fired arms it again (it is due).
        timer.set(Some(start + Duration::from_millis(20)));
        timer.fired().await;
        timer.set(Some(Instant::now() + Duration::from_millis(30)));
        timer.fired().await;
        assert_eq!(
            Instant::now(),
            start + Duration::from_millis(20) + Duration::from_secs(1) + Duration::from_millis(30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_disarmed_timer_never_fires_and_a_dropped_wait_keeps_it_armed() {
        let start = Instant::now();
        let mut timer = LoopTimer::new();
        timer.set(Some(start + Duration::from_millis(10)));
        timer.set(None);
        let waited = tokio::time::timeout(Duration::from_secs(1), timer.fired()).await;
        assert!(waited.is_err(), "disarmed");
        timer.set(Some(Instant::now() + Duration::from_millis(100)));
        // A wait cut short (another branch of a select won) …
        let cut = tokio::time::timeout(Duration::from_millis(10), timer.fired()).await;
        assert!(cut.is_err());
        // … leaves the deadline in place.
        timer.fired().await;
        assert_eq!(
            Instant::now(),
            start + Duration::from_secs(1) + Duration::from_millis(100)
        );
    }
}
