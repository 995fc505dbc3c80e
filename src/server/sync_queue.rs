//! One client's write queue: the entities waiting to be written, in the
//! order their changes came, each with what is pending for it when that
//! fits in a few bytes (value changes of one component's first 32 slots,
//! the commonest change of all: an entity moved).
//!
//! An item says whether the write needs anything more of the entity's
//! [`Entry`] in the sync state (`plain`): a moving entity the client knows
//! is written straight from the queue, with no second look-up of the
//! entry (at 10 000 moving entities that look-up, a cache miss per entity
//! and client, was a tenth of the node's time). The entry says where its
//! item is; an item taken, or of an earlier round of the queue (the queue
//! starts again from empty once taken whole), is not its any more, so
//! taking an item needs no write to the entry either.

use super::sync_state::{Entry, Presence, NO_BODY};
use crate::tundra::EntityId;

/// An entry that is not queued.
pub(super) const NOT_QUEUED: u32 = u32::MAX;

/// An entity waiting to be written.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queued {
    pub id: EntityId,
    /// Changed value slots 0-31 of `component`.
    pub dirty: u32,
    /// The component whose slots `dirty` names (meaningless when empty).
    pub component: u16,
    /// The entry is known to the client, its detail is all in this item,
    /// and its body baseline is at `body`: the write needs nothing else.
    pub plain: bool,
    /// The entry went away after it was queued: skipped.
    gone: bool,
    pub body: u32,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct SyncQueue {
    items: Vec<Queued>,
    /// Items before this one were taken.
    head: usize,
}

impl SyncQueue {
    /// Entities waiting (an entity that went away while queued counts
    /// until its item is reached).
    pub(super) fn len(&self) -> usize {
        self.items.len() - self.head
    }

    /// Where `entry`'s item is, if it is queued.
    fn position(&self, id: EntityId, entry: &Entry) -> Option<usize> {
        let at = entry.queued_at as usize;
        let queued = at >= self.head
            && self
                .items
                .get(at)
                .is_some_and(|item| item.id == id && !item.gone);
        queued.then_some(at)
    }

    /// `entry`'s item, if it is queued.
    #[cfg(test)]
    pub(super) fn get(&self, id: EntityId, entry: &Entry) -> Option<&Queued> {
        self.items.get(self.position(id, entry)?)
    }

    /// `entry`'s item, queued at the back first if it is not queued, and
    /// brought up to date with the entry.
    pub(super) fn push(&mut self, id: EntityId, entry: &mut Entry) -> &mut Queued {
        let at = match self.position(id, entry) {
            Some(at) => at,
            None => {
                entry.queued_at = u32::try_from(self.items.len()).unwrap_or(NOT_QUEUED);
                self.items.push(Queued {
                    id,
                    dirty: 0,
                    component: 0,
                    plain: false,
                    gone: false,
                    body: NO_BODY,
                });
                self.items.len() - 1
            }
        };
        let item = &mut self.items[at];
        item.plain = entry.presence == Presence::Known && !entry.spilled;
        item.body = entry.body;
        item
    }

    /// Brings `entry`'s item up to date with it, if it is queued (its
    /// presence or where its detail is changed).
    pub(super) fn refresh(&mut self, id: EntityId, entry: &mut Entry) {
        if self.position(id, entry).is_some() {
            self.push(id, entry);
        }
    }

    /// Clears what `entry`'s item holds, if it is queued, and returns it
    /// (dirty slots, component).
    pub(super) fn take_packed(&mut self, id: EntityId, entry: &Entry) -> (u32, u16) {
        match self.position(id, entry) {
            Some(at) => {
                let item = &mut self.items[at];
                let packed = (item.dirty, item.component);
                item.dirty = 0;
                packed
            }
            None => (0, 0),
        }
    }

    /// `entry` is about to be forgotten: its item, if queued, is skipped.
    pub(super) fn forget(&mut self, id: EntityId, entry: &Entry) {
        if let Some(at) = self.position(id, entry) {
            self.items[at].gone = true;
        }
    }

    /// Takes the next item; once all are taken the queue starts again
    /// from empty.
    pub(super) fn pop(&mut self) -> Option<Queued> {
        while let Some(item) = self.items.get(self.head).copied() {
            self.head += 1;
            if !item.gone {
                return Some(item);
            }
        }
        self.items.clear();
        self.head = 0;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry::new(Presence::Known)
    }

    #[test]
    fn an_item_taken_or_of_an_earlier_round_is_not_the_entrys() {
        let mut queue = SyncQueue::default();
        let (a, b) = (EntityId(1), EntityId(2));
        let (mut entry_a, mut entry_b) = (entry(), entry());
        queue.push(a, &mut entry_a).dirty = 1;
        queue.push(b, &mut entry_b).dirty = 2;
        // Pushing again finds the same item.
        assert_eq!(queue.push(a, &mut entry_a).dirty, 1);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop().map(|item| item.id), Some(a));
        assert!(queue.get(a, &entry_a).is_none());
        assert!(queue.get(b, &entry_b).is_some());
        assert_eq!(queue.pop().map(|item| (item.id, item.dirty)), Some((b, 2)));
        assert!(queue.pop().is_none());
        // A new round: b is queued first, at the place a had.
        queue.push(b, &mut entry_b);
        assert!(queue.get(a, &entry_a).is_none());
        assert_eq!(queue.get(b, &entry_b).map(|item| item.dirty), Some(0));
    }

    #[test]
    fn a_forgotten_entry_is_skipped_and_an_item_follows_its_entry() {
        let mut queue = SyncQueue::default();
        let (a, b) = (EntityId(1), EntityId(2));
        let (mut entry_a, mut entry_b) = (entry(), entry());
        assert!(queue.push(a, &mut entry_a).plain);
        queue.push(b, &mut entry_b);
        entry_b.spilled = true;
        queue.refresh(b, &mut entry_b);
        queue.forget(a, &entry_a);
        let next = queue.pop().expect("b");
        assert_eq!(next.id, b);
        assert!(!next.plain);
        assert!(queue.pop().is_none());
        assert_eq!(queue.len(), 0);
    }
}
