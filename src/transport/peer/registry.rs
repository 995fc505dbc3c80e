//! The node's table of committed peer connections, one per peer, kept
//! consistent with `peering::arbiter` (docs/peer-link.md section 6.3).
//!
//! Owns only the table and its change notifications; the connection tasks
//! act on what it tells them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{watch, Notify};

use super::link::LinkId;
use crate::peering::arbiter::{arbitrate, LinkFacts, Verdict};
use crate::peering::peer_file::PeerName;

#[derive(Debug)]
struct Entry {
    link: LinkId,
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

    /// Commits `link` for `peer` if arbitration lets it survive; the
    /// connection it replaces (if any) is told to end. On refusal returns
    /// the surviving link.
    pub(super) fn commit(
        &self,
        peer: &PeerName,
        link: LinkId,
        facts: LinkFacts,
        supersede: Arc<Notify>,
    ) -> Result<Option<LinkId>, LinkId> {
        let mut entries = self.lock();
        let replaced = match entries.get(peer) {
            None => None,
            Some(existing) => match arbitrate(&existing.facts, &facts) {
                Verdict::KeepExisting => return Err(existing.link),
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
    use crate::peering::hello::NodeId;

    const LOW: NodeId = NodeId(uuid::Uuid::from_u128(1));
    const HIGH: NodeId = NodeId(uuid::Uuid::from_u128(2));

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
            registry.commit(&peer, LinkId(1), facts(HIGH), first.clone()),
            Ok(None)
        );
        assert!(registry.is_linked(&peer));
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();

        // The connection dialled by the smaller UUID wins; the first is told.
        let second = Arc::new(Notify::new());
        assert_eq!(
            registry.commit(&peer, LinkId(2), facts(LOW), second.clone()),
            Ok(Some(LinkId(1)))
        );
        first.notified().await;
        // A later one from the larger UUID loses against it.
        assert_eq!(
            registry.commit(&peer, LinkId(3), facts(HIGH), Arc::new(Notify::new())),
            Err(LinkId(2))
        );
        // Releasing a loser changes nothing; releasing the survivor frees the peer.
        registry.release(&peer, LinkId(1));
        assert!(registry.is_linked(&peer));
        registry.release(&peer, LinkId(2));
        assert!(!registry.is_linked(&peer));
    }
}
