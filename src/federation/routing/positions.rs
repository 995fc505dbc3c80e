//! Positions crossing a link (docs/federation.md §2.7): the Placeable
//! transform of an entity placed in its world leaves in federation
//! coordinates and arrives in this world's; a relay passes on the value it
//! received, so relaying adds no error and needs no other node's placement.
//! What counts as placed in its world is `space/position.rs`'s rule, applied
//! to the values as they travel on the link.

use tracing::info;

use crate::federation::core::Federation;
use crate::federation::ids::GlobalId;
use crate::federation::routing::link::Link;
use crate::federation::routing::mirror::{ComponentKind, MirrorComponent, MirrorEntity};
use crate::federation::routing::object_values::parent_value;
use crate::federation::routing::references::reference_out;
use crate::federation::space::placement::Placement;
use crate::federation::space::position::{
    self, in_world_on_wire, PARENT_REF, PLACEABLE, TRANSFORM,
};
use crate::federation::wire::mapping::attribute_key;
use crate::federation::wire::values::{from_less, to_less};
use crate::less::value::Value;
use crate::scene::{ChangeSource, Component, Entity, Scene};
use crate::tundra::values::Transform;
use crate::tundra::{AttributeType, AttributeValue, EntityId};

/// A transform value with its position moved by `place`; any other value
/// as it is.
pub(in crate::federation) fn placed(
    value: AttributeValue,
    place: impl Fn(Transform) -> Transform,
) -> AttributeValue {
    match value {
        AttributeValue::Transform(transform) => AttributeValue::Transform(place(transform)),
        other => other,
    }
}

/// Whether scene entity `entity`'s transform travels on `link` in world
/// coordinates: the entity object's `parent` and the Placeable's
/// `parentRef` as this node sends them there are both empty.
pub(in crate::federation) fn exported_in_world(
    link: &Link,
    entity: &Entity,
    placeable: &Component,
) -> bool {
    let parent = parent_value(link, entity.parent);
    let reference = placeable
        .attribute(PARENT_REF)
        .and_then(|a| position::reference_text(&a.value))
        .map(|text| reference_out(link, text));
    in_world_on_wire(Some(&parent), reference.as_ref())
}

/// Whether scene entity `entity`'s transform lies in its world's
/// coordinates in this node's scene: no parent, an empty `parentRef`.
pub(in crate::federation) fn in_world_here(entity: &Entity, placeable: &Component) -> bool {
    entity.parent.is_none()
        && placeable
            .attribute(PARENT_REF)
            .and_then(|a| position::reference_text(&a.value))
            .map_or(true, |text| text.trim().is_empty())
}

/// Whether a peer's copy places its entity in world coordinates, as it
/// sent its `parent` and its Placeable object's `parentRef`.
pub(in crate::federation) fn copy_in_world(
    copy: &MirrorEntity,
    placeable: &MirrorComponent,
) -> bool {
    let parent = copy
        .parent
        .map(|object| Value::Standalone(Box::new(Value::ObjectId(object.get()))));
    in_world_on_wire(parent.as_ref(), placeable.value(&attribute_key(PARENT_REF)))
}

/// Whether a mirrored component object is a Placeable.
pub(in crate::federation) fn is_placeable(object: &MirrorComponent) -> bool {
    matches!(object.kind, ComponentKind::Static { type_id } if type_id == PLACEABLE)
}

impl Federation {
    /// Where this node's world lies in the federation's space.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The wire value of the transform `local` of `component` (a
    /// Placeable of scene entity `entity`) on `link`: `None` when the
    /// entity is not placed in its world there (the value travels as it
    /// is); the value in federation coordinates otherwise. A relayed
    /// entity's value is the one its presented copy carries, unless this
    /// node's scene holds another.
    pub(in crate::federation) fn transform_out(
        &self,
        link: &Link,
        entity: &Entity,
        component: &Component,
        local: &AttributeValue,
    ) -> Option<Value> {
        if component.type_id != PLACEABLE || !exported_in_world(link, entity, component) {
            return None;
        }
        let placement = self.placement;
        let translated = || {
            let reference = |text: &str| reference_out(link, text);
            to_less(
                &placed(local.clone(), |t| placement.transform_to_federation(t)),
                &reference,
            )
        };
        let Some(global) = self.tracked.global_of(entity.id) else {
            return Some(translated());
        };
        match self.received_transform(global, component.id) {
            Some(received) if placed_local(placement, &received).as_ref() == Some(local) => {
                Some(received)
            }
            _ => Some(translated()),
        }
    }

    /// The wire values on `link_id` of the Placeable transforms of scene
    /// entity `entity` that travel placed there, by component (none when
    /// this world lies at the federation's origin: nothing moves).
    pub(in crate::federation) fn placed_transforms(
        &self,
        link_id: crate::federation::ids::LinkId,
        entity: &Entity,
    ) -> Vec<(crate::tundra::ComponentId, Value)> {
        let Some(link) = self
            .links
            .get(&link_id)
            .filter(|_| !self.placement.is_origin())
        else {
            return Vec::new();
        };
        entity
            .components
            .values()
            .filter(|c| c.type_id == PLACEABLE)
            .filter_map(|c| {
                let local = &c.attribute(TRANSFORM)?.value;
                Some((c.id, self.transform_out(link, entity, c, local)?))
            })
            .collect()
    }

    /// The transform value the presented copy of a relayed entity carries
    /// for its scene component `component`, if that copy places it in
    /// world coordinates.
    fn received_transform(
        &self,
        global: GlobalId,
        component: crate::tundra::ComponentId,
    ) -> Option<Value> {
        let tracked = self.tracked.get(&global)?;
        if tracked.is_source() {
            return None;
        }
        let link = self.links.get(&tracked.selected?)?;
        let object = link.mirror.component(tracked.object_of(component)?)?;
        let copy = link.mirror.owner_of(object)?;
        copy_in_world(copy, object)
            .then(|| object.value(&attribute_key(TRANSFORM)).cloned())
            .flatten()
    }

    /// Moves this node's world to `placement` (a reload): its own entities'
    /// positions go out anew in federation coordinates, and every other
    /// world's entities move for this node's clients, as updates.
    pub fn set_placement(&mut self, placement: Placement, scene: &mut Scene) {
        if placement == self.placement {
            return;
        }
        let [x, y, z] = placement.offset();
        info!(x, y, z, "world placement changed");
        self.placement = placement;
        // Remote copies: the scene takes their transforms in the new frame.
        let presented: Vec<(GlobalId, crate::federation::ids::LinkId)> = self
            .tracked
            .iter()
            .filter_map(|(global, t)| Some((*global, t.selected?)))
            .collect();
        for (global, link) in presented {
            self.apply_received_transforms(link, global, scene);
        }
        // Own entities: their scene values are unchanged, their federation
        // values are not; sent as the journal sends an edit.
        let own: Vec<EntityId> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.is_source())
            .map(|(_, t)| t.scene())
            .collect();
        for entity in own {
            self.resend_transforms(entity, scene);
        }
    }

    /// Applies the Placeable transforms of the copy of `global` on
    /// `link_id` to the presented entity, in this world's coordinates
    /// (after a placement or a parent change).
    pub(in crate::federation) fn apply_received_transforms(
        &mut self,
        link_id: crate::federation::ids::LinkId,
        global: GlobalId,
        scene: &mut Scene,
    ) {
        let (Some(link), Some(tracked)) = (self.links.get(&link_id), self.tracked.get(&global))
        else {
            return;
        };
        let Some(copy) = link.mirror.copy_of(global) else {
            return;
        };
        let placement = self.placement;
        let mut edits = Vec::new();
        for (object, component) in &tracked.components {
            let Some(mirrored) = link.mirror.component(*object).filter(|c| is_placeable(c)) else {
                continue;
            };
            let Some(value) = mirrored
                .value(&attribute_key(TRANSFORM))
                .and_then(|v| from_less(AttributeType::Transform, v, &|_| String::new()))
            else {
                continue;
            };
            let value = if copy_in_world(copy, mirrored) {
                placed(value, |t| placement.transform_to_local(t))
            } else {
                value
            };
            edits.push((*component, value));
        }
        let entity = tracked.scene();
        for (component, value) in edits {
            let edited = scene.edit_attribute(
                ChangeSource::Peer(link_id.0),
                entity,
                component,
                TRANSFORM,
                value,
            );
            self.stats.scene(edited, "placed transform not applied");
        }
    }
}

impl Federation {
    /// Sends the Placeable transforms of this node's own scene entity
    /// `entity` again on every link that carries them, in federation
    /// coordinates as they are now (after a placement or a parent change).
    pub(in crate::federation) fn resend_transforms(&mut self, entity: EntityId, scene: &Scene) {
        let Some(target) = scene.entity(entity) else {
            return;
        };
        let placeables: Vec<&Component> = target
            .components
            .values()
            .filter(|c| c.type_id == PLACEABLE)
            .collect();
        if placeables.is_empty() {
            return;
        }
        let mut sends = Vec::new();
        for link in self.links.values() {
            for component in &placeables {
                let Some(object) = link.exported_component(entity, component.id) else {
                    continue;
                };
                let Some(local) = component.attribute(TRANSFORM).map(|a| &a.value) else {
                    continue;
                };
                let reference = |text: &str| reference_out(link, text);
                let value = self
                    .transform_out(link, target, component, local)
                    .unwrap_or_else(|| to_less(local, &reference));
                sends.push((link.id, object, value));
            }
        }
        for (link_id, object, value) in sends {
            if let Some(link) = self.links.get_mut(&link_id) {
                let sent = link
                    .session
                    .update_property(object, &attribute_key(TRANSFORM), value);
                self.stats.session(sent, "placed transform not exported");
            }
        }
    }
}

/// A received transform value in this world's coordinates.
fn placed_local(placement: Placement, received: &Value) -> Option<AttributeValue> {
    let value = from_less(AttributeType::Transform, received, &|_| String::new())?;
    Some(placed(value, |t| placement.transform_to_local(t)))
}
