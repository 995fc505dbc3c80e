//! The node's table of committed peer connections, one per peer, kept
//! consistent with `peering::arbiter` (docs/peer-link.md §6.3).
//!
//! Owns only the table and its change notifications; the connection tasks
//! act on what it tells them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{watch, Notify};

use super::link::LinkId;
use crate::peering::arbiter::{arbitrate, LinkFacts, Verdict};
use crate::peering::hello::NodeId;
use crate::peering::peer_file::PeerName;

/// Why a connection may not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CommitRefused {
    /// Arbitration keeps this other connection with the same peer.
    Duplicate(LinkId),
    /// Another peer (another certificate) is linked under the same node UUID.
    IdentityConflict(PeerName),
}

#[derive(Debug)]
struct Entry {
    link: LinkId,
    /// The node UUID the peer declared on this connection.
    node: NodeId,
    facts: LinkFacts,
    /// Wakes the connection task to end with `duplicate-link`.
    supersede: Arc<Notify>,
}

/// Committed connections by peer.
#[derive(Debug)]
pub(super) struct Registry {
    entries: Mutex<HashMap<PeerName, Entry>>,
    changed: watch::Sender<u64>,
}

impl Registry {
    pub(super) fn new() -> Registry {
        Registry {
            entries: Mutex::new(HashMap::new()),
            changed: watch::channel(0).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PeerName, Entry>> {
        // A panic while holding this lock would be a bug in this file; the
        // table stays usable either way, so take it back from a poisoned lock.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Commits `link` for `peer` (declaring node UUID `node`) if no other
    /// peer is linked under that UUID and arbitration lets it survive; the
    /// connection it replaces (if any) is told to end.
    pub(super) fn commit(
        &self,
        peer: &PeerName,
        node: NodeId,
        link: LinkId,
        facts: LinkFacts,
        supersede: Arc<Notify>,
    ) -> Result<Option<LinkId>, CommitRefused> {
        let mut entries = self.lock();
        if let Some((other, _)) = entries
            .iter()
            .find(|(name, entry)| *name != peer && entry.node == node)
        {
            return Err(CommitRefused::IdentityConflict(other.clone()));
        }
        let replaced = match entries.get(peer) {
            None => None,
            Some(existing) => match arbitrate(&existing.facts, &facts) {
                Verdict::KeepExisting => return Err(CommitRefused::Duplicate(existing.link)),
                Verdict::ReplaceExisting => {
                    existing.supersede.notify_one();
                    Some(existing.link)
                }
            },
        };
        entries.insert(
            peer.clone(),
            Entry {
                link,
                node,
                facts,
                supersede,
            },
        );
        drop(entries);
        self.changed.send_modify(|generation| *generation += 1);
        Ok(replaced)
    }

    /// Removes `link` if it is still the committed one for `peer`.
    pub(super) fn release(&self, peer: &PeerName, link: LinkId) {
        let mut entries = self.lock();
        if entries.get(peer).is_some_and(|entry| entry.link == link) {
            entries.remove(peer);
            drop(entries);
            self.changed.send_modify(|generation| *generation += 1);
        }
    }

    /// Whether some connection with `peer` is committed.
    pub(super) fn is_linked(&self, peer: &PeerName) -> bool {
        self.lock().contains_key(peer)
    }

    /// Notifies on every commit and release.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOW: NodeId = NodeId(uuid::Uuid::from_u128(1));
    const HIGH: NodeId = NodeId(uuid::Uuid::from_u128(2));
    /// The node UUID the peer declares.
    const PEER: NodeId = NodeId(uuid::Uuid::from_u128(0xbe7a));

    fn facts(dialer: NodeId) -> LinkFacts {
        LinkFacts {
            dialer,
            peer_incarnation: 7,
        }
    }

    #[tokio::test]
    async fn the_preferred_connection_replaces_and_the_other_is_refused() {
        let registry = Registry::new();
        let peer = PeerName::new("beta").unwrap();
        let mut changes = registry.subscribe();
        let first = Arc::new(Notify::new());
        assert_eq!(
            registry.commit(&peer, PEER, LinkId(1), facts(HIGH), first.clone()),
            Ok(None)
        );
        assert!(registry.is_linked(&peer));
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();

        // The connection dialled by the smaller UUID wins; the first is told.
        let second = Arc::new(Notify::new());
        assert_eq!(
            registry.commit(&peer, PEER, LinkId(2), facts(LOW), second.clone()),
            Ok(Some(LinkId(1)))
        );
        first.notified().await;
        // A later one from the larger UUID loses against it.
        assert_eq!(
            registry.commit(&peer, PEER, LinkId(3), facts(HIGH), Arc::new(Notify::new())),
            Err(CommitRefused::Duplicate(LinkId(2)))
        );
        // Releasing a loser changes nothing; releasing the survivor frees the peer.
        registry.release(&peer, LinkId(1));
        assert!(registry.is_linked(&peer));
        registry.release(&peer, LinkId(2));
        assert!(!registry.is_linked(&peer));
    }

    #[test]
    fn a_second_peer_declaring_a_linked_peers_uuid_is_refused() {
        let registry = Registry::new();
        let beta = PeerName::new("beta").unwrap();
        let impostor = PeerName::new("beta-copy").unwrap();
        let notify = || Arc::new(Notify::new());
        assert_eq!(
            registry.commit(&beta, PEER, LinkId(1), facts(HIGH), notify()),
            Ok(None)
        );
        assert_eq!(
            registry.commit(&impostor, PEER, LinkId(2), facts(HIGH), notify()),
            Err(CommitRefused::IdentityConflict(beta.clone()))
        );
        assert!(!registry.is_linked(&impostor));
        // Once beta's link is gone the UUID is free again.
        registry.release(&beta, LinkId(1));
        assert_eq!(
            registry.commit(&impostor, PEER, LinkId(3), facts(HIGH), notify()),
            Ok(None)
        );
    }
}
