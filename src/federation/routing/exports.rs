//! What this node exports on one link: the entity and component objects it
//! introduced for each scene entity, and the reverse index from object to
//! entity. The two are kept together here; what to export is `export.rs`'s.

use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use smallvec::SmallVec;
use uuid::Uuid;

use crate::federation::export_policy::origin_policy::OriginPolicy;
use crate::less::ids::{Local, ObjectId};
use crate::tundra::{ComponentId, EntityId};

/// The component objects of an exported entity, by component id: an entity
/// has a handful, kept inline in its record (a hash table of its own cost
/// a cache miss per attribute change exported).
#[derive(Debug, Default)]
pub struct ComponentObjects(SmallVec<[(ComponentId, ObjectId<Local>); 4]>);

impl ComponentObjects {
    #[inline]
    pub fn get(&self, component: &ComponentId) -> Option<&ObjectId<Local>> {
        self.0.iter().find(|(c, _)| c == component).map(|(_, o)| o)
    }

    pub fn contains_key(&self, component: &ComponentId) -> bool {
        self.get(component).is_some()
    }

    /// Sets the object of `component`.
    fn insert(&mut self, component: ComponentId, object: ObjectId<Local>) {
        match self.0.iter_mut().find(|(c, _)| *c == component) {
            Some(entry) => entry.1 = object,
            None => self.0.push((component, object)),
        }
    }

    fn remove(&mut self, component: &ComponentId) -> Option<ObjectId<Local>> {
        let position = self.0.iter().position(|(c, _)| c == component)?;
        Some(self.0.remove(position).1)
    }

    /// Component ids, in export order.
    pub fn keys(&self) -> impl Iterator<Item = &ComponentId> {
        self.0.iter().map(|(c, _)| c)
    }

    /// Objects, in export order.
    pub fn values(&self) -> impl Iterator<Item = &ObjectId<Local>> {
        self.0.iter().map(|(_, o)| o)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An entity this node exports on the link.
#[derive(Debug)]
pub struct ExportedEntity {
    /// The entity object.
    pub object: ObjectId<Local>,
    components: ComponentObjects,
    /// The path last sent for the entity object: it is sent again only when
    /// it changes. Re-sending an unchanged path makes the peer re-route and
    /// answer with its own unchanged path, so two nodes that export the same
    /// entity to each other (a triangle) would echo paths without end.
    pub path: Vec<Uuid>,
    /// The origin's export policy last sent for the entity object (sent
    /// again only when it changes, as the path).
    pub policy: Option<Arc<OriginPolicy>>,
    /// The authority and epoch last sent for the entity object (sent again
    /// only when they change, as the path).
    pub authority: Option<(Uuid, u64)>,
}

impl ExportedEntity {
    #[inline]
    pub fn components(&self) -> &ComponentObjects {
        &self.components
    }
}

/// Scene entity -> exported objects, and object -> scene entity (and
/// component): every object of an exported entity has exactly one owner
/// entry, and every owner entry names an object that is exported.
#[derive(Debug, Default)]
pub struct Exports {
    entities: HashMap<EntityId, ExportedEntity>,
    owners: HashMap<ObjectId<Local>, (EntityId, Option<ComponentId>)>,
}

impl Exports {
    pub fn new() -> Exports {
        Exports {
            entities: HashMap::new(),
            owners: HashMap::new(),
        }
    }

    #[inline]
    pub fn get(&self, entity: &EntityId) -> Option<&ExportedEntity> {
        self.entities.get(entity)
    }

    #[inline]
    pub fn contains(&self, entity: &EntityId) -> bool {
        self.entities.contains_key(entity)
    }

    /// The entity object exported for a scene entity.
    #[inline]
    pub fn object_of(&self, entity: EntityId) -> Option<ObjectId<Local>> {
        self.entities.get(&entity).map(|e| e.object)
    }

    /// The object exported for an entity's component.
    #[inline]
    pub fn component_object(
        &self,
        entity: EntityId,
        component: ComponentId,
    ) -> Option<ObjectId<Local>> {
        self.entities
            .get(&entity)?
            .components
            .get(&component)
            .copied()
    }

    /// The scene entity (and component) an exported object stands for.
    #[inline]
    pub fn owner(&self, object: ObjectId<Local>) -> Option<(EntityId, Option<ComponentId>)> {
        self.owners.get(&object).copied()
    }

    #[inline]
    pub fn contains_object(&self, object: &ObjectId<Local>) -> bool {
        self.owners.contains_key(object)
    }

    /// Exported entities.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether nothing is exported.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Records the entity object of `entity`. False (nothing changed) when
    /// the entity or the object is already recorded.
    pub fn insert_entity(
        &mut self,
        entity: EntityId,
        object: ObjectId<Local>,
        path: Vec<Uuid>,
        policy: Arc<OriginPolicy>,
    ) -> bool {
        if self.entities.contains_key(&entity) || self.owners.contains_key(&object) {
            return false;
        }
        self.owners.insert(object, (entity, None));
        self.entities.insert(
            entity,
            ExportedEntity {
                object,
                components: ComponentObjects::default(),
                path,
                policy: Some(policy),
                authority: None,
            },
        );
        true
    }

    /// Records the object of a component of an exported entity. False when
    /// the entity is not exported, the component already is, or the object
    /// is taken.
    pub fn insert_component(
        &mut self,
        entity: EntityId,
        component: ComponentId,
        object: ObjectId<Local>,
    ) -> bool {
        let Some(exported) = self.entities.get_mut(&entity) else {
            return false;
        };
        if exported.components.contains_key(&component) || self.owners.contains_key(&object) {
            return false;
        }
        exported.components.insert(component, object);
        self.owners.insert(object, (entity, Some(component)));
        true
    }

    /// Forgets a component's object; returns it.
    pub fn remove_component(
        &mut self,
        entity: EntityId,
        component: ComponentId,
    ) -> Option<ObjectId<Local>> {
        let object = self
            .entities
            .get_mut(&entity)?
            .components
            .remove(&component)?;
        self.owners.remove(&object);
        Some(object)
    }

    /// Forgets an entity and all its objects; returns them.
    pub fn remove_entity(&mut self, entity: EntityId) -> Option<ExportedEntity> {
        let exported = self.entities.remove(&entity)?;
        for object in exported.components.values() {
            self.owners.remove(object);
        }
        self.owners.remove(&exported.object);
        Some(exported)
    }

    /// Notes the path last sent for an entity.
    pub fn set_path(&mut self, entity: EntityId, path: Vec<Uuid>) {
        if let Some(exported) = self.entities.get_mut(&entity) {
            exported.path = path;
        }
    }

    /// Notes the authority and epoch last sent for an entity.
    pub fn set_authority(&mut self, entity: EntityId, authority: (Uuid, u64)) {
        if let Some(exported) = self.entities.get_mut(&entity) {
            exported.authority = Some(authority);
        }
    }

    /// Notes the policy last sent for an entity.
    pub fn set_policy(&mut self, entity: EntityId, policy: Arc<OriginPolicy>) {
        if let Some(exported) = self.entities.get_mut(&entity) {
            exported.policy = Some(policy);
        }
    }

    /// Checks that both directions agree, for tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut objects = 0;
        for (entity, exported) in &self.entities {
            objects += 1 + exported.components.len();
            if self.owners.get(&exported.object) != Some(&(*entity, None)) {
                return Err(format!("entity {entity} object has no owner entry"));
            }
            for (component, object) in exported.components.0.iter() {
                if self.owners.get(object) != Some(&(*entity, Some(*component))) {
                    return Err(format!(
                        "component {component} of {entity} has no owner entry"
                    ));
                }
            }
        }
        if objects != self.owners.len() {
            return Err(format!(
                "{} owner entries for {objects} exported objects",
                self.owners.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn policy() -> Arc<OriginPolicy> {
        Arc::new(OriginPolicy::unstated())
    }

    #[derive(Debug, Clone)]
    enum Step {
        InsertEntity(u32, u64),
        InsertComponent(u32, u32, u64),
        RemoveComponent(u32, u32),
        RemoveEntity(u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1u32..5, 1u64..12).prop_map(|(e, o)| Step::InsertEntity(e, o)),
            (1u32..5, 1u32..4, 1u64..12).prop_map(|(e, c, o)| Step::InsertComponent(e, c, o)),
            (1u32..5, 1u32..4).prop_map(|(e, c)| Step::RemoveComponent(e, c)),
            (1u32..5).prop_map(Step::RemoveEntity),
        ]
    }

    #[test]
    fn removing_an_entity_forgets_every_object_of_it() {
        let mut exports = Exports::new();
        assert!(exports.insert_entity(EntityId(1), ObjectId::new(10), Vec::new(), policy()));
        assert!(exports.insert_component(EntityId(1), ComponentId(1), ObjectId::new(11)));
        assert!(!exports.insert_component(EntityId(2), ComponentId(1), ObjectId::new(12)));
        assert_eq!(
            exports.owner(ObjectId::new(11)),
            Some((EntityId(1), Some(ComponentId(1))))
        );
        let removed = exports.remove_entity(EntityId(1)).unwrap();
        assert_eq!(removed.object, ObjectId::new(10));
        assert!(exports.is_empty());
        assert_eq!(exports.owner(ObjectId::new(11)), None);
    }

    proptest! {
        /// Any sequence keeps object -> owner the exact reverse of entity
        /// -> objects, and no object stands for two things.
        #[test]
        fn any_sequence_keeps_owners_the_reverse_of_exports(
            steps in proptest::collection::vec(step(), 0..80)
        ) {
            let mut exports = Exports::new();
            // object -> (entity, component)
            let mut model: BTreeMap<u64, (u32, Option<u32>)> = BTreeMap::new();
            let exported = |model: &BTreeMap<u64, (u32, Option<u32>)>, e: u32| {
                model.values().any(|(entity, c)| *entity == e && c.is_none())
            };
            for step in steps {
                match step {
                    Step::InsertEntity(e, o) => {
                        let free = !exported(&model, e) && !model.contains_key(&o);
                        let accepted = exports.insert_entity(EntityId(e), ObjectId::new(o), Vec::new(), policy());
                        prop_assert_eq!(accepted, free);
                        if accepted {
                            model.insert(o, (e, None));
                        }
                    }
                    Step::InsertComponent(e, c, o) => {
                        let free = exported(&model, e)
                            && !model.values().any(|v| *v == (e, Some(c)))
                            && !model.contains_key(&o);
                        let accepted = exports.insert_component(EntityId(e), ComponentId(c), ObjectId::new(o));
                        prop_assert_eq!(accepted, free);
                        if accepted {
                            model.insert(o, (e, Some(c)));
                        }
                    }
                    Step::RemoveComponent(e, c) => {
                        let removed = exports.remove_component(EntityId(e), ComponentId(c)).map(|o| o.get());
                        let expected = model.iter().find(|(_, v)| **v == (e, Some(c))).map(|(o, _)| *o);
                        prop_assert_eq!(removed, expected);
                        if let Some(o) = expected {
                            model.remove(&o);
                        }
                    }
                    Step::RemoveEntity(e) => {
                        let removed = exports.remove_entity(EntityId(e)).is_some();
                        prop_assert_eq!(removed, exported(&model, e));
                        model.retain(|_, (entity, _)| *entity != e);
                    }
                }
                prop_assert_eq!(exports.check_invariants(), Ok(()));
                for o in 1..12u64 {
                    let expected = model
                        .get(&o)
                        .map(|(e, c)| (EntityId(*e), c.map(ComponentId)));
                    prop_assert_eq!(exports.owner(ObjectId::new(o)), expected);
                }
            }
        }
    }
}
