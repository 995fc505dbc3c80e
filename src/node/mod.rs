//! One lessgate node: the scene, the Tundra server core, and (with peers) the
//! federation, wired together without I/O. [`runtime`] drives it with real
//! sockets; simulations drive it with fake time.

pub mod runtime;

use crate::clock::Time;
use crate::scene::{ClientId, Scene};
use crate::server::TundraServer;

/// The pure part of a node.
#[derive(Debug)]
pub struct Node {
    pub scene: Scene,
    pub server: TundraServer,
}

impl Node {
    pub fn new(scene: Scene, server: TundraServer) -> Node {
        Node { scene, server }
    }

    /// A client connected.
    pub fn handle_client_connect(&mut self, client: ClientId, now: Time) {
        self.server.handle_connect(client, now);
    }

    /// One frame from a client.
    pub fn handle_client_frame(&mut self, client: ClientId, now: Time, frame: &[u8]) {
        self.server.handle_frame(&mut self.scene, client, now, frame);
        self.flush_journal();
    }

    /// A client's connection ended.
    pub fn handle_client_disconnect(&mut self, client: ClientId, reason: &str) {
        self.server.handle_disconnect(client, reason);
    }

    /// The network tick. `backlog` reports each client's unsent bytes.
    pub fn handle_tick(&mut self, now: Time, backlog: &dyn Fn(ClientId) -> usize) {
        self.flush_journal();
        self.server.handle_tick(&self.scene, now, backlog);
    }

    /// Hands the scene's changes to everything that synchronises from it.
    pub fn flush_journal(&mut self) {
        let changes = self.scene.take_journal();
        if !changes.is_empty() {
            self.server.handle_scene_changes(&changes);
        }
    }
}
