//! Id mapping between the world server's scene and the node's scene, both
//! directions, for the two kinds of entity the bridge handles:
//!
//! - *mirrored*: the world server's own entities, copied into the node's
//!   scene under node-allocated ids (their component ids are renumbered too);
//! - *exported*: entities of the federation that the bridge created in the
//!   world server through the client path (docs/tundra-wire.md §7.4): first under
//!   an unacked id `0x4000_0000 | n`, then under the id CreateEntityReply (117)
//!   gave.
//!
//! Pure bookkeeping: no scene access, no messages.

use std::collections::{BTreeMap, HashMap};

use super::forwarded::Forwarded;
use crate::federation::GlobalId;
use crate::scene::{Component, ComponentContent};
use crate::tundra::ids::FIRST_UNACKED_ID;
use crate::tundra::{AttributeValue, ComponentId, EntityId};

/// Highest unacked sequence number: unacked ids must stay below the local
/// range (docs/tundra-wire.md §7.3: `0x40000000 <= unacked < 0x80000000`).
const LAST_UNACKED_SERIAL: u32 = 0x3FFF_FFFF;

/// A world-server entity copied into the node's scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirrored {
    pub local: EntityId,
    /// World-server component id -> node component id.
    pub components: BTreeMap<ComponentId, ComponentId>,
    /// Seen in the current session (reconnect reconciliation).
    pub seen: bool,
}

impl Mirrored {
    /// A mirrored entity at node id `local`, with no components mapped yet.
    pub fn new(local: EntityId) -> Mirrored {
        Mirrored {
            local,
            components: BTreeMap::new(),
            seen: true,
        }
    }
}

/// What the world server holds of one component of an exported entity.
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowComponent {
    /// The component's id in the world server (unacked until 117/118).
    pub upstream: ComponentId,
    /// Slot values as last sent to (or received from) the world server.
    pub values: Vec<Option<AttributeValue>>,
    /// The whole attribute block of an opaque component (a type this node
    /// does not know): it can only be replaced whole.
    pub opaque: Option<Vec<u8>>,
    /// Type and instance name: how a component is recognised when its
    /// entity comes back under another node id (a replaced peer link).
    pub type_id: u32,
    pub name: String,
    /// World-server edits of its attributes sent to the entity's
    /// authority and not yet answered, by attribute index.
    pub forwarded: BTreeMap<u8, Forwarded>,
}

impl ShadowComponent {
    /// What the world server holds once `component` is created there as
    /// `upstream`.
    pub fn of(component: &Component, upstream: ComponentId) -> ShadowComponent {
        ShadowComponent {
            upstream,
            values: super::echo::shadow_of(component),
            opaque: match &component.content {
                ComponentContent::Opaque(bytes) => Some(bytes.clone()),
                ComponentContent::Known { .. } => None,
            },
            type_id: component.type_id,
            name: component.name.clone(),
            forwarded: BTreeMap::new(),
        }
    }
}

/// A federation entity created in the world server by the bridge.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The unacked id the CreateEntity carried, kept until the reply.
    pub unacked: EntityId,
    /// The world server's id, once acked.
    pub upstream: Option<EntityId>,
    /// Node component id -> what the world server has of it.
    pub components: BTreeMap<ComponentId, ShadowComponent>,
    /// Seen in the current session (reconnect reconciliation).
    pub seen: bool,
    /// The parent the world server has (its id; `EntityId(0)`: none).
    pub parent: EntityId,
    /// The entity's federation identity, to recognise it when a replaced
    /// peer link presents it again under a new node id.
    pub key: Option<GlobalId>,
}

/// Both directions of every mapping.
#[derive(Debug, Default)]
pub struct IdMap {
    mirrored: BTreeMap<EntityId, Mirrored>,
    local_to_upstream: HashMap<EntityId, EntityId>,
    exported: BTreeMap<EntityId, Exported>,
    upstream_to_exported: HashMap<EntityId, EntityId>,
    unacked_to_exported: HashMap<EntityId, EntityId>,
    next_unacked: u32,
}

/// What a world-server entity id means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamEntity {
    /// One of the world server's own entities, at this node id.
    Mirrored(EntityId),
    /// One the bridge created; this is the federation entity's node id.
    Exported(EntityId),
    Unknown,
}

impl IdMap {
    /// What the world server's `upstream` id names.
    pub fn resolve(&self, upstream: EntityId) -> UpstreamEntity {
        if let Some(m) = self.mirrored.get(&upstream) {
            return UpstreamEntity::Mirrored(m.local);
        }
        match self.upstream_to_exported.get(&upstream) {
            Some(local) => UpstreamEntity::Exported(*local),
            None => UpstreamEntity::Unknown,
        }
    }

    /// The world-server id of a node entity (mirrored or acked exported).
    pub fn upstream_of(&self, local: EntityId) -> Option<EntityId> {
        self.local_to_upstream
            .get(&local)
            .copied()
            .or_else(|| self.exported.get(&local).and_then(|e| e.upstream))
    }

    /// Whether a node entity is a copy of a world-server entity.
    pub fn is_mirrored(&self, local: EntityId) -> bool {
        self.local_to_upstream.contains_key(&local)
    }

    pub fn mirrored(&self, upstream: EntityId) -> Option<&Mirrored> {
        self.mirrored.get(&upstream)
    }

    pub fn mirrored_mut(&mut self, upstream: EntityId) -> Option<&mut Mirrored> {
        self.mirrored.get_mut(&upstream)
    }

    /// All mirrored entities by world-server id.
    pub fn mirrored_entries(&self) -> impl Iterator<Item = (&EntityId, &Mirrored)> {
        self.mirrored.iter()
    }

    pub fn mirrored_entries_mut(&mut self) -> impl Iterator<Item = (&EntityId, &mut Mirrored)> {
        self.mirrored.iter_mut()
    }

    /// Records a mirrored entity.
    /// Records a mirrored entity. A node entity copies one world entity:
    /// a previous pairing of either id is replaced.
    pub fn insert_mirrored(&mut self, upstream: EntityId, entry: Mirrored) {
        let local = entry.local;
        if let Some(old) = self.mirrored.insert(upstream, entry) {
            self.local_to_upstream.remove(&old.local);
        }
        if let Some(previous) = self.local_to_upstream.insert(local, upstream) {
            if previous != upstream {
                self.mirrored.remove(&previous);
            }
        }
    }

    /// Forgets a mirrored entity; returns its entry.
    pub fn remove_mirrored(&mut self, upstream: EntityId) -> Option<Mirrored> {
        let entry = self.mirrored.remove(&upstream)?;
        self.local_to_upstream.remove(&entry.local);
        Some(entry)
    }

    pub fn exported(&self, local: EntityId) -> Option<&Exported> {
        self.exported.get(&local)
    }

    pub fn exported_mut(&mut self, local: EntityId) -> Option<&mut Exported> {
        self.exported.get_mut(&local)
    }

    /// Node ids of every exported entity.
    pub fn exported_ids(&self) -> Vec<EntityId> {
        self.exported.keys().copied().collect()
    }

    /// Starts exporting `local`: returns the unacked id to create it under.
    pub fn begin_export(&mut self, local: EntityId) -> EntityId {
        let unacked = self.next_unacked_id();
        if let Some(old) = self.exported.insert(
            local,
            Exported {
                unacked,
                upstream: None,
                components: BTreeMap::new(),
                seen: true,
                parent: EntityId(0),
                key: None,
            },
        ) {
            self.forget_exported_ids(&old);
        }
        self.unacked_to_exported.insert(unacked, local);
        unacked
    }

    /// An unacked id for a component (or entity): `0x4000_0000 | n`.
    pub fn next_unacked_id(&mut self) -> EntityId {
        self.next_unacked = if self.next_unacked >= LAST_UNACKED_SERIAL {
            1
        } else {
            self.next_unacked + 1
        };
        EntityId(FIRST_UNACKED_ID | self.next_unacked)
    }

    /// CreateEntityReply: the exported entity created as `unacked` is `id`.
    pub fn ack_export(&mut self, unacked: EntityId, id: EntityId) -> Option<EntityId> {
        let local = self.unacked_to_exported.remove(&unacked)?;
        self.bind_upstream(local, id)?;
        Some(local)
    }

    /// Gives exported entity `local` the world id `id`. One world id names
    /// one export: a world server that reuses an id takes it from the
    /// export that had it (its next reconnect finds that one again).
    fn bind_upstream(&mut self, local: EntityId, id: EntityId) -> Option<()> {
        let entry = self.exported.get_mut(&local)?;
        if let Some(old) = entry.upstream.replace(id) {
            self.upstream_to_exported.remove(&old);
        }
        if let Some(other) = self.upstream_to_exported.insert(id, local) {
            if other != local {
                if let Some(other) = self.exported.get_mut(&other) {
                    other.upstream = None;
                }
            }
        }
        Some(())
    }

    /// Re-associates an exported entity with an id the world server reports
    /// after a reconnect (the entity survived there).
    pub fn rebind_export(&mut self, local: EntityId, id: EntityId) {
        if self.bind_upstream(local, id).is_some() {
            if let Some(entry) = self.exported.get_mut(&local) {
                entry.seen = true;
            }
        }
    }

    /// The export of node entity `from` continues as node entity `to` (the
    /// same federation entity presented again under a new id): the world
    /// server keeps its copy and ids.
    pub fn move_export(&mut self, from: EntityId, to: EntityId) -> bool {
        if self.exported.contains_key(&to) {
            return false;
        }
        let Some(entry) = self.exported.remove(&from) else {
            return false;
        };
        if let Some(upstream) = entry.upstream {
            self.upstream_to_exported.insert(upstream, to);
        }
        if self.unacked_to_exported.get(&entry.unacked) == Some(&from) {
            self.unacked_to_exported.insert(entry.unacked, to);
        }
        self.exported.insert(to, entry);
        true
    }

    /// Stops exporting `local`; returns its entry.
    pub fn end_export(&mut self, local: EntityId) -> Option<Exported> {
        let entry = self.exported.remove(&local)?;
        self.forget_exported_ids(&entry);
        Some(entry)
    }

    fn forget_exported_ids(&mut self, entry: &Exported) {
        self.unacked_to_exported.remove(&entry.unacked);
        if let Some(upstream) = entry.upstream {
            self.upstream_to_exported.remove(&upstream);
        }
    }

    /// A new session begins: nothing is seen yet, no unacked id is pending.
    pub fn begin_session(&mut self) {
        for entry in self.mirrored.values_mut() {
            entry.seen = false;
        }
        for entry in self.exported.values_mut() {
            entry.seen = false;
        }
        self.unacked_to_exported.clear();
    }

    pub fn mirrored_count(&self) -> usize {
        self.mirrored.len()
    }

    pub fn exported_count(&self) -> usize {
        self.exported.len()
    }

    /// Checks that every reverse map is the exact inverse of its forward
    /// map; the first disagreement, for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.local_to_upstream.len() != self.mirrored.len() {
            return Err(format!(
                "{} node ids for {} mirrored entities",
                self.local_to_upstream.len(),
                self.mirrored.len()
            ));
        }
        for (upstream, entry) in &self.mirrored {
            if self.local_to_upstream.get(&entry.local) != Some(upstream) {
                return Err(format!(
                    "mirrored {upstream} is {} one way only",
                    entry.local
                ));
            }
        }
        for (upstream, local) in &self.upstream_to_exported {
            if self.exported.get(local).and_then(|e| e.upstream) != Some(*upstream) {
                return Err(format!(
                    "world id {upstream} names {local}, which is not it"
                ));
            }
        }
        let acked = self
            .exported
            .values()
            .filter(|e| e.upstream.is_some())
            .count();
        if acked != self.upstream_to_exported.len() {
            return Err(format!(
                "{} world ids for {acked} acked exports",
                self.upstream_to_exported.len()
            ));
        }
        for (unacked, local) in &self.unacked_to_exported {
            if self.exported.get(local).map(|e| e.unacked) != Some(*unacked) {
                return Err(format!("unacked {unacked} names {local}, which is not it"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrored_ids_map_both_ways() {
        let mut map = IdMap::default();
        map.insert_mirrored(EntityId(7), Mirrored::new(EntityId(3)));
        assert_eq!(
            map.resolve(EntityId(7)),
            UpstreamEntity::Mirrored(EntityId(3))
        );
        assert_eq!(map.upstream_of(EntityId(3)), Some(EntityId(7)));
        assert!(map.is_mirrored(EntityId(3)));
        map.remove_mirrored(EntityId(7));
        assert_eq!(map.resolve(EntityId(7)), UpstreamEntity::Unknown);
        assert_eq!(map.upstream_of(EntityId(3)), None);
    }

    #[test]
    fn exported_entity_is_unacked_until_the_reply() {
        let mut map = IdMap::default();
        let unacked = map.begin_export(EntityId(12));
        assert_eq!(unacked, EntityId(0x4000_0001));
        assert_eq!(map.upstream_of(EntityId(12)), None);
        assert_eq!(map.ack_export(unacked, EntityId(40)), Some(EntityId(12)));
        assert_eq!(
            map.resolve(EntityId(40)),
            UpstreamEntity::Exported(EntityId(12))
        );
        assert_eq!(map.upstream_of(EntityId(12)), Some(EntityId(40)));
        // A second reply for the same unacked id maps nothing.
        assert_eq!(map.ack_export(unacked, EntityId(41)), None);
        map.end_export(EntityId(12));
        assert_eq!(map.resolve(EntityId(40)), UpstreamEntity::Unknown);
    }

    #[test]
    fn a_moved_export_keeps_its_world_server_id() {
        let mut map = IdMap::default();
        let unacked = map.begin_export(EntityId(12));
        map.ack_export(unacked, EntityId(40));
        assert!(map.move_export(EntityId(12), EntityId(30)));
        assert_eq!(
            map.resolve(EntityId(40)),
            UpstreamEntity::Exported(EntityId(30))
        );
        assert_eq!(map.upstream_of(EntityId(30)), Some(EntityId(40)));
        assert!(map.exported(EntityId(12)).is_none());
        assert!(
            !map.move_export(EntityId(12), EntityId(31)),
            "nothing left to move"
        );
    }

    #[test]
    fn unacked_ids_stay_in_their_range() {
        let mut map = IdMap {
            next_unacked: LAST_UNACKED_SERIAL - 1,
            ..IdMap::default()
        };
        assert_eq!(map.next_unacked_id(), EntityId(0x7FFF_FFFF));
        assert_eq!(map.next_unacked_id(), EntityId(0x4000_0001));
        assert!(map.next_unacked_id().is_unacked());
    }

    #[test]
    fn a_new_session_clears_seen_marks_and_pending_acks() {
        let mut map = IdMap::default();
        let unacked = map.begin_export(EntityId(5));
        map.insert_mirrored(EntityId(1), Mirrored::new(EntityId(2)));
        map.begin_session();
        assert!(!map.mirrored(EntityId(1)).unwrap().seen);
        assert!(!map.exported(EntityId(5)).unwrap().seen);
        assert_eq!(map.ack_export(unacked, EntityId(9)), None);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        #[derive(Debug, Clone)]
        enum Step {
            Mirror(u32, u32),
            Unmirror(u32),
            BeginExport(u32),
            /// Acknowledges the n-th unacked id handed out so far.
            Ack(usize, u32),
            Rebind(u32, u32),
            Move(u32, u32),
            EndExport(u32),
            BeginSession,
        }

        fn step() -> impl Strategy<Value = Step> {
            // World ids 1..8, node ids 100..106.
            prop_oneof![
                (1u32..8, 100u32..106).prop_map(|(u, l)| Step::Mirror(u, l)),
                (1u32..8).prop_map(Step::Unmirror),
                (100u32..106).prop_map(Step::BeginExport),
                (0usize..8, 1u32..8).prop_map(|(n, u)| Step::Ack(n, u)),
                (100u32..106, 1u32..8).prop_map(|(l, u)| Step::Rebind(l, u)),
                (100u32..106, 100u32..106).prop_map(|(a, b)| Step::Move(a, b)),
                (100u32..106).prop_map(Step::EndExport),
                Just(Step::BeginSession),
            ]
        }

        proptest! {
            /// Whatever the world server replies and in whatever order the
            /// bridge mirrors, exports, moves and forgets, every reverse
            /// map stays the inverse of its forward map: a world id names
            /// one node entity and back, and an unacked id names the export
            /// that holds it.
            #[test]
            fn any_sequence_keeps_both_directions_consistent(
                steps in proptest::collection::vec(step(), 0..60)
            ) {
                let mut map = IdMap::default();
                let mut issued = Vec::new();
                for step in steps {
                    match step {
                        Step::Mirror(u, l) => {
                            map.insert_mirrored(EntityId(u), Mirrored::new(EntityId(l)))
                        }
                        Step::Unmirror(u) => {
                            map.remove_mirrored(EntityId(u));
                        }
                        Step::BeginExport(l) => issued.push(map.begin_export(EntityId(l))),
                        Step::Ack(n, u) => {
                            if let Some(unacked) = issued.get(n) {
                                map.ack_export(*unacked, EntityId(u));
                            }
                        }
                        Step::Rebind(l, u) => map.rebind_export(EntityId(l), EntityId(u)),
                        Step::Move(a, b) => {
                            map.move_export(EntityId(a), EntityId(b));
                        }
                        Step::EndExport(l) => {
                            map.end_export(EntityId(l));
                        }
                        Step::BeginSession => map.begin_session(),
                    }
                    prop_assert_eq!(map.check_invariants(), Ok(()));
                }
                // Unacked ids are never handed out twice in a row of this
                // length (they wrap only after 2^30).
                let mut distinct = issued.clone();
                distinct.sort();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), issued.len());
            }
        }
    }
}
