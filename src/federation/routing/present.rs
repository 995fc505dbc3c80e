//! Presenting a copy: the scene entity that shows a peer's copy of an
//! entity is created from it, switched to another copy when the route
//! changes (keeping its ids), and kept in line with the copy's entity
//! properties and parent (docs/federation.md §4).

use foldhash::HashMap;

use tracing::{debug, warn};

use crate::federation::core::Federation;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::mirror::ComponentKind;
use crate::federation::routing::scene_values::{component_data, reconcile_dynamic};
use crate::less::ids::{ObjectId, Remote};
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, ComponentContent, Origin, Scene};
use crate::tundra::{ComponentBody, ComponentId};

impl Federation {
    /// Creates the scene entity for the copy on `link_id`.
    pub(in crate::federation) fn present(
        &mut self,
        global: GlobalId,
        link_id: LinkId,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let Some(entity) = link.mirror.copy_of(global) else {
            return;
        };
        let incomplete = entity
            .components()
            .iter()
            .filter_map(|id| link.mirror.component(*id))
            .any(|c| !c.is_presentable());
        if incomplete {
            // Presented now, a native client would get the entity in pieces;
            // the update that completes the copy presents it whole.
            debug!(link = link_id.0, entity = %global, "entity waits for the rest of a component");
            return;
        }
        let temporary = entity.temporary;
        let has_parent = entity.parent.is_some();
        let component_objects: Vec<ObjectId<Remote>> =
            entity.components().iter().copied().collect();
        let mut data = Vec::new();
        let mut objects = Vec::new();
        for id in component_objects {
            if let Some(c) = link
                .mirror
                .component(id)
                .and_then(|c| component_data(&self.tracked, link, scene, c, &self.placement))
            {
                data.push(c);
                objects.push(id);
            }
        }
        let created = match scene.create_entity(
            ChangeSource::Peer(link_id.0),
            None,
            Origin::Remote,
            temporary,
            None,
            data,
        ) {
            Ok(created) => created,
            Err(error) => {
                warn!(link = link_id.0, entity = %global, error = %RemoteText(&error), "cannot present entity");
                return;
            }
        };
        let components: HashMap<ObjectId<Remote>, ComponentId> = objects
            .into_iter()
            .zip(created.components.iter().map(|(_, id)| *id))
            .collect();
        if let Err(error) =
            self.tracked
                .insert(global, created.id, false, Some(link_id), components)
        {
            // Only an identity not yet tracked is presented (`reroute`).
            warn!(link = link_id.0, entity = %global, %error, "presented entity not tracked");
            return;
        }
        debug!(link = link_id.0, entity = %global, scene = %created.id, "entity presented");
        self.apply_entity_properties(link_id, global, scene);
        if has_parent {
            self.awaiting_parent.insert(global);
        }
    }

    /// Adds one component object of the presented copy to the scene.
    pub(in crate::federation) fn present_component(
        &mut self,
        link_id: LinkId,
        global: GlobalId,
        object: ObjectId<Remote>,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let Some(tracked) = self.tracked.get(&global) else {
            return;
        };
        if tracked.components.contains_key(&object) {
            return;
        }
        let Some(mirrored) = link.mirror.component(object) else {
            return;
        };
        if !mirrored.is_presentable() {
            return; // the update that completes it presents it
        }
        let Some(data) = component_data(&self.tracked, link, scene, mirrored, &self.placement)
        else {
            return;
        };
        let entity = tracked.scene();
        match scene.create_components(ChangeSource::Peer(link_id.0), entity, vec![data]) {
            Ok(pairs) => {
                if let (Some((_, id)), Some(tracked)) =
                    (pairs.first(), self.tracked.get_mut(&global))
                {
                    tracked.components.insert(object, *id);
                }
            }
            Err(error) => {
                warn!(link = link_id.0, error = %RemoteText(&error), "cannot present component")
            }
        }
    }

    /// Presents another copy of an entity already in the scene (a route
    /// change). The entity keeps its id, and each of its components whose
    /// type and name the new copy also has keeps its id too: the new copy's
    /// values are applied to it as edits, so a client sees a route change at
    /// most as changed values. Replacing the components instead would give
    /// them new ids, and a client that follows a component by the id it was
    /// first given (as a Tundra client's scripts do) would stop seeing its
    /// updates. Components only the old copy had are removed, those only the
    /// new copy has are created.
    pub(in crate::federation) fn switch_route(
        &mut self,
        global: GlobalId,
        link_id: LinkId,
        scene: &mut Scene,
    ) {
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        let entity = tracked.scene();
        let mut unclaimed: Vec<ComponentId> = if tracked.selected.is_none() {
            // A node that handed the entity over, or takes it over from
            // another copy: every component is its own scene's.
            tracked.components.clear();
            scene
                .entity(entity)
                .map(|e| e.replicated_components().map(|c| c.id).collect())
                .unwrap_or_default()
        } else {
            tracked.components.drain().map(|(_, c)| c).collect()
        };
        unclaimed.sort();
        tracked.selected = Some(link_id);
        self.awaiting_parent.insert(global);
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let objects: Vec<ObjectId<Remote>> = link
            .mirror
            .copy_of(global)
            .map(|e| e.components().iter().copied().collect())
            .unwrap_or_default();
        let mut kept = Vec::new();
        let mut fresh = Vec::new();
        for object in objects {
            let Some(mirrored) = link.mirror.component(object) else {
                continue;
            };
            let same = unclaimed.iter().position(|id| {
                scene
                    .entity(entity)
                    .and_then(|e| e.components.get(id))
                    .is_some_and(|c| {
                        c.type_id == mirrored.kind.type_id() && c.name == mirrored.name
                    })
            });
            match same {
                Some(index) => kept.push((object, unclaimed.remove(index))),
                None => fresh.push(object),
            }
        }
        let source = ChangeSource::Peer(link_id.0);
        for component in unclaimed {
            let removed = scene.remove_component(source, entity, component);
            self.stats
                .scene(removed, "component of the old route not removed");
        }
        for (object, component) in kept {
            if let Some(tracked) = self.tracked.get_mut(&global) {
                tracked.components.insert(object, component);
            }
            self.refresh_presented_component(link_id, global, object, scene);
        }
        for object in fresh {
            self.present_component(link_id, global, object, scene);
        }
        self.apply_entity_properties(link_id, global, scene);
    }

    /// Makes a presented component hold every value of its mirrored object
    /// (edits only where a value differs; the scene records no equal value).
    fn refresh_presented_component(
        &mut self,
        link_id: LinkId,
        global: GlobalId,
        object: ObjectId<Remote>,
        scene: &mut Scene,
    ) {
        let (Some(link), Some(tracked)) = (self.links.get(&link_id), self.tracked.get(&global))
        else {
            return;
        };
        let (Some(mirrored), Some(&component)) = (
            link.mirror.component(object),
            tracked.components.get(&object),
        ) else {
            return;
        };
        let dynamic = matches!(mirrored.kind, ComponentKind::Dynamic { .. });
        let Some(data) = component_data(&self.tracked, link, scene, mirrored, &self.placement)
        else {
            return;
        };
        let entity = tracked.scene();
        let source = ChangeSource::Peer(link_id.0);
        match data.body {
            ComponentBody::Attributes(block) if !dynamic => {
                for (index, value) in block.values.into_iter().enumerate() {
                    if let Ok(index) = u8::try_from(index) {
                        let edited = scene.edit_attribute(source, entity, component, index, value);
                        self.stats
                            .scene(edited, "value of the new route not applied");
                    }
                }
            }
            ComponentBody::Attributes(block) => {
                let target = (source, entity, component);
                reconcile_dynamic(scene, &mut self.stats, target, block.dynamic);
            }
            ComponentBody::Opaque(bytes) => {
                let same = scene
                    .entity(entity)
                    .and_then(|e| e.components.get(&component))
                    .is_some_and(|c| c.content == ComponentContent::Opaque(bytes.clone()));
                if !same {
                    // Opaque content has no attributes to edit: present anew.
                    let removed = scene.remove_component(source, entity, component);
                    self.stats.scene(removed, "opaque component not replaced");
                    if let Some(tracked) = self.tracked.get_mut(&global) {
                        tracked.components.remove(&object);
                    }
                    self.present_component(link_id, global, object, scene);
                }
            }
        }
    }

    pub(in crate::federation) fn apply_entity_properties(
        &mut self,
        link_id: LinkId,
        global: GlobalId,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let Some(tracked) = self.tracked.get(&global) else {
            return;
        };
        let Some(entity) = link.mirror.copy_of(global) else {
            return;
        };
        let parent = entity
            .parent
            .and_then(|p| link.mirror.entity(p))
            .and_then(|p| self.tracked.get(&p.global))
            .map(|t| t.scene());
        let source = ChangeSource::Peer(link_id.0);
        let temporary = scene.set_temporary(source, tracked.scene(), entity.temporary);
        self.stats
            .scene(temporary, "peer's temporary flag not applied");
        let parented = scene.set_parent(source, tracked.scene(), parent);
        self.stats.scene(parented, "peer's parent not applied");
        if !self.placement.is_origin() {
            // A parent given or taken places the transform anew.
            self.apply_received_transforms(link_id, global, scene);
        }
    }

    /// Re-applies entity properties whose references may have become
    /// resolvable (a parent presented after its child). Visits only the
    /// entities in `awaiting_parent`; one leaves it once its parent is
    /// applied, or when it has no parent or is no longer presented.
    pub(in crate::federation) fn resolve_references(&mut self, scene: &mut Scene) {
        let candidates: Vec<GlobalId> = self.awaiting_parent.iter().copied().collect();
        for global in candidates {
            match self.parent_state(global, scene) {
                ParentState::Settled => {
                    self.awaiting_parent.remove(&global);
                }
                ParentState::Resolvable(link) => {
                    self.apply_entity_properties(link, global, scene);
                    self.awaiting_parent.remove(&global);
                }
                ParentState::Waiting => {}
            }
        }
    }

    /// Where a presented entity's parent reference stands.
    fn parent_state(&self, global: GlobalId, scene: &Scene) -> ParentState {
        let Some(t) = self.tracked.get(&global) else {
            return ParentState::Settled;
        };
        let Some(link_id) = t.selected else {
            return ParentState::Settled;
        };
        let Some(link) = self.links.get(&link_id) else {
            return ParentState::Settled;
        };
        let Some(entity) = link.mirror.copy_of(global) else {
            return ParentState::Settled;
        };
        let Some(parent) = entity.parent else {
            return ParentState::Settled;
        };
        let wanted = link
            .mirror
            .entity(parent)
            .and_then(|p| self.tracked.get(&p.global))
            .map(|p| p.scene());
        let Some(current) = scene.entity(t.scene()).map(|e| e.parent) else {
            return ParentState::Settled;
        };
        match wanted {
            None => ParentState::Waiting,
            Some(wanted) if Some(wanted) == current => ParentState::Settled,
            Some(_) => ParentState::Resolvable(link_id),
        }
    }
}

/// What `resolve_references` does with an awaiting entity.
enum ParentState {
    /// Nothing to do: applied, no parent, or not presented.
    Settled,
    /// The parent is presented but not applied: apply it through this link.
    Resolvable(LinkId),
    /// The parent is not presented yet.
    Waiting,
}
