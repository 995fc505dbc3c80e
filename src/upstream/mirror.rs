//! Messages from the world server: its entities copied into the node's scene
//! (mirrored, with [`ChangeSource::Node`] and marked proxied), replies to the
//! bridge's own creations, and edits or actions on the federation entities
//! the bridge created there (docs/tundra-wire.md §4, §7.4 and §7.5).

use tracing::{debug, info, warn};

use super::bridge::{Bridge, BridgeEvent, LinkState};
use super::forwarded::{Forwarded, FORWARDED_EDIT_WAIT};
use super::ids::{Mirrored, UpstreamEntity};
use crate::clock::Time;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, Origin, Scene};
use crate::tundra::asset_storage::AssetStorages;
use crate::tundra::messages::{
    exec_type, CreateEntity, CreateEntityReply, EditAttributes, EntityAction, RemoveEntity,
};
use crate::tundra::registry::CustomRegistration;
use crate::tundra::{AttributeEdit, ComponentId, DynamicAttribute, EntityId, Message};

impl Bridge {
    pub(super) fn handle_message(&mut self, now: Time, message: Message, scene: &mut Scene) {
        match message {
            Message::LoginReply(reply) => {
                if !matches!(self.state, LinkState::LoggingIn { .. }) {
                    return;
                }
                match self.settings.login.accept_reply(&reply) {
                    Ok(session) => {
                        info!(user = %RemoteText(&session.user), protocol = session.protocol.0, "logged in to the world server");
                        self.commands
                            .push_back(super::bridge::LinkCommand::LoggedIn);
                        self.outage_reported = false;
                        let storages = self.read_world_storages(&reply.reply_data);
                        if storages != self.world_storages {
                            self.world_storages = storages.clone();
                            self.events
                                .push_back(BridgeEvent::WorldAssetStorages(storages));
                        }
                        self.begin_sync(now, session);
                    }
                    Err(error) => warn!(error = %RemoteText(&error), "world server login failed"),
                }
            }
            Message::RegisterComponentType(m) => {
                self.announced.insert(m.type_id);
                match m.register(scene.registry_mut()) {
                    CustomRegistration::Added(id) | CustomRegistration::Replaced(id) => {
                        self.events.push_back(BridgeEvent::TypeRegistered(id));
                    }
                    CustomRegistration::IgnoredStatic(_) => {}
                }
            }
            Message::CreateEntity(mut m) => {
                self.extend_sync(now);
                for data in &mut m.components {
                    self.component_in(data);
                }
                self.handle_create_entity(m, scene);
            }
            Message::CreateEntityReply(m) => self.handle_create_reply(m),
            Message::CreateComponentsReply(m) => {
                if let UpstreamEntity::Exported(local) = self.ids.resolve(m.entity_id) {
                    self.ack_components(local, &m.components);
                    self.dirty.insert(local);
                }
            }
            Message::EditAttributes(m) => self.handle_edit(m, scene),
            Message::RigidBodyUpdate(m) => self.handle_rigid_body(&m, scene),
            Message::RemoveEntity(m) => self.handle_remove(m, scene),
            Message::EntityAction(m) => self.handle_world_action(m),
            other => self.handle_structure(other, scene),
        }
    }

    /// Smaller structural messages about mirrored entities.
    fn handle_structure(&mut self, message: Message, scene: &mut Scene) {
        let source = ChangeSource::Node;
        let entity_of = |bridge: &Bridge, id: EntityId| match bridge.ids.resolve(id) {
            UpstreamEntity::Mirrored(local) => Some((id, local)),
            _ => None,
        };
        match message {
            Message::CreateComponents(m) => {
                if let Some((upstream, local)) = entity_of(self, m.entity_id) {
                    for mut data in m.components {
                        self.component_in(&mut data);
                        let id = data.id;
                        if let Ok(pairs) = scene.create_components(source, local, vec![data]) {
                            if let (Some((_, assigned)), Some(entry)) =
                                (pairs.first(), self.ids.mirrored_mut(upstream))
                            {
                                entry.components.insert(id, *assigned);
                            }
                        }
                    }
                }
            }
            Message::CreateAttributes(m) => {
                if let Some((upstream, local)) = entity_of(self, m.entity_id) {
                    for mut a in m.attributes {
                        if let Some(component) = self.local_component(upstream, a.component_id) {
                            self.value_in(&mut a.value);
                            let attribute = DynamicAttribute {
                                index: a.index,
                                name: a.name,
                                value: a.value,
                            };
                            let created =
                                scene.create_attribute(source, local, component, attribute);
                            self.stats.scene(created, "world attribute not created");
                        }
                    }
                }
            }
            Message::RemoveAttributes(m) => {
                if let Some((upstream, local)) = entity_of(self, m.entity_id) {
                    for a in m.attributes {
                        if let Some(component) = self.local_component(upstream, a.component_id) {
                            let removed = scene.remove_attribute(source, local, component, a.index);
                            self.stats.scene(removed, "world attribute not removed");
                        }
                    }
                }
            }
            Message::RemoveComponents(m) => {
                if let Some((upstream, local)) = entity_of(self, m.entity_id) {
                    for id in m.component_ids {
                        let removed = self
                            .ids
                            .mirrored_mut(upstream)
                            .and_then(|e| e.components.remove(&id));
                        if let Some(component) = removed {
                            let removed = scene.remove_component(source, local, component);
                            self.stats.scene(removed, "world component not removed");
                        }
                    }
                }
            }
            Message::EditEntityProperties(m) => {
                if let Some((_, local)) = entity_of(self, m.entity_id) {
                    let changed = scene.set_temporary(source, local, m.temporary);
                    self.stats
                        .scene(changed, "world temporary flag not applied");
                }
            }
            Message::SetEntityParent(m) => {
                if let Some((_, local)) = entity_of(self, m.entity_id) {
                    let parent = self.local_entity(m.parent_id);
                    let changed = scene.set_parent(source, local, parent);
                    self.stats.scene(changed, "world parent not applied");
                }
            }
            other => debug!(message = other.name(), "world server message ignored"),
        }
    }

    /// The node component of a mirrored entity's world-server component.
    fn local_component(&self, upstream: EntityId, component: ComponentId) -> Option<ComponentId> {
        self.ids
            .mirrored(upstream)?
            .components
            .get(&component)
            .copied()
    }

    /// The node entity a world-server id names (mirrored or exported).
    fn local_entity(&self, upstream: EntityId) -> Option<EntityId> {
        match self.ids.resolve(upstream) {
            UpstreamEntity::Mirrored(local) | UpstreamEntity::Exported(local) => Some(local),
            UpstreamEntity::Unknown => None,
        }
    }

    fn handle_create_entity(&mut self, m: CreateEntity, scene: &mut Scene) {
        if self.removed_again(&m) {
            return;
        }
        let upstream = m.entity_id;
        let parent = m.parent.and_then(|p| self.local_entity(p));
        match self.ids.resolve(upstream) {
            UpstreamEntity::Exported(local) => {
                // One of ours, still there after a reconnect: its state is
                // what the world server has; the next flush sends the rest.
                self.ids.rebind_export(local, upstream);
                self.refresh_shadow(local, &m.components);
                self.dirty.insert(local);
                return;
            }
            UpstreamEntity::Mirrored(local) if scene.entity(local).is_some() => {
                self.update_mirrored(upstream, m, parent, scene);
                return;
            }
            UpstreamEntity::Mirrored(_) => {
                self.ids.remove_mirrored(upstream);
            }
            UpstreamEntity::Unknown => {}
        }
        // After a restart the world server may number its entities anew:
        // an entity not seen yet this session with the same name is the same.
        if let Some(old) = self.unseen_by_name(&m.components, scene) {
            if let Some(mut entry) = self.ids.remove_mirrored(old) {
                debug!(from = %old, to = %upstream, "world entity renumbered by the world server");
                entry.components.clear();
                self.ids.insert_mirrored(upstream, entry);
                self.update_mirrored(upstream, m, parent, scene);
                return;
            }
        }
        let ids: Vec<ComponentId> = m.components.iter().map(|c| c.id).collect();
        match scene.create_entity(
            ChangeSource::Node,
            None,
            Origin::Local,
            m.temporary,
            parent,
            m.components,
        ) {
            Ok(created) => {
                scene.set_proxied(created.id, true);
                let components = ids
                    .into_iter()
                    .zip(created.components.iter().map(|(_, assigned)| *assigned))
                    .collect();
                self.ids.insert_mirrored(
                    upstream,
                    Mirrored {
                        local: created.id,
                        components,
                        seen: true,
                    },
                );
            }
            Err(error) => warn!(%upstream, error = %RemoteText(&error), "world entity not copied"),
        }
    }

    fn handle_create_reply(&mut self, m: CreateEntityReply) {
        let unacked = EntityId::unacked_from_wire(m.sender_entity_id.0);
        if self.orphans.remove(&unacked) {
            // Removed here before the world server answered: remove it there.
            self.send(&Message::RemoveEntity(RemoveEntity {
                scene_id: 0,
                entity_id: m.entity_id,
            }));
            return;
        }
        let Some(local) = self.ids.ack_export(unacked, m.entity_id) else {
            debug!(%unacked, "CreateEntityReply for no pending entity");
            return;
        };
        // Entities whose parent or references waited for an id: retry.
        self.dirty.append(&mut self.waiting);
        self.ack_components(local, &m.components);
        // Edits made while unacked go out now (as Tundra's client re-sends
        // dirty components after the ack, docs/tundra-wire.md §4.13).
        self.dirty.insert(local);
    }

    fn ack_components(&mut self, local: EntityId, pairs: &[crate::tundra::messages::IdPair]) {
        let Some(entry) = self.ids.exported_mut(local) else {
            return;
        };
        for pair in pairs {
            let sender = ComponentId::unacked_from_wire(pair.sender.0);
            for shadow in entry.components.values_mut() {
                if shadow.upstream == sender {
                    shadow.upstream = pair.id;
                }
            }
        }
    }

    fn handle_edit(&mut self, m: EditAttributes, scene: &mut Scene) {
        match self.ids.resolve(m.entity_id) {
            UpstreamEntity::Mirrored(local) => {
                for block in &m.blocks {
                    let Some(component) = self.local_component(m.entity_id, block.component_id)
                    else {
                        continue;
                    };
                    let Some(slots) = scene
                        .entity(local)
                        .and_then(|e| e.components.get(&component))
                        .map(|c| c.slot_types())
                    else {
                        continue;
                    };
                    match block.decode(&slots) {
                        Ok(decoded) => {
                            for mut edit in decoded.edits {
                                self.value_in(&mut edit.value);
                                let edited = scene.edit_attribute(
                                    ChangeSource::Node,
                                    local,
                                    component,
                                    edit.index,
                                    edit.value,
                                );
                                self.stats.scene(edited, "world edit not applied");
                            }
                        }
                        Err(error) => {
                            warn!(entity = %m.entity_id, error = %RemoteText(&error), "undecodable edit from the world server")
                        }
                    }
                }
            }
            UpstreamEntity::Exported(local) => self.handle_exported_edit(local, &m, scene),
            UpstreamEntity::Unknown => {}
        }
    }

    /// A world-server client edited its copy of a federation entity.
    fn handle_exported_edit(&mut self, local: EntityId, m: &EditAttributes, scene: &Scene) {
        let Some(entity) = scene.entity(local) else {
            return;
        };
        for block in &m.blocks {
            let Some(component) = self.ids.exported(local).and_then(|entry| {
                entry
                    .components
                    .iter()
                    .find(|(_, s)| s.upstream == block.component_id)
                    .map(|(component, _)| *component)
            }) else {
                continue;
            };
            let Some(current) = entity.components.get(&component) else {
                continue;
            };
            let Ok(mut decoded) = block.decode(&current.slot_types()) else {
                continue;
            };
            for edit in &mut decoded.edits {
                self.value_in(&mut edit.value);
            }
            self.world_edits_of_exported(local, component, decoded.edits, scene);
        }
    }

    /// Edits the world server made to its copy of a federation entity's
    /// `component`: the shadow takes each value (so it is not sent back)
    /// and the entity's authority is asked to apply the ones that differ,
    /// or that follow an edit it has not answered yet. Until it answers,
    /// the node's older value is not written back to the world server
    /// (`super::forwarded`).
    pub(super) fn world_edits_of_exported(
        &mut self,
        local: EntityId,
        component: ComponentId,
        edits: Vec<AttributeEdit>,
        scene: &Scene,
    ) {
        let Some(current) = scene
            .entity(local)
            .and_then(|e| e.components.get(&component))
        else {
            return;
        };
        let Some(shadow) = self
            .ids
            .exported_mut(local)
            .and_then(|entry| entry.components.get_mut(&component))
        else {
            return;
        };
        let until = self.last_now + FORWARDED_EDIT_WAIT;
        let mut forwarded_any = false;
        for edit in edits {
            let index = usize::from(edit.index);
            if shadow.values.len() <= index {
                shadow.values.resize(index + 1, None);
            }
            shadow.values[index] = Some(edit.value.clone());
            let held = current.attribute(edit.index).map(|a| &a.value);
            let waiting = shadow.forwarded.get_mut(&edit.index);
            if held == Some(&edit.value) && waiting.is_none() {
                continue; // the authority holds it already
            }
            match (waiting, held) {
                (Some(waiting), _) => waiting.push(edit.value.clone(), until),
                (None, Some(held)) => {
                    let first = Forwarded::new(held.clone(), edit.value.clone(), until);
                    shadow.forwarded.insert(edit.index, first);
                }
                (None, None) => {}
            }
            forwarded_any = true;
            self.events.push_back(BridgeEvent::EditToAuthority {
                entity: local,
                component,
                index: edit.index,
                value: edit.value,
            });
        }
        if forwarded_any {
            self.forwarding.insert((until, local));
        }
    }

    fn handle_remove(&mut self, m: RemoveEntity, scene: &mut Scene) {
        match self.ids.resolve(m.entity_id) {
            UpstreamEntity::Mirrored(local) => {
                self.ids.remove_mirrored(m.entity_id);
                if let Ok(removed) = scene.remove_entity(ChangeSource::Node, local) {
                    for id in removed {
                        if let Some(upstream) = self.ids.upstream_of(id) {
                            self.ids.remove_mirrored(upstream);
                        }
                    }
                }
            }
            UpstreamEntity::Exported(local) => {
                // The world's side removed our copy: not created again this
                // session; the federation entity itself lives on.
                self.ids.end_export(local);
                self.declined.insert(local);
            }
            UpstreamEntity::Unknown => {}
        }
    }

    /// An action the world server sent (its clients' Peers actions arrive
    /// as Local, docs/tundra-wire.md §4.15): for this node's clients and every
    /// other node's; for a federation entity, to its authority as well.
    fn handle_world_action(&mut self, mut action: EntityAction) {
        let resolved = self.ids.resolve(action.entity_id);
        let Some(local) = self.local_entity(action.entity_id) else {
            return;
        };
        action.entity_id = local;
        action.execution_type = exec_type::LOCAL;
        self.events
            .push_back(BridgeEvent::DeliverAction(action.clone()));
        self.events
            .push_back(BridgeEvent::FloodAction(action.clone()));
        if let UpstreamEntity::Exported(_) = resolved {
            action.execution_type = exec_type::SERVER;
            self.events
                .push_back(BridgeEvent::ActionToAuthority(action));
        }
    }
}

impl Bridge {
    /// The asset storages of the world server's successful LoginReply
    /// data, read in the form its transport uses (docs/upstream.md §3).
    /// Data that does not parse is no storage, said at INFO: the node's
    /// clients then resolve the world's relative asset references nowhere,
    /// which an operator wants to know once per login.
    fn read_world_storages(&self, data: &str) -> AssetStorages {
        let dialect = self.settings.login.transport.login_dialect();
        match AssetStorages::parse_reply(data, dialect) {
            Ok(storages) => {
                let default_src = storages.default_storage().map_or("", |s| s.src());
                info!(
                    storages = storages.storages().len(),
                    default = %RemoteText(storages.default_name().unwrap_or_default()),
                    default_src = %RemoteText(default_src),
                    "world server's asset storages"
                );
                storages
            }
            Err(error) => {
                info!(error = %RemoteText(&error), data = %RemoteText(data), "world server's asset storages not understood; none passed on");
                AssetStorages::none()
            }
        }
    }
}
