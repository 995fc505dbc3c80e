//! The RigidBodyUpdate (119) path of the tick: protocol 4 WebSocket clients
//! get Placeable transform and RigidBody velocity changes as quantized
//! records, sent before the generic sync, exactly when and how Tundra's
//! `ReplicateRigidBodyChanges` sends them (docs/tundra-wire.md §6.1).

use super::sync_state::{EntitySync, Presence};
use crate::scene::entity_hash::EntityMap;
use crate::scene::{Entity, Scene};
use crate::tundra::rigid_body::RigidBodyEntityUpdate;
use crate::tundra::rigid_body_sender::{decide, encode_body, BodyState, DirtyFlags};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{AttributeValue, ComponentId, EntityId};

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

/// An entity's body as the scene has it: the components that drive
/// RigidBodyUpdate and their values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurrentBody {
    pub placeable: ComponentId,
    pub rigid_body: Option<ComponentId>,
    /// `None` when the Placeable's transform is not a transform.
    pub state: Option<BodyState>,
}

impl CurrentBody {
    /// The body of an entity with a Placeable, if it has one.
    pub fn of(entity: &Entity) -> Option<CurrentBody> {
        let placeable = component_of(entity, PLACEABLE)?;
        let rigid_body = component_of(entity, RIGID_BODY);
        let transform = match &entity
            .components
            .get(&placeable)
            .and_then(|c| c.attribute(TRANSFORM))
            .map(|a| &a.value)
        {
            Some(AttributeValue::Transform(t)) => Some(*t),
            _ => None,
        };
        let state = transform.map(|transform: Transform| BodyState {
            transform,
            linear_velocity: float3(entity, rigid_body, LINEAR_VELOCITY),
            angular_velocity: float3(entity, rigid_body, ANGULAR_VELOCITY),
        });
        Some(CurrentBody {
            placeable,
            rigid_body,
            state,
        })
    }
}

/// The body state of an entity with a Placeable, if it has one.
pub fn body_state(entity: &Entity) -> Option<BodyState> {
    CurrentBody::of(entity)?.state
}

/// The bodies of one write pass, each read from the scene once and shared
/// by every RigidBodyUpdate client written in the pass (five clients took
/// five looks at every moving entity's components). Sound because the
/// scene does not change during a pass, as for the shared EditAttributes
/// frames (`edit_frame.rs`). The bodies are kept in the order first read,
/// which is about the order every client reads them, behind a small index.
#[derive(Debug, Default)]
pub(super) struct CurrentBodies {
    index: EntityMap<u32>,
    bodies: Vec<Option<CurrentBody>>,
    /// Only when more than one client is written.
    sharing: bool,
}

impl CurrentBodies {
    /// Starts a write pass of `clients` clients.
    pub(super) fn start_pass(&mut self, clients: usize) {
        self.finish_pass();
        self.sharing = clients > 1;
    }

    /// Ends a write pass: the scene may change now, and a read outside a
    /// pass goes to the scene.
    pub(super) fn finish_pass(&mut self) {
        self.index.clear();
        self.bodies.clear();
        self.sharing = false;
    }

    /// The body of `id` as the scene has it in this pass.
    pub(super) fn get(&mut self, scene: &Scene, id: EntityId) -> Option<CurrentBody> {
        let read = || scene.entity(id).and_then(CurrentBody::of);
        if !self.sharing {
            return read();
        }
        let next = u32::try_from(self.bodies.len()).unwrap_or(u32::MAX);
        let at = *self.index.entry(id).or_insert(next);
        if at == next {
            self.bodies.push(read());
        }
        self.bodies.get(at as usize).copied().flatten()
    }
}

/// Takes this entity's transform and velocity changes out of `pending` and
/// returns the record to send, if the change is large enough. The dirty bits
/// are cleared either way, as Tundra clears them, so the EditAttributes
/// path does not send them again.
pub fn take_rigid_body_change(
    id: EntityId,
    current: &CurrentBody,
    pending: &mut EntitySync,
    last_sent: &mut BodyState,
) -> Option<RigidBodyEntityUpdate> {
    if pending.presence != Presence::Known {
        return None;
    }
    let mut dirty = DirtyFlags::default();
    if let Some(sync) = pending.components.get_mut(&current.placeable) {
        if sync.presence == Presence::Known && sync.is_dirty(TRANSFORM) {
            dirty.transform = true;
            sync.clear_dirty(TRANSFORM);
        }
    }
    if let Some(sync) = current
        .rigid_body
        .and_then(|b| pending.components.get_mut(&b))
    {
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
    let state = current.state?;
    let decision = decide(last_sent, &state, dirty);
    let record = encode_body(id, &state, &decision)?;
    last_sent.record_sent(&state, &decision);
    Some(record)
}
