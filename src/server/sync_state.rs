//! Per-client sync state: what one client has been told, and what it still
//! needs (docs/tundra-wire.md §7.5).
//!
//! The state is fed the scene's journal and remembers only *that* something is
//! dirty, never the values: the tick writer reads current values from the
//! scene. So a client that reads slowly gets coalesced latest state, and the
//! memory this takes is bounded by the scene's size, not by traffic.

use foldhash::HashMap;
use smallvec::SmallVec;
use std::collections::VecDeque;

use crate::scene::{ChangeKind, ChangeSource, ClientId};
use crate::tundra::{ComponentId, EntityId};

/// A set of attribute slot indices (u8, so 256 slots).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotSet([u64; 4]);

impl SlotSet {
    pub fn insert(&mut self, index: u8) {
        self.0[usize::from(index >> 6)] |= 1 << (index & 63);
    }

    pub fn remove(&mut self, index: u8) {
        self.0[usize::from(index >> 6)] &= !(1 << (index & 63));
    }

    pub fn contains(&self, index: u8) -> bool {
        self.0[usize::from(index >> 6)] & (1 << (index & 63)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn clear(&mut self) {
        self.0 = [0; 4];
    }

    /// Indices in ascending order, visiting only the set bits: the tick
    /// walks three sets per component per client, and probing all 256
    /// indices of each was most of the cost of serving a moving entity.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(word, bits)| {
            let mut rest = *bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                // word < 4 and bit < 64, so the index is at most 255.
                Some((word * 64 + bit) as u8)
            })
        })
    }
}

/// What the client has of an entity or component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Not sent yet: the next tick sends it whole.
    New,
    /// The client has it; only changes are sent.
    Known,
    /// The client has it and must be told it is gone.
    Removed,
    /// The client has an old one under the same id: remove, then send whole.
    Replaced,
}

/// What is pending for one component of an entity the client has.
///
/// Kept small (24 bytes), as every client holds one per component changed
/// for every entity that moved since its last write: the dirty slots below
/// 64 (every attribute of a static Tundra component) inline, the rest, and
/// the attributes created or removed (dynamic components only), boxed.
/// Three 256-slot sets inline made a client's entry for a moving entity
/// two heap blocks and four cache lines, and the node's time at 10 000
/// moving entities went to fetching them.
#[derive(Debug, Clone)]
pub struct ComponentSync {
    pub presence: Presence,
    dirty_low: u64,
    more: Option<Box<MoreSlots>>,
}

/// The rarer part of a [`ComponentSync`].
#[derive(Debug, Clone, Default)]
struct MoreSlots {
    /// Dirty slots 64 and up (the first word stays unused).
    dirty_high: SlotSet,
    created: SlotSet,
    removed: SlotSet,
}

impl ComponentSync {
    fn new(presence: Presence) -> Self {
        ComponentSync {
            presence,
            dirty_low: 0,
            more: None,
        }
    }

    fn more(&mut self) -> &mut MoreSlots {
        self.more.get_or_insert_with(Box::default)
    }

    /// Slots whose values changed.
    pub fn dirty(&self) -> SlotSet {
        let mut set = self
            .more
            .as_ref()
            .map_or(SlotSet::default(), |m| m.dirty_high);
        set.0[0] = self.dirty_low;
        set
    }

    /// Slots created since the last write.
    pub fn created(&self) -> SlotSet {
        self.more.as_ref().map_or(SlotSet::default(), |m| m.created)
    }

    /// Slots removed since the last write.
    pub fn removed(&self) -> SlotSet {
        self.more.as_ref().map_or(SlotSet::default(), |m| m.removed)
    }

    /// Whether nothing but values changed (no slot created or removed).
    pub fn only_values(&self) -> bool {
        self.more
            .as_ref()
            .map_or(true, |m| m.created.is_empty() && m.removed.is_empty())
    }

    pub fn is_dirty(&self, index: u8) -> bool {
        if index < 64 {
            return self.dirty_low & (1 << index) != 0;
        }
        self.more
            .as_ref()
            .is_some_and(|m| m.dirty_high.contains(index))
    }

    pub fn has_dirty(&self) -> bool {
        self.dirty_low != 0 || self.more.as_ref().is_some_and(|m| !m.dirty_high.is_empty())
    }

    fn set_dirty(&mut self, index: u8) {
        if index < 64 {
            self.dirty_low |= 1 << index;
        } else {
            self.more().dirty_high.insert(index);
        }
    }

    /// Clears one dirty slot (it was sent some other way).
    pub fn clear_dirty(&mut self, index: u8) {
        if index < 64 {
            self.dirty_low &= !(1 << index);
        } else if let Some(more) = &mut self.more {
            more.dirty_high.remove(index);
        }
    }

    fn is_created(&self, index: u8) -> bool {
        self.more
            .as_ref()
            .is_some_and(|m| m.created.contains(index))
    }

    /// Forgets every slot (the whole component is sent, or removed).
    fn clear_slots(&mut self) {
        self.dirty_low = 0;
        self.more = None;
    }
}

/// Pending detail per component, in ascending component id (the order
/// Tundra sends them). A sorted list: an entity has a handful of components,
/// where a map allocated and freed a node for every entity on every change
/// and tick; the first is held in place (a moving entity changes one
/// component), so the commonest entry is one block, not two.
#[derive(Debug, Clone, Default)]
pub struct ComponentSyncs(SmallVec<[(ComponentId, ComponentSync); 1]>);

impl ComponentSyncs {
    fn position(&self, id: ComponentId) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(c, _)| *c)
    }

    pub fn get(&self, id: &ComponentId) -> Option<&ComponentSync> {
        self.position(*id).ok().map(|at| &self.0[at].1)
    }

    pub fn get_mut(&mut self, id: &ComponentId) -> Option<&mut ComponentSync> {
        self.position(*id).ok().map(|at| &mut self.0[at].1)
    }

    /// The detail of `id`, inserted with `presence` if absent.
    fn get_or_insert(&mut self, id: ComponentId, presence: Presence) -> &mut ComponentSync {
        // The commonest case: the first change to an entity since it was
        // last sent finds the list empty.
        if self.0.is_empty() {
            self.0.push((id, ComponentSync::new(presence)));
            let last = self.0.len() - 1;
            return &mut self.0[last].1;
        }
        let at = match self.position(id) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (id, ComponentSync::new(presence)));
                at
            }
        };
        &mut self.0[at].1
    }

    fn insert(&mut self, id: ComponentId, sync: ComponentSync) {
        match self.position(id) {
            Ok(at) => self.0[at].1 = sync,
            Err(at) => self.0.insert(at, (id, sync)),
        }
    }

    fn remove(&mut self, id: &ComponentId) {
        if let Ok(at) = self.position(*id) {
            self.0.remove(at);
        }
    }

    fn clear(&mut self) {
        self.0.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Components in ascending id.
    pub fn iter(&self) -> impl Iterator<Item = (&ComponentId, &ComponentSync)> {
        self.0.iter().map(|(id, sync)| (id, sync))
    }
}

impl<'a> IntoIterator for &'a ComponentSyncs {
    type Item = (&'a ComponentId, &'a ComponentSync);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (ComponentId, ComponentSync)>,
        fn(&'a (ComponentId, ComponentSync)) -> (&'a ComponentId, &'a ComponentSync),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(id, sync)| (id, sync))
    }
}

#[derive(Debug, Clone)]
pub struct EntitySync {
    pub presence: Presence,
    queued: bool,
    pub temporary_dirty: bool,
    pub parent_dirty: bool,
    pub components: ComponentSyncs,
}

impl EntitySync {
    fn new(presence: Presence) -> Self {
        EntitySync {
            presence,
            queued: false,
            temporary_dirty: false,
            parent_dirty: false,
            components: ComponentSyncs::default(),
        }
    }

    /// Marks everything pending as sent when the client keeps the entity;
    /// false for a removed one, whose state [`SyncState::sent`] drops.
    pub fn delivered(&mut self) -> bool {
        if self.presence == Presence::Removed {
            return false;
        }
        self.presence = Presence::Known;
        self.reset_detail();
        true
    }

    /// Forget per-component detail: the whole entity will be sent.
    fn reset_detail(&mut self) {
        self.temporary_dirty = false;
        self.parent_dirty = false;
        self.components.clear();
    }
}

/// One client's view of the scene.
#[derive(Debug, Default)]
pub struct SyncState {
    entities: HashMap<EntityId, EntitySync>,
    queue: VecDeque<EntityId>,
}

impl SyncState {
    /// A state for a client that has nothing yet; `initial` are the replicated
    /// entities it must be sent, in the order to send them.
    pub fn new(initial: impl IntoIterator<Item = EntityId>) -> SyncState {
        let mut state = SyncState::default();
        for id in initial {
            state.entities.insert(id, EntitySync::new(Presence::New));
            state.enqueue(id);
        }
        state
    }

    fn enqueue(&mut self, id: EntityId) {
        if let Some(entity) = self.entities.get_mut(&id) {
            Self::enqueue_entity(&mut self.queue, id, entity);
        }
    }

    /// Queues an entity already looked up (once per change, not twice).
    fn enqueue_entity(queue: &mut VecDeque<EntityId>, id: EntityId, entity: &mut EntitySync) {
        if !entity.queued {
            entity.queued = true;
            queue.push_back(id);
        }
    }

    /// Entities waiting to be sent.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Entities this state tracks (sent or about to be).
    pub fn tracked(&self) -> usize {
        self.entities.len()
    }

    /// Whether the client has been sent (or is about to be sent) `id`.
    pub fn knows(&self, id: EntityId) -> bool {
        self.entities
            .get(&id)
            .is_some_and(|e| e.presence != Presence::Removed)
    }

    /// Records one scene change. `me` is the client this state belongs to:
    /// its own changes are not echoed, only remembered as known.
    pub fn apply(&mut self, me: ClientId, source: ChangeSource, kind: ChangeKind) {
        let own = source == ChangeSource::Client(me);
        let id = kind.entity();
        // Local entities and components never leave the node.
        if id.is_local() || kind.component().is_some_and(|c| c.is_local()) {
            return;
        }
        match kind {
            ChangeKind::EntityCreated(_) => {
                match self.entities.get_mut(&id) {
                    Some(entity) if matches!(entity.presence, Presence::Removed) => {
                        entity.presence = if own {
                            Presence::Known
                        } else {
                            Presence::Replaced
                        };
                        entity.reset_detail();
                    }
                    Some(entity) => {
                        entity.presence = if own { Presence::Known } else { Presence::New };
                        entity.reset_detail();
                    }
                    None => {
                        let presence = if own { Presence::Known } else { Presence::New };
                        self.entities.insert(id, EntitySync::new(presence));
                    }
                }
                if !own {
                    self.enqueue(id);
                }
            }
            ChangeKind::EntityRemoved(_) => {
                let Some(entity) = self.entities.get_mut(&id) else {
                    return;
                };
                if own || entity.presence == Presence::New {
                    // Never sent, or the client removed it itself.
                    self.entities.remove(&id);
                    return;
                }
                entity.presence = Presence::Removed;
                entity.reset_detail();
                self.enqueue(id);
            }
            _ => {
                if own {
                    return;
                }
                let Some(entity) = self.entities.get_mut(&id) else {
                    return;
                };
                if entity.presence != Presence::Known {
                    // New or replaced: the whole entity goes out anyway;
                    // removed: nothing more to say.
                    return;
                }
                if !Self::apply_detail(entity, kind) {
                    return;
                }
                Self::enqueue_entity(&mut self.queue, id, entity);
            }
        }
    }

    /// Returns whether the entity now has something to send.
    fn apply_detail(entity: &mut EntitySync, kind: ChangeKind) -> bool {
        match kind {
            ChangeKind::TemporaryChanged(_) => entity.temporary_dirty = true,
            ChangeKind::ParentChanged(_) => entity.parent_dirty = true,
            ChangeKind::ComponentCreated(_, c) => {
                let component = entity.components.get_or_insert(c, Presence::New);
                component.presence = match component.presence {
                    Presence::Removed | Presence::Replaced => Presence::Replaced,
                    _ => Presence::New,
                };
                component.clear_slots();
            }
            ChangeKind::ComponentRemoved(_, c) => match entity.components.get_mut(&c) {
                Some(component) if component.presence == Presence::New => {
                    entity.components.remove(&c);
                    return false;
                }
                Some(component) => {
                    component.presence = Presence::Removed;
                    component.clear_slots();
                }
                None => {
                    entity
                        .components
                        .insert(c, ComponentSync::new(Presence::Removed));
                }
            },
            ChangeKind::AttributeCreated(_, c, i) => {
                let component = entity.components.get_or_insert(c, Presence::Known);
                if component.presence != Presence::Known {
                    return component.presence != Presence::Removed;
                }
                component.more().created.insert(i);
                component.clear_dirty(i);
            }
            ChangeKind::AttributeRemoved(_, c, i) => {
                let component = entity.components.get_or_insert(c, Presence::Known);
                if component.presence != Presence::Known {
                    return component.presence != Presence::Removed;
                }
                let never_sent = component.is_created(i) && !component.removed().contains(i);
                let more = component.more();
                if !never_sent {
                    more.removed.insert(i);
                }
                // Created and removed between two ticks: never sent.
                more.created.remove(i);
                component.clear_dirty(i);
            }
            ChangeKind::AttributeChanged(_, c, i) => {
                let component = entity.components.get_or_insert(c, Presence::Known);
                if component.presence != Presence::Known || component.is_created(i) {
                    // The full value goes out with the creation.
                    return component.presence != Presence::Removed;
                }
                component.set_dirty(i);
            }
            ChangeKind::EntityCreated(_) | ChangeKind::EntityRemoved(_) => {}
        }
        true
    }

    /// Takes the next dirty entity to send, in the order changes happened,
    /// with its pending detail, so the caller needs no further lookup to
    /// read it and mark it delivered (`EntitySync::delivered`); a removed
    /// entity's state is dropped with [`SyncState::sent`], and a deferred
    /// one goes back with [`SyncState::defer`].
    pub fn pop_dirty_mut(&mut self) -> Option<(EntityId, &mut EntitySync)> {
        // Skips ids whose state went away after they were queued; the
        // lookup is repeated for the one returned, as a borrow taken in the
        // loop could not be returned from it.
        let id = loop {
            let id = self.queue.pop_front()?;
            if self.entities.contains_key(&id) {
                break id;
            }
        };
        let entity = self.entities.get_mut(&id)?;
        entity.queued = false;
        Some((id, entity))
    }

    /// What is pending for one entity.
    pub fn entity(&self, id: EntityId) -> Option<&EntitySync> {
        self.entities.get(&id)
    }

    /// Pending detail of one entity, to consume part of it (the rigid body
    /// path takes the transform and velocity bits).
    pub fn entity_mut(&mut self, id: EntityId) -> Option<&mut EntitySync> {
        self.entities.get_mut(&id)
    }

    /// Marks `id` as delivered: everything pending for it was sent.
    pub fn sent(&mut self, id: EntityId) {
        let Some(entity) = self.entities.get_mut(&id) else {
            return;
        };
        if entity.presence == Presence::Removed {
            self.entities.remove(&id);
        } else {
            entity.presence = Presence::Known;
            entity.reset_detail();
        }
    }

    /// Keeps a popped entity, with all its detail, for a later tick.
    pub fn defer(&mut self, id: EntityId) {
        self.enqueue(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(state: &SyncState, entity: EntityId, component: ComponentId) -> &ComponentSync {
        let pending = state.entity(entity).expect("tracked");
        pending.components.get(&component).expect("pending")
    }

    #[test]
    fn a_clients_entry_for_a_moving_entity_is_one_small_block() {
        // What every client holds per entity that moved since its last
        // write (see `ComponentSync`): kept within a cache line.
        assert!(std::mem::size_of::<ComponentSync>() <= 24);
        assert!(std::mem::size_of::<EntitySync>() <= 48);
        let mut state = SyncState::new([]);
        let (me, other) = (ClientId(1), ChangeSource::Client(ClientId(2)));
        let (entity, component) = (EntityId(1), ComponentId(20));
        state.apply(me, other, ChangeKind::EntityCreated(entity));
        state.pop_dirty_mut();
        state.sent(entity);
        for index in [0, 63, 64, 200] {
            state.apply(
                me,
                other,
                ChangeKind::AttributeChanged(entity, component, index),
            );
        }
        let pending = detail(&state, entity, component);
        assert_eq!(pending.dirty().iter().collect::<Vec<_>>(), [0, 63, 64, 200]);
        assert!(pending.is_dirty(64) && !pending.is_dirty(1) && pending.only_values());
        state.apply(
            me,
            other,
            ChangeKind::AttributeRemoved(entity, component, 63),
        );
        state.apply(
            me,
            other,
            ChangeKind::AttributeCreated(entity, component, 100),
        );
        let pending = detail(&state, entity, component);
        assert_eq!(pending.dirty().iter().collect::<Vec<_>>(), [0, 64, 200]);
        assert_eq!(pending.removed().iter().collect::<Vec<_>>(), [63]);
        assert_eq!(pending.created().iter().collect::<Vec<_>>(), [100]);
        assert!(!pending.only_values());
    }

    #[test]
    fn slot_sets_iterate_their_members_in_order() {
        let mut set = SlotSet::default();
        for index in [255u8, 0, 64, 63, 7, 128, 200] {
            set.insert(index);
        }
        set.remove(7);
        let members: Vec<u8> = set.iter().collect();
        assert_eq!(members, [0, 63, 64, 128, 200, 255]);
        assert_eq!(set.len(), members.len());
        assert!(SlotSet::default().iter().next().is_none());
    }
}
