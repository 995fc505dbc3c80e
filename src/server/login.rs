//! Login (100) and the reply sequence of docs/tundra-wire.md §7.2, for both
//! login dialects: JSON from WebSocket clients, XML from native (kNet)
//! clients (docs/knet-wire.md §5.3-§5.4). Both give the same property map, checked
//! by the same `required_login` policy.

use tracing::{info, warn};

use super::client::LoginState;
use super::core::{ServerEvent, TundraServer};
use super::sync_state::SyncState;
use crate::clock::Time;
use crate::logging::RemoteText;
use crate::scene::{ClientId, Scene};
use crate::tundra::login_xml::parse_login_xml;
use crate::tundra::messages::{ClientJoined, Login, LoginReply, RegisterComponentType};
use crate::tundra::{EntityId, LoginDialect, Message, ProtocolVersion, UserId};

/// Tundra closes a refused WebSocket client about a second after the reply
/// (`DisconnectDelayed()` default 1000 ms), so the reason arrives.
const REFUSED_CLOSE_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

impl TundraServer {
    pub(super) fn handle_login(
        &mut self,
        scene: &Scene,
        client: ClientId,
        now: Time,
        login: Login,
    ) {
        let Some(state) = self.clients.get(&client) else {
            return;
        };
        if state.login != LoginState::Connecting {
            // A second Login is dropped, as Tundra drops it for a logged-in user.
            return;
        }
        let protocol =
            ProtocolVersion::negotiate(login.protocol_version).max(ProtocolVersion::ORIGINAL);
        let dialect = state.dialect;
        let properties = match dialect {
            // "If the JSON fails to parse nothing is sent (connection stays
            // unauthenticated)" (docs/tundra-wire.md §4.1).
            LoginDialect::Json => {
                match serde_json::from_str::<serde_json::Value>(&login.login_data) {
                    Ok(serde_json::Value::Object(map)) => map,
                    // Tundra sends nothing then; a failed LoginReply tells
                    // the client (and its user) what is wrong instead.
                    Ok(_) | Err(_) => {
                        self.stats.refused_messages += 1;
                        self.refuse_login(
                            client,
                            protocol,
                            now,
                            "malformed Login: the login data is not a JSON object".to_owned(),
                        );
                        return;
                    }
                }
            }
            // A real server logs malformed login XML and lets the client in
            // with no properties (docs/knet-wire.md §5.3). We refuse it instead, deliberately,
            // with the reason: a real client always writes valid XML, so
            // broken XML is a broken client, better told why than let in
            // nameless and treated as if it had sent nothing.
            LoginDialect::Xml => match parse_login_xml(&login.login_data) {
                Ok(map) => map,
                Err(error) => {
                    self.stats.refused_messages += 1;
                    self.refuse_login(client, protocol, now, error.to_string());
                    return;
                }
            },
        };
        if let Some(reason) = self.login_refusal(&properties) {
            self.refuse_login(client, protocol, now, reason);
            return;
        }
        // Only logged-in clients take seats: connections that never log in
        // have their own budget (`PendingLogins`).
        let seated = self.authenticated_clients().count();
        if seated >= self.config.limits.max_clients {
            if let Some(left_out) = self.full_refusals.handle_occurrence(now) {
                warn!(%client, limit = self.config.limits.max_clients, left_out, "login refused: limits.max_clients reached");
            }
            self.refuse_login_quietly(
                client,
                protocol,
                now,
                "server full (limits.max_clients); try again later".to_owned(),
            );
            return;
        }
        // User ids: max of existing ids + 1, from 1
        // (`KristalliProtocolModule::AllocateNewConnectionID`).
        let user = UserId(
            self.clients
                .values()
                .filter(|c| c.is_authenticated())
                .map(|c| c.user.0)
                .max()
                .unwrap_or(0)
                .saturating_add(1),
        );
        let username = properties
            .get("username")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        let initial = initial_entities(scene);
        let pending_types = if protocol >= ProtocolVersion::CUSTOM_COMPONENTS {
            scene.registry().custom_types().map(|t| t.type_id).collect()
        } else {
            Vec::new()
        };
        if let Some(c) = self.clients.get_mut(&client) {
            self.pending.release(c.address);
            c.login = LoginState::Authenticated;
            c.user = user;
            c.username = username.clone();
            c.protocol = protocol;
            c.properties = properties;
            c.sync = SyncState::new(initial);
            c.pending_types = pending_types;
        }
        self.stats.area_changes += 1;
        if self.areas.is_some() {
            // Until the node draws its area, only this node's world.
            self.review_client(client, scene);
        }
        // ClientJoined(new) to everyone including the new user, then every
        // existing user to the new one, then LoginReply (section 7.2 step 4).
        let joined = Message::ClientJoined(ClientJoined {
            user_id: user,
            username: Some(username.clone()),
        });
        let everyone: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        for id in &everyone {
            self.push_message(*id, &joined);
        }
        let others: Vec<(UserId, String)> = self
            .authenticated_clients()
            .filter(|c| c.id != client)
            .map(|c| (c.user, c.username.clone()))
            .collect();
        for (other, name) in others {
            self.push_message(
                client,
                &Message::ClientJoined(ClientJoined {
                    user_id: other,
                    username: Some(name),
                }),
            );
        }
        // Local storages are directories on this host: only for clients on
        // it, as a real server does (docs/upstream.md §3).
        let on_this_host = self
            .clients
            .get(&client)
            .is_some_and(|c| c.address.to_canonical().is_loopback());
        let reply_data = if on_this_host {
            self.config.asset_storages.reply_data(dialect)
        } else {
            self.config
                .asset_storages
                .for_remote_host()
                .reply_data(dialect)
        };
        let reply = Message::LoginReply(LoginReply {
            success: true,
            user_id: user,
            reply_data,
            protocol_version: Some(protocol.0),
        });
        self.push_message(client, &reply);
        // Its scene leaves right after the reply, not at the next tick.
        self.schedule_write(client);
        info!(%client, %user, username = %RemoteText(&username), protocol = protocol.0, "client logged in");
        self.events.push_back(ServerEvent::ClientJoined {
            client,
            user,
            username,
        });
    }

    /// Sends a failed LoginReply carrying `reason` (the same text in both
    /// dialects) and closes the client after [`REFUSED_CLOSE_DELAY`].
    /// A Login frame that does not decode: refused with the reason, then
    /// closed like any refused login.
    pub(super) fn refuse_malformed_login(&mut self, client: ClientId, now: Time, reason: String) {
        self.refuse_login(client, ProtocolVersion::ORIGINAL, now, reason);
    }

    fn refuse_login(
        &mut self,
        client: ClientId,
        protocol: ProtocolVersion,
        now: Time,
        reason: String,
    ) {
        info!(%client, reason = %RemoteText(&reason), "login refused");
        self.refuse_login_quietly(client, protocol, now, reason);
    }

    /// [`Self::refuse_login`] for a caller that has logged the refusal.
    fn refuse_login_quietly(
        &mut self,
        client: ClientId,
        protocol: ProtocolVersion,
        now: Time,
        reason: String,
    ) {
        self.push_raw(
            client,
            protocol,
            &Message::LoginReply(LoginReply {
                success: false,
                user_id: UserId(0),
                reply_data: reason,
                protocol_version: None,
            }),
        );
        if let Some(c) = self.clients.get_mut(&client) {
            c.login = LoginState::Refused {
                close_at: now + REFUSED_CLOSE_DELAY,
            };
        }
    }

    /// Why a login is refused by the configured policy, if it is.
    fn login_refusal(
        &self,
        properties: &serde_json::Map<String, serde_json::Value>,
    ) -> Option<String> {
        for (key, expected) in &self.config.required_login {
            let given = match properties.get(key) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => {
                    return Some(format!(
                        "login property '{key}' is required: add it to the login data (ask the server's operator for the value)"
                    ))
                }
            };
            if given != *expected {
                return Some(format!(
                    "login property '{key}' is not accepted: check its value with the server's operator"
                ));
            }
        }
        None
    }

    /// Encodes for a client whose protocol is not stored yet.
    fn push_raw(&mut self, client: ClientId, protocol: ProtocolVersion, message: &Message) {
        if let Ok(frame) = message.encode_frame(protocol) {
            self.push_frame(client, frame);
        }
    }

    /// RegisterComponentType messages for the types still pending.
    pub(super) fn write_pending_types(&mut self, scene: &Scene, client: ClientId) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let pending = std::mem::take(&mut c.pending_types);
        for type_id in pending {
            if let Some(schema) = scene.registry().get(type_id) {
                let message =
                    Message::RegisterComponentType(RegisterComponentType::from_schema(schema));
                self.push_message(client, &message);
            }
        }
    }
}

/// Replicated entities in the order a new client gets them: ascending id,
/// but every parent before its children (as urho's server sends them).
fn initial_entities(scene: &Scene) -> Vec<EntityId> {
    let mut order = Vec::with_capacity(scene.len());
    let mut placed = std::collections::HashSet::with_capacity(scene.len());
    for entity in scene.entities().filter(|e| e.is_replicated()) {
        let mut chain = vec![entity.id];
        let mut parent = entity.parent;
        while let Some(id) = parent {
            if placed.contains(&id) || chain.contains(&id) || chain.len() > 64 {
                break;
            }
            match scene.entity(id) {
                Some(p) if p.is_replicated() => {
                    chain.push(id);
                    parent = p.parent;
                }
                _ => break,
            }
        }
        for id in chain.into_iter().rev() {
            if placed.insert(id) {
                order.push(id);
            }
        }
    }
    order
}
