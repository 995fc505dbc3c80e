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
use crate::scene::{ClientId, Scene};
use crate::server::{ServerEvent, TundraServer};

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
}

impl Node {
    pub fn new(scene: Scene, server: TundraServer, id: Uuid) -> Node {
        Node {
            scene,
            server,
            federation: Federation::new(id),
            server_events: Default::default(),
            executed_actions: Default::default(),
        }
    }

    /// A client connected.
    pub fn handle_client_connect(&mut self, client: ClientId, now: Time) {
        self.server.handle_connect(client, now);
    }

    /// One frame from a client.
    pub fn handle_client_frame(&mut self, client: ClientId, now: Time, frame: &[u8]) {
        self.server
            .handle_frame(&mut self.scene, client, now, frame);
        self.settle();
    }

    /// A client's connection ended.
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
        self.federation.remove_link(link, &mut self.scene);
        self.settle();
    }

    /// Applies what a link's session received. Returns the close reason when
    /// the session ended; the link is then removed.
    pub fn handle_link_events(&mut self, link: LinkId) -> Option<CloseReason> {
        let closed = self.federation.handle_link_events(link, &mut self.scene);
        if let Some(reason) = &closed {
            info!(%link, %reason, "peer session closed");
            self.federation.remove_link(link, &mut self.scene);
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

    /// Passes events between the server and the federation and hands the
    /// scene's changes to everything that synchronises from it, until quiet.
    pub fn settle(&mut self) {
        for _ in 0..16 {
            let mut busy = false;
            let changes = self.scene.take_journal();
            if !changes.is_empty() {
                busy = true;
                self.server.handle_scene_changes(&changes);
                self.federation.handle_scene_changes(&self.scene, &changes);
            }
            while let Some(event) = self.server.poll_event() {
                busy = true;
                self.federation.handle_server_event(&event, &mut self.scene);
                self.server_events.push_back(event);
            }
            while let Some(event) = self.federation.poll_event() {
                busy = true;
                match event {
                    FederationEvent::TypeRegistered(type_id) => {
                        self.server.handle_type_registered(type_id, None)
                    }
                    FederationEvent::ActionForClients(action) => self.server.deliver_action(action),
                    FederationEvent::ActionForAuthority { entity, action } => {
                        debug!(%entity, name = %action.name, "entity action executed by its authority");
                        if self.executed_actions.len() < 1024 {
                            self.executed_actions.push_back((entity, action));
                        }
                    }
                }
            }
            if !busy {
                return;
            }
        }
    }
}
