//! One lessgate node as a single sans-IO core: the scene, the Tundra server
//! core, the federation and (in upstream mode) the bridge to a world server,
//! joined without I/O.
//!
//! In the manner of quinn-proto's `Connection`: inputs are `handle_*` calls
//! with an explicit `now`; outputs are [`Node::poll_transmit`] (frames, each
//! naming the client, link or world server it is for), [`Node::poll_event`]
//! (closes, commands, actions) and [`Node::poll_timeout`] (when to call
//! [`Node::handle_timeout`] next). The tokio driver (`crate::runtime`) drives
//! it with sockets and one clock; the simulation tests drive the same calls
//! under fake time.
//!
//! ```text
//!  client frames ─┐                         ┌─> Transmit::Client
//!  link frames   ─┼─> handle_* ─> Node ─> poll_transmit ─> Transmit::Link
//!  world server  ─┤               │         └─> Transmit::Upstream
//!  timeouts      ─┘               └─> poll_event, poll_timeout
//! ```

mod departure;
mod interest;
mod links;
pub mod operator;
pub mod output;
mod settle;
mod zones;

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::clock::Time;
use crate::federation::Federation;
use crate::link_id::LinkId;
use crate::peering::peer_file::TypeFilter;
use crate::scene::{ClientId, Scene};
use crate::server::TundraServer;
use crate::tundra::messages::edit_attributes_target;
use crate::tundra::ClientTransport;
use crate::upstream::Bridge;

pub use links::LinkUp;
pub use output::{Event, Transmit};
pub use zones::ZoneRequestCounts;

/// Client frames (counted through their transport's events) a driver hands
/// in before draining the outputs: enough to fill a LESS datagram with
/// updates, few enough that a burst never delays other work by more than a
/// fraction of a millisecond. A transport's batch is not split, so a drain
/// may follow up to `CLIENT_FRAME_BATCH + websocket::READ_BATCH - 1` frames.
pub const CLIENT_FRAME_BATCH: usize = 256;

/// Link frames (mostly datagrams) a driver hands in before draining the
/// outputs: the acknowledgements of many packets then leave in one, before
/// any of them is applied.
pub const LINK_FRAME_BATCH: usize = 64;

/// The finest step of the node's timers. A deadline that is still due after
/// `handle_timeout` ran at it (a session paced but with its send window
/// full waits for an acknowledgement, not for time) is reported this much
/// later, so a driver never spins on it.
pub const TIMER_GRANULARITY: Duration = Duration::from_millis(1);

/// Most actions and answers kept for the driver between drains: a flood of
/// them from peers costs memory only up to this bound.
const MAX_QUEUED_ACTIONS: usize = 1024;

/// Work the embedding program does on the node's own scene each network
/// tick (for example a simulation moving its entities), with the node's
/// time. Its edits are ordinary local changes: sent to clients and peers in
/// the same tick.
pub type TickHook = Box<dyn FnMut(&mut Scene, Time) + Send>;

/// The node core. Its state is private: drivers feed inputs and drain
/// outputs; status pages read it through the accessors.
pub struct Node {
    scene: Scene,
    server: TundraServer,
    federation: Federation,
    /// Upstream mode: the bridge to the world server this node is a client
    /// of (docs/upstream.md); `None` otherwise.
    upstream: Option<Bridge>,
    /// The buffer `settle` takes the scene's journal into, kept between calls.
    journal: Vec<crate::scene::Change>,
    /// Links that received frames whose events are not applied yet: their
    /// acknowledgements go out first (see `poll_transmit`).
    received: Vec<LinkId>,
    /// Events for the driver, in the order they arose.
    events: VecDeque<Event>,
    /// Actions and answers among `events`, bounded by `MAX_QUEUED_ACTIONS`.
    queued_actions: usize,
    tick_period: Duration,
    next_tick: Time,
    tick_hook: Option<TickHook>,
    /// When `handle_timeout` last ran (see [`TIMER_GRANULARITY`]).
    last_timeout: Option<Time>,
    /// The zone trigger, when this node owns zones.
    zones: Option<Box<zones::Zones>>,
    /// The departure under way, once this node started leaving.
    leaving: Option<Box<departure::Leaving>>,
    /// Whose departing entities this node accepts.
    accept_departures: crate::peering::peer_file::PeerChoice,
    /// What this node wants from its peers (docs/federation.md §8.1).
    interest: interest::NodeInterest,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("node", &self.federation.node_id())
            .field("entities", &self.scene.len())
            .field("links", &self.federation.links().count())
            .field("upstream", &self.upstream.is_some())
            .field("next_tick", &self.next_tick)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// A node whose network tick is the server's configured period; the
    /// first tick is due at once.
    pub fn new(scene: Scene, server: TundraServer, id: Uuid) -> Node {
        let tick_period = server.config().tick;
        let mut node = Node {
            scene,
            server,
            federation: Federation::new(id),
            upstream: None,
            journal: Vec::new(),
            received: Vec::new(),
            events: VecDeque::new(),
            queued_actions: 0,
            tick_period,
            next_tick: Time::ZERO,
            tick_hook: None,
            last_timeout: None,
            zones: None,
            leaving: None,
            accept_departures: crate::peering::peer_file::PeerChoice::All,
            interest: interest::NodeInterest::default(),
        };
        node.set_interest_settings(Default::default());
        node
    }

    // ----- configuration -----

    /// Puts the node in upstream mode.
    pub fn attach_upstream(&mut self, bridge: Bridge) {
        self.upstream = Some(bridge);
    }

    /// Installs the per-tick work on the scene (see [`TickHook`]). It runs
    /// inside the tick, so its edits leave with that tick's updates.
    pub fn set_tick_hook(&mut self, hook: TickHook) {
        self.tick_hook = Some(hook);
    }

    /// Where this node's world lies in the federation's space
    /// (docs/federation.md §2.7): its own entities' positions leave, and
    /// every other world's arrive, translated by it. A change moves every
    /// other world for this node's clients, and this one for every other
    /// node's, as updates.
    pub fn set_placement(&mut self, placement: crate::federation::space::placement::Placement) {
        self.federation.set_placement(placement, &mut self.scene);
        self.settle();
        // The own interest's boxes lie in the federation's space.
        self.refresh_interest(self.last_timeout.unwrap_or(Time::ZERO));
    }

    /// The background refresh budget of every link, in bytes per second.
    pub fn set_refresh_rate(&mut self, bytes_per_sec: u32) {
        self.federation.set_refresh_rate(bytes_per_sec);
    }

    /// This node's export lists, one per peer file; relays apply them to
    /// its entities too (docs/federation.md §4.1).
    pub fn set_configured_exports(&mut self, filters: Vec<TypeFilter>) {
        self.federation.set_configured_exports(filters, &self.scene);
    }

    /// Which take-authority requests this node grants for its entities
    /// (docs/federation.md §7.2).
    pub fn set_handover_policy(&mut self, policy: crate::federation::HandoverPolicy) {
        self.federation.set_handover_policy(policy);
    }

    /// Asks the authority of a remote entity to hand it to this node,
    /// stating `reason` (an operator's request; a client sends the
    /// EntityAction `TakeAuthority`, a zone asks by itself).
    pub fn request_authority(
        &mut self,
        entity: crate::tundra::EntityId,
        reason: crate::federation::HandoverReason,
    ) -> Result<(), crate::federation::HandoverError> {
        let requested = self
            .federation
            .request_authority(entity, reason, &self.scene);
        self.settle();
        requested
    }

    /// Hands an entity this node is the authority of to node `to` (a zone
    /// crossing, a departure, an operator).
    pub fn hand_over(
        &mut self,
        entity: crate::tundra::EntityId,
        to: Uuid,
        reason: crate::federation::HandoverReason,
    ) -> Result<(), crate::federation::HandoverError> {
        let handed = self
            .federation
            .hand_over(entity, to, reason, &mut self.scene);
        self.settle();
        handed
    }

    // ----- accessors -----

    pub fn scene(&self) -> &Scene {
        &self.scene
    }

    /// The scene, for local edits (an embedding program's own entities, a
    /// scene import): they are ordinary local changes, handed to clients
    /// and peers with the next output.
    pub fn scene_mut(&mut self) -> &mut Scene {
        &mut self.scene
    }

    pub fn server(&self) -> &TundraServer {
        &self.server
    }

    pub fn federation(&self) -> &Federation {
        &self.federation
    }

    pub fn upstream(&self) -> Option<&Bridge> {
        self.upstream.as_ref()
    }

    // ----- client inputs -----

    /// A client connected over `transport`, which decides how it logs in.
    pub fn handle_client_connect(
        &mut self,
        client: ClientId,
        now: Time,
        transport: ClientTransport,
    ) {
        self.server
            .handle_connect(client, now, transport.login_dialect());
    }

    /// A client connected from `address` over `transport`: it waits to log
    /// in within its address's pending-login budget.
    pub fn handle_client_connect_from(
        &mut self,
        client: ClientId,
        now: Time,
        transport: ClientTransport,
        address: std::net::IpAddr,
    ) {
        self.server
            .handle_connect_from(client, now, transport.login_dialect(), address);
    }

    /// One frame from a client.
    pub fn handle_client_frame(&mut self, client: ClientId, now: Time, frame: &[u8]) {
        self.server
            .handle_frame(&mut self.scene, client, now, frame);
        self.settle();
        self.note_client_areas();
    }

    /// Frames a client sent together, in order. The entities they edit are
    /// looked up first, all of them (see `Scene::warm`).
    pub fn handle_client_frames<F: AsRef<[u8]>>(
        &mut self,
        client: ClientId,
        now: Time,
        frames: &[F],
    ) {
        for frame in frames {
            if let Some((entity, component)) = edit_attributes_target(frame.as_ref()) {
                self.federation.warm(&self.scene, entity, component);
            }
        }
        for frame in frames {
            self.handle_client_frame(client, now, frame.as_ref());
        }
    }

    /// A client's transport closed it for breaking the transport protocol.
    pub fn handle_client_misbehaved(&mut self, client: ClientId, reason: &str) {
        self.server.handle_transport_violation(client, reason);
    }

    /// A client's connection ended.
    pub fn handle_client_disconnect(&mut self, client: ClientId, reason: &str) {
        self.server.handle_disconnect(client, reason);
        self.settle();
    }

    // ----- world server inputs (upstream mode) -----

    /// The connection to the world server is open.
    pub fn handle_upstream_connected(&mut self, now: Time) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_connected(now);
        }
        self.note_world_readiness();
    }

    /// The federation hands the world server's entities out only while the
    /// bridge's session is ready (docs/upstream.md §8).
    fn note_world_readiness(&mut self) {
        let ready = self.upstream.as_ref().is_some_and(Bridge::is_ready);
        self.federation.set_world_server_ready(ready);
    }

    /// One frame from the world server.
    pub fn handle_upstream_frame(&mut self, now: Time, frame: &[u8]) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_frame(now, frame, &mut self.scene);
        }
        self.note_world_readiness();
        self.settle();
    }

    /// The connection to the world server ended (or a dial failed).
    pub fn handle_upstream_disconnected(&mut self, now: Time, reason: &str) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_disconnected(now, reason);
        }
        self.note_world_readiness();
    }

    // ----- timers -----

    /// When [`Node::handle_timeout`] should next run: the earliest of the
    /// network tick (while it has work, see [`Node::tick_wanted`]), every
    /// link session's timer, the bridge's timers and the clients' writes
    /// (the server's login deadlines are checked at the tick). Never
    /// earlier than [`TIMER_GRANULARITY`] after the last `handle_timeout`,
    /// except for clients' changes a peer's packet brought; `None` when
    /// nothing is due at any time.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut deadline = if self.tick_wanted() {
            self.next_tick
        } else {
            Time::MAX
        };
        for link in self.federation.links() {
            if let Some(at) = link.session.poll_timeout() {
                deadline = deadline.min(at);
            }
        }
        if let Some(at) = self.upstream.as_ref().and_then(Bridge::poll_timeout) {
            deadline = deadline.min(at);
        }
        // Clients with changes that may leave before the tick.
        if let Some(at) = self.server.poll_timeout() {
            deadline = deadline.min(at);
        }
        for at in [
            self.zone_timeout(),
            self.departure_timeout(),
            self.interest_timeout(),
        ]
        .into_iter()
        .flatten()
        {
            deadline = deadline.min(at);
        }
        if deadline == Time::MAX {
            return None;
        }
        // Changes a peer's packet brought are not held to the step: their
        // link gathered them for a gap already (server::write_schedule).
        Some(match self.last_timeout {
            Some(last) if !self.server.has_fresh_peer_changes() => {
                deadline.max(last + TIMER_GRANULARITY)
            }
            _ => deadline,
        })
    }

    /// Whether the network tick has work: clients (their writes, login
    /// deadlines), the embedding program's tick work, or entities (the
    /// links' background refresh and the hand-over deadlines run at the
    /// tick). A node with none of these sleeps until an input or one of
    /// its links' own timers (keepalives, acknowledgements): an idle node
    /// wakes only for what its links' liveness needs.
    pub fn tick_wanted(&self) -> bool {
        self.tick_hook.is_some()
            || self.server.has_connections()
            || !self.scene.is_empty()
            || self
                .federation
                .links()
                .any(|link| !link.exported.is_empty() || link.mirror.entity_count() > 0)
    }

    /// Runs every timer due at `now`: the link sessions' (acknowledgements,
    /// re-sends, keepalives, idle timeouts), the bridge's, the network tick,
    /// and the clients' writes that are due. `backlog` reports each
    /// client's unsent bytes, which only the transport knows (a client that
    /// has not drained its last write is sent nothing more meanwhile).
    pub fn handle_timeout(&mut self, now: Time, backlog: &dyn Fn(ClientId) -> usize) {
        self.last_timeout = Some(now);
        self.apply_received();
        self.handle_link_timeouts(now);
        self.handle_zone_timeout(now);
        self.handle_departure_timeout(now);
        self.handle_interest_timeout(now);
        if let Some(bridge) = &mut self.upstream {
            if bridge.poll_timeout().is_some_and(|at| at <= now) {
                bridge.handle_timeout(now, &mut self.scene);
            }
        }
        self.note_world_readiness();
        if now >= self.next_tick && self.tick_wanted() {
            // The next tick keeps the period; a late tick is not caught up.
            self.next_tick += self.tick_period;
            if self.next_tick <= now {
                self.next_tick = now + self.tick_period;
            }
            if let Some(hook) = &mut self.tick_hook {
                hook(&mut self.scene, now);
            }
            self.federation
                .handle_handover_deadlines(now, &mut self.scene);
            self.settle();
            self.federation.refresh(now);
            self.server.handle_tick(&self.scene, now, backlog);
        } else {
            self.settle();
        }
        // Clients' changes leave as soon as they are worth writing, not at
        // the next tick (server::write_schedule).
        self.server.handle_due_writes(&self.scene, now, backlog);
    }

    // ----- outputs -----

    /// The next frame to send. A link that received frames has its due
    /// packets (the acknowledgements) handed out before what it received is
    /// applied to the scene: the peer's send window (64 datagrams) reopens
    /// only with them, and applying a batch takes milliseconds (sent after
    /// the batch, acknowledgements capped a link at 64 datagrams per batch
    /// time). Then the server's frames, the bridge's, and every link's.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Transmit> {
        if !self.received.is_empty() {
            if let Some(transmit) = self.poll_link_transmit(now) {
                return Some(transmit);
            }
            self.apply_received();
        }
        if let Some((client, frame)) = self.server.poll_transmit() {
            return Some(Transmit::Client(client, frame));
        }
        if let Some(frame) = self.upstream.as_mut().and_then(Bridge::poll_transmit) {
            return Some(Transmit::Upstream(frame));
        }
        self.poll_link_transmit(now)
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.apply_received();
        if let Some(event) = self.events.pop_front() {
            if matches!(event, Event::ActionExecuted(..) | Event::ActionAnswered(..)) {
                self.queued_actions -= 1;
            }
            return Some(event);
        }
        if let Some((client, reason)) = self.server.poll_close() {
            return Some(Event::CloseClient(client, reason));
        }
        self.upstream
            .as_mut()
            .and_then(Bridge::poll_link_command)
            .map(Event::Upstream)
    }

    /// Queues an action or answer for the driver, within the bound.
    fn push_action_event(&mut self, event: Event) {
        if self.queued_actions < MAX_QUEUED_ACTIONS {
            self.queued_actions += 1;
            self.events.push_back(event);
        }
    }
}

#[cfg(test)]
mod tests;
