//! RigidBodyUpdate (119) from the world server (docs/tundra-wire.md §6.1). A Tundra
//! server sends it to every native kNet client whatever its protocol, and
//! to WebSocket clients at protocol 4, and then leaves Placeable transform
//! and RigidBody velocity changes out of EditAttributes for them: without
//! it a `knet+` upstream would never see world entities move.
//!
//! Each record is read as Tundra's client reads it
//! (`tundra::rigid_body_receiver`) and applied exactly as the equivalent
//! EditAttributes would be: Placeable attribute 0 (Transform), RigidBody
//! attributes 13 (linear velocity) and 14 (angular velocity, degrees/s).
//! Mirrored entities take the values with [`ChangeSource::Node`], so they
//! flow on to the node's clients and peers; for a federation entity the
//! bridge exported, the edits go to its authority as a world-server client's
//! edit does. A message that does not decode never gets here: the frame is
//! refused (counted and logged) by `Bridge::handle_frame`.
//!
//! Parts of a record that only repeat, quantized, what the bridge holds
//! (its own value written back by the server's physics) change nothing
//! ([`super::body_echo`]): a world entity's copy and a federation entity's
//! authority keep their exact values.

use tracing::debug;

use super::body_echo::news;
use super::bridge::Bridge;
use super::ids::{ShadowComponent, UpstreamEntity};
use crate::scene::{ChangeSource, Scene};
use crate::tundra::rigid_body::{RigidBodyEntityUpdate, RigidBodyUpdate};
use crate::tundra::rigid_body_receiver::receive;
use crate::tundra::rigid_body_sender::BodyState;
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{AttributeEdit, AttributeValue, ComponentId, EntityId};

const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
/// Placeable `transform`, RigidBody `linearVelocity` / `angularVelocity`
/// (docs/tundra-wire.md §9, types 20 and 23).
const TRANSFORM: u8 = 0;
const LINEAR_VELOCITY: u8 = 13;
const ANGULAR_VELOCITY: u8 = 14;

/// The edits equal to one record: `placeable` is the Placeable component,
/// `body` the RigidBody, and `held` what the bridge holds of them (the
/// transform the record's missing parts keep, the values its repeated
/// parts keep).
fn record_edits(
    record: &RigidBodyEntityUpdate,
    placeable: Option<ComponentId>,
    body: Option<ComponentId>,
    held: &BodyState,
) -> Vec<(ComponentId, AttributeEdit)> {
    let received = news(record, receive(record, held.transform), held);
    let mut edits = Vec::new();
    let edit = |index, value| AttributeEdit { index, value };
    match (placeable, received.transform) {
        (Some(component), Some(t)) => {
            edits.push((component, edit(TRANSFORM, AttributeValue::Transform(t))));
        }
        (None, Some(_)) => {
            debug!(entity = %record.entity_id, "RigidBodyUpdate transform for an entity without a Placeable ignored")
        }
        _ => {}
    }
    let velocities = [
        (LINEAR_VELOCITY, received.linear_velocity),
        (ANGULAR_VELOCITY, received.angular_velocity),
    ];
    for (index, value) in velocities {
        match (body, value) {
            (Some(component), Some(v)) => {
                edits.push((component, edit(index, AttributeValue::Float3(v))));
            }
            (None, Some(_)) => {
                debug!(entity = %record.entity_id, "RigidBodyUpdate velocity for an entity without a RigidBody ignored")
            }
            _ => {}
        }
    }
    edits
}

fn transform_of(value: Option<&AttributeValue>) -> Option<Transform> {
    match value {
        Some(AttributeValue::Transform(t)) => Some(*t),
        _ => None,
    }
}

fn float3_of(value: Option<&AttributeValue>) -> Option<Float3> {
    match value {
        Some(AttributeValue::Float3(v)) => Some(*v),
        _ => None,
    }
}

/// What the world server was told of attribute `index` of an exported
/// component (its shadow), else what the node holds.
fn told<'a>(
    scene: &'a Scene,
    entity: EntityId,
    part: Option<(ComponentId, &'a ShadowComponent)>,
    index: u8,
) -> Option<&'a AttributeValue> {
    let (component, shadow) = part?;
    shadow
        .values
        .get(usize::from(index))
        .and_then(Option::as_ref)
        .or_else(|| attribute_of(scene, entity, Some(component), index))
}

/// A scene component's attribute `index`, if filled.
fn attribute_of(
    scene: &Scene,
    entity: EntityId,
    component: Option<ComponentId>,
    index: u8,
) -> Option<&AttributeValue> {
    let component = scene.entity(entity)?.components.get(&component?)?;
    component.attribute(index).map(|a| &a.value)
}

impl Bridge {
    pub(super) fn handle_rigid_body(&mut self, m: &RigidBodyUpdate, scene: &mut Scene) {
        for record in &m.entities {
            match self.ids.resolve(record.entity_id) {
                UpstreamEntity::Mirrored(local) => self.body_of_mirrored(record, local, scene),
                UpstreamEntity::Exported(local) => self.body_of_exported(record, local, scene),
                UpstreamEntity::Unknown => {
                    debug!(entity = %record.entity_id, "RigidBodyUpdate for an unknown world entity ignored");
                }
            }
        }
    }

    /// The first component of `type_id` in the world server's id order
    /// (Tundra's `GetComponent<T>()`), as its node component.
    fn mirrored_component_of(
        &self,
        upstream: EntityId,
        type_id: u32,
        scene: &Scene,
    ) -> Option<ComponentId> {
        let entity = scene.entity(self.ids.mirrored(upstream)?.local)?;
        self.ids
            .mirrored(upstream)?
            .components
            .values()
            .copied()
            .find(|c| {
                entity
                    .components
                    .get(c)
                    .is_some_and(|c| c.type_id == type_id)
            })
    }

    fn body_of_mirrored(
        &mut self,
        record: &RigidBodyEntityUpdate,
        local: EntityId,
        scene: &mut Scene,
    ) {
        let upstream = record.entity_id;
        let placeable = self.mirrored_component_of(upstream, PLACEABLE, scene);
        let body = self.mirrored_component_of(upstream, RIGID_BODY, scene);
        let current = |component, index| attribute_of(scene, local, component, index);
        let held = BodyState {
            transform: transform_of(current(placeable, TRANSFORM)).unwrap_or_default(),
            linear_velocity: float3_of(current(body, LINEAR_VELOCITY)).unwrap_or_default(),
            angular_velocity: float3_of(current(body, ANGULAR_VELOCITY)).unwrap_or_default(),
        };
        let placeable = placeable.filter(|_| transform_of(current(placeable, TRANSFORM)).is_some());
        for (component, edit) in record_edits(record, placeable, body, &held) {
            // As `handle_edit`: the node's copy takes the world's value.
            let edited =
                scene.edit_attribute(ChangeSource::Node, local, component, edit.index, edit.value);
            self.stats
                .scene(edited, "world rigid body move not applied");
        }
    }

    /// The world server moved its copy of a federation entity: as its
    /// EditAttributes would, the edits go to the entity's authority. Parts
    /// the record leaves out, or only repeats, keep what the world server
    /// was last told (the authority's own values, not a lossy copy).
    fn body_of_exported(&mut self, record: &RigidBodyEntityUpdate, local: EntityId, scene: &Scene) {
        let Some(entry) = self.ids.exported(local) else {
            return;
        };
        let first_of = |type_id: u32| {
            entry
                .components
                .iter()
                .filter(|(_, shadow)| shadow.type_id == type_id)
                .min_by_key(|(_, shadow)| shadow.upstream)
                .map(|(component, shadow)| (*component, shadow))
        };
        let (placeable, body) = (first_of(PLACEABLE), first_of(RIGID_BODY));
        let transform = transform_of(told(scene, local, placeable, TRANSFORM));
        let held = BodyState {
            transform: transform.unwrap_or_default(),
            linear_velocity: float3_of(told(scene, local, body, LINEAR_VELOCITY))
                .unwrap_or_default(),
            angular_velocity: float3_of(told(scene, local, body, ANGULAR_VELOCITY))
                .unwrap_or_default(),
        };
        let placeable = placeable.map(|(c, _)| c).filter(|_| transform.is_some());
        let body = body.map(|(c, _)| c);
        for (component, edit) in record_edits(record, placeable, body, &held) {
            self.world_edits_of_exported(local, component, vec![edit], scene);
        }
    }
}
