//! The glue between the node's parts: scene changes go to everything that
//! synchronises from the scene, and the events of the server, the
//! federation and the bridge go to the part that acts on them, until quiet.

use tracing::{debug, info};

use super::{Event, Node};
use crate::federation::FederationEvent;
use crate::logging::RemoteText;
use crate::server::ServerEvent;
use crate::upstream::{Bridge, BridgeEvent};

impl Node {
    /// Hands what the bridge asks for to the server and the federation.
    fn handle_bridge_event(&mut self, event: BridgeEvent) {
        match event {
            BridgeEvent::DeliverAction(action) => self.server.deliver_action(action),
            BridgeEvent::FloodAction(action) => self.federation.handle_peers_action(&action),
            BridgeEvent::ActionToAuthority(action) => self
                .federation
                .handle_action_for_authority(&action, &self.scene),
            BridgeEvent::EditToAuthority {
                entity,
                component,
                index,
                value,
            } if self
                .scene
                .entity(entity)
                .is_some_and(|e| e.origin == crate::scene::Origin::Local) =>
            {
                // This node is the authority (an entity of its own
                // clients): the edit applies here and reaches its clients
                // and peers as any change of the node's.
                if let Err(error) = self.scene.edit_attribute(
                    crate::scene::ChangeSource::Node,
                    entity,
                    component,
                    index,
                    value,
                ) {
                    debug!(%entity, %error, "world server's edit of this node's entity refused");
                }
            }
            BridgeEvent::EditToAuthority {
                entity,
                component,
                index,
                value,
            } => self
                .federation
                .handle_remote_edit(entity, component, index, value, &self.scene),
            BridgeEvent::TypeRegistered(type_id) => {
                self.server.handle_type_registered(type_id, None)
            }
            BridgeEvent::WorldAssetStorages(storages) => self.server.set_asset_storages(storages),
        }
    }

    /// Upstream mode: an entity handed away from this node that was the
    /// world server's leaves the world server; an entity handed to this
    /// node becomes the world server's (docs/upstream.md §8).
    fn carry_authority_to_world(&mut self, entity: crate::tundra::EntityId, authority: uuid::Uuid) {
        let Some(bridge) = &mut self.upstream else {
            return;
        };
        if authority == self.federation.node_id() {
            bridge.adopt_into_world(entity, &mut self.scene);
        } else if bridge.is_world_entity(entity) {
            let key = self.federation.global_of(entity);
            bridge.release_world_entity(entity, key, &mut self.scene);
        }
    }

    /// Passes events between the server and the federation and hands the
    /// scene's changes to everything that synchronises from it, until quiet.
    pub(super) fn settle(&mut self) {
        let mut changes = std::mem::take(&mut self.journal);
        for _ in 0..16 {
            let mut busy = false;
            self.scene.take_journal_into(&mut changes);
            if !changes.is_empty() {
                busy = true;
                self.server.handle_scene_changes(&changes);
                self.server.follow_client_areas(&self.scene, &changes);
                self.federation.handle_scene_changes(&self.scene, &changes);
                if let Some(zones) = &mut self.zones {
                    zones.mark(&changes);
                }
                if let Some(bridge) = &mut self.upstream {
                    let federation = &self.federation;
                    bridge.handle_scene_changes_with(&self.scene, &changes, &|entity| {
                        federation.global_of(entity)
                    });
                    bridge.finish_adoptions(&mut self.scene);
                }
            }
            let proxied = self.scene.take_proxied_edits();
            if !proxied.is_empty() {
                busy = true;
                if let Some(bridge) = &mut self.upstream {
                    bridge.handle_proxied_edits(&mut self.scene, proxied);
                }
            }
            while let Some(event) = self.server.poll_event() {
                busy = true;
                // The server's events the federation acts on.
                match &event {
                    ServerEvent::RemoteEdit {
                        entity,
                        component,
                        index,
                        value,
                        ..
                    } => self.federation.handle_remote_edit(
                        *entity,
                        *component,
                        *index,
                        value.clone(),
                        &self.scene,
                    ),
                    ServerEvent::RemoteRemove {
                        entity, component, ..
                    } => self.federation.handle_remote_remove(*entity, *component),
                    ServerEvent::Action { action, .. } => self
                        .federation
                        .handle_action_for_authority(action, &self.scene),
                    ServerEvent::PeersAction { action, .. } => {
                        self.federation.handle_peers_action(action)
                    }
                    _ => {}
                }
                if let Some(bridge) = &mut self.upstream {
                    match &event {
                        ServerEvent::Action { action, .. } => {
                            bridge.handle_action_for_world(action);
                        }
                        ServerEvent::PeersAction { action, .. } => {
                            bridge.handle_peers_action(action)
                        }
                        _ => {}
                    }
                }
                match &event {
                    ServerEvent::Action { client, action } => {
                        debug!(%client, entity = %action.entity_id, name = %RemoteText(&action.name), "entity action for the server");
                    }
                    other => debug!(
                        event = match other {
                            ServerEvent::ClientJoined { .. } => "client_joined",
                            ServerEvent::ClientLeft { .. } => "client_left",
                            ServerEvent::RemoteEdit { .. } => "remote_edit",
                            ServerEvent::RemoteRemove { .. } => "remote_remove",
                            ServerEvent::PeersAction { .. } => "peers_action",
                            ServerEvent::Action { .. } => "action",
                        },
                        "server event"
                    ),
                }
            }
            while let Some(event) = self.upstream.as_mut().and_then(Bridge::poll_event) {
                busy = true;
                self.handle_bridge_event(event);
            }
            while let Some(event) = self.federation.poll_event() {
                busy = true;
                match event {
                    FederationEvent::TypeRegistered(type_id) => {
                        self.server.handle_type_registered(type_id, None)
                    }
                    FederationEvent::ActionForClients(action) => {
                        if let Some(bridge) = &mut self.upstream {
                            bridge.handle_peers_action(&action);
                        }
                        self.server.deliver_action(action)
                    }
                    FederationEvent::ActionForAuthority { entity, action }
                        if self
                            .upstream
                            .as_mut()
                            .is_some_and(|b| b.handle_action_for_world(&action)) =>
                    {
                        debug!(%entity, name = %RemoteText(&action.name), "entity action sent to the world server, its authority");
                    }
                    FederationEvent::ActionForAuthority { entity, action } => {
                        info!(%entity, name = %RemoteText(&action.name), "entity action from a peer executed here, its authority");
                        self.push_action_event(Event::ActionExecuted(entity, action));
                    }
                    FederationEvent::AuthorityChanged {
                        entity,
                        authority,
                        epoch,
                    } => {
                        debug!(%entity, %authority, epoch, "entity authority changed");
                        if let Some(zones) = &mut self.zones {
                            zones.mark_entity(entity);
                        }
                        self.carry_authority_to_world(entity, authority);
                    }
                    FederationEvent::AuthorityRefused {
                        entity,
                        status,
                        detail,
                    } => {
                        info!(
                            %entity,
                            status = status.0,
                            detail = %RemoteText(match &detail {
                                crate::less::value::Value::String(text) => text.clone(),
                                other => format!("{other:?}"),
                            }),
                            "this node's authority request refused"
                        );
                        if let Some(zones) = &mut self.zones {
                            zones.note_refused(entity);
                        }
                    }
                    FederationEvent::DepartureOffered {
                        link,
                        peer,
                        entities,
                    } => self.handle_departure_offer(link, peer, entities),
                    FederationEvent::DepartureAnswered { peer, accepted } => {
                        self.note_departure_answer(peer, accepted)
                    }
                    FederationEvent::ActionAnswered { status, detail } => {
                        debug!(
                            status = status.0,
                            detail = %RemoteText(format_args!("{detail:?}")),
                            "a remote authority answered an entity action"
                        );
                        self.push_action_event(Event::ActionAnswered(status, detail));
                    }
                }
            }
            if !busy {
                break;
            }
        }
        self.journal = changes;
    }
}
