//! Imports: a peer's session events applied. Types it introduces are
//! subscribed as the accept list allows, its objects are mirrored, and the
//! copy routing chose is presented in the scene, once per entity
//! (docs/federation.md §3 and §4).

use smallvec::SmallVec;

use tracing::{debug, warn};

use crate::federation::core::{Federation, FederationEvent};
use crate::federation::ids::LinkId;
use crate::federation::interest::entry::INTEREST;
use crate::federation::routing::link::{Link, RemoteType};
use crate::federation::routing::mirror::{self, ComponentKind, MirrorComponent};
use crate::federation::routing::positions::{copy_in_world, is_placeable, placed};
use crate::federation::routing::references::reference_in;
use crate::federation::routing::scene_values::{
    attribute_index, dynamic_attributes, reconcile_dynamic,
};
use crate::federation::space::position::{PARENT_REF, TRANSFORM};
use crate::federation::wire::interactions::{DEPARTURE_ANSWER, DEPARTURE_OFFER, ENTITY_ACTION};
use crate::federation::wire::mapping::{self, attribute_key, UriKind};
use crate::federation::wire::values::from_less;
use crate::less::ids::{ObjectId, PropertyKey, Remote};
use crate::less::session::{CloseReason, Event};
use crate::less::value::Value;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, Scene};
use crate::tundra::{ComponentId, EntityId};

impl Federation {
    /// Drains and applies every event of one link's session. Returns the
    /// close reason when the session ended (the driver then removes the link).
    pub fn handle_link_events(
        &mut self,
        link_id: LinkId,
        scene: &mut Scene,
    ) -> Option<CloseReason> {
        self.warm_updates(link_id, scene);
        loop {
            let Some(event) = self.links.get_mut(&link_id)?.session.poll_event() else {
                break;
            };
            if let Some(reason) = self.handle_event(link_id, event, scene) {
                return Some(reason);
            }
        }
        // Every event of the packets that arrived is applied: new epochs
        // whose earlier packets are all here take effect, and entities that
        // waited for the peer to answer a type introduction go out.
        self.pass_epoch_barriers(link_id, scene);
        self.release_deferred(link_id, scene);
        None
    }

    fn handle_event(
        &mut self,
        link_id: LinkId,
        event: Event,
        scene: &mut Scene,
    ) -> Option<CloseReason> {
        match event {
            Event::TypeIntroduced {
                type_id,
                uri,
                schema,
            } => self.handle_type(link_id, type_id, &uri, schema, scene),
            Event::EntityIntroduced {
                entity,
                type_id,
                values,
            } => {
                let kind = self
                    .links
                    .get(&link_id)?
                    .remote_types
                    .get(&type_id)
                    .cloned();
                match kind {
                    Some(RemoteType::Entity) => {
                        self.handle_entity_object(link_id, entity, &values, true, scene)
                    }
                    Some(RemoteType::Component(kind)) => {
                        // Subscribed types have a schema (handle_type).
                        let link = self.links.get(&link_id)?;
                        let schema = link.session.remote_type(type_id)?.1?.clone();
                        let mut object = MirrorComponent::new(kind, schema);
                        if let Err(error) = mirror::apply_component_values(&mut object, values) {
                            warn!(link = link_id.0, error = %RemoteText(&error), "bad component object");
                            return None;
                        }
                        self.handle_component_object(link_id, entity, object, scene);
                    }
                    _ => {}
                }
            }
            Event::EntityUpdated { entity, values } => {
                let link = self.links.get_mut(&link_id)?;
                // Component objects first: they take nearly every update.
                if link.mirror.component(entity).is_some() {
                    // The values move into the mirror; the scene takes them
                    // from there (by attribute index: the keys move too).
                    let attributes: SmallVec<[u8; 8]> = values
                        .iter()
                        .filter_map(|v| attribute_index(&v.key))
                        .collect();
                    let (owner, applied) = link.mirror.update_component(entity, values)?;
                    if owner.changed() {
                        self.disown_presented(link_id, entity, owner.before, scene);
                    }
                    if let Err(error) = applied {
                        warn!(link = link_id.0, error = %RemoteText(&error), "bad component update");
                        return None;
                    }
                    if owner.changed() {
                        let link = self.links.get(&link_id)?;
                        let waiting = owner
                            .after
                            .and_then(|o| link.mirror.entity(o))
                            .map(|e| e.global)
                            .filter(|g| {
                                self.tracked.get(g).and_then(|t| t.selected) != Some(link_id)
                            });
                        if let Some(global) = waiting {
                            // As for a new component object: a route change may wait on it.
                            self.reroute(global, scene);
                        }
                    }
                    self.apply_component_update(link_id, entity, &attributes, scene);
                } else if link.mirror.entity(entity).is_some() {
                    self.handle_entity_object(link_id, entity, &values, false, scene);
                }
            }
            Event::EntityRemoved { entity } => self.handle_removed_object(link_id, entity, scene),
            Event::Tweaked {
                entity,
                property,
                value,
            } => self.handle_tweak(link_id, entity, property, value, scene),
            Event::MethodInvoked {
                request,
                entity,
                method,
                arguments,
            } => self.handle_method(link_id, request, entity, method, arguments, scene),
            Event::MethodResult {
                request,
                status,
                value,
            } => self.handle_method_result(link_id, request, status, value, scene),
            Event::Closed { reason } => return Some(reason),
            Event::TypeSubscribed { .. } | Event::TypeUnsubscribed { .. } => {}
            Event::Interaction {
                interaction,
                values,
            } if interaction == ENTITY_ACTION => self.handle_flood(link_id, &values),
            Event::Interaction {
                interaction,
                values,
            } if interaction == DEPARTURE_OFFER || interaction == DEPARTURE_ANSWER => {
                self.handle_departure_interaction(link_id, interaction, &values)
            }
            Event::Interaction {
                interaction,
                values,
            } if interaction == INTEREST => {
                self.handle_interest_interaction(link_id, &values, scene)
            }
            Event::Interaction { .. } | Event::ConnectionControl { .. } => {}
        }
        None
    }

    fn handle_type(
        &mut self,
        link_id: LinkId,
        type_id: crate::less::ids::TypeId<Remote>,
        uri: &str,
        schema: Option<std::sync::Arc<crate::less::schema::TypeSchema>>,
        scene: &mut Scene,
    ) {
        let accept = |link: &Link, name: &str| link.policy.accepts(name);
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let kind = match mapping::parse_uri(uri) {
            Some(UriKind::Entity) => RemoteType::Entity,
            Some(UriKind::Component(name)) => match scene.registry().get_by_name(&name) {
                Some(s) if accept(link, &s.name) => {
                    RemoteType::Component(if s.dynamic_attributes {
                        ComponentKind::Dynamic { type_id: s.type_id }
                    } else {
                        ComponentKind::Static { type_id: s.type_id }
                    })
                }
                _ => RemoteType::Ignored,
            },
            Some(UriKind::Custom(name, attributes)) if accept(link, &name) => {
                let known = scene.registry().get_by_name(&name).map(|s| s.type_id);
                let registration = scene.registry_mut().register_custom(&name, attributes);
                let id = registration.type_id();
                if known != Some(id) {
                    self.events.push_back(FederationEvent::TypeRegistered(id));
                }
                RemoteType::Component(ComponentKind::Static { type_id: id })
            }
            Some(UriKind::Opaque(id)) if accept(link, &format!("opaque:{id}")) => {
                RemoteType::Component(ComponentKind::Opaque { type_id: id })
            }
            _ => RemoteType::Ignored,
        };
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let subscribed = match (&kind, schema) {
            (RemoteType::Ignored, _) | (_, None) => false,
            (_, Some(schema)) => {
                let keys: Vec<PropertyKey> = schema
                    .properties()
                    .into_iter()
                    .map(|(key, _)| key)
                    .collect();
                link.session.subscribe_type(type_id, &keys).is_ok()
            }
        };
        debug!(link = link_id.0, uri = %RemoteText(&uri), subscribed, "peer type introduced");
        link.remote_types.insert(
            type_id,
            if subscribed {
                kind
            } else {
                RemoteType::Ignored
            },
        );
    }

    fn handle_entity_object(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
        values: &[crate::less::property_list::PropertyValue],
        introduced: bool,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let global = if let Some(updated) = link.mirror.update_entity(object, values) {
            match updated {
                Ok(global) => {
                    self.note_announced(link_id, object);
                    global
                }
                Err(error) => {
                    warn!(link = link_id.0, error = %RemoteText(&error), "bad entity update");
                    return;
                }
            }
        } else if introduced {
            // Components introduced before their entity wait in the mirror
            // and join it here.
            let inserted = mirror::entity_from_values(values).and_then(|entity| {
                let global = entity.global;
                link.mirror.insert_entity(object, entity).map(|()| global)
            });
            match inserted {
                Ok(global) => global,
                Err(error) => {
                    warn!(link = link_id.0, error = %RemoteText(&error), "bad entity object");
                    return;
                }
            }
        } else {
            return;
        };
        let has_parent = self
            .links
            .get(&link_id)
            .and_then(|l| l.mirror.entity(object))
            .is_some_and(|e| e.parent.is_some());
        if has_parent {
            self.awaiting_parent.insert(global);
        }
        let selected_here = self.tracked.get(&global).and_then(|t| t.selected) == Some(link_id);
        self.reroute(global, scene);
        if selected_here && !introduced {
            self.apply_entity_properties(link_id, global, scene);
        }
        self.resolve_references(scene);
    }

    fn handle_component_object(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
        component: MirrorComponent,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let owner = component.owner;
        // Filed under its owner, or waiting for it.
        link.mirror.insert_component(object, component);
        let Some(global) = owner.and_then(|o| link.mirror.entity(o)).map(|e| e.global) else {
            return;
        };
        if self.tracked.get(&global).and_then(|t| t.selected) == Some(link_id) {
            self.present_component(link_id, global, object, scene);
        } else {
            // This copy may now be complete enough for a waiting route change.
            self.reroute(global, scene);
        }
    }

    /// Applies a component object's update to the scene if it is presented.
    fn apply_component_update(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
        attributes: &[u8],
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        // The chain the read-ahead walks too (`read_ahead.rs`).
        let Some(target) = self.update_target(link, object) else {
            return;
        };
        let mirrored = target.mirrored;
        let Some((entity, component_id)) = target.scene else {
            // The presented copy's object not yet in the scene: present it.
            let owner = link.mirror.owner_of(mirrored).map(|o| o.global);
            let presented_here = owner
                .and_then(|g| self.tracked.get(&g))
                .is_some_and(|t| t.selected == Some(link_id));
            if let Some(global) = owner.filter(|_| presented_here) {
                self.present_component(link_id, global, object, scene);
            } else if let Some(global) = owner.filter(|g| self.tracked.get(g).is_none()) {
                // Its entity waited for this object to be complete.
                self.reroute(global, scene);
            }
            return;
        };
        let source = ChangeSource::Peer(link_id.0);
        let reference = |value: &Value| reference_in(&self.tracked, link, value);
        match &mirrored.kind {
            ComponentKind::Static { .. } => {
                let Some(component) = scene
                    .entity(entity)
                    .and_then(|e| e.components.get(&component_id))
                else {
                    return;
                };
                let mut edits: SmallVec<[_; 4]> = SmallVec::new();
                // A placed transform comes into this world's coordinates,
                // and a new parentRef may place it anew (`positions.rs`).
                let placement = self.placement;
                let placed_in_world = (!placement.is_origin() && is_placeable(mirrored))
                    .then(|| link.mirror.owner_of(mirrored))
                    .flatten()
                    .map(|copy| copy_in_world(copy, mirrored));
                let mut indices: SmallVec<[u8; 8]> = SmallVec::from_slice(attributes);
                if placed_in_world.is_some()
                    && indices.contains(&PARENT_REF)
                    && !indices.contains(&TRANSFORM)
                {
                    indices.push(TRANSFORM);
                }
                for &index in &indices {
                    let Some(ty) = component.attribute(index).map(|a| a.ty()) else {
                        continue;
                    };
                    let key = attribute_key(index);
                    let Some(value) = mirrored.value(&key) else {
                        continue;
                    };
                    match from_less(ty, value, &reference) {
                        Some(value) if index == TRANSFORM && placed_in_world == Some(true) => {
                            edits.push((index, placed(value, |t| placement.transform_to_local(t))))
                        }
                        Some(value) => edits.push((index, value)),
                        None => {
                            warn!(link = link_id.0, property = %key, "value does not fit its attribute")
                        }
                    }
                }
                for (index, value) in edits {
                    let edited = scene.edit_attribute(source, entity, component_id, index, value);
                    self.stats.scene(edited, "peer's update not applied");
                }
            }
            ComponentKind::Dynamic { .. } => {
                let wanted = dynamic_attributes(mirrored, &reference);
                let target = (source, entity, component_id);
                reconcile_dynamic(scene, &mut self.stats, target, wanted);
            }
            ComponentKind::Opaque { .. } => {}
        }
    }

    /// A component object of the presented copy named another owner: it
    /// is no longer a component of the entity it was presented in.
    fn disown_presented(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
        before: Option<ObjectId<Remote>>,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let Some(global) = before.and_then(|o| link.mirror.entity(o)).map(|e| e.global) else {
            return;
        };
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        if tracked.selected != Some(link_id) {
            return;
        }
        if let Some(component) = tracked.components.remove(&object) {
            let entity = tracked.scene();
            let removed = scene.remove_component(ChangeSource::Peer(link_id.0), entity, component);
            self.stats.scene(removed, "re-owned component not removed");
        }
    }

    pub(in crate::federation) fn handle_removed_object(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Remote>,
        scene: &mut Scene,
    ) {
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        // The entity's component objects go with it; if this copy was
        // presented, the route change below takes them out of the scene.
        if let Some(entity) = link.mirror.remove_entity(object) {
            self.reroute(entity.global, scene);
            return;
        }
        let Some(component) = link.mirror.remove_component(object) else {
            return;
        };
        let Some(global) = link.mirror.owner_of(&component).map(|e| e.global) else {
            return;
        };
        let Some(tracked) = self.tracked.get_mut(&global) else {
            return;
        };
        if tracked.selected == Some(link_id) {
            if let Some(id) = tracked.components.remove(&object) {
                let source = ChangeSource::Peer(link_id.0);
                let removed = scene.remove_component(source, tracked.scene(), id);
                self.stats
                    .scene(removed, "peer's removed component not removed");
            }
        }
    }

    /// The scene entity of an exported object on a link.
    pub(in crate::federation) fn exported_owner(
        &self,
        link: LinkId,
        object: ObjectId<crate::less::ids::Local>,
    ) -> Option<(EntityId, Option<ComponentId>)> {
        self.links.get(&link)?.exported.owner(object)
    }
}
