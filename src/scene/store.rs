//! The scene store: validated mutations, id allocation, the change journal.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::change::{Change, ChangeKind, ChangeSource};
use super::component_map::ComponentMap;
use super::entity::{Attribute, Component, ComponentContent, Entity, Origin};
use super::entity_hash::EntityMap;
use super::error::SceneError;
use crate::tundra::ids::{FIRST_LOCAL_ID, LAST_REPLICATED_ID};
use crate::tundra::{
    AttributeBlock, AttributeValue, ComponentBody, ComponentData, ComponentId, DynamicAttribute,
    EntityId, Registry,
};

/// What `create_entity` assigned: the entity id, and for each component the
/// id it was given in the request paired with the id it now has (the pairs a
/// CreateEntityReply carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedEntity {
    pub id: EntityId,
    pub components: Vec<(ComponentId, ComponentId)>,
}

/// The node's scene.
#[derive(Debug)]
pub struct Scene {
    /// Hashed: every edit looks its entity up (an ordered map cost a tree
    /// search per edit, several per forwarded update across the node).
    entities: EntityMap<Entity>,
    /// The same ids in ascending order, for the walks that send a scene in
    /// Tundra's order (its std::map); changed only on create and remove.
    order: BTreeSet<EntityId>,
    registry: Registry,
    next_replicated: u32,
    next_local: u32,
    journal: Vec<Change>,
    /// Entities whose authority is behind this node (a world server the
    /// node is a client of): edits from clients and peers are diverted.
    proxied: BTreeSet<EntityId>,
    proxied_edits: Vec<ProxiedEdit>,
    /// Each parent's children, kept with every parent change, so a walk
    /// down a hierarchy (a removal, interest in a tree) visits only it.
    children: foldhash::HashMap<EntityId, Vec<EntityId>>,
}

/// An edit a client or peer asked for on a proxied entity: not applied, but
/// handed to whoever holds the entity's authority (docs/upstream.md).
#[derive(Debug, Clone, PartialEq)]
pub struct ProxiedEdit {
    pub source: ChangeSource,
    pub entity: EntityId,
    pub component: ComponentId,
    pub index: u8,
    pub value: AttributeValue,
}

impl Scene {
    pub fn new(registry: Registry) -> Scene {
        Scene {
            entities: EntityMap::default(),
            order: BTreeSet::new(),
            registry,
            next_replicated: 1,
            next_local: FIRST_LOCAL_ID,
            journal: Vec::new(),
            proxied: BTreeSet::new(),
            proxied_edits: Vec::new(),
            children: foldhash::HashMap::default(),
        }
    }

    /// The entities whose parent is `id`.
    pub fn children(&self, id: EntityId) -> &[EntityId] {
        self.children.get(&id).map_or(&[], Vec::as_slice)
    }

    fn adopt(&mut self, parent: Option<EntityId>, child: EntityId) {
        if let Some(parent) = parent {
            self.children.entry(parent).or_default().push(child);
        }
    }

    fn disown(&mut self, parent: Option<EntityId>, child: EntityId) {
        let Some(parent) = parent else { return };
        if let Some(list) = self.children.get_mut(&parent) {
            list.retain(|c| *c != child);
            if list.is_empty() {
                self.children.remove(&parent);
            }
        }
    }

    /// Marks an entity as proxied: only [`ChangeSource::Node`] changes it;
    /// attribute edits from clients and peers are queued for
    /// [`Scene::take_proxied_edits`], other changes from them are refused.
    pub fn set_proxied(&mut self, entity: EntityId, proxied: bool) {
        if proxied {
            self.proxied.insert(entity);
        } else {
            self.proxied.remove(&entity);
        }
    }

    /// Whether `entity` is proxied.
    pub fn is_proxied(&self, entity: EntityId) -> bool {
        self.proxied.contains(&entity)
    }

    /// Edits of proxied entities asked for since the last call.
    pub fn take_proxied_edits(&mut self) -> Vec<ProxiedEdit> {
        std::mem::take(&mut self.proxied_edits)
    }

    /// Refuses a change of a proxied entity by anyone but the node.
    fn guard(&self, source: ChangeSource, entity: EntityId) -> Result<(), SceneError> {
        if source != ChangeSource::Node && self.proxied.contains(&entity) {
            return Err(SceneError::NotAuthority(entity));
        }
        Ok(())
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    pub fn entity(&self, id: EntityId) -> Option<&Entity> {
        self.entities.get(&id)
    }

    /// Reads where an edit of `component` of entity `id` will write, so that
    /// it is in the cache when the edit comes. The node does this for a
    /// whole batch of edits first: in a loop this short the cache misses of
    /// different entities overlap, where inside each edit they are taken one
    /// after another.
    pub fn warm(&self, id: EntityId, component: ComponentId) {
        let slot = self
            .entities
            .get(&id)
            .and_then(|entity| entity.components.get(&component))
            .and_then(|component| match &component.content {
                ComponentContent::Known { slots, .. } => slots.first(),
                ComponentContent::Opaque(_) => None,
            });
        std::hint::black_box(slot.map(Option::is_some));
    }

    /// Entities in ascending id order.
    pub fn entities(&self) -> impl Iterator<Item = &Entity> {
        self.order.iter().filter_map(|id| self.entities.get(id))
    }

    pub fn len(&self) -> usize {
        self.entities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Takes the changes recorded since the last call, oldest first.
    pub fn take_journal(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.journal)
    }

    /// [`Scene::take_journal`] into `out` (cleared first), whose buffer the
    /// scene keeps for the next changes: the node settles after every
    /// client frame, and a fresh journal each time was regrown each time.
    pub fn take_journal_into(&mut self, out: &mut Vec<Change>) {
        out.clear();
        std::mem::swap(&mut self.journal, out);
    }

    fn record(&mut self, source: ChangeSource, kind: ChangeKind) {
        self.journal.push(Change { source, kind });
    }

    /// Tundra's `AllocateReplicated` (or a local id from 0x80000000):
    /// ascending, wrapping to the start of the range, never an id in use.
    pub fn allocate_entity_id(&mut self, local: bool) -> Result<EntityId, SceneError> {
        let (next, first, last, what) = if local {
            (
                &mut self.next_local,
                FIRST_LOCAL_ID,
                u32::MAX,
                "local entity",
            )
        } else {
            (&mut self.next_replicated, 1, LAST_REPLICATED_ID, "entity")
        };
        for _ in 0..=self.entities.len() {
            let candidate = EntityId(*next);
            *next = if *next >= last { first } else { *next + 1 };
            if !self.entities.contains_key(&candidate) {
                return Ok(candidate);
            }
        }
        Err(SceneError::IdsExhausted(what))
    }

    /// Creates an entity. `id` is `None` to allocate a replicated id, or the
    /// id to use (a TXML file's, or a local id). Component ids in the request
    /// are replaced by fresh ones, except local ones which stay local.
    pub fn create_entity(
        &mut self,
        source: ChangeSource,
        id: Option<EntityId>,
        origin: Origin,
        temporary: bool,
        parent: Option<EntityId>,
        components: Vec<ComponentData>,
    ) -> Result<CreatedEntity, SceneError> {
        let id = match id {
            Some(id) if self.entities.contains_key(&id) => {
                return Err(SceneError::EntityExists(id))
            }
            Some(id) if id.0 == 0 => self.allocate_entity_id(false)?,
            Some(id) => id,
            None => self.allocate_entity_id(false)?,
        };
        let parent = parent.filter(|p| self.entities.contains_key(p) && *p != id);
        let entity = Entity {
            id,
            temporary,
            parent,
            origin,
            components: ComponentMap::new(),
            next_component_id: 1,
            next_local_component_id: FIRST_LOCAL_ID,
        };
        self.entities.insert(id, entity);
        self.order.insert(id);
        self.adopt(parent, id);
        self.record(source, ChangeKind::EntityCreated(id));
        let components = self.add_components(source, id, components, false)?;
        Ok(CreatedEntity { id, components })
    }

    /// Adds components to an existing entity; returns (requested, assigned)
    /// id pairs in request order.
    pub fn create_components(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        components: Vec<ComponentData>,
    ) -> Result<Vec<(ComponentId, ComponentId)>, SceneError> {
        if !self.entities.contains_key(&entity) {
            return Err(SceneError::UnknownEntity(entity));
        }
        self.guard(source, entity)?;
        self.add_components(source, entity, components, true)
    }

    fn add_components(
        &mut self,
        source: ChangeSource,
        entity_id: EntityId,
        components: Vec<ComponentData>,
        announce: bool,
    ) -> Result<Vec<(ComponentId, ComponentId)>, SceneError> {
        let mut pairs = Vec::with_capacity(components.len());
        for data in components {
            let content = self.content_from_wire(data.type_id, data.body);
            let entity = self
                .entities
                .get_mut(&entity_id)
                .ok_or(SceneError::UnknownEntity(entity_id))?;
            let assigned = allocate_component_id(entity, data.id.is_local())?;
            entity.components.insert(
                assigned,
                Component {
                    id: assigned,
                    type_id: data.type_id,
                    name: data.name,
                    content,
                },
            );
            pairs.push((data.id, assigned));
            if announce {
                self.record(source, ChangeKind::ComponentCreated(entity_id, assigned));
            }
        }
        Ok(pairs)
    }

    /// Builds slots from a decoded block: a prefix block is completed with the
    /// type's defaults (docs/tundra-wire.md §5.1, version tolerance).
    fn content_from_wire(&self, type_id: u32, body: ComponentBody) -> ComponentContent {
        let block = match body {
            ComponentBody::Opaque(bytes) => return ComponentContent::Opaque(bytes),
            ComponentBody::Attributes(block) => block,
        };
        let Some(schema) = self.registry.get(type_id).cloned() else {
            // Decoded against a registry that knew the type; keep it readable.
            return ComponentContent::Opaque(block.encode().unwrap_or_default());
        };
        let mut slots: Vec<Option<Attribute>> = schema
            .attributes
            .iter()
            .enumerate()
            .map(|(index, attribute)| {
                let value = block
                    .values
                    .get(index)
                    .filter(|v| v.attribute_type() == attribute.ty)
                    .cloned()
                    .unwrap_or_else(|| attribute.default.clone());
                Some(Attribute {
                    dynamic_name: None,
                    value,
                })
            })
            .collect();
        if schema.dynamic_attributes {
            for dynamic in block.dynamic {
                let index = usize::from(dynamic.index);
                if index < slots.len() {
                    continue; // a dynamic attribute may not shadow a static one
                }
                slots.resize(slots.len().max(index + 1), None);
                slots[index] = Some(Attribute {
                    dynamic_name: Some(dynamic.name),
                    value: dynamic.value,
                });
            }
        }
        ComponentContent::Known { schema, slots }
    }

    /// A component as a full update for the wire.
    pub fn component_data(component: &Component) -> ComponentData {
        let body = match &component.content {
            ComponentContent::Opaque(bytes) => ComponentBody::Opaque(bytes.clone()),
            ComponentContent::Known { schema, slots } => {
                let statics = schema.attributes.len();
                let values = slots
                    .iter()
                    .take(statics)
                    .map(|slot| slot.as_ref().map(|a| a.value.clone()))
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_default();
                let dynamic = slots
                    .iter()
                    .enumerate()
                    .skip(statics)
                    .filter_map(|(index, slot)| {
                        let attribute = slot.as_ref()?;
                        Some(DynamicAttribute {
                            index: u8::try_from(index).ok()?,
                            name: attribute.dynamic_name.clone().unwrap_or_default(),
                            value: attribute.value.clone(),
                        })
                    })
                    .collect();
                ComponentBody::Attributes(AttributeBlock {
                    values,
                    dynamic,
                    trailing: Vec::new(),
                })
            }
        };
        ComponentData {
            id: component.id,
            type_id: component.type_id,
            name: component.name.clone(),
            body,
        }
    }

    /// The schema and slots of a component of a known type; an opaque
    /// component's attributes cannot be addressed.
    fn slots_mut(
        &mut self,
        entity: EntityId,
        component: ComponentId,
    ) -> Result<
        (
            &Arc<crate::tundra::ComponentSchema>,
            &mut Vec<Option<Attribute>>,
        ),
        SceneError,
    > {
        let target = self
            .entities
            .get_mut(&entity)
            .ok_or(SceneError::UnknownEntity(entity))?
            .components
            .get_mut(&component)
            .ok_or(SceneError::UnknownComponent(entity, component))?;
        match &mut target.content {
            ComponentContent::Known { schema, slots } => Ok((schema, slots)),
            ComponentContent::Opaque(_) => Err(SceneError::OpaqueComponent(
                entity,
                component,
                target.type_id,
            )),
        }
    }

    /// Sets one attribute; returns whether the value changed (an equal value
    /// is not recorded, so it is not sent again).
    pub fn edit_attribute(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        component: ComponentId,
        index: u8,
        value: AttributeValue,
    ) -> Result<bool, SceneError> {
        if source != ChangeSource::Node && self.proxied.contains(&entity) {
            self.proxied_edits.push(ProxiedEdit {
                source,
                entity,
                component,
                index,
                value,
            });
            return Ok(false);
        }
        let (_, slots) = self.slots_mut(entity, component)?;
        let slot = slots
            .get_mut(usize::from(index))
            .and_then(Option::as_mut)
            .ok_or(SceneError::UnknownAttribute(entity, component, index))?;
        if slot.ty() != value.attribute_type() {
            return Err(SceneError::TypeMismatch(
                entity,
                component,
                index,
                slot.ty().tundra_name(),
                value.attribute_type().tundra_name(),
            ));
        }
        if slot.value == value {
            return Ok(false);
        }
        slot.value = value;
        self.record(
            source,
            ChangeKind::AttributeChanged(entity, component, index),
        );
        Ok(true)
    }

    /// Creates a dynamic attribute; Tundra refuses to overwrite an existing
    /// index (docs/tundra-wire.md §4.8).
    pub fn create_attribute(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        component: ComponentId,
        attribute: DynamicAttribute,
    ) -> Result<(), SceneError> {
        self.guard(source, entity)?;
        let (schema, slots) = self.slots_mut(entity, component)?;
        let index = usize::from(attribute.index);
        if !schema.dynamic_attributes {
            return Err(SceneError::NotDynamic(schema.type_id));
        }
        if index < schema.attributes.len() || slots.get(index).is_some_and(Option::is_some) {
            return Err(SceneError::AttributeExists(
                entity,
                component,
                attribute.index,
            ));
        }
        slots.resize(slots.len().max(index + 1), None);
        slots[index] = Some(Attribute {
            dynamic_name: Some(attribute.name),
            value: attribute.value,
        });
        self.record(
            source,
            ChangeKind::AttributeCreated(entity, component, attribute.index),
        );
        Ok(())
    }

    /// Removes a dynamic attribute, leaving a hole in its slot.
    pub fn remove_attribute(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        component: ComponentId,
        index: u8,
    ) -> Result<(), SceneError> {
        self.guard(source, entity)?;
        let (schema, slots) = self.slots_mut(entity, component)?;
        let position = usize::from(index);
        if position < schema.attributes.len() {
            return Err(SceneError::StaticAttribute(entity, component, index));
        }
        match slots.get_mut(position) {
            Some(slot @ Some(_)) => *slot = None,
            _ => return Err(SceneError::UnknownAttribute(entity, component, index)),
        }
        while slots.len() > schema.attributes.len() && slots.last().is_some_and(Option::is_none) {
            slots.pop();
        }
        self.record(
            source,
            ChangeKind::AttributeRemoved(entity, component, index),
        );
        Ok(())
    }

    pub fn remove_component(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        component: ComponentId,
    ) -> Result<(), SceneError> {
        self.guard(source, entity)?;
        let target = self
            .entities
            .get_mut(&entity)
            .ok_or(SceneError::UnknownEntity(entity))?;
        target
            .components
            .remove(&component)
            .ok_or(SceneError::UnknownComponent(entity, component))?;
        self.record(source, ChangeKind::ComponentRemoved(entity, component));
        Ok(())
    }

    /// Removes an entity and, as Tundra's hierarchic scene does, its children.
    /// Returns every id removed, children first.
    pub fn remove_entity(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
    ) -> Result<Vec<EntityId>, SceneError> {
        if !self.entities.contains_key(&entity) {
            return Err(SceneError::UnknownEntity(entity));
        }
        self.guard(source, entity)?;
        let mut order = vec![entity];
        let mut next = 0;
        while next < order.len() {
            let parent = order[next];
            order.extend(self.children(parent).iter().copied());
            next += 1;
        }
        order.reverse();
        for id in &order {
            if let Some(removed) = self.entities.remove(id) {
                self.disown(removed.parent, *id);
            }
            self.children.remove(id);
            self.order.remove(id);
            self.proxied.remove(id);
            self.record(source, ChangeKind::EntityRemoved(*id));
        }
        Ok(order)
    }

    /// Changes where the entity is simulated (a hand-over of authority,
    /// docs/federation.md §7). Nothing a client sees changes, so nothing is
    /// journalled: only how later client edits are handled.
    pub fn set_origin(&mut self, entity: EntityId, origin: Origin) -> Result<(), SceneError> {
        let target = self
            .entities
            .get_mut(&entity)
            .ok_or(SceneError::UnknownEntity(entity))?;
        target.origin = origin;
        Ok(())
    }

    pub fn set_temporary(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        temporary: bool,
    ) -> Result<(), SceneError> {
        self.guard(source, entity)?;
        let target = self
            .entities
            .get_mut(&entity)
            .ok_or(SceneError::UnknownEntity(entity))?;
        if target.temporary != temporary {
            target.temporary = temporary;
            self.record(source, ChangeKind::TemporaryChanged(entity));
        }
        Ok(())
    }

    /// Sets or clears the parent; refuses an unknown parent or a cycle.
    pub fn set_parent(
        &mut self,
        source: ChangeSource,
        entity: EntityId,
        parent: Option<EntityId>,
    ) -> Result<(), SceneError> {
        if !self.entities.contains_key(&entity) {
            return Err(SceneError::UnknownEntity(entity));
        }
        self.guard(source, entity)?;
        if let Some(parent) = parent {
            let mut cursor = Some(parent);
            while let Some(ancestor) = cursor {
                if ancestor == entity {
                    return Err(SceneError::ParentCycle(entity));
                }
                cursor = self
                    .entities
                    .get(&ancestor)
                    .ok_or(SceneError::UnknownEntity(ancestor))?
                    .parent;
            }
        }
        let target = self
            .entities
            .get_mut(&entity)
            .ok_or(SceneError::UnknownEntity(entity))?;
        if target.parent != parent {
            let before = std::mem::replace(&mut target.parent, parent);
            self.disown(before, entity);
            self.adopt(parent, entity);
            self.record(source, ChangeKind::ParentChanged(entity));
        }
        Ok(())
    }
}

fn allocate_component_id(entity: &mut Entity, local: bool) -> Result<ComponentId, SceneError> {
    let (next, first, last) = if local {
        (
            &mut entity.next_local_component_id,
            FIRST_LOCAL_ID,
            u32::MAX,
        )
    } else {
        (&mut entity.next_component_id, 1, LAST_REPLICATED_ID)
    };
    for _ in 0..=entity.components.len() {
        let candidate = ComponentId(*next);
        *next = if *next >= last { first } else { *next + 1 };
        if !entity.components.contains_key(&candidate) {
            return Ok(candidate);
        }
    }
    Err(SceneError::IdsExhausted("component"))
}

#[cfg(test)]
mod children_tests {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Step {
        Create(Option<u32>),
        Reparent(u32, Option<u32>),
        Remove(u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        let id = 1u32..12;
        prop_oneof![
            proptest::option::of(id.clone()).prop_map(Step::Create),
            (id.clone(), proptest::option::of(id.clone())).prop_map(|(e, p)| Step::Reparent(e, p)),
            id.prop_map(Step::Remove),
        ]
    }

    proptest! {
        /// Whatever is created, reparented and removed, each entity's
        /// children are exactly the entities naming it as their parent,
        /// and a removal takes every descendant.
        #[test]
        fn the_children_index_is_the_reverse_of_parent(steps in proptest::collection::vec(step(), 0..60)) {
            let mut scene = Scene::new(Registry::builtin());
            for step in steps {
                match step {
                    Step::Create(parent) => {
                        let _ = scene.create_entity(ChangeSource::Node, None, Origin::Local, false, parent.map(EntityId), vec![]);
                    }
                    Step::Reparent(entity, parent) => {
                        let _ = scene.set_parent(ChangeSource::Node, EntityId(entity), parent.map(EntityId));
                    }
                    Step::Remove(entity) => {
                        let _ = scene.remove_entity(ChangeSource::Node, EntityId(entity));
                        // Descendants went with it: no survivor's parent is gone.
                        for survivor in scene.entities() {
                            prop_assert!(survivor.parent.map_or(true, |p| scene.entity(p).is_some()), "{} lost its parent", survivor.id);
                        }
                    }
                }
                for entity in scene.entities() {
                    let expected: Vec<EntityId> = scene.entities().filter(|e| e.parent == Some(entity.id)).map(|e| e.id).collect();
                    let mut indexed = scene.children(entity.id).to_vec();
                    indexed.sort();
                    prop_assert_eq!(indexed, expected, "children of {}", entity.id);
                }
                prop_assert!(scene.children.keys().all(|p| scene.entity(*p).is_some()), "no children for gone parents");
            }
        }
    }
}
