//! Refused requests: counted, logged without letting a client amplify the
//! log (first of a kind in full, then a summary per interval, see
//! [`RefusalLog`]), and closing the client only when they come in bulk
//! (`limits.max_refused_requests_per_minute`, see [`RefusalWindow`]).
//!
//! [`RefusalLog`]: super::refusal_log::RefusalLog
//! [`RefusalWindow`]: super::refusal_window::RefusalWindow

use std::fmt::Display;

use tracing::warn;

use super::core::TundraServer;
use super::refusal_log::{Summary, Verdict, SUMMARY_INTERVAL};
use crate::clock::Time;
use crate::scene::ClientId;

impl TundraServer {
    /// A request of `kind` from `client` was refused (not applied), because
    /// of `reason`. Uses the time of the frame being handled.
    pub(super) fn refuse_request(
        &mut self,
        client: ClientId,
        kind: &'static str,
        reason: impl Display,
    ) {
        self.stats.refused_messages += 1;
        let now = self.now;
        let limit = self.config.limits.max_refused_requests_per_minute;
        let Some(state) = self.clients.get_mut(&client) else {
            return;
        };
        if state.refusal_log.note(kind, now) == Verdict::Log {
            warn!(%client, request = kind, reason = %crate::logging::RemoteText(&reason), "request refused (more of this kind are summarised every {} s)", SUMMARY_INTERVAL.as_secs());
        }
        if state.refusal_window.note(now, limit) && !state.is_refused() {
            self.refuse_client(
                client,
                format!(
                    "more than {limit} refused requests in a minute (limits.max_refused_requests_per_minute)"
                ),
            );
        }
    }

    /// Logs the refusal summaries due at `now`, for every client.
    pub(super) fn log_refusal_summaries(&mut self, now: Time) {
        let mut due = Vec::new();
        for client in self.clients.values_mut() {
            if client.refusal_log.is_empty() {
                continue;
            }
            client.refusal_log.poll_summaries(now, &mut due);
            log_summaries(client.id, &mut due);
        }
    }

    /// Logs what a leaving client's summaries still held.
    pub(super) fn log_last_refusal_summaries(&mut self, client: &mut super::Client) {
        let mut due = Vec::new();
        client.refusal_log.drain(&mut due);
        log_summaries(client.id, &mut due);
    }
}

fn log_summaries(client: ClientId, due: &mut Vec<Summary<&'static str>>) {
    for summary in due.drain(..) {
        warn!(%client, request = summary.kind, count = summary.count, "requests refused since the last line about them");
    }
}
