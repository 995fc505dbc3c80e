//! Imports: what peers present becomes entities in this node's scene, once
//! per entity, from the copy routing chose (docs/federation.md §3 and §4).

use foldhash::HashMap;
use smallvec::SmallVec;

use tracing::{debug, warn};

use super::core::{Federation, FederationEvent};
use super::ids::{GlobalId, LinkId};
use super::link::{Link, RemoteType};
use super::mapping::{self, attribute_key, component, UriKind};
use super::mirror::{self, ComponentKind, MirrorComponent};
use super::stats::FederationStats;
use super::values::from_less;
use crate::less::ids::{ObjectId, PropertyKey, Remote};
use crate::less::session::{CloseReason, Event};
use crate::less::value::Value;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, ComponentContent, Origin, Scene};
use crate::tundra::{
    AttributeBlock, AttributeType, ComponentBody, ComponentData, ComponentId, DynamicAttribute,
    EntityId,
};

/// The scene id text an OBJECT-ID of `link` stands for ("" when unknown).
pub(super) fn reference_in(federation: &Federation, link: &Link, value: &Value) -> String {
    match value {
        Value::ObjectId(raw) => link
            .mirror
            .entity(ObjectId::new(*raw))
            .and_then(|e| federation.tracked.get(&e.global))
            .map_or_else(String::new, |t| t.scene().0.to_string()),
        Value::String(name) => name.clone(),
        _ => String::new(),
    }
}

/// The ComponentData of a mirrored component object, or `None` when the
/// type is not known here.
fn component_data(
    federation: &Federation,
    link: &Link,
    scene: &Scene,
    object: &MirrorComponent,
) -> Option<ComponentData> {
    let reference = |value: &Value| reference_in(federation, link, value);
    let body = match &object.kind {
        ComponentKind::Opaque { .. } => {
            match object.value(&attribute_key(component::OPAQUE_BLOCK as u8)) {
                Some(Value::VariableBinary(bytes)) => ComponentBody::Opaque(bytes.clone()),
                _ => ComponentBody::Opaque(Vec::new()),
            }
        }
        ComponentKind::Static { type_id } => {
            let schema = scene.registry().get(*type_id)?;
            let values = schema
                .attributes
                .iter()
                .enumerate()
                .map(|(index, attribute)| {
                    object
                        .value(&attribute_key(index as u8))
                        .and_then(|v| from_less(attribute.ty, v, &reference))
                        .unwrap_or_else(|| attribute.default.clone())
                })
                .collect();
            ComponentBody::Attributes(AttributeBlock {
                values,
                dynamic: Vec::new(),
                trailing: Vec::new(),
            })
        }
        ComponentKind::Dynamic { .. } => ComponentBody::Attributes(AttributeBlock {
            values: Vec::new(),
            dynamic: dynamic_attributes(object, &reference),
            trailing: Vec::new(),
        }),
    };
    Some(ComponentData {
        id: ComponentId(1),
        type_id: object.kind.type_id(),
        name: object.name.clone(),
        body,
    })
}

/// A DynamicComponent's attributes from its layout and slot values.
fn dynamic_attributes(
    object: &MirrorComponent,
    reference: &dyn Fn(&Value) -> String,
) -> Vec<DynamicAttribute> {
    let list = |property| match object.value(&PropertyKey::new(component::LAYOUT, property)) {
        Some(Value::List(_, items)) => items.clone(),
        _ => Vec::new(),
    };
    let types = list(component::LAYOUT_TYPES);
    let names = list(component::LAYOUT_NAMES);
    let mut attributes = Vec::new();
    for (index, ty) in types.iter().enumerate().take(256) {
        let Value::Integer(ty) = ty else { continue };
        let Some(ty) = u8::try_from(*ty).ok().and_then(AttributeType::from_id) else {
            continue;
        };
        let name = match names.get(index) {
            Some(Value::String(n)) => n.clone(),
            _ => String::new(),
        };
        let value = match object.value(&attribute_key(index as u8)) {
            Some(Value::Standalone(inner)) => from_less(ty, inner, reference),
            _ => None,
        };
        attributes.push(DynamicAttribute {
            index: index as u8,
            name,
            value: value.unwrap_or_else(|| crate::tundra::AttributeValue::default_for(ty)),
        });
    }
    attributes
}

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
            } if interaction == super::flood::ENTITY_ACTION => self.handle_flood(link_id, &values),
            Event::Interaction {
                interaction,
                values,
            } if interaction == super::departure_wire::DEPARTURE_OFFER
                || interaction == super::departure_wire::DEPARTURE_ANSWER =>
            {
                self.handle_departure_interaction(link_id, interaction, &values)
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

    fn apply_entity_properties(&mut self, link_id: LinkId, global: GlobalId, scene: &mut Scene) {
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

    /// Adds one component object of the presented copy to the scene.
    fn present_component(
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
        let Some(data) = component_data(self, link, scene, mirrored) else {
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

    /// Creates the scene entity for the copy on `link_id`.
    pub(super) fn present(&mut self, global: GlobalId, link_id: LinkId, scene: &mut Scene) {
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
                .and_then(|c| component_data(self, link, scene, c))
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

    /// Presents another copy of an entity already in the scene (a route
    /// change). The entity keeps its id, and each of its components whose
    /// type and name the new copy also has keeps its id too: the new copy's
    /// values are applied to it as edits, so a client sees a route change at
    /// most as changed values. Replacing the components instead would give
    /// them new ids, and a client that follows a component by the id it was
    /// first given (as a Tundra client's scripts do) would stop seeing its
    /// updates. Components only the old copy had are removed, those only the
    /// new copy has are created.
    pub(super) fn switch_route(&mut self, global: GlobalId, link_id: LinkId, scene: &mut Scene) {
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
        let Some(data) = component_data(self, link, scene, mirrored) else {
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
        let reference = |value: &Value| reference_in(self, link, value);
        match &mirrored.kind {
            ComponentKind::Static { .. } => {
                let Some(component) = scene
                    .entity(entity)
                    .and_then(|e| e.components.get(&component_id))
                else {
                    return;
                };
                let mut edits: SmallVec<[_; 4]> = SmallVec::new();
                for &index in attributes {
                    let Some(ty) = component.attribute(index).map(|a| a.ty()) else {
                        continue;
                    };
                    let key = attribute_key(index);
                    let Some(value) = mirrored.value(&key) else {
                        continue;
                    };
                    match from_less(ty, value, &reference) {
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

    pub(super) fn handle_removed_object(
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

    /// Re-applies entity properties whose references may have become
    /// resolvable (a parent presented after its child). Visits only the
    /// entities in `awaiting_parent`; one leaves it once its parent is
    /// applied, or when it has no parent or is no longer presented.
    fn resolve_references(&mut self, scene: &mut Scene) {
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

    /// The scene entity of an exported object on a link.
    pub(super) fn exported_owner(
        &self,
        link: LinkId,
        object: ObjectId<crate::less::ids::Local>,
    ) -> Option<(EntityId, Option<ComponentId>)> {
        self.links.get(&link)?.exported.owner(object)
    }
}

/// Makes a presented DynamicComponent's attributes match `wanted`.
fn reconcile_dynamic(
    scene: &mut Scene,
    stats: &mut FederationStats,
    (source, entity, component): (ChangeSource, EntityId, ComponentId),
    wanted: Vec<DynamicAttribute>,
) {
    let Some(current) = scene
        .entity(entity)
        .and_then(|e| e.components.get(&component))
        .cloned()
    else {
        return;
    };
    let wanted_indices: std::collections::HashSet<u8> = wanted.iter().map(|a| a.index).collect();
    for index in 0..=255u8 {
        if current.attribute(index).is_some() && !wanted_indices.contains(&index) {
            let removed = scene.remove_attribute(source, entity, component, index);
            stats.scene(removed, "dynamic attribute not removed");
        }
    }
    for attribute in wanted {
        let index = attribute.index;
        match current.attribute(index) {
            Some(existing) if existing.ty() == attribute.value.attribute_type() => {
                let edited =
                    scene.edit_attribute(source, entity, component, index, attribute.value);
                stats.scene(edited, "dynamic attribute not edited");
            }
            Some(_) => {
                // Another type in the slot: the attribute is created anew.
                let removed = scene.remove_attribute(source, entity, component, index);
                stats.scene(removed, "retyped dynamic attribute not removed");
                let created = scene.create_attribute(source, entity, component, attribute);
                stats.scene(created, "retyped dynamic attribute not created");
            }
            None => {
                let created = scene.create_attribute(source, entity, component, attribute);
                stats.scene(created, "dynamic attribute not created");
            }
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

/// The attribute index a property of a component object stands for
/// (docs/federation.md §2.2: property i of component `attributes`).
fn attribute_index(key: &PropertyKey) -> Option<u8> {
    match key.component.elements() {
        [c] if c.0 == component::ATTRIBUTES => u8::try_from(key.property.0).ok(),
        _ => None,
    }
}
