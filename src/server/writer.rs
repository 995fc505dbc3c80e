//! The network tick: each client is sent the latest state of what changed,
//! in Tundra's per-entity message order (docs/tundra-wire.md §7.2 step 5
//! and §7.5). Between ticks a client is written the same way whenever
//! `write_schedule` says.

use std::time::Duration;

use tracing::warn;

use bytes::Bytes;

use super::client::Client;
use super::core::TundraServer;
use super::edit_frame::Lookup;
use super::interest::update_interval;
use super::rigid_body::{body_state, take_rigid_body_change};
use super::slots::{dirty_edits, SceneSlots};
use super::sync_state::{Dirty, EntitySync, Presence};
use crate::clock::Time;
use crate::logging::RemoteText;
use crate::scene::{ClientId, ComponentContent, Entity, Scene};
use crate::tundra::bits::BitWriter;
use crate::tundra::edit_attributes::{sorted_block_len, write_block, SlotTypes};
use crate::tundra::messages::id::RIGID_BODY_UPDATE;
use crate::tundra::messages::{
    CreateAttributes, CreateComponents, CreateEntity, EditAttributes, EditAttributesBlock,
    EditEntityProperties, NewAttribute, RemoveAttributes, RemoveComponents, RemoveEntity,
    RemovedAttribute, SetEntityParent,
};
use crate::tundra::rigid_body_sender::{pack, BodyState};
use crate::tundra::{EntityId, Message, ProtocolVersion};

impl TundraServer {
    /// The tick: closes the clients that stopped reading and writes every
    /// other client whose connection has drained, its deferred entities
    /// included (interest management); a held client keeps coalescing.
    pub(super) fn write_tick(
        &mut self,
        scene: &Scene,
        now: Time,
        backlog: &dyn Fn(ClientId) -> usize,
    ) {
        let limit = self.config.limits.max_client_backlog_bytes;
        let stall = Duration::from_secs(self.config.limits.max_client_stall_secs);
        let threshold = self.write_rule.max_backlog_bytes;
        let ids: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        self.edit_frames.start_tick(ids.len());
        self.current_bodies.start_pass(ids.len());
        for id in ids {
            let queued = backlog(id);
            let Some(client) = self.clients.get_mut(&id) else {
                continue;
            };
            let held = client.backlog.observe(now, queued, threshold);
            let stuck = client.backlog.stuck_for(now).unwrap_or_default();
            if queued > limit.saturating_mul(2) || (held && stuck >= stall) {
                self.refuse_client(
                    id,
                    format!(
                        "not reading: {queued} bytes unsent, none taken for {:.1} s (limits.max_client_backlog_bytes = {limit}, limits.max_client_stall_secs = {})",
                        stuck.as_secs_f64(),
                        stall.as_secs()
                    ),
                );
                continue;
            }
            if held {
                // Leave its changes dirty: it gets coalesced latest state
                // once it reads again (`write_schedule` looks at it).
                continue;
            }
            self.write_client(scene, id, now);
        }
        self.edit_frames.finish_tick();
        self.current_bodies.finish_pass();
    }

    /// Writes everything waiting for one client: new component types, its
    /// scene changes, then actions (at the tick, or between: `write_schedule`).
    pub(super) fn write_client(&mut self, scene: &Scene, id: ClientId, now: Time) {
        // A tick that finds nothing waiting is no write: it must not make
        // the client's next change wait for the next gap.
        let waiting = self.clients.get(&id).is_some_and(Client::has_waiting);
        self.write_pending_types(scene, id);
        self.write_entities(scene, id, now);
        let actions = match self.clients.get_mut(&id) {
            Some(client) => {
                if waiting {
                    client.last_sync_write = Some(now);
                }
                client.write_scheduled = false;
                client.peer_changes_waiting = false;
                std::mem::take(&mut client.pending_actions)
            }
            None => Vec::new(),
        };
        self.schedule.forget(id);
        for action in actions {
            self.push_message(id, &Message::EntityAction(action));
        }
    }

    fn write_entities(&mut self, scene: &Scene, id: ClientId, now: Time) {
        let tick = self.config.tick;
        let interest = self.config.interest_management;
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        let protocol = client.protocol;
        // Protocol 4 WebSocket clients take transforms as RigidBodyUpdate,
        // and so does every native (kNet) client, whatever its protocol
        // (docs/tundra-wire.md §6.1, "who gets 119").
        let rigid_bodies = protocol >= ProtocolVersion::WEB_CLIENT_RIGID_BODY
            || client.dialect == super::LoginDialect::Xml;
        let mut records = Vec::new();
        // Frames in the order the entities' messages go out, after the
        // RigidBodyUpdate batch.
        let mut frames = std::mem::take(&mut self.tick_frames);
        let mut messages = Vec::new();
        let mut deferred = Vec::new();
        while let Some(Dirty {
            id: entity_id,
            mut pending,
            body,
        }) = client.sync.pop_dirty(rigid_bodies)
        {
            if interest && pending.presence == Presence::Known {
                if let (Some(observer), Some(last)) =
                    (&client.observer, client.last_sent.get(&entity_id))
                {
                    let interval: Duration = update_interval(scene, entity_id, observer, tick);
                    if now - *last < interval {
                        deferred.push((entity_id, pending));
                        continue;
                    }
                }
            }
            // A kept entity of a RigidBodyUpdate client comes with its
            // baseline; the body is read once per pass for all clients.
            if let Some(slot) = body.filter(|_| pending.presence == Presence::Known) {
                let current = self.current_bodies.get(scene, entity_id);
                if let (Some(current), Some(last_sent)) = (current, client.sync.body_mut(slot)) {
                    records.extend(take_rigid_body_change(
                        entity_id,
                        &current,
                        &mut pending,
                        last_sent,
                    ));
                    // Its move was all there was (the commonest case): the
                    // entity is in the scene and nothing else goes out.
                    if pending.is_settled() {
                        if interest {
                            client.last_sent.insert(entity_id, now);
                        }
                        continue;
                    }
                }
            }
            // The scene is looked up only when needed: a frame another
            // client's identical pending edits produced this pass needs
            // none.
            let exists = match self.edit_frames.lookup(entity_id, &pending) {
                Lookup::Shared(frame) => {
                    frames.extend(frame);
                    true
                }
                lookup => {
                    let entity = scene.entity(entity_id);
                    let built = match (lookup, entity) {
                        (Lookup::Build, Some(entity)) => self.edit_frames.build(entity).ok(),
                        _ => None,
                    };
                    match built {
                        Some(frame) => frames.extend(frame),
                        None => {
                            entity_messages(entity, entity_id, &pending, protocol, &mut messages);
                            encode_messages(&mut messages, protocol, id, &mut frames);
                        }
                    }
                    if let Some(baseline) = body.and_then(|slot| client.sync.body_mut(slot)) {
                        record_body(baseline, entity, pending.presence);
                    }
                    entity.is_some()
                }
            };
            if interest {
                if exists {
                    client.last_sent.insert(entity_id, now);
                } else {
                    client.last_sent.remove(&entity_id);
                }
            }
        }
        for (entity_id, pending) in deferred {
            client.sync.defer(entity_id, pending);
        }
        // The RigidBodyUpdate batch goes before the generic sync.
        match pack(&records) {
            Ok(payloads) => {
                for payload in payloads {
                    let mut frame = Vec::with_capacity(payload.len() + 2);
                    frame.extend_from_slice(&RIGID_BODY_UPDATE.to_le_bytes());
                    frame.extend_from_slice(&payload);
                    self.push_frame(id, frame);
                }
            }
            Err(error) => warn!(client = %id, %error, "cannot encode RigidBodyUpdate"),
        }
        for frame in frames.drain(..) {
            self.push_bytes(id, frame);
        }
        self.tick_frames = frames;
    }
}

/// A RigidBodyUpdate client's body baseline after an entity went out to it.
fn record_body(baseline: &mut BodyState, entity: Option<&Entity>, presence: Presence) {
    match entity {
        // A whole entity sent: the client now holds its state.
        Some(e) if matches!(presence, Presence::New | Presence::Replaced) => {
            if let Some(state) = body_state(e) {
                *baseline = state;
            }
        }
        Some(_) => {}
        // Gone from the scene: whatever comes under this id next starts
        // from nothing.
        None => *baseline = BodyState::default(),
    }
}

/// Encodes the general path's messages into frames, in order.
fn encode_messages(
    messages: &mut Vec<Message>,
    protocol: ProtocolVersion,
    client: ClientId,
    frames: &mut Vec<Bytes>,
) {
    for message in messages.drain(..) {
        match message.encode_frame(protocol) {
            Ok(frame) => frames.push(Bytes::from(frame)),
            // Only an internal inconsistency gets here (e.g. a value too
            // long for its wire field); skip the message, keep the client.
            Err(error) => {
                warn!(%client, message = message.name(), error = %RemoteText(&error), "cannot encode")
            }
        }
    }
}

/// The messages that bring one client's copy of an entity up to date.
fn entity_messages(
    entity: Option<&Entity>,
    id: EntityId,
    pending: &EntitySync,
    protocol: ProtocolVersion,
    out: &mut Vec<Message>,
) {
    match pending.presence {
        Presence::Removed => {
            out.push(Message::RemoveEntity(RemoveEntity {
                scene_id: 0,
                entity_id: id,
            }));
        }
        Presence::New | Presence::Replaced => {
            if pending.presence == Presence::Replaced {
                out.push(Message::RemoveEntity(RemoveEntity {
                    scene_id: 0,
                    entity_id: id,
                }));
            }
            if let Some(entity) = entity {
                out.push(Message::CreateEntity(create_entity(entity)));
            }
        }
        Presence::Known => {
            if let Some(entity) = entity {
                changed_entity_messages(entity, pending, protocol, out);
            }
        }
    }
}

fn create_entity(entity: &Entity) -> CreateEntity {
    CreateEntity {
        scene_id: 0,
        entity_id: entity.id,
        temporary: entity.temporary,
        // Written only for protocol >= 3 by the encoder (section 4.6).
        parent: entity.parent,
        components: entity
            .replicated_components()
            .map(Scene::component_data)
            .collect(),
    }
}

/// Per entity per tick: RemoveComponents, RemoveAttributes, CreateComponents,
/// CreateAttributes, EditAttributes, EditEntityProperties, SetEntityParent.
fn changed_entity_messages(
    entity: &Entity,
    pending: &EntitySync,
    protocol: ProtocolVersion,
    out: &mut Vec<Message>,
) {
    let id = entity.id;
    let mut removed_components = Vec::new();
    let mut removed_attributes = Vec::new();
    let mut created_components = Vec::new();
    let mut created_attributes = Vec::new();
    let mut edit_blocks = Vec::new();
    for (component_id, sync) in &pending.components {
        if component_id.is_local() {
            continue;
        }
        let current = entity.components.get(component_id);
        match sync.presence {
            Presence::Removed => removed_components.push(*component_id),
            Presence::New | Presence::Replaced => {
                if sync.presence == Presence::Replaced {
                    removed_components.push(*component_id);
                }
                if let Some(component) = current {
                    created_components.push(Scene::component_data(component));
                }
            }
            Presence::Known => {
                let Some(component) = current else { continue };
                if matches!(component.content, ComponentContent::Opaque(_)) {
                    continue;
                }
                for index in sync.removed().iter() {
                    removed_attributes.push(RemovedAttribute {
                        component_id: *component_id,
                        index,
                    });
                }
                for index in sync.created().iter() {
                    if let Some(attribute) = component.attribute(index) {
                        created_attributes.push(NewAttribute {
                            component_id: *component_id,
                            index,
                            name: attribute.dynamic_name.clone().unwrap_or_default(),
                            value: attribute.value.clone(),
                        });
                    }
                }
                let edits = dirty_edits(component, &sync.dirty());
                if !edits.is_empty() {
                    let slots = SceneSlots::of(component);
                    let mut w =
                        BitWriter::with_capacity(sorted_block_len(&edits, slots.slot_count()));
                    match write_block(&edits, &slots, &mut w) {
                        Ok(()) => edit_blocks.push(EditAttributesBlock {
                            component_id: *component_id,
                            data: w.finish(),
                        }),
                        Err(error) => {
                            warn!(entity = %id, component = %component_id, error = %RemoteText(&error), "cannot encode edits")
                        }
                    }
                }
            }
        }
    }
    if !removed_components.is_empty() {
        out.push(Message::RemoveComponents(RemoveComponents {
            scene_id: 0,
            entity_id: id,
            component_ids: removed_components,
        }));
    }
    if !removed_attributes.is_empty() {
        out.push(Message::RemoveAttributes(RemoveAttributes {
            scene_id: 0,
            entity_id: id,
            attributes: removed_attributes,
        }));
    }
    if !created_components.is_empty() {
        out.push(Message::CreateComponents(CreateComponents {
            scene_id: 0,
            entity_id: id,
            components: created_components,
        }));
    }
    if !created_attributes.is_empty() {
        out.push(Message::CreateAttributes(CreateAttributes {
            scene_id: 0,
            entity_id: id,
            attributes: created_attributes,
        }));
    }
    if !edit_blocks.is_empty() {
        out.push(Message::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: id,
            blocks: edit_blocks,
        }));
    }
    if pending.temporary_dirty {
        out.push(Message::EditEntityProperties(EditEntityProperties {
            scene_id: 0,
            entity_id: id,
            temporary: entity.temporary,
        }));
    }
    if pending.parent_dirty && protocol >= ProtocolVersion::HIERARCHIC_SCENE {
        out.push(Message::SetEntityParent(SetEntityParent {
            scene_id: 0,
            entity_id: id,
            parent_id: entity.parent.unwrap_or(EntityId(0)),
        }));
    }
}
