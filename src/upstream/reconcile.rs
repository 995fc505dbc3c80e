//! Reconnect reconciliation (docs/upstream.md §4): after a new login
//! the world server sends its whole scene again. Each entity is matched to
//! the old mapping by id (or, for the world's own entities, by Name when the
//! server renumbered them) and only differences reach the node's scene, so
//! peers see no remove-and-recreate storm. Once the initial scene is
//! complete, world entities that did not come back leave, and federation
//! entities the world server lost are created in it again.
//!
//! Also the end of the grace period: the world's entities leave the scene.

use std::collections::{BTreeMap, BTreeSet};

use tracing::debug;

use super::bridge::{Bridge, BridgeStats, LinkState};
use super::echo::shadow_of_data;
use super::export::is_exportable;
use super::ids::Mirrored;
use crate::scene::{ChangeSource, Scene};
use crate::tundra::messages::CreateEntity;
use crate::tundra::{AttributeValue, ComponentBody, ComponentData, ComponentId, EntityId};

/// Component type of Name (docs/tundra-wire.md §9, type 26); its first
/// attribute is the name used to recognise an entity across a restart.
const NAME_COMPONENT: u32 = 26;

impl Bridge {
    /// Runs when the initial scene of a session is complete.
    pub(super) fn reconcile(&mut self, scene: &mut Scene) {
        let stale: Vec<(EntityId, EntityId)> = self
            .ids
            .mirrored_entries()
            .filter(|(_, m)| !m.seen)
            .map(|(upstream, m)| (*upstream, m.local))
            .collect();
        for (upstream, local) in stale {
            debug!(%upstream, entity = %local, "world entity gone after reconnect");
            self.ids.remove_mirrored(upstream);
            scene.set_proxied(local, false);
            let removed = scene.remove_entity(ChangeSource::Node, local);
            self.stats
                .scene(removed, "vanished world entity not removed");
        }
        for local in self.ids.exported_ids() {
            let lost = self.ids.exported(local).is_some_and(|e| !e.seen);
            if lost {
                // The world server does not have it (it restarted): forget the
                // old ids; the flush below creates it again.
                self.ids.end_export(local);
            }
            self.dirty.insert(local);
        }
        // Federation entities that arrived while the link was down.
        for entity in scene.entities().filter(|e| is_exportable(e)) {
            self.dirty.insert(entity.id);
        }
    }

    /// The world server stayed away past the grace period.
    pub(super) fn drop_mirrored(&mut self, scene: &mut Scene) {
        let all: Vec<(EntityId, EntityId)> = self
            .ids
            .mirrored_entries()
            .map(|(upstream, m)| (*upstream, m.local))
            .collect();
        for (upstream, local) in all {
            self.ids.remove_mirrored(upstream);
            scene.set_proxied(local, false);
            let removed = scene.remove_entity(ChangeSource::Node, local);
            self.stats.scene(removed, "world entity not removed");
        }
        for local in self.ids.exported_ids() {
            // What the world server had of them is unknown by the next login.
            if let Some(entry) = self.ids.exported_mut(local) {
                entry.seen = false;
            }
        }
    }

    /// A mirrored entity the world server sent whole again: only what
    /// differs changes in the node's scene (no remove and recreate).
    pub(super) fn update_mirrored(
        &mut self,
        upstream: EntityId,
        m: CreateEntity,
        parent: Option<EntityId>,
        scene: &mut Scene,
    ) {
        let Some(entry) = self.ids.mirrored(upstream).cloned() else {
            return;
        };
        let local = entry.local;
        let source = ChangeSource::Node;
        let changed = scene.set_temporary(source, local, m.temporary);
        self.stats
            .scene(changed, "world temporary flag not applied");
        if m.parent.is_some() {
            let changed = scene.set_parent(source, local, parent);
            self.stats.scene(changed, "world parent not applied");
        }
        let mut claimed = BTreeSet::new();
        let mut map = BTreeMap::new();
        for data in m.components {
            let existing = scene.entity(local).and_then(|e| {
                entry
                    .components
                    .get(&data.id)
                    .filter(|c| {
                        e.components
                            .get(c)
                            .is_some_and(|c| c.type_id == data.type_id)
                    })
                    .copied()
                    .filter(|c| !claimed.contains(c))
                    .or_else(|| {
                        e.replicated_components()
                            .find(|c| {
                                c.type_id == data.type_id
                                    && c.name == data.name
                                    && !claimed.contains(&c.id)
                                    && !entry.components.values().any(|v| *v == c.id)
                            })
                            .map(|c| c.id)
                    })
            });
            let upstream_component = data.id;
            match existing {
                Some(component) => {
                    claimed.insert(component);
                    map.insert(upstream_component, component);
                    apply_values(scene, &mut self.stats, (local, component), &data);
                }
                None => {
                    if let Ok(pairs) = scene.create_components(source, local, vec![data]) {
                        if let Some((_, assigned)) = pairs.first() {
                            claimed.insert(*assigned);
                            map.insert(upstream_component, *assigned);
                        }
                    }
                }
            }
        }
        let stale: Vec<ComponentId> = scene
            .entity(local)
            .map(|e| {
                e.replicated_components()
                    .map(|c| c.id)
                    .filter(|c| !claimed.contains(c))
                    .collect()
            })
            .unwrap_or_default();
        for component in stale {
            let removed = scene.remove_component(source, local, component);
            self.stats
                .scene(removed, "stale world component not removed");
        }
        self.ids.insert_mirrored(
            upstream,
            Mirrored {
                local,
                components: map,
                seen: true,
            },
        );
    }

    /// A mirrored entity not seen this session whose Name matches.
    pub(super) fn unseen_by_name(
        &self,
        components: &[ComponentData],
        scene: &Scene,
    ) -> Option<EntityId> {
        let name = components
            .iter()
            .find(|c| c.type_id == NAME_COMPONENT)
            .and_then(|c| match &c.body {
                ComponentBody::Attributes(block) => match block.values.first() {
                    Some(AttributeValue::String(s)) if !s.is_empty() => Some(s.clone()),
                    _ => None,
                },
                ComponentBody::Opaque(_) => None,
            })?;
        if !matches!(self.state, LinkState::Syncing { .. }) {
            return None;
        }
        self.ids
            .mirrored_entries()
            .filter(|(_, m)| !m.seen)
            .find(|(_, m)| {
                scene
                    .entity(m.local)
                    .and_then(|e| e.component_of_type(NAME_COMPONENT))
                    .and_then(|c| c.attribute(0))
                    .is_some_and(|a| a.value == AttributeValue::String(name.clone()))
            })
            .map(|(id, _)| *id)
    }

    /// The world server's current state of an exported entity becomes its
    /// shadow; components it no longer has are forgotten (created again).
    pub(super) fn refresh_shadow(&mut self, local: EntityId, components: &[ComponentData]) {
        let Some(entry) = self.ids.exported_mut(local) else {
            return;
        };
        entry.components.retain(|_, shadow| {
            match components.iter().find(|c| c.id == shadow.upstream) {
                Some(data) => {
                    shadow.values = shadow_of_data(data);
                    shadow.forwarded.clear();
                    true
                }
                None => false,
            }
        });
    }
}

/// Writes a full update's values into an existing component; equal values
/// are not recorded by the scene, so only differences reach the journal.
fn apply_values(
    scene: &mut Scene,
    stats: &mut BridgeStats,
    (entity, component): (EntityId, ComponentId),
    data: &ComponentData,
) {
    let source = ChangeSource::Node;
    let ComponentBody::Attributes(block) = &data.body else {
        return;
    };
    for (index, value) in block.values.iter().enumerate() {
        if let Ok(index) = u8::try_from(index) {
            let edited = scene.edit_attribute(source, entity, component, index, value.clone());
            stats.scene(edited, "world value not applied");
        }
    }
    let statics = block.values.len();
    let existing: Vec<u8> = scene
        .entity(entity)
        .and_then(|e| e.components.get(&component))
        .map(|c| {
            (statics..c.slot_types().len())
                .filter_map(|i| u8::try_from(i).ok())
                .filter(|i| c.attribute(*i).is_some())
                .collect()
        })
        .unwrap_or_default();
    for index in existing {
        if !block.dynamic.iter().any(|d| d.index == index) {
            let removed = scene.remove_attribute(source, entity, component, index);
            stats.scene(removed, "world dynamic attribute not removed");
        }
    }
    for dynamic in &block.dynamic {
        let present = scene
            .entity(entity)
            .and_then(|e| e.components.get(&component))
            .and_then(|c| c.attribute(dynamic.index))
            .is_some_and(|a| a.ty() == dynamic.value.attribute_type());
        if present {
            let edited = scene.edit_attribute(
                source,
                entity,
                component,
                dynamic.index,
                dynamic.value.clone(),
            );
            stats.scene(edited, "world dynamic attribute not edited");
        } else {
            // Absent, or another type in the slot: created anew.
            if present_any(scene, entity, component, dynamic.index) {
                let removed = scene.remove_attribute(source, entity, component, dynamic.index);
                stats.scene(removed, "retyped world attribute not removed");
            }
            let created = scene.create_attribute(source, entity, component, dynamic.clone());
            stats.scene(created, "world dynamic attribute not created");
        }
    }
}

/// Whether the component has attribute `index` at all.
fn present_any(scene: &Scene, entity: EntityId, component: ComponentId, index: u8) -> bool {
    scene
        .entity(entity)
        .and_then(|e| e.components.get(&component))
        .is_some_and(|c| c.attribute(index).is_some())
}
