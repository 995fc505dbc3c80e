//! The configured peers as the operator sees them: which are linked and,
//! for each that is not, the last thing that went wrong with it (a dial
//! that failed, a refused handshake, a link that ended). `/readyz` names
//! them; `/status` and the `lessgate_peer_up` metric show all of them.
//!
//! Whether a peer is linked is read off the federation's links when a
//! snapshot is taken; this only remembers failures, which the links do not.

use std::collections::BTreeMap;

use serde::Serialize;

/// What went wrong with a peer most recently.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PeerFailure {
    /// What happened, as the log says it (escaped and cut by the driver).
    pub reason: String,
    /// When, in seconds since the node started.
    pub at_secs: f64,
}

/// One configured peer in a status snapshot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PeerState {
    /// The name of its peer file.
    pub name: String,
    /// Whether this node dials it (its peer file has a `control` address);
    /// otherwise only the peer can start the link.
    pub dialled: bool,
    /// Whether a link with it is up now.
    pub linked: bool,
    /// The last failure, while it stays relevant: kept after the link
    /// comes back, so a flapping peer shows why it went down.
    pub last_failure: Option<PeerFailure>,
}

/// The configured peers and their last failures.
#[derive(Debug, Clone, Default)]
pub struct PeerHealth {
    /// Name -> (dialled, last failure).
    peers: BTreeMap<String, (bool, Option<PeerFailure>)>,
}

/// Failure texts kept per peer: a peer's refusal reason is remote text.
const MAX_REASON_CHARS: usize = 256;

impl PeerHealth {
    /// The peers of the peer files: `(name, dialled)`.
    pub fn new<'a>(peers: impl IntoIterator<Item = (&'a str, bool)>) -> PeerHealth {
        PeerHealth {
            peers: peers
                .into_iter()
                .map(|(name, dialled)| (name.to_owned(), (dialled, None)))
                .collect(),
        }
    }

    /// The peer files changed (a reload): removed peers leave, new ones
    /// start without a failure, kept ones keep their last failure.
    pub fn reconfigure<'a>(&mut self, peers: impl IntoIterator<Item = (&'a str, bool)>) {
        let mut old = std::mem::take(&mut self.peers);
        self.peers = peers
            .into_iter()
            .map(|(name, dialled)| {
                let last = old.remove(name).and_then(|(_, last)| last);
                (name.to_owned(), (dialled, last))
            })
            .collect();
    }

    /// Remembers a failure with a configured peer; others are not tracked
    /// (an unknown node's refusals are counted and logged elsewhere).
    pub fn failed(&mut self, peer: &str, reason: &str, at_secs: f64) {
        if let Some((_, last)) = self.peers.get_mut(peer) {
            *last = Some(PeerFailure {
                reason: reason.chars().take(MAX_REASON_CHARS).collect(),
                at_secs,
            });
        }
    }

    /// Every configured peer, `linked` telling which have a link up.
    pub fn states(&self, linked: impl Fn(&str) -> bool) -> Vec<PeerState> {
        self.peers
            .iter()
            .map(|(name, (dialled, last_failure))| PeerState {
                name: name.clone(),
                dialled: *dialled,
                linked: linked(name),
                last_failure: last_failure.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_keeps_the_failures_of_kept_peers_only() {
        let mut health = PeerHealth::new([("beta", true), ("gamma", true)]);
        health.failed("beta", "no answer in time", 1.0);
        health.failed("gamma", "refused", 2.0);
        health.reconfigure([("beta", false), ("delta", true)]);
        let states = health.states(|_| false);
        let names: Vec<_> = states.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["beta", "delta"]);
        assert!(!states[0].dialled);
        assert_eq!(
            states[0].last_failure.as_ref().unwrap().reason,
            "no answer in time"
        );
        assert!(states[1].dialled && states[1].last_failure.is_none());
    }

    #[test]
    fn only_configured_peers_are_tracked_and_the_last_failure_wins() {
        let mut health = PeerHealth::new([("beta", true), ("gamma", false)]);
        health.failed("beta", "dial failed: no answer in time", 1.0);
        health.failed("beta", "tls handshake failed: bad certificate", 2.5);
        health.failed("mallory", "unknown certificate", 3.0);
        health.failed("gamma", &"x".repeat(1000), 4.0);
        let states = health.states(|name| name == "gamma");
        assert_eq!(states.len(), 2);
        assert_eq!(states[0].name, "beta");
        assert!(states[0].dialled && !states[0].linked);
        let beta = states[0].last_failure.as_ref().unwrap();
        assert_eq!(beta.reason, "tls handshake failed: bad certificate");
        assert_eq!(beta.at_secs, 2.5);
        assert!(!states[1].dialled && states[1].linked);
        let gamma = states[1].last_failure.as_ref().unwrap();
        assert_eq!(gamma.reason.chars().count(), MAX_REASON_CHARS);
    }
}
