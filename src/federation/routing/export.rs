//! Exports: this node's view of an entity, sent as LESS objects on a link
//! (docs/federation.md §2), kept current from the scene's journal.

use tracing::{debug, warn};

use crate::federation::core::Federation;
use crate::federation::export_policy::filter::{may_export, TypeFilter};
use crate::federation::export_policy::origin_policy::OriginPolicy;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::{unexport_entity, withdraw, Link};
use crate::federation::routing::object_values::{
    authority_values, component_type, component_values, dynamic_layout, parent_value, pv, type_name,
};
use crate::federation::routing::references::reference_out;
use crate::federation::space::position::{is_transform, moves_reference};
use crate::federation::wire::mapping::{self, attribute_key, entity};
use crate::federation::wire::values::to_less;
use crate::less::ids::{Local, ObjectId, PropertyKey};
use crate::less::property_list::PropertyValue;
use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::logging::RemoteText;
use crate::scene::position::PLACEABLE;
use crate::scene::{
    Change, ChangeKind, ChangeSource, Component, ComponentContent, Entity, Origin, Scene,
};
use crate::tundra::{ComponentId, EntityId};

/// Whether the objects of `target` wait before going out on `link`, so
/// that the peer receives the entity whole: while the peer may still
/// subscribe to the type of one of its components (its objects would follow
/// the entity object by a round trip), or while its parent waits (the
/// child's parent would go out empty). Introduces the component types it
/// needs, so the wait starts at once.
fn entity_waits(link: &mut Link, target: &Entity, rule: Option<&OriginPolicy>) -> bool {
    if target.parent.is_some_and(|p| link.deferred.contains(&p)) {
        return true;
    }
    let mut waits = false;
    for component in target.replicated_components() {
        let (uri, type_name) = component_type(component);
        if may_export(&link.policy, link.peer, rule, &type_name) {
            link.type_for(&uri);
            waits |= link.awaits_subscription(&uri);
        }
    }
    waits
}

/// Introduces one component object on `link`; `transform` is its
/// attribute 0 in federation coordinates where it is a placed transform
/// (`positions.rs`).
fn export_component(
    link: &mut Link,
    entity: EntityId,
    component: &Component,
    rule: Option<&OriginPolicy>,
    transform: Option<Value>,
) {
    if !component.is_replicated() {
        return;
    }
    let (uri, type_name) = component_type(component);
    if !may_export(&link.policy, link.peer, rule, &type_name) {
        return;
    }
    let Some(exported) = link.exported.get(&entity) else {
        return;
    };
    // Idempotent: a component reaches here from the journal and from a
    // route change in the same round.
    if exported.components().contains_key(&component.id) {
        return;
    }
    let entity_object = exported.object;
    let Some(type_id) = link.type_for(&uri) else {
        warn!(link = link.id.0, uri = %RemoteText(&uri), "cannot introduce component type");
        return;
    };
    let object = link.session.allocate_object_id();
    let values = component_values(link, entity_object, component, transform);
    if let Err(error) = link.session.introduce_entity(object, type_id, values) {
        warn!(link = link.id.0, %entity, component = %component.id, error = %RemoteText(&error), "cannot export component");
        return;
    }
    link.exported.insert_component(entity, component.id, object);
}

impl Federation {
    /// Adds or removes the entity object of `global` on `link`, and keeps its
    /// path current.
    pub(in crate::federation) fn sync_entity_export(
        &mut self,
        global: GlobalId,
        link_id: LinkId,
        scene: &Scene,
    ) {
        // Untracked entities were unexported when they left the scene.
        let Some(scene_id) = self.tracked.get(&global).map(|t| t.scene()) else {
            return;
        };
        let want =
            self.should_export(global, link_id) && self.interest_admits(link_id, scene_id, scene);
        let path = self.outgoing_path(global);
        let policy = self.outgoing_policy(global);
        let authority = self.outgoing_authority(global);
        let rule = self.relay_rule(global);
        let introducing = want
            && self
                .links
                .get(&link_id)
                .is_some_and(|l| !l.exported.contains(&scene_id));
        // Its placed transforms, for the component objects that go out
        // with a new entity object (`positions.rs`).
        let transforms = match scene.entity(scene_id) {
            Some(target) if introducing => self.placed_transforms(link_id, target),
            _ => Vec::new(),
        };
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let have = link.exported.contains(&scene_id);
        // Version 1 of the entity type has no policy, authority or epoch
        // (docs/federation.md §2.1): they are noted as sent, and not sent.
        let version_2 = link.features.entity_v2;
        let path_value = Value::List(
            ValueType::Uuid,
            path.iter().map(|u| Value::Uuid(*u)).collect(),
        );
        match (want, have) {
            (false, true) => unexport_entity(link, scene_id, &mut self.stats),
            (true, true) => {
                // Only a changed path is sent (see `ExportedEntity::path`).
                let Some(exported) = link.exported.get(&scene_id) else {
                    return;
                };
                let object = exported.object;
                let moved = exported.path != path;
                let stale = exported.policy.as_deref() != Some(&*policy);
                let handed = exported.authority != Some(authority);
                if handed && !version_2 {
                    link.exported.set_authority(scene_id, authority);
                } else if handed {
                    // One message: a receiver sees authority and epoch change
                    // together.
                    let sent = link
                        .session
                        .update_entity(object, authority_values(authority).to_vec());
                    if sent.is_ok() {
                        link.exported.set_authority(scene_id, authority);
                    }
                }
                if moved {
                    let sent = link.session.set_property(
                        object,
                        PropertyKey::new(entity::COMPONENT, entity::PATH),
                        path_value,
                    );
                    if sent.is_ok() {
                        link.exported.set_path(scene_id, path);
                    }
                }
                if stale && !version_2 {
                    link.exported.set_policy(scene_id, policy);
                } else if stale {
                    let sent = link.session.set_property(
                        object,
                        PropertyKey::new(entity::COMPONENT, entity::EXPORT),
                        policy.to_value(),
                    );
                    if sent.is_ok() {
                        link.exported.set_policy(scene_id, policy);
                    }
                }
            }
            (true, false) => {
                let Some(target) = scene.entity(scene_id) else {
                    return;
                };
                let Some(type_id) = link.type_for(mapping::entity_uri(version_2)) else {
                    return;
                };
                if entity_waits(link, target, rule.as_deref()) {
                    link.deferred.insert(scene_id);
                    return; // `release_deferred` exports it
                }
                link.deferred.remove(&scene_id);
                let object = link.session.allocate_object_id();
                let mut values = vec![
                    pv(
                        entity::COMPONENT,
                        entity::ORIGIN,
                        Value::Uuid(global.origin),
                    ),
                    pv(
                        entity::COMPONENT,
                        entity::SERIAL,
                        Value::Integer(global.serial as i64),
                    ),
                    pv(entity::COMPONENT, entity::PATH, path_value),
                    pv(
                        entity::COMPONENT,
                        entity::TEMPORARY,
                        Value::Integer(i64::from(target.temporary)),
                    ),
                    pv(
                        entity::COMPONENT,
                        entity::PARENT,
                        parent_value(link, target.parent),
                    ),
                ];
                if version_2 {
                    values.push(pv(entity::COMPONENT, entity::EXPORT, policy.to_value()));
                    values.extend(authority_values(authority));
                }
                // The components go out before the entity object: a peer
                // files them until their entity comes (section 3) and then
                // presents it whole, even when its objects span packets.
                link.exported.insert_entity(scene_id, object, path, policy);
                link.exported.set_authority(scene_id, authority);
                for component in target.replicated_components() {
                    let transform = placed_for(&transforms, component.id);
                    export_component(link, scene_id, component, rule.as_deref(), transform);
                }
                if let Err(error) = link.session.introduce_entity(object, type_id, values) {
                    warn!(link = link_id.0, entity = %global, error = %RemoteText(&error), "cannot export entity");
                    unexport_entity(link, scene_id, &mut self.stats);
                    return;
                }
                debug!(link = link_id.0, entity = %global, object = object.get(), "entity exported");
            }
            (false, false) => {
                link.deferred.remove(&scene_id);
            }
        }
    }

    /// Exports the components of an exported entity that are not yet on
    /// the link, and withdraws those the origin's policy no longer allows
    /// there.
    pub(in crate::federation) fn sync_component_exports(
        &mut self,
        global: GlobalId,
        link_id: LinkId,
        scene: &Scene,
    ) {
        let Some(scene_id) = self.tracked.get(&global).map(|t| t.scene()) else {
            return;
        };
        let rule = self.relay_rule(global);
        let Some(target) = scene.entity(scene_id) else {
            return;
        };
        let transforms = self.placed_transforms(link_id, target);
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let Some(exported) = link.exported.get(&scene_id) else {
            return;
        };
        // Only a relayed entity's policy changes while it is exported, and
        // only a restrictive one can refuse what is already out.
        let refused: Vec<ComponentId> = match rule.as_deref() {
            Some(policy) if *policy.filter_for(link.peer) != TypeFilter::All => exported
                .components()
                .keys()
                .filter(|id| {
                    target.components.get(id).is_some_and(|c| {
                        !may_export(&link.policy, link.peer, Some(policy), &type_name(c))
                    })
                })
                .copied()
                .collect(),
            _ => Vec::new(),
        };
        let missing: Vec<&Component> = target
            .replicated_components()
            .filter(|c| !exported.components().contains_key(&c.id))
            .collect();
        for id in refused {
            if let Some(object) = link.exported.remove_component(scene_id, id) {
                withdraw(link, object, &mut self.stats);
            }
        }
        for component in missing {
            let transform = placed_for(&transforms, component.id);
            export_component(link, scene_id, component, rule.as_deref(), transform);
        }
    }

    /// Feeds the scene's journal: new local entities get an identity and go
    /// out; changes to exported entities become property updates.
    pub fn handle_scene_changes(&mut self, scene: &Scene, changes: &[Change]) {
        for change in changes {
            let id = change.kind.entity();
            if id.is_local() {
                continue;
            }
            match change.kind {
                ChangeKind::EntityCreated(_) => {
                    let global = match self.tracked.global_of(id) {
                        Some(global) => global,
                        None => match scene.entity(id) {
                            Some(e) if e.origin == Origin::Local => self.track_local(id),
                            _ => continue,
                        },
                    };
                    self.sync_all_links(global, scene);
                    // A new child may bring its tree into a link's interest.
                    if scene.entity(id).is_some_and(|e| e.parent.is_some()) {
                        self.follow_interest(id, scene);
                    }
                }
                ChangeKind::EntityRemoved(_) => {
                    // The entity left the scene: its identity goes with it
                    // (a remote one is presented anew if a copy changes).
                    if let Some((global, _)) = self.tracked.remove_scene(id) {
                        debug!(entity = %global, scene = %id, "tracked entity left the scene");
                    }
                    for link in self.links.values_mut() {
                        unexport_entity(link, id, &mut self.stats);
                    }
                }
                ChangeKind::ComponentCreated(_, c) => {
                    let rule = self
                        .tracked
                        .global_of(id)
                        .and_then(|global| self.relay_rule(global));
                    let Some(target) = scene.entity(id) else {
                        continue;
                    };
                    let Some(component) = target.components.get(&c) else {
                        continue;
                    };
                    if component.type_id == PLACEABLE {
                        self.follow_interest(id, scene);
                    }
                    let links: Vec<LinkId> = self.links.keys().copied().collect();
                    for link_id in links {
                        let transform = placed_for(&self.placed_transforms(link_id, target), c);
                        let Some(link) = self.links.get_mut(&link_id) else {
                            continue;
                        };
                        if link.exported.contains(&id) {
                            export_component(link, id, component, rule.as_deref(), transform);
                        }
                    }
                }
                ChangeKind::ComponentRemoved(_, c) => {
                    for link in self.links.values_mut() {
                        if let Some(object) = link.exported.remove_component(id, c) {
                            withdraw(link, object, &mut self.stats);
                        }
                    }
                    // It may have been its tree's Placeable.
                    self.follow_interest(id, scene);
                }
                ChangeKind::AttributeChanged(_, c, index)
                | ChangeKind::AttributeCreated(_, c, index)
                | ChangeKind::AttributeRemoved(_, c, index) => {
                    let Some(component) = scene.entity(id).and_then(|e| e.components.get(&c))
                    else {
                        continue;
                    };
                    let structural = !matches!(change.kind, ChangeKind::AttributeChanged(..));
                    if !self.own_edits.is_empty()
                        && !matches!(change.source, ChangeSource::Peer(_))
                        && scene.entity(id).is_some_and(|e| e.origin == Origin::Local)
                    {
                        // This node's own edit, applied here as the authority.
                        if let Some(global) = self.tracked.global_of(id) {
                            self.own_edits.edited_here((global, c, index));
                        }
                    }
                    if is_transform(component.type_id, index) {
                        // The tree may enter or leave a link's interest.
                        self.follow_interest(id, scene);
                    }
                    let placed = !self.placement.is_origin();
                    if placed && is_transform(component.type_id, index) {
                        // Per link, in federation coordinates (`positions.rs`).
                        self.resend_transforms(id, scene);
                        continue;
                    }
                    if placed && moves_reference(component.type_id, index) {
                        // Whether the transform is placed in the world changes.
                        self.resend_transforms(id, scene);
                    }
                    for link in self.links.values_mut() {
                        // The lookup the read-ahead walks too (`export_targets`).
                        let Some(object) = link.exported_component(id, c) else {
                            continue;
                        };
                        let mut values = Vec::new();
                        let reference = |text: &str| reference_out(link, text);
                        if let ComponentContent::Known { schema, .. } = &component.content {
                            let value = component
                                .attribute(index)
                                .map(|a| to_less(&a.value, &reference));
                            if schema.dynamic_attributes {
                                if structural {
                                    values.extend(dynamic_layout(component));
                                }
                                values.push(PropertyValue {
                                    key: attribute_key(index),
                                    value: Value::Standalone(Box::new(
                                        value.unwrap_or(Value::Null),
                                    )),
                                });
                            } else if let Some(value) = value {
                                let sent = link.session.update_property(
                                    object,
                                    &attribute_key(index),
                                    value,
                                );
                                self.stats.session(sent, "attribute change not exported");
                            }
                        }
                        if !values.is_empty() {
                            let sent = link.session.update_entity(object, values);
                            self.stats
                                .session(sent, "dynamic attribute change not exported");
                        }
                    }
                }
                ChangeKind::TemporaryChanged(_) | ChangeKind::ParentChanged(_) => {
                    let Some(target) = scene.entity(id) else {
                        continue;
                    };
                    for link in self.links.values_mut() {
                        let Some(object) = link.exported.object_of(id) else {
                            continue;
                        };
                        let values = vec![
                            pv(
                                entity::COMPONENT,
                                entity::TEMPORARY,
                                Value::Integer(i64::from(target.temporary)),
                            ),
                            pv(
                                entity::COMPONENT,
                                entity::PARENT,
                                parent_value(link, target.parent),
                            ),
                        ];
                        let sent = link.session.update_entity(object, values);
                        self.stats
                            .session(sent, "temporary flag or parent not exported");
                    }
                    if matches!(change.kind, ChangeKind::ParentChanged(_)) {
                        self.follow_interest(id, scene);
                    }
                    if matches!(change.kind, ChangeKind::ParentChanged(_))
                        && !self.placement.is_origin()
                    {
                        // A child's transform is relative, a root's placed.
                        self.resend_transforms(id, scene);
                    }
                }
            }
        }
    }

    /// Exports the entities that waited on `link_id` for the peer's answer to
    /// a type introduction, once the peer has answered every one (parents
    /// first, so each goes out with its parent).
    pub(in crate::federation) fn release_deferred(&mut self, link_id: LinkId, scene: &Scene) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        if link.deferred.is_empty() || link.awaits_any_subscription() {
            return;
        }
        for global in self.export_order(scene) {
            let waiting = self.tracked.get(&global).map(|t| t.scene());
            let deferred = self.links.get(&link_id).map(|l| &l.deferred);
            if waiting.is_some_and(|id| deferred.is_some_and(|d| d.contains(&id))) {
                self.sync_entity_export(global, link_id, scene);
                self.sync_component_exports(global, link_id, scene);
            }
        }
    }

    /// Components of an exported entity, for tests and status.
    pub fn exported_objects(
        &self,
        link: LinkId,
        entity: EntityId,
    ) -> Option<(ObjectId<Local>, Vec<ComponentId>)> {
        let exported = self.links.get(&link)?.exported.get(&entity)?;
        Some((
            exported.object,
            exported.components().keys().copied().collect(),
        ))
    }
}

/// The placed transform of component `id` among `transforms`.
fn placed_for(transforms: &[(ComponentId, Value)], id: ComponentId) -> Option<Value> {
    transforms
        .iter()
        .find(|(component, _)| *component == id)
        .map(|(_, value)| value.clone())
}
