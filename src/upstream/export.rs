//! Federation entities into the world server, through the client path
//! (docs/tundra-wire.md §7.4): CreateEntity under an unacked id, CreateEntityReply
//! (117) / CreateComponentsReply (118) for the real ids, then only what
//! differs from the shadow (see [`super::echo`]) as Create/Edit/Remove
//! messages, SetEntityParent (124) when the parent changes, and RemoveEntity
//! when the entity leaves the federation.
//!
//! Exported: every replicated entity of the node's scene that is not a copy
//! of the world server's own: other nodes' entities and those of this node's
//! clients alike (docs/upstream.md §1). Entity ids inside values
//! (EntityReference, such as Placeable.parentRef) are renumbered into the
//! world server's id space.

use tracing::debug;

use super::bridge::Bridge;
use super::echo::diff_slots;
use super::ids::ShadowComponent;
use crate::logging::RemoteText;
use crate::scene::{Attribute, ComponentContent, Entity, Scene};
use crate::tundra::messages::{
    CreateAttributes, CreateComponents, CreateEntity, EditAttributes, EditAttributesBlock,
    NewAttribute, RegisterComponentType, RemoveAttributes, RemoveComponents, RemoveEntity,
    RemovedAttribute, SetEntityParent,
};
use crate::tundra::ProtocolVersion;
use crate::tundra::{AttributeValue, ComponentBody, ComponentData, ComponentId, EntityId, Message};

/// Whether the bridge brings `entity` to the world server: a replicated
/// entity (the world server's own copies are told apart by their id, see
/// [`super::ids::IdMap::is_mirrored`]).
pub(super) fn is_exportable(entity: &Entity) -> bool {
    entity.is_replicated()
}

impl Bridge {
    /// Brings every entity marked dirty up to date in the world server.
    pub(super) fn flush(&mut self, scene: &Scene) {
        let dirty = std::mem::take(&mut self.dirty);
        for entity in dirty {
            self.sync_exported(entity, scene);
        }
    }

    fn sync_exported(&mut self, local: EntityId, scene: &Scene) {
        if self.declined.contains(&local) && scene.entity(local).is_none() {
            self.declined.remove(&local);
            self.keys.remove(&local);
        }
        if self.ids.is_mirrored(local) || self.declined.contains(&local) {
            return;
        }
        let Some(entity) = scene.entity(local).filter(|e| is_exportable(e)) else {
            if self.held.contains_key(&local) {
                return; // its link went away: kept for a while (section 4)
            }
            self.keys.remove(&local);
            if let Some(entry) = self.ids.end_export(local) {
                match entry.upstream {
                    Some(upstream) => self.send(&Message::RemoveEntity(RemoveEntity {
                        scene_id: 0,
                        entity_id: upstream,
                    })),
                    None => {
                        self.orphans.insert(entry.unacked);
                    }
                }
                debug!(entity = %local, "federation entity removed from the world server");
            }
            return;
        };
        let Some(entry) = self.ids.exported(local) else {
            return self.create_upstream(entity);
        };
        let Some(upstream) = entry.upstream else {
            return; // the reply marks it dirty again
        };
        self.update_upstream(entity, upstream);
    }

    /// An EntityReference's text in the world server's id space: a node id
    /// becomes the world server's id of that entity; a name travels as it
    /// is. An id the world server has no entity for yet is sent empty, and
    /// `unresolved` is set so the entity is revisited after the next reply.
    fn reference_out(&self, text: &str, unresolved: &mut bool) -> String {
        match text.trim().parse::<u32>() {
            Ok(0) | Err(_) => text.to_owned(),
            Ok(id) => match self.ids.upstream_of(EntityId(id)) {
                Some(upstream) => upstream.0.to_string(),
                None => {
                    *unresolved = true;
                    String::new()
                }
            },
        }
    }

    fn value_out(&self, value: &AttributeValue, unresolved: &mut bool) -> AttributeValue {
        match value {
            AttributeValue::EntityReference(text) => {
                AttributeValue::EntityReference(self.reference_out(text, unresolved))
            }
            other => other.clone(),
        }
    }

    /// A component's full data as the world server must see it.
    fn data_out(&self, data: &mut ComponentData, unresolved: &mut bool) {
        if let ComponentBody::Attributes(block) = &mut data.body {
            for value in &mut block.values {
                *value = self.value_out(value, unresolved);
            }
            for dynamic in &mut block.dynamic {
                dynamic.value = self.value_out(&dynamic.value, unresolved);
            }
        }
    }

    /// The parent to give the world server's copy: `Some(0)` for none,
    /// `None` while the parent has no world-server id yet.
    fn parent_out(&self, entity: &Entity) -> Option<EntityId> {
        match entity.parent {
            None => Some(EntityId(0)),
            Some(parent) => self.ids.upstream_of(parent),
        }
    }

    /// Custom component types the world server has not registered are
    /// announced before the first component of the type, as a Tundra client
    /// does (RegisterComponentType, section 4.17, protocol 2 and up):
    /// otherwise it could not read the component or edits of it.
    fn announce_custom_types(&mut self, entity: &Entity, only: Option<&[ComponentId]>) {
        if self.protocol() < ProtocolVersion::CUSTOM_COMPONENTS {
            return;
        }
        for component in entity.replicated_components() {
            if only.is_some_and(|ids| !ids.contains(&component.id)) {
                continue;
            }
            let ComponentContent::Known { schema, .. } = &component.content else {
                continue;
            };
            if schema.custom && self.announced.insert(schema.type_id) {
                debug!(type_id = schema.type_id, name = %RemoteText(&schema.name), "custom type announced to the world server");
                self.send(&Message::RegisterComponentType(
                    RegisterComponentType::from_schema(schema),
                ));
            }
        }
    }

    fn create_upstream(&mut self, entity: &Entity) {
        self.announce_custom_types(entity, None);
        let unacked = self.ids.begin_export(entity.id);
        let key = self.keys.get(&entity.id).copied();
        let mut unresolved = false;
        let mut components = Vec::new();
        let mut shadows = Vec::new();
        for component in entity.replicated_components() {
            let id = ComponentId(self.ids.next_unacked_id().0);
            let mut data = Scene::component_data(component);
            data.id = id;
            self.data_out(&mut data, &mut unresolved);
            let mut shadow = ShadowComponent::of(component, id);
            shadow.values = super::echo::shadow_of_data(&data);
            shadows.push((component.id, shadow));
            components.push(data);
        }
        let parent = self.parent_out(entity);
        unresolved |= parent.is_none();
        if let Some(entry) = self.ids.exported_mut(entity.id) {
            entry.components.extend(shadows);
            entry.parent = parent.unwrap_or(EntityId(0));
            entry.key = key;
        }
        if unresolved {
            self.waiting.insert(entity.id);
        }
        let parent = self
            .protocol()
            .has_entity_parent()
            .then(|| parent.unwrap_or(EntityId(0)));
        debug!(entity = %entity.id, %unacked, "federation entity created in the world server");
        self.send(&Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: unacked,
            temporary: entity.temporary,
            parent,
            components,
        }));
    }

    fn update_upstream(&mut self, entity: &Entity, upstream: EntityId) {
        let now = self.last_now;
        let mut created = Vec::<ComponentData>::new();
        let mut removed = Vec::<ComponentId>::new();
        let mut new_attributes = Vec::<NewAttribute>::new();
        let mut removed_attributes = Vec::<RemovedAttribute>::new();
        let mut blocks = Vec::<EditAttributesBlock>::new();
        let mut unresolved = false;
        // Values in the world server's id space, computed before the entry
        // is borrowed for the diff.
        let translated: Vec<(ComponentId, Vec<Option<Attribute>>)> = entity
            .replicated_components()
            .filter_map(|component| match &component.content {
                ComponentContent::Known { slots, .. } => Some((
                    component.id,
                    slots
                        .iter()
                        .map(|slot| {
                            slot.as_ref().map(|a| Attribute {
                                dynamic_name: a.dynamic_name.clone(),
                                value: self.value_out(&a.value, &mut unresolved),
                            })
                        })
                        .collect(),
                )),
                ComponentContent::Opaque(_) => None,
            })
            .collect();
        let parent = self.parent_out(entity);
        unresolved |= parent.is_none();
        let Some(entry) = self.ids.exported_mut(entity.id) else {
            return;
        };
        let mut reparent = None;
        if let Some(parent) = parent.filter(|p| *p != entry.parent) {
            entry.parent = parent;
            reparent = Some(parent);
        }
        for component in entity.replicated_components() {
            let Some(shadow) = entry.components.get_mut(&component.id) else {
                created.push(Scene::component_data(component));
                continue;
            };
            if shadow.upstream.is_unacked() {
                continue; // CreateComponents not answered yet
            }
            if let ComponentContent::Opaque(bytes) = &component.content {
                // Its attribute layout is unknown here, so no edit can name
                // an attribute: the world server's copy is replaced whole.
                if shadow.opaque.as_ref() != Some(bytes) {
                    removed.push(shadow.upstream);
                    entry.components.remove(&component.id);
                    created.push(Scene::component_data(component));
                }
                continue;
            }
            let Some((_, slots)) = translated.iter().find(|(id, _)| *id == component.id) else {
                continue;
            };
            let diff = diff_slots(
                &mut shadow.values,
                slots,
                component.static_count(),
                &mut shadow.forwarded,
                now,
            );
            let target = shadow.upstream;
            for index in diff.removed {
                removed_attributes.push(RemovedAttribute {
                    component_id: target,
                    index,
                });
            }
            for attribute in diff.created {
                new_attributes.push(NewAttribute {
                    component_id: target,
                    index: attribute.index,
                    name: attribute.name,
                    value: attribute.value,
                });
            }
            if !diff.edits.is_empty() {
                if let Ok(block) =
                    EditAttributesBlock::encode(target, &diff.edits, &component.slot_types())
                {
                    blocks.push(block);
                }
            }
        }
        let gone: Vec<ComponentId> = entry
            .components
            .keys()
            .filter(|c| !entity.components.contains_key(c))
            .copied()
            .collect();
        for component in gone {
            if let Some(shadow) = entry.components.remove(&component) {
                if !shadow.upstream.is_unacked() {
                    removed.push(shadow.upstream);
                }
            }
        }
        let created_local: Vec<ComponentId> = created.iter().map(|d| d.id).collect();
        for data in &mut created {
            let local = data.id;
            let id = ComponentId(self.ids.next_unacked_id().0);
            data.id = id;
            self.data_out(data, &mut unresolved);
            if let (Some(entry), Some(component)) = (
                self.ids.exported_mut(entity.id),
                entity.components.get(&local),
            ) {
                let mut shadow = ShadowComponent::of(component, id);
                if shadow.opaque.is_none() {
                    shadow.values = super::echo::shadow_of_data(data);
                }
                entry.components.insert(local, shadow);
            }
        }
        if unresolved {
            self.waiting.insert(entity.id);
        }
        if !created.is_empty() {
            self.announce_custom_types(entity, Some(&created_local));
        }
        // Tundra's per-entity order: removals, creations, edits, then the
        // parent (section 7.2).
        if !removed.is_empty() {
            self.send(&Message::RemoveComponents(RemoveComponents {
                scene_id: 0,
                entity_id: upstream,
                component_ids: removed,
            }));
        }
        if !removed_attributes.is_empty() {
            self.send(&Message::RemoveAttributes(RemoveAttributes {
                scene_id: 0,
                entity_id: upstream,
                attributes: removed_attributes,
            }));
        }
        if !created.is_empty() {
            self.send(&Message::CreateComponents(CreateComponents {
                scene_id: 0,
                entity_id: upstream,
                components: created,
            }));
        }
        if !new_attributes.is_empty() {
            self.send(&Message::CreateAttributes(CreateAttributes {
                scene_id: 0,
                entity_id: upstream,
                attributes: new_attributes,
            }));
        }
        if !blocks.is_empty() {
            self.stats.edits_sent += 1;
            self.send(&Message::EditAttributes(EditAttributes {
                scene_id: 0,
                entity_id: upstream,
                blocks,
            }));
        }
        // SetEntityParent exists from protocol 3 (HierarchicScene, section
        // 4.18); it carries full u32 ids.
        if let Some(parent_id) = reparent.filter(|_| self.protocol().has_entity_parent()) {
            self.send(&Message::SetEntityParent(SetEntityParent {
                scene_id: 0,
                entity_id: upstream,
                parent_id,
            }));
        }
    }
}
