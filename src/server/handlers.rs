//! Messages from clients: decoding, validation and their effect on the scene
//! (docs/tundra-wire.md §4 and §7.4). A malformed frame closes only the client
//! that sent it; a refused request is dropped, as Tundra drops it, and
//! logged without flooding the log (`super::refusal`). How fast a client's
//! frames arrive is its transport's business: over its budget it is read
//! more slowly (`transport::message_budget`), not refused here.

use tracing::debug;

use super::core::{ServerEvent, TundraServer};
use super::slots::SceneSlots;
use crate::clock::Time;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, ClientId, Origin, Scene, SceneError};
use crate::tundra::edit_attributes::decode_block_each;
use crate::tundra::messages::{
    exec_type, id, split_frame, CreateAttributes, CreateComponents, CreateComponentsReply,
    CreateEntity, CreateEntityReply, EditAttributesView, EntityAction, IdPair, RemoveAttributes,
    RemoveComponents, SetEntityParent,
};
use crate::tundra::registry::CustomRegistration;
use crate::tundra::{DecodeContext, DynamicAttribute, EntityId, Message};

impl TundraServer {
    /// One binary WebSocket message from a client.
    pub fn handle_frame(&mut self, scene: &mut Scene, client: ClientId, now: Time, frame: &[u8]) {
        self.stats.frames_in += 1;
        self.stats.bytes_in += frame.len() as u64;
        self.now = now;
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        if state.is_refused() {
            return;
        }
        let connecting = state.login == super::client::LoginState::Connecting;
        let authenticated = state.is_authenticated();
        if let Ok((id::EDIT_ATTRIBUTES, payload)) = split_frame(frame) {
            // The bulk of client traffic: read in place, no message built.
            match Message::decode_edit_attributes(payload) {
                Ok(edit) if authenticated => self.handle_edit_attributes(scene, client, &edit),
                Ok(_) => debug!(%client, message = "EditAttributes", "dropped before login"),
                Err(error) => self.refuse_client(
                    client,
                    format!("malformed message {}: {error}", id::EDIT_ATTRIBUTES),
                ),
            }
            return;
        }
        let context = DecodeContext {
            protocol_version: state.protocol,
            registry: scene.registry(),
        };
        let message = match Message::decode_frame(frame, &context) {
            Ok(message) => message,
            Err(error) => {
                let id = frame
                    .get(..2)
                    .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
                if id == id::LOGIN && connecting {
                    // The client is told why, then closed.
                    self.stats.refused_messages += 1;
                    self.refuse_malformed_login(client, now, format!("malformed Login: {error}"));
                } else {
                    self.refuse_client(client, format!("malformed message {id}: {error}"));
                }
                return;
            }
        };
        match message {
            Message::Login(login) => self.handle_login(scene, client, now, login),
            _ if !authenticated => {
                // "Only signal messages from authenticated users" (section 2.1).
                debug!(%client, message = message.name(), "dropped before login");
            }
            Message::ObserverPosition(observer) => {
                if let Some(state) = self.clients.get_mut(&client) {
                    let observer_state = state.observer.get_or_insert_with(Default::default);
                    if let Some(position) = observer.position.value() {
                        observer_state.position = Some(position);
                    }
                }
            }
            Message::EditEntityProperties(m) => {
                let result = self.writable_entity(scene, m.entity_id).and_then(|id| {
                    scene.set_temporary(ChangeSource::Client(client), id, m.temporary)
                });
                self.note_refusal(client, "EditEntityProperties", result);
            }
            Message::CreateEntity(m) => self.handle_create_entity(scene, client, m),
            Message::CreateComponents(m) => self.handle_create_components(scene, client, m),
            Message::CreateAttributes(m) => self.handle_create_attributes(scene, client, m),
            // Taken in place above; an owned one is handled the same way.
            Message::EditAttributes(m) => self.handle_edit_attributes(scene, client, &m.view()),
            Message::RemoveAttributes(m) => self.handle_remove_attributes(scene, client, m),
            Message::RemoveComponents(m) => self.handle_remove_components(scene, client, m),
            Message::RemoveEntity(m) => {
                // A client may remove an entity the server already removed
                // (docs/tundra-wire.md §8): unknown ids are ignored, not errors.
                if scene
                    .entity(m.entity_id)
                    .is_some_and(|e| e.origin == Origin::Remote)
                {
                    self.events.push_back(ServerEvent::RemoteRemove {
                        client,
                        entity: m.entity_id,
                        component: None,
                    });
                } else if scene.entity(m.entity_id).is_some() {
                    let result = self.writable_entity(scene, m.entity_id).and_then(|id| {
                        scene
                            .remove_entity(ChangeSource::Client(client), id)
                            .map(|_| ())
                    });
                    self.note_refusal(client, "RemoveEntity", result);
                }
            }
            Message::SetEntityParent(m) => self.handle_set_parent(scene, client, m),
            Message::EntityAction(m) => self.handle_action(scene, client, m),
            Message::RegisterComponentType(m) => {
                let registration = m.register(scene.registry_mut());
                debug!(
                    %client,
                    name = %RemoteText(&m.type_name),
                    outcome = match registration {
                        CustomRegistration::Added(_) => "added",
                        CustomRegistration::Replaced(_) => "replaced",
                        CustomRegistration::IgnoredStatic(_) => "ignored_static",
                    },
                    "component type registered"
                );
                match registration {
                    CustomRegistration::Added(type_id) | CustomRegistration::Replaced(type_id) => {
                        self.handle_type_registered(type_id, Some(client));
                    }
                    CustomRegistration::IgnoredStatic(_) => {}
                }
            }
            Message::AssetDiscovery(_) | Message::AssetDeleted(_) => {
                // The asset module tells every other connection (section 4.16).
                let others: Vec<ClientId> = self
                    .authenticated_clients()
                    .filter(|c| c.id != client)
                    .map(|c| c.id)
                    .collect();
                for other in others {
                    self.push_message(other, &message);
                }
            }
            other => {
                self.refuse_request(client, other.name(), "a server-to-client message");
            }
        }
    }

    /// The entity if clients may change it here (its authority is this node).
    fn writable_entity(&self, scene: &Scene, id: EntityId) -> Result<EntityId, SceneError> {
        match scene.entity(id) {
            None => Err(SceneError::UnknownEntity(id)),
            Some(e) if e.origin == Origin::Remote => Err(SceneError::NotAuthority(id)),
            Some(_) => Ok(id),
        }
    }

    fn note_refusal<T>(
        &mut self,
        client: ClientId,
        what: &'static str,
        result: Result<T, SceneError>,
    ) {
        if let Err(error) = result {
            self.refuse_request(client, what, error);
        }
    }

    fn handle_create_entity(&mut self, scene: &mut Scene, client: ClientId, m: CreateEntity) {
        let limit = self.config.limits.max_entities_per_client;
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        if state.entities_created >= limit {
            return self.refuse_request(
                client,
                "CreateEntity",
                format_args!("limits.max_entities_per_client ({limit}) reached"),
            );
        }
        let address = state.address;
        if let Err(refusal) = self.entity_quota.check(Some(address)) {
            return self.refuse_request(
                client,
                "CreateEntity",
                format_args!("{} ({}) reached", refusal.key(), refusal.limit()),
            );
        }
        let sender = EntityId::unacked_from_wire(m.entity_id.0);
        // A parent may be one of this client's unacked ids (section 4.6).
        let parent = m.parent.and_then(|p| state.resolve_full_id(p));
        let result = scene.create_entity(
            ChangeSource::Client(client),
            None,
            Origin::Local,
            m.temporary,
            parent,
            m.components,
        );
        let created = match result {
            Ok(created) => created,
            Err(error) => return self.note_refusal(client, "CreateEntity", Err::<(), _>(error)),
        };
        self.entity_quota.record(created.id, Some(address));
        if let Some(state) = self.clients.get_mut(&client) {
            state.entities_created += 1;
            state.unacked.insert(sender, created.id);
        }
        debug!(%client, %sender, entity = %created.id, "entity created by client");
        let reply = Message::CreateEntityReply(CreateEntityReply {
            scene_id: 0,
            sender_entity_id: sender,
            entity_id: created.id,
            components: created
                .components
                .iter()
                .map(|(sender, id)| IdPair {
                    sender: *sender,
                    id: *id,
                })
                .collect(),
        });
        self.push_message(client, &reply);
    }

    fn handle_create_components(
        &mut self,
        scene: &mut Scene,
        client: ClientId,
        m: CreateComponents,
    ) {
        let result = self
            .writable_entity(scene, m.entity_id)
            .and_then(|id| scene.create_components(ChangeSource::Client(client), id, m.components));
        match result {
            Ok(pairs) => {
                let reply = Message::CreateComponentsReply(CreateComponentsReply {
                    scene_id: 0,
                    entity_id: m.entity_id,
                    components: pairs
                        .into_iter()
                        .map(|(sender, id)| IdPair { sender, id })
                        .collect(),
                });
                self.push_message(client, &reply);
            }
            Err(error) => self.note_refusal(client, "CreateComponents", Err::<(), _>(error)),
        }
    }

    fn handle_create_attributes(
        &mut self,
        scene: &mut Scene,
        client: ClientId,
        m: CreateAttributes,
    ) {
        if is_echo(scene, &m) {
            // A native client answers the attributes of a DynamicComponent
            // it was sent with CreateAttributes of the same attributes
            // (with the values it held then): nothing is asked of the node,
            // as Tundra never overwrites an attribute by creating it.
            debug!(%client, entity = %m.entity_id, "CreateAttributes repeating attributes the client was sent: nothing to do");
            return;
        }
        let entity = match self.writable_entity(scene, m.entity_id) {
            Ok(id) => id,
            Err(error) => {
                return self.note_refusal(client, "CreateAttributes", Err::<(), _>(error))
            }
        };
        for attribute in m.attributes {
            let result = scene.create_attribute(
                ChangeSource::Client(client),
                entity,
                attribute.component_id,
                DynamicAttribute {
                    index: attribute.index,
                    name: attribute.name,
                    value: attribute.value,
                },
            );
            if let Err(error) = result {
                // Tundra aborts parsing the rest of the message here.
                return self.note_refusal(client, "CreateAttributes", Err::<(), _>(error));
            }
        }
    }

    fn handle_edit_attributes(
        &mut self,
        scene: &mut Scene,
        client: ClientId,
        m: &EditAttributesView<'_>,
    ) {
        let Some(entity) = scene.entity(m.entity_id) else {
            return self.note_refusal(
                client,
                "EditAttributes",
                Err::<(), _>(SceneError::UnknownEntity(m.entity_id)),
            );
        };
        let remote = entity.origin == Origin::Remote;
        // Every block is decoded before any edit is applied (the entity is
        // borrowed from the scene meanwhile); the list is kept between
        // frames so decoding allocates nothing.
        let mut edits = std::mem::take(&mut self.edit_scratch);
        edits.clear();
        for block in &m.blocks {
            let Some(component) = entity.components.get(&block.component_id) else {
                // Unknown component: skip its block (section 4.9).
                self.stats.refused_messages += 1;
                debug!(%client, entity = %m.entity_id, component = %block.component_id, "edit of unknown component skipped");
                continue;
            };
            let start = edits.len();
            let decoded =
                decode_block_each(&block.data, &SceneSlots::of(component), |index, value| {
                    edits.push((block.component_id, index, value))
                });
            if let Err(error) = decoded {
                // A block that does not decode is skipped whole.
                edits.truncate(start);
                self.refuse_request(
                    client,
                    "EditAttributes",
                    format_args!(
                        "undecodable block of component {} of entity {}: {error}",
                        block.component_id, m.entity_id
                    ),
                );
            }
        }
        for (component, index, value) in edits.drain(..) {
            if remote {
                self.events.push_back(ServerEvent::RemoteEdit {
                    client,
                    entity: m.entity_id,
                    component,
                    index,
                    value,
                });
            } else {
                let result = scene.edit_attribute(
                    ChangeSource::Client(client),
                    m.entity_id,
                    component,
                    index,
                    value,
                );
                self.note_refusal(client, "EditAttributes", result);
            }
        }
        self.edit_scratch = edits;
    }

    fn handle_remove_attributes(
        &mut self,
        scene: &mut Scene,
        client: ClientId,
        m: RemoveAttributes,
    ) {
        let entity = match self.writable_entity(scene, m.entity_id) {
            Ok(id) => id,
            Err(error) => {
                return self.note_refusal(client, "RemoveAttributes", Err::<(), _>(error))
            }
        };
        for attribute in m.attributes {
            let result = scene.remove_attribute(
                ChangeSource::Client(client),
                entity,
                attribute.component_id,
                attribute.index,
            );
            self.note_refusal(client, "RemoveAttributes", result);
        }
    }

    fn handle_remove_components(
        &mut self,
        scene: &mut Scene,
        client: ClientId,
        m: RemoveComponents,
    ) {
        let entity = match self.writable_entity(scene, m.entity_id) {
            Ok(id) => id,
            Err(SceneError::NotAuthority(entity)) => {
                for component in m.component_ids {
                    self.events.push_back(ServerEvent::RemoteRemove {
                        client,
                        entity,
                        component: Some(component),
                    });
                }
                return;
            }
            Err(error) => {
                return self.note_refusal(client, "RemoveComponents", Err::<(), _>(error))
            }
        };
        for component in m.component_ids {
            let result = scene.remove_component(ChangeSource::Client(client), entity, component);
            self.note_refusal(client, "RemoveComponents", result);
        }
    }

    fn handle_set_parent(&mut self, scene: &mut Scene, client: ClientId, m: SetEntityParent) {
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        // Full u32 ids; unacked ones go through this client's map and the
        // message is dropped if unknown (section 4.18).
        let Some(entity) = state.resolve_full_id(m.entity_id) else {
            return self.note_refusal(
                client,
                "SetEntityParent",
                Err::<(), _>(SceneError::UnknownEntity(m.entity_id)),
            );
        };
        let parent = match m.parent_id {
            EntityId(0) => None,
            id => match state.resolve_full_id(id) {
                Some(parent) => Some(parent),
                None => {
                    return self.note_refusal(
                        client,
                        "SetEntityParent",
                        Err::<(), _>(SceneError::UnknownEntity(id)),
                    )
                }
            },
        };
        let result = self
            .writable_entity(scene, entity)
            .and_then(|id| scene.set_parent(ChangeSource::Client(client), id, parent));
        self.note_refusal(client, "SetEntityParent", result);
    }

    fn handle_action(&mut self, scene: &Scene, client: ClientId, mut action: EntityAction) {
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        // The entity id is a plain u32 and may be an unacked id (docs/tundra-wire.md §8).
        let Some(entity) = state.resolve_full_id(action.entity_id) else {
            return self.note_refusal(
                client,
                "EntityAction",
                Err::<(), _>(SceneError::UnknownEntity(action.entity_id)),
            );
        };
        if scene.entity(entity).is_none() {
            return self.note_refusal(
                client,
                "EntityAction",
                Err::<(), _>(SceneError::UnknownEntity(entity)),
            );
        }
        action.entity_id = entity;
        let kind = action.execution_type;
        if kind & (exec_type::LOCAL | exec_type::SERVER) != 0 {
            self.events.push_back(ServerEvent::Action {
                client,
                action: action.clone(),
            });
        }
        if kind & exec_type::PEERS != 0 {
            // Queued as Local to every other user, sent after its next scene
            // sync (section 4.15).
            action.execution_type = exec_type::LOCAL;
            for other in self
                .clients
                .values_mut()
                .filter(|c| c.is_authenticated() && c.id != client)
            {
                other.pending_actions.push(action.clone());
            }
            self.events
                .push_back(ServerEvent::PeersAction { client, action });
        }
    }
}

/// Whether every attribute `m` creates is one the scene's entity already
/// has under the same index, name and type: a client repeating what it was
/// sent (the values it held then may be older than the node's). Tundra
/// refuses to overwrite an existing attribute this way, so it changes
/// nothing (an empty message repeats nothing).
fn is_echo(scene: &Scene, m: &CreateAttributes) -> bool {
    let Some(entity) = scene.entity(m.entity_id) else {
        return false;
    };
    !m.attributes.is_empty()
        && m.attributes.iter().all(|a| {
            entity
                .components
                .get(&a.component_id)
                .and_then(|c| c.attribute(a.index))
                .is_some_and(|held| {
                    held.ty() == a.value.attribute_type()
                        && held.dynamic_name.as_deref() == Some(a.name.as_str())
                })
        })
}
