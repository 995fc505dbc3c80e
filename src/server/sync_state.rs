//! Per-client sync state: what one client has been told, and what it still
//! needs (docs/tundra-wire.md §7.5).
//!
//! The state is fed the scene's journal and remembers only *that* something is
//! dirty, never the values: the tick writer reads current values from the
//! scene. So a client that reads slowly gets coalesced latest state, and the
//! memory this takes is bounded by the scene's size, not by traffic.

use foldhash::HashMap;
use slab::Slab;
use smallvec::SmallVec;

use super::sync_queue::{SyncQueue, NOT_QUEUED};
use crate::scene::entity_hash::EntityMap;
use crate::scene::{ChangeKind, ChangeSource, ClientId};
use crate::tundra::rigid_body_sender::BodyState;
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

/// What is pending for one entity, as the writer takes it
/// ([`SyncState::pop_dirty`]).
#[derive(Debug, Clone)]
pub struct EntitySync {
    pub presence: Presence,
    pub temporary_dirty: bool,
    pub parent_dirty: bool,
    pub components: ComponentSyncs,
}

impl EntitySync {
    fn new(presence: Presence) -> Self {
        EntitySync {
            presence,
            temporary_dirty: false,
            parent_dirty: false,
            components: ComponentSyncs::default(),
        }
    }

    /// Whether nothing is left to send of a known entity.
    pub fn is_settled(&self) -> bool {
        self.presence == Presence::Known
            && !self.temporary_dirty
            && !self.parent_dirty
            && self.components.iter().all(|(_, sync)| {
                sync.presence == Presence::Known && !sync.has_dirty() && sync.only_values()
            })
    }

    /// Whether this detail fits a queue item (`sync_queue.rs`) with
    /// nothing spilled: value changes of one component's first 32 slots.
    fn compact(&self) -> Option<(u16, u32)> {
        if self.temporary_dirty || self.parent_dirty {
            return None;
        }
        match self.components.0.as_slice() {
            [] => Some((0, 0)),
            [(id, sync)] if sync.presence == Presence::Known && sync.more.is_none() => Some((
                u16::try_from(id.0).ok()?,
                u32::try_from(sync.dirty_low).ok()?,
            )),
            _ => None,
        }
    }
}

/// One tracked entity of one client, kept to 12 bytes: every client holds
/// one per replicated entity, and each move of an entity looks it up once
/// per client, when the change is applied, so at 10 000 moving entities
/// the node's time went to fetching these records (at 57 bytes a slot,
/// five clients' tables were 4.7 MB, past the core's cache; at 16 they are
/// about 1.3 MB). What is pending for a queued entity is in its queue item
/// (`sync_queue.rs`), so a moving entity is written without a second
/// look-up; detail an item cannot hold moves to [`SyncState::spilled`]. A
/// RigidBodyUpdate client's baseline of the body is found from here too.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    /// Where the entity's item is in the queue, when it is queued.
    pub queued_at: u32,
    /// Where the client's body baseline is in [`SyncState::bodies`], or
    /// [`NO_BODY`].
    pub body: u32,
    pub presence: Presence,
    /// The pending detail is in [`SyncState::spilled`], not in the item.
    pub spilled: bool,
}

/// An entry without a body baseline.
pub(super) const NO_BODY: u32 = u32::MAX;

impl Entry {
    pub(super) fn new(presence: Presence) -> Self {
        Entry {
            queued_at: NOT_QUEUED,
            body: NO_BODY,
            presence,
            spilled: false,
        }
    }
}

/// A tracked entity's body baseline in its client's [`SyncState`], as
/// [`SyncState::pop_dirty`] hands it out for the write at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodySlot(u32);

/// What [`SyncState::pop_dirty`] takes: an entity to write, its pending
/// detail, and (when asked for) where the client's baseline of its body is.
#[derive(Debug)]
pub struct Dirty {
    pub id: EntityId,
    pub pending: EntitySync,
    /// `None` for a removal, or when bodies were not asked for.
    pub body: Option<BodySlot>,
}

/// One client's view of the scene.
#[derive(Debug, Default)]
pub struct SyncState {
    entities: EntityMap<Entry>,
    /// Pending detail that a queue item cannot hold (created or removed
    /// components and attributes, several components, high slots, the
    /// temporary flag or the parent): rare, and only for known entities.
    spilled: HashMap<EntityId, EntitySync>,
    queue: SyncQueue,
    /// What a RigidBodyUpdate client was last sent of each body
    /// (docs/tundra-wire.md §6.1), at the entries' `body` slots.
    bodies: Slab<BodyState>,
}

/// The pending detail of a packed item (dirty value slots of one
/// component), for an entity of `presence`.
fn packed_detail(presence: Presence, dirty: u32, component: u16) -> EntitySync {
    let mut detail = EntitySync::new(presence);
    if dirty != 0 {
        let mut sync = ComponentSync::new(Presence::Known);
        sync.dirty_low = u64::from(dirty);
        let component = ComponentId(u32::from(component));
        detail.components.0.push((component, sync));
    }
    detail
}

impl SyncState {
    /// A state for a client that has nothing yet; `initial` are the replicated
    /// entities it must be sent, in the order to send them.
    pub fn new(initial: impl IntoIterator<Item = EntityId>) -> SyncState {
        let mut state = SyncState::default();
        for id in initial {
            let entry = state
                .entities
                .entry(id)
                .or_insert(Entry::new(Presence::New));
            state.queue.push(id, entry);
        }
        state
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

    /// Forgets an entry's pending detail: the whole entity (or its
    /// removal) goes.
    fn reset_detail(
        queue: &mut SyncQueue,
        spilled: &mut HashMap<EntityId, EntitySync>,
        id: EntityId,
        entry: &mut Entry,
    ) {
        queue.take_packed(id, entry);
        if entry.spilled {
            entry.spilled = false;
            spilled.remove(&id);
        }
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
                let entry = match self.entities.get_mut(&id) {
                    Some(entry) => {
                        entry.presence = match (entry.presence, own) {
                            (_, true) => Presence::Known,
                            (Presence::Removed, false) => Presence::Replaced,
                            (_, false) => Presence::New,
                        };
                        Self::reset_detail(&mut self.queue, &mut self.spilled, id, entry);
                        entry
                    }
                    None => {
                        let presence = if own { Presence::Known } else { Presence::New };
                        self.entities.entry(id).or_insert(Entry::new(presence))
                    }
                };
                if own {
                    self.queue.refresh(id, entry);
                } else {
                    self.queue.push(id, entry);
                }
            }
            ChangeKind::EntityRemoved(_) => {
                let Some(entry) = self.entities.get_mut(&id) else {
                    return;
                };
                Self::reset_detail(&mut self.queue, &mut self.spilled, id, entry);
                if own || entry.presence == Presence::New {
                    // Never sent, or the client removed it itself.
                    Self::release_body(&mut self.bodies, entry);
                    self.queue.forget(id, entry);
                    self.entities.remove(&id);
                    return;
                }
                entry.presence = Presence::Removed;
                self.queue.push(id, entry);
            }
            _ => {
                if own {
                    return;
                }
                let Some(entry) = self.entities.get_mut(&id) else {
                    return;
                };
                if entry.presence != Presence::Known {
                    // New or replaced: the whole entity goes out anyway;
                    // removed: nothing more to say.
                    return;
                }
                // A moving entity: one value slot of the component whose
                // values changed last, held in its queue item.
                if let ChangeKind::AttributeChanged(_, component, index) = kind {
                    let packed = u16::try_from(component.0)
                        .ok()
                        .filter(|_| !entry.spilled && index < 32);
                    if let Some(component) = packed {
                        let item = self.queue.push(id, entry);
                        if item.dirty == 0 || item.component == component {
                            item.component = component;
                            item.dirty |= 1 << index;
                            return;
                        }
                    }
                }
                if !entry.spilled {
                    let (dirty, component) = self.queue.take_packed(id, entry);
                    entry.spilled = true;
                    self.queue.refresh(id, entry);
                    self.spilled
                        .insert(id, packed_detail(Presence::Known, dirty, component));
                }
                let detail = self
                    .spilled
                    .entry(id)
                    .or_insert_with(|| EntitySync::new(Presence::Known));
                if Self::apply_detail(detail, kind) {
                    self.queue.push(id, entry);
                }
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
    /// with its pending detail, and counts it as delivered: the client
    /// knows it from now on, or forgets a removed one. With `bodies`, a
    /// kept entity comes with its body baseline ([`SyncState::body_mut`]),
    /// all zero if it never had one. A kept entity the caller does not
    /// write goes back with [`SyncState::defer`].
    pub fn pop_dirty(&mut self, bodies: bool) -> Option<Dirty> {
        loop {
            let item = self.queue.pop()?;
            let id = item.id;
            if item.plain && (!bodies || item.body != NO_BODY) {
                // A moving entity the client knows: all it needs is here.
                return Some(Dirty {
                    id,
                    pending: packed_detail(Presence::Known, item.dirty, item.component),
                    body: bodies.then_some(BodySlot(item.body)),
                });
            }
            let Some(entry) = self.entities.get_mut(&id) else {
                continue;
            };
            let mut pending = match entry.spilled {
                true => {
                    entry.spilled = false;
                    self.spilled
                        .remove(&id)
                        .unwrap_or_else(|| EntitySync::new(entry.presence))
                }
                false => packed_detail(entry.presence, item.dirty, item.component),
            };
            pending.presence = entry.presence;
            let mut body = None;
            if entry.presence == Presence::Removed {
                Self::release_body(&mut self.bodies, entry);
                self.entities.remove(&id);
            } else {
                entry.presence = Presence::Known;
                if bodies {
                    body = Some(Self::body_of(&mut self.bodies, entry));
                }
            }
            return Some(Dirty { id, pending, body });
        }
    }

    /// The client's baseline of a body, at a slot [`SyncState::pop_dirty`]
    /// gave in this write.
    pub fn body_mut(&mut self, slot: BodySlot) -> Option<&mut BodyState> {
        self.bodies.get_mut(slot.0 as usize)
    }

    /// The entry's body slot, made (all zero: an entity the client created
    /// itself has no baseline yet, so its first record is complete) if
    /// it has none.
    fn body_of(bodies: &mut Slab<BodyState>, entry: &mut Entry) -> BodySlot {
        if entry.body == NO_BODY {
            let slot = bodies.insert(BodyState::default());
            match u32::try_from(slot) {
                Ok(slot) => entry.body = slot,
                Err(_) => {
                    bodies.remove(slot);
                }
            }
        }
        BodySlot(entry.body)
    }

    /// Frees the body slot of an entry about to be forgotten.
    fn release_body(bodies: &mut Slab<BodyState>, entry: &mut Entry) {
        if entry.body != NO_BODY {
            bodies.try_remove(entry.body as usize);
            entry.body = NO_BODY;
        }
    }

    /// What is pending for one entity (a copy: the state holds it packed),
    /// for tests to read without taking it.
    #[cfg(test)]
    fn entity(&self, id: EntityId) -> Option<EntitySync> {
        let entry = self.entities.get(&id)?;
        if entry.spilled {
            let mut detail = self.spilled.get(&id)?.clone();
            detail.presence = entry.presence;
            return Some(detail);
        }
        let (dirty, component) = self
            .queue
            .get(id, entry)
            .map_or((0, 0), |item| (item.dirty, item.component));
        Some(packed_detail(entry.presence, dirty, component))
    }

    /// Keeps a popped entity, with `detail` (what [`SyncState::pop_dirty`]
    /// gave), for a later write; a removal, already forgotten, cannot be.
    pub fn defer(&mut self, id: EntityId, detail: EntitySync) {
        let Some(entry) = self.entities.get_mut(&id) else {
            return;
        };
        entry.presence = detail.presence;
        match detail.compact() {
            Some((component, dirty)) => {
                let item = self.queue.push(id, entry);
                item.component = component;
                item.dirty = dirty;
            }
            None => {
                entry.spilled = true;
                self.spilled.insert(id, detail);
                self.queue.push(id, entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(state: &SyncState, entity: EntityId, component: ComponentId) -> ComponentSync {
        let pending = state.entity(entity).expect("tracked");
        pending.components.get(&component).expect("pending").clone()
    }

    #[test]
    fn a_clients_entry_for_a_moving_entity_is_one_small_block() {
        // What every client holds per tracked entity (see `Entry`), and
        // what a write takes of one that changed.
        assert!(std::mem::size_of::<Entry>() <= 12);
        assert!(std::mem::size_of::<ComponentSync>() <= 24);
        assert!(std::mem::size_of::<EntitySync>() <= 48);
        let mut state = SyncState::new([]);
        let (me, other) = (ClientId(1), ChangeSource::Client(ClientId(2)));
        let (entity, component) = (EntityId(1), ComponentId(20));
        state.apply(me, other, ChangeKind::EntityCreated(entity));
        state.pop_dirty(false);
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
    fn an_entity_made_again_before_a_write_is_written_once_and_whole() {
        // Created, removed and created again by another client before this
        // client was written: one write, of the whole entity, also after
        // the write defers it (a stale place in the queue once gave it a
        // second, empty time).
        let mut state = SyncState::new([]);
        let (me, other) = (ClientId(1), ChangeSource::Client(ClientId(2)));
        let entity = EntityId(7);
        for kind in [
            ChangeKind::EntityCreated(entity),
            ChangeKind::EntityRemoved(entity),
            ChangeKind::EntityCreated(entity),
        ] {
            state.apply(me, other, kind);
        }
        let first = state.pop_dirty(true).expect("queued");
        assert_eq!((first.id, first.pending.presence), (entity, Presence::New));
        assert!(state.pop_dirty(true).is_none());
        state.defer(first.id, first.pending);
        let again = state.pop_dirty(true).expect("deferred");
        assert_eq!((again.id, again.pending.presence), (entity, Presence::New));
        assert!(again.body.is_some());
        assert!(state.pop_dirty(true).is_none());
    }

    #[test]
    fn a_moving_entity_keeps_its_body_baseline_until_it_is_removed() {
        let mut state = SyncState::new([EntityId(1), EntityId(2)]);
        let (me, other) = (ClientId(1), ChangeSource::Client(ClientId(2)));
        let mut slots = Vec::new();
        while let Some(dirty) = state.pop_dirty(true) {
            slots.push(dirty.body.expect("a kept entity has a baseline"));
        }
        let baseline = state.body_mut(slots[0]).expect("slot");
        baseline.transform.pos.x = 4.0;
        state.apply(
            me,
            other,
            ChangeKind::AttributeChanged(EntityId(1), ComponentId(20), 0),
        );
        let moved = state.pop_dirty(true).expect("moved");
        assert_eq!(moved.body, Some(slots[0]));
        assert_eq!(dirty_slots(&moved.pending), [(20, vec![0])]);
        assert_eq!(
            state.body_mut(slots[0]).map(|b| b.transform.pos.x),
            Some(4.0)
        );
        // Removed and written: its slot is reused, from nothing, by the
        // next entity that needs one.
        state.apply(me, other, ChangeKind::EntityRemoved(EntityId(1)));
        let removed = state.pop_dirty(true).expect("removal");
        assert_eq!(
            (removed.pending.presence, removed.body),
            (Presence::Removed, None)
        );
        state.apply(me, other, ChangeKind::EntityCreated(EntityId(3)));
        let created = state.pop_dirty(true).expect("created");
        assert_eq!(created.body, Some(slots[0]));
        assert_eq!(
            state.body_mut(slots[0]).map(|b| b.transform.pos.x),
            Some(0.0)
        );
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

    /// A client that knows `entity`, with nothing pending.
    fn knowing(entity: EntityId) -> SyncState {
        let mut state = SyncState::new([entity]);
        state.pop_dirty(false).expect("queued");
        state
    }

    fn changed(state: &mut SyncState, entity: EntityId, component: u32, index: u8) {
        let change = ChangeKind::AttributeChanged(entity, ComponentId(component), index);
        state.apply(ClientId(1), ChangeSource::Client(ClientId(2)), change);
    }

    fn dirty_slots(pending: &EntitySync) -> Vec<(u32, Vec<u8>)> {
        let components = pending.components.iter();
        components
            .map(|(id, sync)| (id.0, sync.dirty().iter().collect()))
            .collect()
    }

    #[test]
    fn detail_an_entry_cannot_hold_spills_and_is_written_whole() {
        let entity = EntityId(7);
        // Two components; a slot past 31; a component id past u16.
        let cases: [&[(u32, u8)]; 3] = [
            &[(3, 0), (4, 1), (3, 2)],
            &[(3, 0), (3, 40)],
            &[(70_000, 0)],
        ];
        for moves in cases {
            let mut state = knowing(entity);
            for &(component, index) in moves {
                changed(&mut state, entity, component, index);
            }
            assert_eq!(state.spilled.len(), 1, "{moves:?}");
            assert_eq!(state.pending(), 1, "queued once: {moves:?}");
            let Dirty { id, pending, .. } = state.pop_dirty(false).expect("queued");
            assert_eq!(id, entity);
            let mut expected: Vec<(u32, Vec<u8>)> = Vec::new();
            for &(component, index) in moves {
                match expected.iter_mut().find(|(c, _)| *c == component) {
                    Some((_, slots)) => slots.push(index),
                    None => expected.push((component, vec![index])),
                }
            }
            expected.sort();
            assert_eq!(dirty_slots(&pending), expected, "{moves:?}");
            assert!(state.spilled.is_empty() && state.pop_dirty(false).is_none());
            // The next move is held in the entry again.
            changed(&mut state, entity, 3, 0);
            assert!(state.spilled.is_empty());
            let Dirty { pending, .. } = state.pop_dirty(false).expect("queued");
            assert_eq!(dirty_slots(&pending), [(3, vec![0])]);
        }
    }

    #[test]
    fn a_deferred_entity_keeps_its_detail_packed_or_spilled() {
        let entity = EntityId(9);
        for spill in [false, true] {
            let mut state = knowing(entity);
            changed(&mut state, entity, 5, 0);
            changed(&mut state, entity, 5, 3);
            if spill {
                changed(&mut state, entity, 6, 1);
            }
            let Dirty { id, pending, .. } = state.pop_dirty(false).expect("queued");
            let before = dirty_slots(&pending);
            state.defer(id, pending);
            assert_eq!(state.spilled.len(), usize::from(spill));
            // A move while deferred joins the detail kept.
            changed(&mut state, entity, 5, 4);
            assert_eq!(state.pending(), 1);
            let Dirty { pending, .. } = state.pop_dirty(false).expect("queued again");
            let mut expected = before;
            expected[0].1.push(4);
            assert_eq!(dirty_slots(&pending), expected, "spilled: {spill}");
        }
    }

    #[test]
    fn removal_or_replacement_drops_spilled_detail() {
        let (me, other) = (ClientId(1), ChangeSource::Client(ClientId(2)));
        let entity = EntityId(11);
        let mut state = knowing(entity);
        changed(&mut state, entity, 5, 0);
        state.apply(
            me,
            other,
            ChangeKind::ComponentCreated(entity, ComponentId(6)),
        );
        assert_eq!(state.spilled.len(), 1);
        state.apply(me, other, ChangeKind::EntityRemoved(entity));
        assert!(state.spilled.is_empty());
        let Dirty { pending, .. } = state.pop_dirty(false).expect("removal queued");
        assert_eq!(pending.presence, Presence::Removed);
        assert!(pending.components.is_empty());
        assert_eq!(state.tracked(), 0);

        let mut state = knowing(entity);
        changed(&mut state, entity, 5, 40);
        state.apply(me, other, ChangeKind::EntityRemoved(entity));
        state.apply(me, other, ChangeKind::EntityCreated(entity));
        assert!(state.spilled.is_empty());
        let Dirty { pending, .. } = state.pop_dirty(false).expect("queued");
        assert_eq!(pending.presence, Presence::Replaced);
        assert!(pending.components.is_empty());
    }
}
