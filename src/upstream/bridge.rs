//! The bridge core: one client session to a Tundra world server at a time,
//! its link state, and the quinn-proto style interface the node and the
//! driver use (docs/upstream.md).
//!
//! Pure: frames, link events and an explicit `now` in; frames for the world
//! server, timeouts and [`BridgeEvent`]s out. It changes the node's scene
//! only with [`ChangeSource::Node`], so its own changes are told apart from
//! the federation's in the journal.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use tracing::{debug, info, warn};

use super::ids::IdMap;
use super::login::{LoginSettings, Session};
use crate::clock::Time;
use crate::federation::GlobalId;
use crate::logging::RemoteText;
use crate::scene::{Change, Scene};
use crate::tundra::asset_storage::AssetStorages;
use crate::tundra::messages::EntityAction;
use crate::tundra::{AttributeValue, ComponentId, DecodeContext, EntityId, Message};
use crate::tundra::{ProtocolVersion, UserId};

/// Settings of the bridge core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeSettings {
    pub login: LoginSettings,
    /// How long the world's entities stay in the node's scene while the
    /// world server is unreachable.
    pub grace: Duration,
    /// After login, the initial scene is complete once no CreateEntity has
    /// arrived for this long; reconciliation runs then.
    pub settle: Duration,
    /// How long to wait for LoginReply before closing and redialling.
    pub login_timeout: Duration,
}

/// What the bridge asks of the connection driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkCommand {
    /// The login succeeded: the redial backoff starts over.
    LoggedIn,
    /// Close this connection (and redial with backoff), for this reason.
    Close(String),
}

/// What the bridge asks of the node.
#[derive(Debug, Clone, PartialEq)]
pub enum BridgeEvent {
    /// An action from the world server's side: for this node's clients.
    DeliverAction(EntityAction),
    /// The same action, for the clients of every other node.
    FloodAction(EntityAction),
    /// An action from the world server's side for a federation entity: to
    /// that entity's authority.
    ActionToAuthority(EntityAction),
    /// The world server's copy of a federation entity was edited there: the
    /// edit goes to the entity's authority.
    EditToAuthority {
        entity: EntityId,
        component: ComponentId,
        index: u8,
        value: AttributeValue,
    },
    /// The world server registered a custom component type.
    TypeRegistered(u32),
    /// The asset storages the world server advertised in its LoginReply
    /// (JSON over WebSocket, XML over kNet; none if it named none or its
    /// data did not parse), when they differ from those last reported: the
    /// node's clients are told of them from now on, each in its own
    /// dialect.
    WorldAssetStorages(AssetStorages),
}

/// Where the session to the world server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// No connection; `since` is when it was lost (None: never connected or
    /// the grace period is over).
    Down { since: Option<Time> },
    /// Login sent, waiting for LoginReply until `until`; `down_since` is
    /// when the last working session was lost (its grace period runs on).
    LoggingIn {
        until: Time,
        down_since: Option<Time>,
    },
    /// Logged in, receiving the initial scene until `until`.
    Syncing { session: Session, until: Time },
    /// Reconciled; changes flow both ways.
    Ready { session: Session },
}

/// Counters for logs and status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgeStats {
    pub frames_in: u64,
    pub frames_out: u64,
    pub undecodable_frames: u64,
    pub sessions: u64,
    pub edits_sent: u64,
    pub actions_sent: u64,
    /// Changes from the world server (or echoes of the bridge's own) the
    /// scene refused: the node's copy is left as it was.
    pub scene_refusals: u64,
    /// World entities handed to another node (removed from the world
    /// server).
    pub handed_out: u64,
    /// Entities handed to this node that became the world server's.
    pub adopted: u64,
}

impl BridgeStats {
    /// Counts and logs a refused scene change; the value of an accepted one.
    pub(super) fn scene<T>(
        &mut self,
        result: Result<T, crate::scene::SceneError>,
        what: &'static str,
    ) -> Option<T> {
        result
            .map_err(|error| {
                self.scene_refusals += 1;
                tracing::debug!(reason = what, error = %RemoteText(&error), "scene refused a world server change");
            })
            .ok()
    }
}

/// The bridge core.
#[derive(Debug)]
pub struct Bridge {
    pub(super) settings: BridgeSettings,
    pub(super) state: LinkState,
    pub(super) ids: IdMap,
    /// Node entities whose world-server copy may be out of date.
    pub(super) dirty: BTreeSet<EntityId>,
    /// Federation entities the world server removed: not created again this
    /// session (its clients asked for them to go).
    pub(super) declined: HashSet<EntityId>,
    /// Unacked ids of exported entities removed before their reply.
    pub(super) orphans: HashSet<EntityId>,
    /// Exported entities whose parent or an entity reference names an
    /// entity the world server has no id for yet: revisited after a reply.
    pub(super) waiting: BTreeSet<EntityId>,
    /// Federation identities of the entities the bridge exports.
    pub(super) keys: HashMap<EntityId, GlobalId>,
    /// Exported entities removed because their peer link went away, with
    /// when the hold started (stamped by the next timer run): kept in the
    /// world server for the grace period in case they come back.
    pub(super) held: BTreeMap<EntityId, Time>,
    /// The latest `now` the bridge was given (the scene's journal comes
    /// without one).
    pub(super) last_now: Time,
    /// When each exported entity's forwarded world edits are given up on
    /// (`super::forwarded`): it is brought up to date then.
    pub(super) forwarding: BTreeSet<(Time, EntityId)>,
    /// Set while a peer link is being removed: removals are held.
    pub(super) holding: bool,
    /// The current outage has had its INFO line (cleared by a login).
    pub(super) outage_reported: bool,
    /// The world server's asset storages the node was last told of (none
    /// until a login names some): a login that names the same asks
    /// nothing of the node.
    pub(super) world_storages: AssetStorages,
    pub(super) commands: VecDeque<LinkCommand>,
    /// Custom component types the world server knows this session (it
    /// registered them, or the bridge announced them).
    pub(super) announced: HashSet<u32>,
    pub(super) transmits: VecDeque<Vec<u8>>,
    pub(super) events: VecDeque<BridgeEvent>,
    pub(super) stats: BridgeStats,
    /// World entities removed from the world server on a hand-over.
    pub(super) handed_out: super::handover::HandedOutEntities,
    /// Entities handed to this node, to become the world server's once it
    /// holds them.
    pub(super) adopting: BTreeSet<EntityId>,
}

impl Bridge {
    pub fn new(settings: BridgeSettings) -> Bridge {
        Bridge {
            settings,
            state: LinkState::Down { since: None },
            ids: IdMap::default(),
            dirty: BTreeSet::new(),
            declined: HashSet::new(),
            orphans: HashSet::new(),
            waiting: BTreeSet::new(),
            keys: HashMap::new(),
            held: BTreeMap::new(),
            holding: false,
            outage_reported: false,
            world_storages: AssetStorages::none(),
            last_now: Time::ZERO,
            forwarding: BTreeSet::new(),
            commands: VecDeque::new(),
            announced: HashSet::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: BridgeStats::default(),
            handed_out: Default::default(),
            adopting: BTreeSet::new(),
        }
    }

    pub fn state(&self) -> LinkState {
        self.state
    }

    pub fn stats(&self) -> &BridgeStats {
        &self.stats
    }

    /// The id map (read-only), for status and tests.
    pub fn ids(&self) -> &IdMap {
        &self.ids
    }

    /// The negotiated session, once logged in.
    pub fn session(&self) -> Option<Session> {
        match self.state {
            LinkState::Syncing { session, .. } | LinkState::Ready { session } => Some(session),
            _ => None,
        }
    }

    /// The connection id the world server gave this node.
    pub fn user(&self) -> Option<UserId> {
        self.session().map(|s| s.user)
    }

    pub(super) fn protocol(&self) -> ProtocolVersion {
        self.session()
            .map_or(ProtocolVersion::ORIGINAL, |s| s.protocol)
    }

    pub(super) fn ready(&self) -> bool {
        matches!(self.state, LinkState::Ready { .. })
    }

    /// Logged in and reconciled: changes flow both ways.
    pub fn is_ready(&self) -> bool {
        self.ready()
    }

    /// A connection to the world server is open (WebSocket or kNet, as the
    /// login settings say): log in.
    pub fn handle_connected(&mut self, now: Time) {
        self.last_now = now;
        let down_since = match self.state {
            LinkState::Down { since }
            | LinkState::LoggingIn {
                down_since: since, ..
            } => since,
            _ => None,
        };
        self.transmits.clear();
        self.ids.begin_session();
        self.orphans.clear();
        self.declined.clear();
        self.announced.clear();
        self.state = LinkState::LoggingIn {
            until: now + self.settings.login_timeout,
            down_since,
        };
        self.stats.sessions += 1;
        self.transmits.push_back(self.settings.login.login_frame());
    }

    /// The connection ended (or a dial failed) for `reason`. The world's
    /// entities stay for the grace period. One INFO line per outage: the
    /// redials that fail while the world server is away are DEBUG, and the
    /// next successful login ends the outage.
    ///
    /// The grace period starts when a logged-in session is lost, and only
    /// then: a redial that fails keeps the outage's start, or none once the
    /// grace period is over and the world's entities have left (a failed
    /// login is no new session to wait for).
    pub fn handle_disconnected(&mut self, now: Time, reason: &str) {
        self.last_now = now;
        let since = match self.state {
            LinkState::Down { since } => since,
            LinkState::LoggingIn { down_since, .. } => down_since,
            LinkState::Syncing { .. } | LinkState::Ready { .. } => Some(now),
        };
        if self.outage_reported {
            debug!(reason = %RemoteText(reason), "world server still unreachable");
        } else {
            self.outage_reported = true;
            info!(
                reason = %RemoteText(reason),
                grace_secs = self.settings.grace.as_secs(),
                "world server connection lost; redialling, its entities stay for the grace period"
            );
        }
        self.state = LinkState::Down { since };
        self.transmits.clear();
    }

    /// One binary frame from the world server.
    pub fn handle_frame(&mut self, now: Time, frame: &[u8], scene: &mut Scene) {
        self.last_now = now;
        self.stats.frames_in += 1;
        let context = DecodeContext {
            protocol_version: self.protocol(),
            registry: scene.registry(),
        };
        let message = match Message::decode_frame(frame, &context) {
            Ok(message) => message,
            Err(error) => {
                self.stats.undecodable_frames += 1;
                warn!(error = %RemoteText(&error), "undecodable frame from the world server skipped");
                return;
            }
        };
        self.handle_message(now, message, scene);
        if self.ready() {
            self.flush(scene);
            self.finish_adoptions(scene);
        }
    }

    /// Sees the scene's journal: federation entities that appear, change or
    /// leave are brought to the world server. The bridge's own changes
    /// (source Node on mirrored entities) are never sent back.
    pub fn handle_scene_changes(&mut self, scene: &Scene, changes: &[Change]) {
        self.handle_scene_changes_with(scene, changes, &|_| None);
    }

    /// [`Bridge::handle_scene_changes`], with the federation identity of
    /// scene entities (`Federation::global_of`): an entity a replaced peer
    /// link presents again under a new node id keeps its world-server copy.
    pub fn handle_scene_changes_with(
        &mut self,
        scene: &Scene,
        changes: &[Change],
        identity: &dyn Fn(EntityId) -> Option<GlobalId>,
    ) {
        for change in changes {
            let entity = change.kind.entity();
            if self.ids.is_mirrored(entity) {
                continue; // the world server's own: it knows
            }
            let present = scene.entity(entity);
            let exportable = present.is_some_and(super::export::is_exportable);
            if exportable && self.ids.exported(entity).is_none() {
                if let Some(key) = identity(entity) {
                    self.keys.insert(entity, key);
                    self.adopt_held(entity, key, scene);
                }
            }
            if present.is_none() && self.holding && self.ids.exported(entity).is_some() {
                self.hold(entity);
            }
            // A removed entity is no longer in the scene: known by its export.
            if exportable || self.ids.exported(entity).is_some() || self.declined.contains(&entity)
            {
                self.dirty.insert(entity);
            }
        }
        if self.ready() {
            self.flush(scene);
        }
    }

    /// Whether a node entity is a copy of a world-server entity.
    pub fn is_world_entity(&self, entity: EntityId) -> bool {
        self.ids.is_mirrored(entity)
    }

    /// Next frame for the world server.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<BridgeEvent> {
        self.events.pop_front()
    }

    /// Next request for the connection driver (close, backoff reset).
    pub fn poll_link_command(&mut self) -> Option<LinkCommand> {
        self.commands.pop_front()
    }

    pub(super) fn send(&mut self, message: &Message) {
        match message.encode_frame(self.protocol()) {
            Ok(frame) => {
                self.stats.frames_out += 1;
                self.transmits.push_back(frame);
            }
            Err(error) => {
                warn!(message = message.name(), error = %RemoteText(&error), "cannot encode for the world server")
            }
        }
    }

    /// Starts (or restarts) the window in which the initial scene arrives.
    pub(super) fn extend_sync(&mut self, now: Time) {
        if let LinkState::Syncing { session, .. } = self.state {
            self.state = LinkState::Syncing {
                session,
                until: now + self.settings.settle,
            };
        }
    }

    pub(super) fn begin_sync(&mut self, now: Time, session: Session) {
        self.state = LinkState::Syncing {
            session,
            until: now + self.settings.settle,
        };
    }
}
