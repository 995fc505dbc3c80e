//! Federation entities into the world server, through the client path
//! (reference section 7.4): CreateEntity under an unacked id, CreateEntityReply
//! (117) / CreateComponentsReply (118) for the real ids, then only what
//! differs from the shadow (see [`super::echo`]) as Create/Edit/Remove
//! messages, and RemoveEntity when the entity leaves the federation.

use tracing::debug;

use super::bridge::Bridge;
use super::echo::{diff_slots, shadow_of};
use super::ids::ShadowComponent;
use crate::scene::{Entity, Origin, Scene};
use crate::tundra::messages::{
    CreateAttributes, CreateComponents, CreateEntity, EditAttributes, EditAttributesBlock,
    NewAttribute, RemoveAttributes, RemoveComponents, RemoveEntity, RemovedAttribute,
};
use crate::tundra::{ComponentData, ComponentId, EntityId, Message};

/// Whether the bridge brings `entity` to the world server: a replicated
/// entity another node simulates.
pub(super) fn is_exportable(entity: &Entity) -> bool {
    entity.origin == Origin::Remote && entity.is_replicated()
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
        if self.ids.is_mirrored(local) || self.declined.contains(&local) {
            return;
        }
        let Some(entity) = scene.entity(local).filter(|e| is_exportable(e)) else {
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

    fn create_upstream(&mut self, entity: &Entity) {
        let unacked = self.ids.begin_export(entity.id);
        let mut components = Vec::new();
        for component in entity.replicated_components() {
            let id = ComponentId(self.ids.next_unacked_id().0);
            let mut data = Scene::component_data(component);
            data.id = id;
            components.push(data);
            if let Some(entry) = self.ids.exported_mut(entity.id) {
                entry.components.insert(
                    component.id,
                    ShadowComponent {
                        upstream: id,
                        values: shadow_of(component),
                    },
                );
            }
        }
        let parent = if self.protocol().has_entity_parent() {
            Some(
                entity
                    .parent
                    .and_then(|p| self.ids.upstream_of(p))
                    .unwrap_or(EntityId(0)),
            )
        } else {
            None
        };
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
        let mut created = Vec::<ComponentData>::new();
        let mut removed = Vec::<ComponentId>::new();
        let mut new_attributes = Vec::<NewAttribute>::new();
        let mut removed_attributes = Vec::<RemovedAttribute>::new();
        let mut blocks = Vec::<EditAttributesBlock>::new();
        let Some(entry) = self.ids.exported_mut(entity.id) else {
            return;
        };
        for component in entity.replicated_components() {
            let Some(shadow) = entry.components.get_mut(&component.id) else {
                created.push(Scene::component_data(component));
                continue;
            };
            if shadow.upstream.is_unacked() {
                continue; // CreateComponents not answered yet
            }
            let crate::scene::ComponentContent::Known { slots, .. } = &component.content else {
                continue;
            };
            let diff = diff_slots(&mut shadow.values, slots, component.static_count());
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
        for data in &mut created {
            let local = data.id;
            let id = ComponentId(self.ids.next_unacked_id().0);
            data.id = id;
            if let (Some(entry), Some(component)) = (
                self.ids.exported_mut(entity.id),
                entity.components.get(&local),
            ) {
                entry.components.insert(
                    local,
                    ShadowComponent {
                        upstream: id,
                        values: shadow_of(component),
                    },
                );
            }
        }
        // Tundra's per-entity order: removals, creations, edits (section 7.2).
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
    }
}
