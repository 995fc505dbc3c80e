//! The tokio driver of one node: sockets and timers in, [`Node`] calls,
//! frames out. Its loop is small on purpose; all decisions are in the core.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;
use tracing::{debug, error, info};

use super::status::{NodeStatus, STATUS_PERIOD};
use super::Node;
use crate::clock::Time;
use crate::config::NodeConfig;
use crate::federation::{schemas::schema_registry, Link, LinkId as FederationLink, LinkPolicy};
use crate::less::schema::ConnectionSchema;
use crate::less::session::Session;
use crate::peering::reason::{Reason, ReasonCode};
use crate::scene::{ClientId, Scene};
use crate::server::{ServerConfig, ServerEvent, TundraServer};
use crate::transport::peer::{
    Frame, PeerEvent, PeerLink, PeerNode, PeerNodeConfig, PeerStartError, SessionOwnership,
};
use crate::transport::tls;
use crate::transport::websocket::{self, ClientEvent, ClientHandle, ListenerOptions};
use crate::tundra::Registry;

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("scene {file}: {message}")]
    Scene { file: String, message: String },
    #[error("cannot listen for Tundra clients on {addr}: {source} (is another server on that port? set tundra.listen or --tundra-listen)")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Peering(#[from] PeerStartError),
}

/// Maps the process clock onto protocol time.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    pub fn start() -> Clock {
        Clock(Instant::now())
    }

    /// Time since the node started.
    pub fn elapsed(&self) -> std::time::Duration {
        self.0.elapsed()
    }

    pub fn now(&self) -> Time {
        Time::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// A node that has bound its sockets and is ready to run.
pub struct Running {
    pub tundra_addr: SocketAddr,
    node: Node,
    config: NodeConfig,
    listener: Option<TcpListener>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    peers: Option<(PeerNode, mpsc::Receiver<PeerEvent>)>,
    status: watch::Sender<NodeStatus>,
}

/// Loads the scene and binds the listener; errors say what to fix.
pub async fn start(config: NodeConfig) -> Result<Running, StartError> {
    let mut scene = Scene::new(Registry::builtin());
    if let Some(path) = &config.tundra.scene {
        let file = crate::tundra::txml::load_file(path, scene.registry()).map_err(|e| {
            StartError::Scene {
                file: path.display().to_string(),
                message: e.to_string(),
            }
        })?;
        let report = scene.import_txml(&file);
        for warning in &file.warnings {
            debug!(scene = %path.display(), %warning, "scene file warning");
        }
        for skipped in &report.skipped {
            info!(scene = %path.display(), %skipped, "scene content left out");
        }
        info!(scene = %path.display(), entities = report.entities, components = report.components, "scene loaded");
    }
    let server = TundraServer::new(ServerConfig {
        tick: config.tick_period(),
        limits: config.limits.clone(),
        required_login: config.tundra.required_login.clone(),
        interest_management: config.tundra.interest_management,
        login_reply: "{}".to_owned(),
    });
    let addr = config.tundra.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen { addr, source })?;
    let tundra_addr = listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, source })?;
    let tls = match (&config.tundra.tls_cert, &config.tundra.tls_key) {
        (Some(cert), Some(key)) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(
            cert, key,
        )?)),
        _ => None,
    };
    // The node's federation identity: configured with [peering], else
    // fresh per run (a standalone node has no peers to remember it).
    let id = config.node.uuid.unwrap_or_else(uuid::Uuid::new_v4);
    let peers = match &config.peering {
        Some(_) => {
            let schemas = Arc::new(schema_registry(scene.registry()));
            let mut peer_config = PeerNodeConfig::from_node_config(
                &config,
                schemas,
                Arc::new(ConnectionSchema::builtin()),
            )?;
            // The federation core drives the sessions; the driver moves frames.
            peer_config.sessions = SessionOwnership::Application;
            let (peer_node, events) = PeerNode::start(peer_config).await?;
            info!(control = %peer_node.control_address(), data = ?peer_node.data_address(), fingerprint = %peer_node.fingerprint(), "peer links listening");
            Some((peer_node, events))
        }
        None => None,
    };
    Ok(Running {
        tundra_addr,
        node: {
            let mut node = Node::new(scene, server, id);
            if let Some(peering) = &config.peering {
                node.federation
                    .set_refresh_rate(peering.refresh_bytes_per_sec);
            }
            node
        },
        config,
        listener: Some(listener),
        tls,
        peers,
        status: watch::Sender::new(NodeStatus::default()),
    })
}

impl Running {
    /// The URL a Tundra WebSocket client connects to.
    pub fn tundra_url(&self) -> String {
        let scheme = if self.tls.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.tundra_addr)
    }

    /// The node's status, refreshed every [`STATUS_PERIOD`] while it runs.
    pub fn status(&self) -> watch::Receiver<NodeStatus> {
        self.status.subscribe()
    }

    /// Runs until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let clock = Clock::start();
        let (events_tx, mut events) = mpsc::channel(1024);
        let options = ListenerOptions {
            tls: self.tls.clone(),
            max_frame_bytes: self.config.limits.max_frame_bytes,
        };
        if let Some(listener) = self.listener.take() {
            tokio::spawn(websocket::serve(listener, options, events_tx));
        }
        info!(url = %self.tundra_url(), node = %self.config.node.name, "listening for Tundra clients");
        let mut handles: HashMap<ClientId, ClientHandle> = HashMap::new();
        let (peer_node, mut peer_events) = match self.peers.take() {
            Some((node, events)) => (Some(node), Some(events)),
            None => (None, None),
        };
        let mut links: HashMap<FederationLink, PeerLink> = HashMap::new();
        // LESS timers (acks, re-sends, keepalives) are checked at this pace.
        let mut link_timer = tokio::time::interval(std::time::Duration::from_millis(5));
        link_timer.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut tick = tokio::time::interval(self.config.tick_period());
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let stats_period =
            std::time::Duration::from_secs(self.config.log.stats_interval_secs.max(1));
        let mut stats =
            tokio::time::interval_at(tokio::time::Instant::now() + stats_period, stats_period);
        let mut status_timer = tokio::time::interval(STATUS_PERIOD);
        status_timer.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let tundra_url = self.tundra_url();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(ClientEvent::Connected { id, addr, handle }) => {
                        let client = ClientId(id.0);
                        debug!(%client, %addr, "client connected");
                        handles.insert(client, handle);
                        self.node.handle_client_connect(client, clock.now());
                    }
                    Some(ClientEvent::Frame { id, frame }) => {
                        self.node.handle_client_frame(ClientId(id.0), clock.now(), &frame);
                    }
                    Some(ClientEvent::Closed { id, reason }) => {
                        let client = ClientId(id.0);
                        handles.remove(&client);
                        self.node.handle_client_disconnect(client, &reason);
                    }
                    None => {
                        error!("client listener stopped");
                        break;
                    }
                },
                event = next_peer_event(&mut peer_events) => match event {
                    Some(event) => self.handle_peer_event(event, &mut links, &clock),
                    None => peer_events = None,
                },
                _ = link_timer.tick(), if !links.is_empty() => {
                    let now = clock.now();
                    let due: Vec<FederationLink> = self
                        .node
                        .federation
                        .links_mut()
                        .filter(|l| l.session.poll_timeout().is_some_and(|t| t <= now))
                        .map(|l| {
                            l.session.handle_timeout(now);
                            l.id
                        })
                        .collect();
                    for link in due {
                        self.link_events(link, &mut links);
                    }
                }
                _ = tick.tick() => {
                    let backlog = |id: ClientId| handles.get(&id).map_or(0, ClientHandle::queued_bytes);
                    self.node.handle_tick(clock.now(), &backlog);
                }
                _ = stats.tick(), if self.config.log.stats_interval_secs > 0 => {
                    for link in self.node.federation.links() {
                        if let Some(peer) = links.get(&link.id) {
                            peer.report_stats(link.session.stats());
                            peer.set_entity_counts(link.exported.len() as u64, link.mirror.entities.len() as u64);
                        }
                    }
                    let s = self.node.server.stats();
                    info!(
                        clients = self.node.server.authenticated_clients().count(),
                        entities = self.node.scene.len(),
                        frames_in = s.frames_in, frames_out = s.frames_out,
                        bytes_in = s.bytes_in, bytes_out = s.bytes_out,
                        refused = s.refused_messages,
                        "node stats"
                    );
                }
                _ = status_timer.tick() => {
                    let status = NodeStatus::collect(&self.node, &self.config.node.name, &tundra_url, clock.elapsed());
                    self.status.send_replace(status);
                }
                _ = &mut shutdown => {
                    info!("shutting down");
                    break;
                }
            }
            self.drain(&mut handles);
            self.flush_links(&clock, &mut links);
        }
        for handle in handles.values() {
            handle.close("node shutting down");
        }
        if let Some(peer_node) = peer_node {
            peer_node.shutdown().await;
        }
    }

    fn handle_peer_event(
        &mut self,
        event: PeerEvent,
        links: &mut HashMap<FederationLink, PeerLink>,
        clock: &Clock,
    ) {
        match event {
            PeerEvent::LinkUp(peer) => {
                let id = federation_link(peer.id().0);
                let Some(config) = peer.take_session_config() else {
                    return;
                };
                match Session::new(config, clock.now()) {
                    Ok(session) => {
                        let policy = LinkPolicy {
                            export: peer.peer_config().export.clone(),
                            accept: peer.peer_config().accept.clone(),
                        };
                        let link = Link::new(
                            id,
                            peer.peer_node().0,
                            peer.peer().to_string(),
                            policy,
                            session,
                        );
                        links.insert(id, peer);
                        self.node.handle_link_up(link);
                    }
                    Err(error) => peer.close(Reason::new(ReasonCode::INTERNAL, error.to_string())),
                }
            }
            PeerEvent::Frame { link, frame, .. } => {
                let id = federation_link(link.0);
                let now = clock.now();
                if let Some(l) = self.node.federation.link_mut(id) {
                    match frame {
                        Frame::Datagram(bytes) => l.session.handle_datagram(now, &bytes),
                        Frame::Stream(bytes) => l.session.handle_stream_frame(now, &bytes),
                    }
                }
                self.link_events(id, links);
            }
            PeerEvent::LinkDown {
                link,
                peer,
                closure,
            } => {
                let id = federation_link(link.0);
                info!(%peer, ?closure, "peer link down");
                links.remove(&id);
                self.node.handle_link_down(id);
            }
            PeerEvent::Refused {
                peer,
                remote,
                reason,
                ..
            } => {
                debug!(?peer, %remote, %reason, "peer connection refused");
            }
            PeerEvent::Session { .. } => {}
        }
    }

    /// Applies a link's session events; a closed session ends the link.
    fn link_events(&mut self, id: FederationLink, links: &mut HashMap<FederationLink, PeerLink>) {
        if let Some(reason) = self.node.handle_link_events(id) {
            if let Some(peer) = links.remove(&id) {
                peer.close(Reason::new(ReasonCode::PROTOCOL_ERROR, reason.to_string()));
            }
        }
    }

    /// Hands every session's pending packets to its link.
    fn flush_links(&mut self, clock: &Clock, links: &mut HashMap<FederationLink, PeerLink>) {
        if links.is_empty() {
            return;
        }
        let now = clock.now();
        for link in self.node.federation.links_mut() {
            let Some(peer) = links.get(&link.id) else {
                continue;
            };
            while let Some(transmit) = link.session.poll_transmit(now) {
                if peer.transmit(transmit).is_err() {
                    break;
                }
            }
        }
    }

    fn drain(&mut self, handles: &mut HashMap<ClientId, ClientHandle>) {
        while let Some((entity, action)) = self.node.executed_actions.pop_front() {
            info!(%entity, name = %action.name, "entity action from a peer executed here, its authority");
        }
        while let Some((client, frame)) = self.node.server.poll_transmit() {
            if let Some(handle) = handles.get(&client) {
                handle.send(frame);
            }
        }
        while let Some((client, reason)) = self.node.server.poll_close() {
            if let Some(handle) = handles.get(&client) {
                handle.close(reason);
            }
        }
        while let Some(event) = self.node.server_events.pop_front() {
            match event {
                ServerEvent::Action { client, action } => {
                    debug!(%client, entity = %action.entity_id, name = %action.name, "entity action for the server");
                }
                other => debug!(?other, "server event"),
            }
        }
    }
}

/// Peer links are numbered by the driver; the federation uses the same number.
fn federation_link(id: u64) -> FederationLink {
    FederationLink(id as u32)
}

async fn next_peer_event(events: &mut Option<mpsc::Receiver<PeerEvent>>) -> Option<PeerEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}
