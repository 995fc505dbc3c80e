//! What the federation counts: refusals it handles by going on, so that
//! they are visible instead of discarded.

use tracing::debug;

use crate::less::session::CommandError;
use crate::logging::RemoteText;
use crate::scene::SceneError;

/// Counters of one node's federation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FederationStats {
    /// Hand-overs whose new authority's copy this node presented without
    /// components it lacked, once [`crate::federation::authority::handover_types::INCOMPLETE_COPY_WAIT`]
    /// had passed (docs/federation.md §7.3).
    pub incomplete_handovers: u64,
    /// Entities introduced on a link because their tree entered the
    /// link's interest (docs/federation.md §8).
    pub interest_entered: u64,
    /// Entities withdrawn from a link because their tree left its interest.
    pub interest_left: u64,
    /// Interest entries from peers refused (malformed, not from the peer,
    /// too many origins, or on a link without the feature).
    pub interest_refused: u64,
    /// Changes a peer's objects or requests asked of the scene that the
    /// scene refused (an attribute that does not fit, a component already
    /// gone): the scene is left as it was.
    pub scene_refusals: u64,
    /// Commands a session refused (it is closing, or the object is already
    /// withdrawn): nothing was sent.
    pub session_refusals: u64,
    /// Hand-overs of this node's entities, by new authority and reason
    /// (`handover.rs`).
    pub handed_over: std::collections::BTreeMap<(uuid::Uuid, &'static str), u64>,
    /// Entities this node took over, by previous authority and reason: the
    /// reason of this node's own request the grant answered, or `push`
    /// (`handover.rs`).
    pub taken_over: std::collections::BTreeMap<(uuid::Uuid, &'static str), u64>,
    /// Take-authority calls this node refused as the authority, by reason
    /// (`conflict`: another won the epoch; `policy`).
    pub handover_refusals: std::collections::BTreeMap<&'static str, u64>,
    /// This node's own take-authority requests refused, by status.
    pub requests_refused: std::collections::BTreeMap<i64, u64>,
    /// Edits refused while waiting for a new authority's copy (queue full).
    pub handover_refusals_edit: u64,
    /// Entity updates that carried an older epoch than the copy's.
    pub stale_epochs: u64,
    /// This node's own edits that came back as tweaks after a later edit of
    /// the same property took another route, and were dropped
    /// (`own_edits.rs`).
    pub superseded_edits: u64,
}

impl FederationStats {
    /// Counts and logs a refused scene change; the value of an accepted one.
    #[inline]
    pub(super) fn scene<T>(
        &mut self,
        result: Result<T, SceneError>,
        what: &'static str,
    ) -> Option<T> {
        result
            .map_err(|error| {
                self.scene_refusals += 1;
                debug!(reason = what, error = %RemoteText(&error), "scene refused a federation change");
            })
            .ok()
    }

    /// Counts and logs a refused session command.
    #[inline]
    pub(super) fn session<T>(
        &mut self,
        result: Result<T, CommandError>,
        what: &'static str,
    ) -> Option<T> {
        result
            .map_err(|error| {
                self.session_refusals += 1;
                debug!(reason = what, %error, "session refused a federation command");
            })
            .ok()
    }
}
