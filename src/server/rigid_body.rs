//! The RigidBodyUpdate (119) path of the tick: protocol 4 WebSocket clients
//! get Placeable transform and RigidBody velocity changes as quantized
//! records, sent before the generic sync, exactly when and how Tundra's
//! `ReplicateRigidBodyChanges` sends them (docs/tundra-wire.md §6.1).

use super::sync_state::{EntitySync, Presence};
use crate::scene::Entity;
use crate::tundra::rigid_body::RigidBodyEntityUpdate;
use crate::tundra::rigid_body_sender::{decide, encode_body, BodyState, DirtyFlags};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{AttributeValue, ComponentId};

const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
/// Placeable attribute 0 and RigidBody attributes 13 and 14 drive 119.
const TRANSFORM: u8 = 0;
const LINEAR_VELOCITY: u8 = 13;
const ANGULAR_VELOCITY: u8 = 14;

fn component_of(entity: &Entity, type_id: u32) -> Option<ComponentId> {
    entity
        .components
        .values()
        .find(|c| c.type_id == type_id && c.is_replicated())
        .map(|c| c.id)
}

fn float3(entity: &Entity, component: Option<ComponentId>, index: u8) -> Float3 {
    let value = component
        .and_then(|c| entity.components.get(&c))
        .and_then(|c| c.attribute(index));
    match value.map(|a| &a.value) {
        Some(AttributeValue::Float3(v)) => *v,
        _ => Float3::default(),
    }
}

/// The body state of an entity with a Placeable, if it has one.
pub fn body_state(entity: &Entity) -> Option<BodyState> {
    let placeable = component_of(entity, PLACEABLE)?;
    let transform: Transform = match &entity
        .components
        .get(&placeable)?
        .attribute(TRANSFORM)?
        .value
    {
        AttributeValue::Transform(t) => *t,
        _ => return None,
    };
    let body = component_of(entity, RIGID_BODY);
    Some(BodyState {
        transform,
        linear_velocity: float3(entity, body, LINEAR_VELOCITY),
        angular_velocity: float3(entity, body, ANGULAR_VELOCITY),
    })
}

/// Takes this entity's transform and velocity changes out of `pending` and
/// returns the record to send, if the change is large enough. The dirty bits
/// are cleared either way, as Tundra clears them, so the EditAttributes
/// path does not send them again.
pub fn take_rigid_body_change(
    entity: Option<&Entity>,
    pending: &mut EntitySync,
    last_sent: &mut BodyState,
) -> Option<RigidBodyEntityUpdate> {
    if pending.presence != Presence::Known {
        return None;
    }
    let entity = entity?;
    let id = entity.id;
    let placeable = component_of(entity, PLACEABLE)?;
    let body = component_of(entity, RIGID_BODY);
    let mut dirty = DirtyFlags::default();
    if let Some(sync) = pending.components.get_mut(&placeable) {
        if sync.presence == Presence::Known && sync.is_dirty(TRANSFORM) {
            dirty.transform = true;
            sync.clear_dirty(TRANSFORM);
        }
    }
    if let Some(sync) = body.and_then(|b| pending.components.get_mut(&b)) {
        if sync.presence == Presence::Known {
            dirty.linear_velocity = sync.is_dirty(LINEAR_VELOCITY);
            dirty.angular_velocity = sync.is_dirty(ANGULAR_VELOCITY);
            sync.clear_dirty(LINEAR_VELOCITY);
            sync.clear_dirty(ANGULAR_VELOCITY);
        }
    }
    if !(dirty.transform || dirty.linear_velocity || dirty.angular_velocity) {
        return None;
    }
    let current = body_state(entity)?;
    let decision = decide(last_sent, &current, dirty);
    let record = encode_body(id, &current, &decision)?;
    last_sent.record_sent(&current, &decision);
    Some(record)
}
