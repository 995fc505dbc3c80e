//! The entities the federation tracks: each federation identity with the
//! scene entity that presents it, in both directions. This module owns the
//! pairing; which copy is presented is `core.rs`'s and `import.rs`'s.

use foldhash::{HashMap, HashMapExt};

use crate::federation::ids::{GlobalId, LinkId};
use crate::less::ids::{ObjectId, Remote};
use crate::tundra::{ComponentId, EntityId};

/// One entity the federation tracks. Its scene entity never changes while
/// it is tracked; whether this node is its authority changes only by a
/// hand-over (`handover.rs`).
#[derive(Debug)]
pub(in crate::federation) struct Tracked {
    scene: EntityId,
    local: bool,
    /// While this node is the authority or has just handed the entity
    /// over: the epoch it exports (docs/federation.md §7).
    pub epoch: u64,
    /// Handed to this node, whose copy has not arrived yet: until it does,
    /// this node goes on exporting its last state as a relay would.
    pub handed_to: Option<uuid::Uuid>,
    /// The link whose copy this node presents (remote entities).
    pub selected: Option<LinkId>,
    /// Selected copy's component objects and the scene components they are.
    pub components: HashMap<ObjectId<Remote>, ComponentId>,
}

impl Tracked {
    /// The scene entity that presents the identity.
    #[inline]
    pub fn scene(&self) -> EntityId {
        self.scene
    }

    /// Whether this node is the entity's authority (it exports it as its
    /// own).
    #[inline]
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// Whether this node exports the entity from its own scene state: as
    /// its authority, or handed over and waiting for the new one's copy.
    #[inline]
    pub fn is_source(&self) -> bool {
        self.local || self.handed_to.is_some()
    }

    /// This node takes the entity over at `epoch`: its scene state is the
    /// entity's state from now on.
    pub fn become_authority(&mut self, epoch: u64) {
        self.local = true;
        self.epoch = epoch;
        self.handed_to = None;
        self.selected = None;
        self.components.clear();
    }

    /// This node handed the entity to `to` at `epoch`.
    pub fn hand_to(&mut self, to: uuid::Uuid, epoch: u64) {
        self.local = false;
        self.epoch = epoch;
        self.handed_to = Some(to);
        self.selected = None;
        self.components.clear();
    }

    /// The component object of the presented copy that is scene component
    /// `component`.
    pub fn object_of(&self, component: ComponentId) -> Option<ObjectId<Remote>> {
        self.components
            .iter()
            .find(|(_, c)| **c == component)
            .map(|(object, _)| *object)
    }
}

/// Why a pairing was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(in crate::federation) enum TrackError {
    #[error("identity {0} is already tracked")]
    GlobalTaken(GlobalId),
    #[error("scene entity {0} already has an identity")]
    SceneTaken(EntityId),
}

/// Identity <-> scene entity, a bijection: a pair is inserted and removed
/// together, and neither side is ever paired twice.
#[derive(Debug, Default)]
pub(in crate::federation) struct TrackedEntities {
    globals: HashMap<GlobalId, Tracked>,
    by_scene: HashMap<EntityId, GlobalId>,
}

impl TrackedEntities {
    /// Pairs `global` with scene entity `scene`: this node's own entity
    /// (`local`) or a remote one presented from `selected`'s copy.
    pub fn insert(
        &mut self,
        global: GlobalId,
        scene: EntityId,
        local: bool,
        selected: Option<LinkId>,
        components: HashMap<ObjectId<Remote>, ComponentId>,
    ) -> Result<(), TrackError> {
        if self.globals.contains_key(&global) {
            return Err(TrackError::GlobalTaken(global));
        }
        if self.by_scene.contains_key(&scene) {
            return Err(TrackError::SceneTaken(scene));
        }
        self.by_scene.insert(scene, global);
        self.globals.insert(
            global,
            Tracked {
                scene,
                local,
                epoch: 0,
                handed_to: None,
                selected,
                components,
            },
        );
        Ok(())
    }

    /// A new own entity with no components recorded.
    pub fn insert_local(&mut self, global: GlobalId, scene: EntityId) -> Result<(), TrackError> {
        self.insert(global, scene, true, None, HashMap::new())
    }

    #[inline]
    pub fn get(&self, global: &GlobalId) -> Option<&Tracked> {
        self.globals.get(global)
    }

    #[inline]
    pub fn get_mut(&mut self, global: &GlobalId) -> Option<&mut Tracked> {
        self.globals.get_mut(global)
    }

    /// The identity of a scene entity.
    #[inline]
    pub fn global_of(&self, scene: EntityId) -> Option<GlobalId> {
        self.by_scene.get(&scene).copied()
    }

    pub fn is_tracked_scene(&self, scene: EntityId) -> bool {
        self.by_scene.contains_key(&scene)
    }

    /// Unpairs `global` and its scene entity.
    pub fn remove(&mut self, global: &GlobalId) -> Option<Tracked> {
        let tracked = self.globals.remove(global)?;
        self.by_scene.remove(&tracked.scene);
        Some(tracked)
    }

    /// Unpairs scene entity `scene` and its identity.
    pub fn remove_scene(&mut self, scene: EntityId) -> Option<(GlobalId, Tracked)> {
        let global = self.by_scene.remove(&scene)?;
        let tracked = self.globals.remove(&global)?;
        Some((global, tracked))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&GlobalId, &Tracked)> {
        self.globals.iter()
    }

    pub fn len(&self) -> usize {
        self.globals.len()
    }

    /// Checks that both directions agree, for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.globals.len() != self.by_scene.len() {
            return Err(format!(
                "{} identities but {} scene entities",
                self.globals.len(),
                self.by_scene.len()
            ));
        }
        for (global, tracked) in &self.globals {
            if self.by_scene.get(&tracked.scene) != Some(global) {
                return Err(format!("{global} is {} one way only", tracked.scene));
            }
            if tracked.local && tracked.selected.is_some() {
                return Err(format!("own entity {global} presents a copy"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use uuid::Uuid;

    use super::*;

    fn global(serial: u64) -> GlobalId {
        GlobalId {
            origin: Uuid::from_u128(0xa),
            serial,
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Insert(u64, u32),
        Remove(u64),
        RemoveScene(u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..6, 1u32..7).prop_map(|(g, s)| Step::Insert(g, s)),
            (0u64..6).prop_map(Step::Remove),
            (1u32..7).prop_map(Step::RemoveScene),
        ]
    }

    #[test]
    fn a_taken_identity_or_scene_entity_is_refused() {
        let mut tracked = TrackedEntities::default();
        tracked.insert_local(global(1), EntityId(5)).unwrap();
        assert_eq!(
            tracked.insert_local(global(1), EntityId(6)),
            Err(TrackError::GlobalTaken(global(1)))
        );
        assert_eq!(
            tracked.insert(global(2), EntityId(5), false, None, HashMap::new()),
            Err(TrackError::SceneTaken(EntityId(5)))
        );
        assert_eq!(tracked.global_of(EntityId(5)), Some(global(1)));
        assert_eq!(tracked.len(), 1);
    }

    proptest! {
        /// Any sequence of pairings and removals keeps identity <-> scene
        /// entity a bijection: no identity has two scene entities, no scene
        /// entity two identities, and both directions always agree.
        #[test]
        fn any_sequence_keeps_the_pairing_a_bijection(
            steps in proptest::collection::vec(step(), 0..80)
        ) {
            let mut tracked = TrackedEntities::default();
            let mut model: BTreeMap<u64, u32> = BTreeMap::new();
            for step in steps {
                match step {
                    Step::Insert(g, s) => {
                        let free = !model.contains_key(&g) && !model.values().any(|v| *v == s);
                        let accepted = tracked.insert_local(global(g), EntityId(s)).is_ok();
                        prop_assert_eq!(accepted, free);
                        if accepted {
                            model.insert(g, s);
                        }
                    }
                    Step::Remove(g) => {
                        let removed = tracked.remove(&global(g)).map(|t| t.scene().0);
                        prop_assert_eq!(removed, model.remove(&g));
                    }
                    Step::RemoveScene(s) => {
                        let removed = tracked.remove_scene(EntityId(s)).map(|(g, _)| g.serial);
                        let expected = model.iter().find(|(_, v)| **v == s).map(|(g, _)| *g);
                        prop_assert_eq!(removed, expected);
                        if let Some(g) = expected {
                            model.remove(&g);
                        }
                    }
                }
                prop_assert_eq!(tracked.check_invariants(), Ok(()));
                prop_assert_eq!(tracked.len(), model.len());
                for (g, s) in &model {
                    prop_assert_eq!(tracked.global_of(EntityId(*s)), Some(global(*g)));
                    prop_assert_eq!(tracked.get(&global(*g)).map(Tracked::scene), Some(EntityId(*s)));
                }
            }
        }
    }
}
