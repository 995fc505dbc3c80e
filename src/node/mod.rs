//! One lessgate node: the scene, the Tundra server core and the federation,
//! wired together without I/O. [`runtime`] drives it with real sockets;
//! simulations drive it with fake time.

pub mod runtime;
pub mod status;

use tracing::{debug, info};
use uuid::Uuid;

use crate::clock::Time;
use crate::federation::{Federation, FederationEvent, Link, LinkId};
use crate::less::session::CloseReason;
use crate::logging::RemoteText;
use crate::scene::{ClientId, Scene};
use crate::server::{ServerEvent, TundraServer};
use crate::transport::client::ClientTransport;
use crate::tundra::messages::edit_attributes_target;
use crate::upstream::{Bridge, BridgeEvent};

/// The client id upstream actions are attributed to when they enter the
/// federation (no local client sent them).
pub const UPSTREAM_CLIENT: ClientId = ClientId(u64::MAX);

/// The pure part of a node.
#[derive(Debug)]
pub struct Node {
    pub scene: Scene,
    pub server: TundraServer,
    pub federation: Federation,
    /// Server events after the federation saw them, for the driver to log.
    pub server_events: std::collections::VecDeque<ServerEvent>,
    /// EntityActions this node executed as the entity's authority, coming
    /// from peers (for the driver to log or hand to a world server).
    pub executed_actions: std::collections::VecDeque<(
        crate::tundra::EntityId,
        crate::tundra::messages::EntityAction,
    )>,
    /// Answers of remote authorities to EntityActions this node's clients
    /// sent (Tundra has no reply message; kept for the driver to log).
    pub action_results: std::collections::VecDeque<(
        crate::less::message::MethodStatus,
        crate::less::value::Value,
    )>,
    /// Upstream mode: the bridge to the world server this node is a client
    /// of (docs/upstream.md); `None` otherwise.
    pub upstream: Option<Bridge>,
    /// The buffer `settle` takes the scene's journal into, kept between calls.
    journal: Vec<crate::scene::Change>,
}

impl Node {
    pub fn new(scene: Scene, server: TundraServer, id: Uuid) -> Node {
        Node {
            scene,
            server,
            federation: Federation::new(id),
            server_events: Default::default(),
            executed_actions: Default::default(),
            action_results: Default::default(),
            upstream: None,
            journal: Vec::new(),
        }
    }

    /// Puts the node in upstream mode.
    pub fn attach_upstream(&mut self, bridge: Bridge) {
        self.upstream = Some(bridge);
    }

    /// The connection to the world server is open.
    pub fn handle_upstream_connected(&mut self, now: Time) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_connected(now);
        }
    }

    /// One frame from the world server.
    pub fn handle_upstream_frame(&mut self, now: Time, frame: &[u8]) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_frame(now, frame, &mut self.scene);
        }
        self.settle();
    }

    /// The connection to the world server ended.
    pub fn handle_upstream_disconnected(&mut self, now: Time) {
        if let Some(bridge) = &mut self.upstream {
            bridge.handle_disconnected(now);
        }
    }

    /// The bridge's timers.
    pub fn handle_upstream_timeout(&mut self, now: Time) {
        if let Some(bridge) = &mut self.upstream {
            if bridge.poll_timeout().is_some_and(|t| t <= now) {
                bridge.handle_timeout(now, &mut self.scene);
            }
        }
        self.settle();
    }

    /// Hands what the bridge asks for to the server and the federation.
    fn handle_bridge_event(&mut self, event: BridgeEvent) {
        match event {
            BridgeEvent::DeliverAction(action) => self.server.deliver_action(action),
            BridgeEvent::FloodAction(action) => self.federation.handle_server_event(
                &ServerEvent::PeersAction {
                    client: UPSTREAM_CLIENT,
                    action,
                },
                &mut self.scene,
            ),
            BridgeEvent::ActionToAuthority(action) => self.federation.handle_server_event(
                &ServerEvent::Action {
                    client: UPSTREAM_CLIENT,
                    action,
                },
                &mut self.scene,
            ),
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
                let _ = self.scene.edit_attribute(
                    crate::scene::ChangeSource::Node,
                    entity,
                    component,
                    index,
                    value,
                );
            }
            BridgeEvent::EditToAuthority {
                entity,
                component,
                index,
                value,
            } => self.federation.handle_server_event(
                &ServerEvent::RemoteEdit {
                    client: UPSTREAM_CLIENT,
                    entity,
                    component,
                    index,
                    value,
                },
                &mut self.scene,
            ),
            BridgeEvent::TypeRegistered(type_id) => {
                self.server.handle_type_registered(type_id, None)
            }
        }
    }

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
                self.scene.warm(entity, component);
                self.federation.warm(entity, component);
            }
        }
        for frame in frames {
            self.handle_client_frame(client, now, frame.as_ref());
        }
    }

    /// A client's connection ended.
    /// A client's transport closed it for breaking the transport protocol.
    pub fn handle_client_misbehaved(&mut self, client: ClientId, reason: &str) {
        self.server.handle_transport_violation(client, reason);
    }

    pub fn handle_client_disconnect(&mut self, client: ClientId, reason: &str) {
        self.server.handle_disconnect(client, reason);
        self.settle();
    }

    /// A peer link is up: its session is negotiated.
    pub fn handle_link_up(&mut self, link: Link) {
        self.federation.add_link(link, &self.scene);
        self.settle();
    }

    /// A peer link is gone.
    pub fn handle_link_down(&mut self, link: LinkId) {
        self.remove_link(link);
    }

    /// Removes a link. The bridge to a world server holds the removals this
    /// causes: a replacing link may present the same entities again
    /// (docs/upstream.md section 4).
    fn remove_link(&mut self, link: LinkId) {
        self.settle();
        if let Some(bridge) = &mut self.upstream {
            bridge.set_holding_removals(true);
        }
        self.federation.remove_link(link, &mut self.scene);
        self.settle();
        if let Some(bridge) = &mut self.upstream {
            bridge.set_holding_removals(false);
        }
    }

    /// Applies what a link's session received. Returns the close reason when
    /// the session ended; the link is then removed.
    pub fn handle_link_events(&mut self, link: LinkId) -> Option<CloseReason> {
        let closed = self.federation.handle_link_events(link, &mut self.scene);
        if let Some(reason) = &closed {
            info!(%link, reason = %RemoteText(reason), "peer session closed");
            self.remove_link(link);
        }
        self.settle();
        closed
    }

    /// The network tick. `backlog` reports each client's unsent bytes.
    pub fn handle_tick(&mut self, now: Time, backlog: &dyn Fn(ClientId) -> usize) {
        self.settle();
        self.federation.refresh(now);
        self.server.handle_tick(&self.scene, now, backlog);
    }

    /// Writes the waiting changes of every idle client before the tick
    /// (`server::early_send`): the driver calls it after each batch of
    /// inputs and at [`Node::poll_send_timeout`]. `backlog` reports each
    /// client's unsent bytes.
    pub fn handle_send_early(&mut self, now: Time, backlog: &dyn Fn(ClientId) -> usize) {
        self.settle();
        self.server.handle_send_early(&self.scene, now, backlog);
    }

    /// When [`Node::handle_send_early`] should next run even without input.
    pub fn poll_send_timeout(&self) -> Option<Time> {
        self.server.poll_timeout()
    }

    /// Passes events between the server and the federation and hands the
    /// scene's changes to everything that synchronises from it, until quiet.
    pub fn settle(&mut self) {
        let mut changes = std::mem::take(&mut self.journal);
        for _ in 0..16 {
            let mut busy = false;
            self.scene.take_journal_into(&mut changes);
            if !changes.is_empty() {
                busy = true;
                self.server.handle_scene_changes(&changes);
                self.federation.handle_scene_changes(&self.scene, &changes);
                if let Some(bridge) = &mut self.upstream {
                    let federation = &self.federation;
                    bridge.handle_scene_changes_with(&self.scene, &changes, &|entity| {
                        federation.global_of(entity)
                    });
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
                self.federation.handle_server_event(&event, &mut self.scene);
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
                self.server_events.push_back(event);
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
                        debug!(%entity, name = %RemoteText(&action.name), "entity action executed by its authority");
                        if self.executed_actions.len() < 1024 {
                            self.executed_actions.push_back((entity, action));
                        }
                    }
                    FederationEvent::ActionAnswered { status, detail } => {
                        if self.action_results.len() < 1024 {
                            self.action_results.push_back((status, detail));
                        }
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
