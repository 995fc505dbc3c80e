//! The bridge's timers (docs/upstream.md §3 and §4): the end of the
//! initial scene, the login timeout, the grace period of an unreachable
//! world server, and held removals (see [`super::hold`]).
//!
//! Pure: the caller passes `now`; a timed-out login becomes a
//! [`LinkCommand::Close`] for the connection driver.

use tracing::{info, warn};

use super::bridge::{Bridge, LinkCommand, LinkState};
use crate::clock::Time;
use crate::scene::Scene;

impl Bridge {
    /// When [`Bridge::handle_timeout`] wants to run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        let link = match self.state {
            LinkState::Syncing { until, .. } => Some(until),
            LinkState::Down { since: Some(since) } => Some(since + self.settings.grace),
            LinkState::LoggingIn { until, down_since } => {
                Some(down_since.map_or(until, |s| until.min(s + self.settings.grace)))
            }
            _ => None,
        };
        let forwarded = self.forwarding.first().map(|(until, _)| *until);
        [link, self.poll_hold_timeout(), forwarded]
            .into_iter()
            .flatten()
            .min()
    }

    /// Timers: the end of the initial scene, the end of the grace period.
    pub fn handle_timeout(&mut self, now: Time, scene: &mut Scene) {
        self.last_now = now;
        self.handle_hold_timeout(now);
        // Forwarded world edits the authority did not take in time: the
        // entity is brought up to date (its value goes back to the world).
        while let Some((until, entity)) = self.forwarding.first().copied() {
            if until > now {
                break;
            }
            self.forwarding.pop_first();
            self.dirty.insert(entity);
        }
        match self.state {
            LinkState::Syncing { session, until } if now >= until => {
                self.reconcile(scene);
                self.state = LinkState::Ready { session };
                info!(
                    mirrored = self.ids.mirrored_count(),
                    exported = self.ids.exported_count(),
                    "world server scene reconciled"
                );
                self.forget_confirmed_removals();
                self.flush(scene);
            }
            LinkState::Down { since: Some(since) } if now - since >= self.settings.grace => {
                info!("world server unreachable past the grace period: its entities leave");
                self.drop_mirrored(scene);
                self.state = LinkState::Down { since: None };
            }
            LinkState::LoggingIn { until, down_since } => {
                if down_since.is_some_and(|s| now - s >= self.settings.grace) {
                    info!("world server unreachable past the grace period: its entities leave");
                    self.drop_mirrored(scene);
                    self.state = LinkState::LoggingIn {
                        until,
                        down_since: None,
                    };
                }
                if now >= until {
                    let timeout_ms = self.settings.login_timeout.as_millis() as u64;
                    warn!(
                        timeout_ms,
                        "the world server accepted the connection but sent no LoginReply within upstream.login_timeout_ms; closing it to redial"
                    );
                    self.commands.push_back(LinkCommand::Close(format!(
                        "no LoginReply within {timeout_ms} ms (upstream.login_timeout_ms)"
                    )));
                    self.transmits.clear();
                    let down_since = match self.state {
                        LinkState::LoggingIn { down_since, .. } => down_since,
                        _ => None,
                    };
                    self.state = LinkState::Down { since: down_since };
                }
            }
            _ => {}
        }
        if self.ready() {
            self.flush(scene);
            self.finish_adoptions(scene);
        }
    }
}
