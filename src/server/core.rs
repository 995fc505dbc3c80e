//! The server core's state and its quinn-proto style interface.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use bytes::Bytes;
use tracing::{debug, info, warn};

use super::client::{Client, LoginState};
use super::edit_frame::EditFrames;
use super::entity_quota::EntityQuota;
use super::limits::ServerLimits;
use super::pending_logins::PendingLogins;
use super::rigid_body::CurrentBodies;
use super::write_schedule::{WriteRule, WriteSchedule};
use crate::clock::Time;
use crate::log_budget::LogBudget;
use crate::logging::RemoteText;
use crate::scene::{Change, ChangeKind, ChangeSource, ClientId, Scene};
use crate::tundra::asset_storage::AssetStorages;
use crate::tundra::messages::{ClientLeft, EntityAction};
use crate::tundra::LoginDialect;
use crate::tundra::{AttributeValue, ComponentId, EntityId, Message, ProtocolVersion, UserId};

/// Settings the core needs, filled by the node from its configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub tick: Duration,
    pub limits: ServerLimits,
    /// Login properties a client must present with exactly these values.
    pub required_login: BTreeMap<String, String>,
    pub interest_management: bool,
    /// The asset storages a successful LoginReply advertises, written in
    /// each client's dialect (docs/tundra-wire.md §4.2: JSON for WebSocket,
    /// XML for native clients). None for a node with no asset storage of
    /// its own; in upstream mode, the world server's.
    pub asset_storages: AssetStorages,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            tick: Duration::from_millis(50),
            limits: ServerLimits::default(),
            required_login: BTreeMap::new(),
            interest_management: false,
            asset_storages: AssetStorages::none(),
        }
    }
}

/// What the core asks of the node.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// A client logged in.
    ClientJoined {
        client: ClientId,
        user: UserId,
        username: String,
    },
    /// A client left.
    ClientLeft { client: ClientId, user: UserId },
    /// A client edited an entity whose authority is another node: the node
    /// forwards the request; the scene is unchanged until the authority's
    /// update comes back.
    RemoteEdit {
        client: ClientId,
        entity: EntityId,
        component: ComponentId,
        index: u8,
        value: AttributeValue,
    },
    /// A client removed a remote entity (`component` None) or one of its
    /// components: the node forwards the request to the authority; the scene
    /// is unchanged until the authority's removal comes back.
    RemoteRemove {
        client: ClientId,
        entity: EntityId,
        component: Option<ComponentId>,
    },
    /// An EntityAction for the server (execution type Local or Server). For
    /// a remote entity the node forwards it to the authority.
    Action {
        client: ClientId,
        action: EntityAction,
    },
    /// An EntityAction with the Peers bit, already queued for this node's
    /// other clients; the federation takes it to every other node's.
    PeersAction {
        client: ClientId,
        action: EntityAction,
    },
}

/// Counters for the stats line and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub refused_messages: u64,
    pub clients_closed_for_misbehaviour: u64,
    /// Clients written between network ticks, as soon as their changes
    /// were worth writing (`write_schedule.rs`).
    pub early_writes: u64,
    /// ObserverPositions taken and logins: each may move a client's area
    /// (the node redraws its interest when this changes).
    pub area_changes: u64,
}

/// The Tundra server core for one node.
#[derive(Debug)]
pub struct TundraServer {
    pub(super) config: ServerConfig,
    pub(super) clients: BTreeMap<ClientId, Client>,
    pub(super) transmits: VecDeque<(ClientId, Bytes)>,
    pub(super) closes: VecDeque<(ClientId, String)>,
    pub(super) events: VecDeque<ServerEvent>,
    pub(super) stats: ServerStats,
    /// Decoded edits of the frame being handled, kept between frames.
    pub(super) edit_scratch: Vec<(ComponentId, u8, AttributeValue)>,
    /// EditAttributes frames of the tick, shared between clients.
    pub(super) edit_frames: EditFrames,
    /// The bodies read for RigidBodyUpdate clients in the write pass at hand.
    pub(super) current_bodies: CurrentBodies,
    /// One client's frames of the tick, kept between clients.
    pub(super) tick_frames: Vec<Bytes>,
    /// Connected clients that have not logged in yet.
    pub(super) pending: PendingLogins,
    /// Lines about connections refused for the pending-login budgets, and
    /// about logins refused because the node is full: a stranger can cause
    /// either at will.
    pub(super) pending_refusals: LogBudget,
    pub(super) full_refusals: LogBudget,
    /// Lines about clients closed for not logging in in time.
    pub(super) login_timeouts: LogBudget,
    /// The entities clients created that are still in the scene.
    pub(super) entity_quota: EntityQuota,
    /// The time of the frame or tick being handled.
    pub(super) now: Time,
    /// Clients with changes waiting to be written, and the rule deciding
    /// when (`write_schedule.rs`).
    pub(super) schedule: WriteSchedule,
    pub(super) write_rule: WriteRule,
    /// Client areas, in spatial interest (`visibility.rs`); `None`: every
    /// client is shown everything.
    pub(super) areas: Option<super::visibility::ClientAreas>,
}

impl TundraServer {
    pub fn new(config: ServerConfig) -> TundraServer {
        let entity_quota = EntityQuota::new(
            config.limits.max_client_entities,
            config.limits.max_entities_per_address,
        );
        let write_rule = WriteRule::for_tick(config.tick)
            .with_backlog_limit(config.limits.max_client_backlog_bytes);
        TundraServer {
            entity_quota,
            now: Time::ZERO,
            schedule: WriteSchedule::default(),
            write_rule,
            config,
            clients: BTreeMap::new(),
            transmits: VecDeque::new(),
            closes: VecDeque::new(),
            events: VecDeque::new(),
            stats: ServerStats::default(),
            edit_scratch: Vec::new(),
            edit_frames: EditFrames::default(),
            current_bodies: CurrentBodies::default(),
            tick_frames: Vec::new(),
            pending: PendingLogins::default(),
            pending_refusals: LogBudget::default(),
            full_refusals: LogBudget::default(),
            login_timeouts: LogBudget::default(),
            areas: None,
        }
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Clients connected but not logged in yet.
    pub fn pending_logins(&self) -> usize {
        self.pending.total()
    }

    pub fn client(&self, id: ClientId) -> Option<&Client> {
        self.clients.get(&id)
    }

    /// Whether any client is connected (logged in or not yet).
    pub fn has_connections(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Clients that have logged in.
    pub fn authenticated_clients(&self) -> impl Iterator<Item = &Client> {
        self.clients.values().filter(|c| c.is_authenticated())
    }

    /// A new connection whose address does not matter (simulations and
    /// unit tests): counted as one from the loopback address.
    pub fn handle_connect(&mut self, client: ClientId, now: Time, dialect: LoginDialect) -> bool {
        self.handle_connect_from(client, now, dialect, IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    /// A new connection from `address` whose login data will be in
    /// `dialect`. It waits to log in within the pending-login budgets (total
    /// and per address); `max_clients` is checked at login, so connections
    /// that never log in cannot take the seats of those that do. Returns
    /// false (and queues a close) when a budget is spent.
    pub fn handle_connect_from(
        &mut self,
        client: ClientId,
        now: Time,
        dialect: LoginDialect,
        address: IpAddr,
    ) -> bool {
        let limits = &self.config.limits;
        let admitted = self.pending.try_admit(
            address,
            limits.max_pending_logins,
            limits.max_pending_logins_per_address,
        );
        if let Err(refusal) = admitted {
            let limit = match refusal {
                super::pending_logins::PendingRefusal::Total => limits.max_pending_logins,
                super::pending_logins::PendingRefusal::Address => {
                    limits.max_pending_logins_per_address
                }
            };
            if let Some(left_out) = self.pending_refusals.handle_occurrence(now) {
                warn!(%client, %address, limit, left_out, "connection refused: {} reached", refusal.key());
            }
            self.closes.push_back((
                client,
                format!(
                    "too many connections waiting to log in ({}); try again later",
                    refusal.key()
                ),
            ));
            return false;
        }
        self.clients
            .insert(client, Client::new(client, now, dialect, address));
        true
    }

    /// Client-created entities in the scene: all, and from `address`.
    pub fn client_entities(&self, address: Option<std::net::IpAddr>) -> (usize, usize) {
        let from = address.map_or(0, |a| self.entity_quota.of_address(a));
        (self.entity_quota.total(), from)
    }

    /// A connection ended. Tells the other clients (ClientLeft).
    pub fn handle_disconnect(&mut self, client: ClientId, reason: &str) {
        let Some(mut gone) = self.clients.remove(&client) else {
            return;
        };
        self.schedule.forget(client);
        if !gone.is_authenticated() {
            self.pending.release(gone.address);
        }
        self.log_last_refusal_summaries(&mut gone);
        // A user id is given only at login; a client closed for misbehaving
        // after login still leaves the others a ClientLeft.
        if gone.user.0 == 0 {
            debug!(%client, reason = %RemoteText(&reason), "closed before login");
            return;
        }
        info!(%client, user = %gone.user, reason = %RemoteText(&reason), "client left");
        let left = Message::ClientLeft(ClientLeft { user_id: gone.user });
        let others: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        for other in others {
            self.push_message(other, &left);
        }
        self.events.push_back(ServerEvent::ClientLeft {
            client,
            user: gone.user,
        });
    }

    /// Feeds the scene's journal to every client's sync state.
    pub fn handle_scene_changes(&mut self, changes: &[Change]) {
        for change in changes {
            if let ChangeKind::EntityRemoved(entity) = change.kind {
                self.entity_quota.forget(entity);
            }
        }
        for client in self.clients.values_mut().filter(|c| c.is_authenticated()) {
            let before = client.sync.pending();
            let mut from_peer = false;
            for change in changes {
                // A hidden entity's changes wait until it is shown whole.
                if client.visibility.hides(change.kind.entity()) {
                    if let ChangeKind::EntityRemoved(entity) = change.kind {
                        client.visibility.forget(entity);
                    }
                    continue;
                }
                from_peer |= matches!(change.source, ChangeSource::Peer(_));
                client.sync.apply(client.id, change.source, change.kind);
            }
            // Only newly queued entities make a client worth writing (a
            // deferred one is already queued); one already in the schedule
            // stays where it is (under load this runs for every frame),
            // unless a peer's packet brought these: they are due sooner
            // (`write_schedule.rs`), so it is looked at again.
            let peer_news = from_peer && !client.peer_changes_waiting;
            if peer_news {
                client.peer_changes_waiting = true;
            }
            if (client.sync.pending() > before && !client.write_scheduled) || peer_news {
                client.write_scheduled = true;
                self.schedule.handle_changed(client.id, from_peer);
            }
        }
    }

    /// Registers a custom component type to be sent to every client that
    /// speaks protocol 2 or later (those joining later get all of them).
    pub fn handle_type_registered(&mut self, type_id: u32, except: Option<ClientId>) {
        for client in self.clients.values_mut().filter(|c| c.is_authenticated()) {
            if Some(client.id) != except
                && client.protocol >= ProtocolVersion::CUSTOM_COMPONENTS
                && !client.pending_types.contains(&type_id)
            {
                client.pending_types.push(type_id);
            }
        }
    }

    /// The asset storages clients that log in from now on are told of (the
    /// world server's, in upstream mode).
    pub fn set_asset_storages(&mut self, storages: AssetStorages) {
        self.config.asset_storages = storages;
    }

    /// The asset storages a login is told of.
    pub fn asset_storages(&self) -> &AssetStorages {
        &self.config.asset_storages
    }

    /// Queues an action for every logged-in client, sent after its next
    /// scene sync (an action from another node's client).
    pub fn deliver_action(&mut self, action: EntityAction) {
        let ids: Vec<ClientId> = self.authenticated_clients().map(|c| c.id).collect();
        for id in ids {
            if let Some(client) = self.clients.get_mut(&id) {
                client.pending_actions.push(action.clone());
            }
            self.schedule_write(id);
        }
    }

    /// Next frame to send to a client.
    pub fn poll_transmit(&mut self) -> Option<(ClientId, Bytes)> {
        self.transmits.pop_front()
    }

    /// Next connection to close, with the reason to log and send.
    pub fn poll_close(&mut self) -> Option<(ClientId, String)> {
        self.closes.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    pub(super) fn push_frame(&mut self, client: ClientId, frame: Vec<u8>) {
        self.push_bytes(client, Bytes::from(frame));
    }

    /// Queues a frame that may be shared with other clients.
    pub(super) fn push_bytes(&mut self, client: ClientId, frame: Bytes) {
        self.stats.frames_out += 1;
        self.stats.bytes_out += frame.len() as u64;
        self.transmits.push_back((client, frame));
    }

    pub(super) fn push_message(&mut self, client: ClientId, message: &Message) {
        let Some(protocol) = self.clients.get(&client).map(|c| c.protocol) else {
            return;
        };
        match message.encode_frame(protocol) {
            Ok(frame) => self.push_frame(client, frame),
            // Only an internal inconsistency gets here (e.g. a value too long
            // for its wire field); skip the message, keep the client.
            Err(error) => {
                warn!(%client, message = message.name(), error = %RemoteText(&error), "cannot encode")
            }
        }
    }

    /// The transport closed `client` for breaking its protocol: counted
    /// with the clients closed for misbehaviour (the close itself follows
    /// from the transport).
    pub fn handle_transport_violation(&mut self, client: ClientId, reason: &str) {
        warn!(%client, reason = %RemoteText(reason), "client closed by its transport for a protocol violation");
        self.stats.clients_closed_for_misbehaviour += 1;
    }

    /// Closes a client for misbehaving; only that connection is affected.
    pub(super) fn refuse_client(&mut self, client: ClientId, reason: String) {
        warn!(%client, reason = %RemoteText(&reason), left_out = 0_u64, "closing client");
        self.stats.clients_closed_for_misbehaviour += 1;
        self.closes.push_back((client, reason));
        // Stop processing its frames until the transport reports the close.
        if let Some(c) = self.clients.get_mut(&client) {
            c.login = LoginState::Refused {
                close_at: Time::ZERO,
            };
        }
    }

    /// Timers: refused logins closing, login timeouts.
    pub(super) fn handle_client_timers(&mut self, now: Time) {
        let login_timeout = self.config.limits.login_timeout();
        let mut to_close = Vec::new();
        for client in self.clients.values() {
            match client.login {
                LoginState::Refused { close_at } if close_at != Time::ZERO && now >= close_at => {
                    to_close.push((client.id, "login refused".to_owned(), false));
                }
                LoginState::Connecting if now - client.connected_at >= login_timeout => {
                    let reason = format!(
                        "no login within {} s (limits.login_timeout_secs)",
                        login_timeout.as_secs()
                    );
                    to_close.push((client.id, reason, true));
                }
                _ => {}
            }
        }
        for (id, reason, timed_out) in to_close {
            if let Some(c) = self.clients.get_mut(&id) {
                c.login = LoginState::Refused {
                    close_at: Time::ZERO,
                };
            }
            if !timed_out {
                info!(client = %id, reason = %RemoteText(&reason), left_out = 0_u64, "closing client");
            } else if let Some(left_out) = self.login_timeouts.handle_occurrence(now) {
                info!(client = %id, reason = %RemoteText(&reason), left_out, "closing client");
            }
            self.closes.push_back((id, reason));
        }
    }

    /// The scene, for ticks and handlers, is always passed in by the node.
    pub fn handle_tick(&mut self, scene: &Scene, now: Time, backlog: &dyn Fn(ClientId) -> usize) {
        self.now = now;
        self.handle_client_timers(now);
        self.log_refusal_summaries(now);
        self.write_tick(scene, now, backlog);
    }
}
