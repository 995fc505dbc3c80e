//! One connected Tundra client as the server core sees it.

use std::net::IpAddr;

use foldhash::{HashMap, HashMapExt};

use super::backlog::BacklogWatch;
use super::interest::Observer;
use super::refusal_log::RefusalLog;
use super::refusal_window::RefusalWindow;
use super::sync_state::SyncState;
use crate::clock::Time;
use crate::scene::entity_hash::EntityMap;
use crate::scene::ClientId;
use crate::tundra::messages::EntityAction;
use crate::tundra::LoginDialect;
use crate::tundra::{EntityId, ProtocolVersion, UserId};

/// Where a client is in the login sequence (docs/tundra-wire.md §7.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginState {
    /// Connected; only Login (100) is accepted.
    Connecting,
    /// Refused; closed at `close_at` (tundra waits ~1 s so the reply arrives).
    Refused { close_at: Time },
    /// Logged in; its scene sync starts right after the LoginReply.
    Authenticated,
}

#[derive(Debug)]
pub struct Client {
    pub id: ClientId,
    pub connected_at: Time,
    pub login: LoginState,
    pub user: UserId,
    pub username: String,
    pub protocol: ProtocolVersion,
    /// How this client's login data is written (JSON or XML), from its
    /// transport; also the form of its LoginReply data.
    pub dialect: LoginDialect,
    /// Login properties: every top-level JSON key, or every child element
    /// of the login XML, with the same meaning either way.
    pub properties: serde_json::Map<String, serde_json::Value>,
    pub sync: SyncState,
    /// Custom component types still to send (RegisterComponentType).
    pub pending_types: Vec<u32>,
    /// EntityActions to send after this client's next scene sync.
    pub pending_actions: Vec<EntityAction>,
    /// The client's unacked entity ids and the ids the server gave them
    /// (`unackedIdsToRealIds`, docs/tundra-wire.md §7.4).
    pub unacked: HashMap<EntityId, EntityId>,
    pub entities_created: usize,
    /// Its refusals, for the log's summaries.
    pub refusal_log: RefusalLog<&'static str>,
    /// Its refusals, for telling bulk from a few races.
    pub refusal_window: RefusalWindow,
    pub observer: Option<Observer>,
    /// What this client is not shown (spatial interest, `visibility.rs`).
    pub visibility: super::visibility::Visibility,
    /// When each entity was last sent, for interest management.
    pub last_sent: EntityMap<Time>,
    /// Its unsent bytes over time: whether it is held, or not reading.
    pub backlog: BacklogWatch,
    /// When its scene changes were last written (at the tick or between).
    pub last_sync_write: Option<Time>,
    /// Whether it is in the write schedule (`write_schedule.rs`).
    pub write_scheduled: bool,
    /// Whether some of its waiting changes came in a peer's packet (due
    /// sooner, `write_schedule.rs`).
    pub peer_changes_waiting: bool,
    /// The IP address it connected from: its pending-login budget and
    /// `limits.max_entities_per_address`.
    pub address: IpAddr,
}

impl Client {
    pub fn new(id: ClientId, now: Time, dialect: LoginDialect, address: IpAddr) -> Client {
        Client {
            id,
            connected_at: now,
            login: LoginState::Connecting,
            user: UserId(0),
            username: String::new(),
            protocol: ProtocolVersion::ORIGINAL,
            dialect,
            properties: Default::default(),
            sync: SyncState::default(),
            pending_types: Vec::new(),
            pending_actions: Vec::new(),
            unacked: HashMap::new(),
            entities_created: 0,
            refusal_log: RefusalLog::default(),
            refusal_window: RefusalWindow::default(),
            observer: None,
            visibility: Default::default(),
            last_sent: EntityMap::default(),
            backlog: BacklogWatch::default(),
            last_sync_write: None,
            write_scheduled: false,
            peer_changes_waiting: false,
            address,
        }
    }

    pub fn is_authenticated(&self) -> bool {
        self.login == LoginState::Authenticated
    }

    /// Whether a write would send it anything: scene changes, actions or
    /// component types.
    pub fn has_waiting(&self) -> bool {
        self.sync.pending() > 0
            || !self.pending_actions.is_empty()
            || !self.pending_types.is_empty()
    }

    /// Refused (its login, or closed for misbehaving): its frames are
    /// dropped until the close.
    pub fn is_refused(&self) -> bool {
        matches!(self.login, LoginState::Refused { .. })
    }

    /// Maps a full 32-bit id a client sent (CreateEntity parent,
    /// SetEntityParent) through its unacked map; 0 means none.
    pub fn resolve_full_id(&self, id: EntityId) -> Option<EntityId> {
        match id {
            EntityId(0) => None,
            id if id.is_unacked() => self.unacked.get(&id).copied(),
            id => Some(id),
        }
    }
}
