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

use super::status::{DataSocketCounters, LinkEnd, LinkEnds, NodeStatus, STATUS_PERIOD};
use super::Node;
use crate::clock::Time;
use crate::config::NodeConfig;
use crate::federation::{schemas::schema_registry, Link, LinkId as FederationLink, LinkPolicy};
use crate::http;
use crate::less::schema::ConnectionSchema;
use crate::less::session::Session;
use crate::logging::RemoteText;
use crate::peering::handshake::Initiator;
use crate::peering::reason::{Reason, ReasonCode};
use crate::scene::{ClientId, Scene};
use crate::server::{ServerConfig, ServerEvent, TundraServer};
use crate::transport::address_limits::AddressLimits;
use crate::transport::client::{ClientEvent, ClientHandle, ConnectionIds};
use crate::transport::guarded_listener::GuardedListener;
use crate::transport::knet::listener::{KnetListener, KnetOptions};
use crate::transport::knet::udp_server::UdpServerOptions;
use crate::transport::message_budget::BudgetConfig;
use crate::transport::peer::{
    Frame, PeerEvent, PeerLink, PeerNode, PeerNodeConfig, PeerStartError, SessionOwnership,
};
use crate::transport::websocket::{self, ListenerOptions};
use crate::tundra::Registry;

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("scene {file}: {message} (check tundra.scene or --scene)")]
    Scene { file: String, message: String },
    #[error("cannot listen for Tundra clients on {addr}: {source} (is another server on that port? set tundra.listen or --tundra-listen)")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot listen for native Tundra clients (kNet UDP) on {addr}: {source} (set tundra.knet_listen or --knet-listen to a free address)")]
    KnetListen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot listen for HTTP on {addr}: {source} (set http.listen to a free address)")]
    HttpListen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Peering(#[from] PeerStartError),
}

/// The tokio runtime for `[node] threads`. The node loop runs on the thread
/// that blocks on it; with one thread the client and peer sockets are served
/// there too, so a batch of frames is read, applied and sent on one core
/// with no wake-up of another thread (measured in BENCHMARKS.md).
pub fn tokio_runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    use tokio::runtime::Builder;
    match threads {
        0 => tokio::runtime::Runtime::new(),
        1 => Builder::new_current_thread().enable_all().build(),
        n => Builder::new_multi_thread()
            .worker_threads(n - 1)
            .enable_all()
            .build(),
    }
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

    /// The process instant of a protocol time.
    pub fn instant_of(&self, time: Time) -> Instant {
        self.0 + std::time::Duration::from_micros(time.as_micros())
    }
}

/// Work the embedding program does on the node's own scene each network
/// tick (for example a simulation moving its entities), with the node's
/// time. Its edits are ordinary local changes: sent to clients and peers.
pub type TickHook = Box<dyn FnMut(&mut Scene, Time) + Send>;

/// A node that has bound its sockets and is ready to run.
pub struct Running {
    pub tundra_addr: SocketAddr,
    knet_addr: Option<SocketAddr>,
    /// Whether the kNet listener serves TCP too (not when its port is the
    /// WebSocket listener's).
    knet_tcp: bool,
    /// The kNet listener while not yet serving.
    knet: Option<KnetListener>,
    node: Node,
    config: NodeConfig,
    listener: Option<TcpListener>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    peers: Option<(PeerNode, mpsc::Receiver<PeerEvent>)>,
    status: watch::Sender<NodeStatus>,
    tick_hook: Option<TickHook>,
    /// The HTTP listener while not yet serving, and its address.
    http: Option<TcpListener>,
    http_addr: Option<SocketAddr>,
    view: watch::Sender<http::ViewSnapshot>,
    /// Why peer links ended, for the status.
    link_ends: LinkEnds,
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
    let knet = match config.tundra.knet_listen {
        Some(addr) => Some(
            KnetListener::bind(addr)
                .await
                .map_err(|source| StartError::KnetListen { addr, source })?,
        ),
        None => None,
    };
    let knet_addr = knet.as_ref().map(KnetListener::local_addr);
    let knet_tcp = knet.as_ref().is_some_and(KnetListener::has_tcp);
    let http = match config.http.listen {
        Some(addr) => Some(
            http::bind(addr)
                .await
                .map_err(|source| StartError::HttpListen { addr, source })?,
        ),
        None => None,
    };
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let tls = config.tundra_tls()?.map(tokio_rustls::TlsAcceptor::from);
    // The node's federation identity: configured with [peering], else
    // fresh per run (a standalone node has no peers to remember it).
    let id = config.node.uuid.unwrap_or_else(uuid::Uuid::new_v4);
    let mut peer_exports = Vec::new();
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
            peer_exports = peer_config.peers.iter().map(|p| p.export.clone()).collect();
            let (peer_node, events) = PeerNode::start(peer_config).await?;
            info!(control = %peer_node.control_address(), data = ?peer_node.data_address(), fingerprint = %peer_node.fingerprint(), "peer links listening");
            Some((peer_node, events))
        }
        None => None,
    };
    let mut node = Node::new(scene, server, id);
    if let Some(upstream) = &config.upstream {
        node.attach_upstream(crate::upstream::Bridge::new(upstream.bridge_settings()));
    }
    if let Some(peering) = &config.peering {
        node.federation
            .set_refresh_rate(peering.refresh_bytes_per_sec);
        // Relays apply this node's export lists to its entities too
        // (docs/federation.md section 4.1).
        node.federation
            .set_configured_exports(peer_exports, &node.scene);
    }
    Ok(Running {
        tundra_addr,
        knet_addr,
        knet_tcp,
        knet,
        node,
        config,
        listener: Some(listener),
        tls,
        peers,
        status: watch::Sender::new(NodeStatus::default()),
        tick_hook: None,
        http,
        http_addr,
        view: watch::Sender::new(http::ViewSnapshot::default()),
        link_ends: LinkEnds::default(),
    })
}

impl Running {
    /// Where native Tundra clients connect over kNet (UDP, and TCP on the
    /// same port), when `[tundra] knet_listen` is set.
    pub fn knet_addr(&self) -> Option<SocketAddr> {
        self.knet_addr
    }

    /// Whether native clients can use kNet over TCP as well as UDP.
    pub fn knet_tcp(&self) -> bool {
        self.knet_tcp
    }

    /// The URL a Tundra WebSocket client connects to.
    pub fn tundra_url(&self) -> String {
        let scheme = if self.tls.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.tundra_addr)
    }

    /// The node's status, refreshed every [`STATUS_PERIOD`] while it runs.
    pub fn status(&self) -> watch::Receiver<NodeStatus> {
        self.status.subscribe()
    }

    /// The scene before the node runs: an embedding program may add its
    /// own entities (they are local, like the scene file's).
    pub fn scene_mut(&mut self) -> &mut Scene {
        &mut self.node.scene
    }

    /// Installs the per-tick work on the scene (see [`TickHook`]).
    pub fn set_tick_hook(&mut self, hook: TickHook) {
        self.tick_hook = Some(hook);
    }

    /// Where the web viewer, `/status` and `/metrics` are served, when
    /// `[http] listen` is set.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Runs until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let clock = Clock::start();
        let (events_tx, mut events) = mpsc::channel(1024);
        // One id counter for every listener: ids stay unique across transports.
        let connection_ids = ConnectionIds::default();
        let options = ListenerOptions {
            tls: self.tls.clone(),
            max_frame_bytes: self.config.limits.max_frame_bytes,
            handshake_timeout: self.config.limits.handshake_timeout(),
            budget: client_budget(&self.config),
        };
        // One count per remote address over every TCP listener.
        let address_limits = AddressLimits::new(self.config.limits.max_connections_per_address);
        let knet_tasks = self.knet.take().map_or_else(Vec::new, |knet| {
            knet.spawn(
                connection_ids.clone(),
                knet_options(&self.config, address_limits.clone()),
                events_tx.clone(),
            )
        });
        let listener_task = self.listener.take().map(|listener| {
            tokio::spawn(websocket::serve(
                GuardedListener::new(listener, address_limits.clone(), "tundra"),
                options,
                connection_ids.clone(),
                events_tx,
            ))
        });
        info!(url = %self.tundra_url(), node = %self.config.node.name, "listening for Tundra clients");
        let http_task = self.http.take().map(|listener| {
            if let Some(addr) = self.http_addr {
                info!(url = %format!("http://{addr}/"), "serving the web viewer, /status and /metrics");
            }
            let sources = http::HttpSources {
                status: self.status.subscribe(),
                view: self.view.subscribe(),
            };
            let listener = GuardedListener::new(listener, address_limits.clone(), "http");
            let deadline = self.config.limits.handshake_timeout();
            tokio::spawn(http::serve(listener, deadline, sources))
        });
        let mut schema_cache = http::schema::SchemaCache::default();
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
        let mut upstream_events = self.config.upstream.as_ref().map(|u| {
            crate::transport::upstream::spawn(crate::transport::upstream::UpstreamDial {
                url: u.url.clone(),
                reconnect_min: u.reconnect_min(),
                reconnect_max: u.reconnect_max(),
                seed: id_seed(&self.config),
            })
        });
        let mut upstream_out: Option<
            mpsc::UnboundedSender<crate::transport::upstream::UpstreamCommand>,
        > = None;
        tokio::pin!(shutdown);
        loop {
            let send_early_at = self.node.poll_send_timeout().map(|t| clock.instant_of(t));
            // Peer datagrams carry the acknowledgements that open the LESS
            // send window. Handled one per wake-up behind batches of client
            // frames, they arrived late, the peer declared packets lost and
            // re-sent them, and every duplicate drew another acknowledgement
            // (measured at 10 000 entities x 20 Hz: 2 s one-way delay, 5
            // copies of every packet). So peer events are taken in batches,
            // and also after every batch of client frames.
            tokio::select! {
                event = next_peer_event(&mut peer_events) => match event {
                    Some(event) => {
                        self.handle_peer_event(event, &mut links, &clock);
                        for _ in 1..PEER_EVENT_BATCH {
                            let Some(more) = peer_events.as_mut().and_then(|q| q.try_recv().ok()) else {
                                break;
                            };
                            self.handle_peer_event(more, &mut links, &clock);
                        }
                    }
                    None => peer_events = None,
                },
                event = events.recv() => match event {
                    Some(event) => {
                        let mut frames = self.handle_client_event(event, &mut handles, &clock);
                        // Whatever else is already queued is handled before
                        // the outputs are flushed, so one flush (and one LESS
                        // packet) carries many updates under load, and a
                        // lone update still leaves at once. The budget is
                        // counted in frames, as events carry batches.
                        while frames < CLIENT_EVENT_BATCH {
                            match events.try_recv() {
                                Ok(event) => {
                                    frames += self.handle_client_event(event, &mut handles, &clock);
                                }
                                Err(_) => break,
                            }
                        }
                        for _ in 0..PEER_EVENT_BATCH {
                            let Some(peer) = peer_events.as_mut().and_then(|q| q.try_recv().ok()) else {
                                break;
                            };
                            self.handle_peer_event(peer, &mut links, &clock);
                        }
                    }
                    None => {
                        error!("client listener stopped");
                        break;
                    }
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
                event = next_upstream_event(&mut upstream_events) => {
                    use crate::transport::upstream::UpstreamEvent;
                    match event {
                        Some(UpstreamEvent::Connected(out)) => {
                            upstream_out = Some(out);
                            self.node.handle_upstream_connected(clock.now());
                        }
                        Some(UpstreamEvent::Frame(frame)) => {
                            self.node.handle_upstream_frame(clock.now(), &frame);
                        }
                        Some(UpstreamEvent::Disconnected { reason }) => {
                            debug!(reason = %RemoteText(&reason), "world server link down");
                            upstream_out = None;
                            self.node.handle_upstream_disconnected(clock.now());
                        }
                        None => upstream_events = None,
                    }
                }
                // Clients waiting out their early-send gap: written below,
                // with every arm's inputs.
                _ = sleep_until(send_early_at) => {}
                _ = tick.tick() => {
                    if let Some(hook) = &mut self.tick_hook {
                        hook(&mut self.node.scene, clock.now());
                    }
                    self.node.handle_upstream_timeout(clock.now());
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
                    let status = self.snapshot(&tundra_url, &clock, peer_node.as_ref());
                    crate::logging::log_node_stats(&status);
                }
                _ = status_timer.tick() => {
                    let status = self.snapshot(&tundra_url, &clock, peer_node.as_ref());
                    self.status.send_replace(status);
                    if http_task.is_some() {
                        self.view.send_replace(http::ViewSnapshot {
                            origins: Arc::new(http::origins::OriginsDoc::collect(&self.node, &self.config.node.name)),
                            schema: schema_cache.refresh(self.node.scene.registry()),
                        });
                    }
                }
                _ = &mut shutdown => {
                    info!("shutting down");
                    break;
                }
            }
            let backlog = |id: ClientId| handles.get(&id).map_or(0, ClientHandle::queued_bytes);
            self.node.handle_send_early(clock.now(), &backlog);
            self.drain(&mut handles);
            self.flush_links(&clock, &mut links);
            if let Some(bridge) = &mut self.node.upstream {
                use crate::transport::upstream::UpstreamCommand;
                while let Some(frame) = bridge.poll_transmit() {
                    if let Some(out) = &upstream_out {
                        let _ = out.send(UpstreamCommand::Frame(frame));
                    }
                }
                while let Some(command) = bridge.poll_link_command() {
                    let command = match command {
                        crate::upstream::LinkCommand::LoggedIn => UpstreamCommand::LoggedIn,
                        crate::upstream::LinkCommand::Close(reason) => {
                            UpstreamCommand::Close(reason)
                        }
                    };
                    if let Some(out) = &upstream_out {
                        let _ = out.send(command);
                    }
                }
            }
        }
        for handle in handles.values() {
            handle.close("node shutting down");
        }
        // The listeners are closed before `run` returns (a task is dropped
        // when an aborted one is awaited), so a node restarted at once can
        // bind the same ports.
        for task in [listener_task, http_task]
            .into_iter()
            .flatten()
            .chain(knet_tasks)
        {
            task.abort();
            let _ = task.await;
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
                    // Acknowledge before applying: the peer's send window
                    // (64 datagrams) reopens only with our acknowledgements,
                    // and applying a batch of packets to the scene takes
                    // milliseconds. Sent after the batch, acknowledgements
                    // capped the link at 64 datagrams per batch time.
                    if let Some(peer) = links.get(&id) {
                        send_due(&mut l.session, peer, now);
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
                info!(%peer, reason = %RemoteText(&closure.reason), initiator = ?closure.initiator, "peer link down");
                self.link_ends.record(LinkEnd {
                    link: link.0 as u32,
                    peer: peer.to_string(),
                    code: closure.reason.code.name().to_owned(),
                    reason: closure.reason.text.clone(),
                    by_this_node: closure.initiator == Initiator::Local,
                    at_secs: clock.elapsed().as_secs_f64(),
                });
                links.remove(&id);
                self.node.handle_link_down(id);
            }
            PeerEvent::Refused {
                peer,
                remote,
                reason,
                ..
            } => {
                debug!(?peer, %remote, reason = %RemoteText(&reason), "peer connection refused");
            }
            PeerEvent::Session { .. } => {}
        }
    }

    /// The status snapshot: the pure node's view plus what only the
    /// driver knows (link ends, the data socket's refusals).
    fn snapshot(&self, tundra_url: &str, clock: &Clock, peers: Option<&PeerNode>) -> NodeStatus {
        let mut status = NodeStatus::collect(
            &self.node,
            &self.config.node.name,
            tundra_url,
            clock.elapsed(),
        );
        status.link_ends = self.link_ends.clone();
        if let Some(peers) = peers {
            status.data_socket = DataSocketCounters {
                unknown_source: peers.unknown_source_datagrams(),
                queue_full: peers.queue_full_datagrams(),
            };
            status.identity_conflicts = peers.identity_conflicts();
        }
        status
    }

    /// Applies a link's session events; a closed session ends the link.
    fn link_events(&mut self, id: FederationLink, links: &mut HashMap<FederationLink, PeerLink>) {
        if let Some(reason) = self.node.handle_link_events(id) {
            if let Some(peer) = links.remove(&id) {
                peer.close(Reason::new(ReasonCode::PROTOCOL_ERROR, reason.to_string()));
            }
        }
    }

    /// Applies one client event; returns how many frames it carried (an
    /// event that carries none counts as one, for the loop's budget).
    fn handle_client_event(
        &mut self,
        event: ClientEvent,
        handles: &mut HashMap<ClientId, ClientHandle>,
        clock: &Clock,
    ) -> usize {
        match event {
            ClientEvent::Connected {
                id,
                addr,
                transport,
                handle,
            } => {
                let client = ClientId(id.0);
                debug!(%client, %addr, %transport, "client connected");
                handles.insert(client, handle);
                self.node
                    .handle_client_connect_from(client, clock.now(), transport, addr.ip());
                1
            }
            ClientEvent::Frames { id, frames } => {
                // The frames of a batch were read together: one time for all.
                let now = clock.now();
                let client = ClientId(id.0);
                self.node.handle_client_frames(client, now, &frames);
                frames.len().max(1)
            }
            ClientEvent::Misbehaved { id, reason } => {
                self.node.handle_client_misbehaved(ClientId(id.0), &reason);
                1
            }
            ClientEvent::Closed { id, reason } => {
                let client = ClientId(id.0);
                handles.remove(&client);
                self.node.handle_client_disconnect(client, &reason);
                1
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
            if let Some(peer) = links.get(&link.id) {
                send_due(&mut link.session, peer, now);
            }
        }
    }

    fn drain(&mut self, handles: &mut HashMap<ClientId, ClientHandle>) {
        while let Some((entity, action)) = self.node.executed_actions.pop_front() {
            info!(%entity, name = %RemoteText(&action.name), "entity action from a peer executed here, its authority");
        }
        while let Some((status, detail)) = self.node.action_results.pop_front() {
            debug!(
                status = status.0,
                detail = %RemoteText(format_args!("{detail:?}")),
                "a remote authority answered an entity action"
            );
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
                    debug!(%client, entity = %action.entity_id, name = %RemoteText(&action.name), "entity action for the server");
                }
                other => debug!(?other, "server event"),
            }
        }
    }
}

/// Client frames (counted through their events) handled back to back
/// before outputs are flushed: enough to fill a LESS datagram with updates,
/// few enough that a burst never delays other work by more than a fraction
/// of a millisecond. An event's batch is not split, so a flush may follow
/// up to `CLIENT_EVENT_BATCH + websocket::READ_BATCH - 1` frames.
const CLIENT_EVENT_BATCH: usize = 256;
/// Peer events (mostly datagrams) handled per wake-up before the links are
/// flushed: acknowledgements for many packets then leave in one.
const PEER_EVENT_BATCH: usize = 64;

/// Peer links are numbered by the driver; the federation uses the same number.
fn federation_link(id: u64) -> FederationLink {
    FederationLink(id as u32)
}

/// Seeds the upstream backoff jitter from the node's identity, so nodes
/// bridging the same world server do not redial in lockstep.
fn id_seed(config: &NodeConfig) -> u64 {
    let name = config.node.name.bytes();
    let uuid = config.node.uuid.map_or(0, |u| u.as_u64_pair().0);
    name.fold(uuid, |h, b| h.rotate_left(5) ^ u64::from(b))
}

async fn next_upstream_event(
    events: &mut Option<mpsc::Receiver<crate::transport::upstream::UpstreamEvent>>,
) -> Option<crate::transport::upstream::UpstreamEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

async fn next_peer_event(events: &mut Option<mpsc::Receiver<PeerEvent>>) -> Option<PeerEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// Hands a session's due packets to its link, until none is due or the link
/// is closed.
fn send_due(session: &mut Session, peer: &PeerLink, now: Time) {
    while let Some(transmit) = session.poll_transmit(now) {
        if peer.transmit(transmit).is_err() {
            break;
        }
    }
}

/// Bytes a kNet connection holds beyond the node's own client queue: kept
/// small so a slow native client's backlog shows in its queued bytes, where
/// the sync state coalesces, as for a WebSocket client.
const KNET_UNSENT_BYTES: usize = 64 * 1024;

/// Fragment bytes one native client may have buffered, in messages of at
/// most `max_frame_bytes` each: a few messages in flight at once.
const KNET_REASSEMBLY_MESSAGES: usize = 4;

/// Fragment bytes all native clients of a node may have buffered together.
/// 64 MiB holds 256 clients each sending a full 256 KiB message at once.
const KNET_REASSEMBLY_NODE_BYTES: usize = 64 * 1024 * 1024;

/// The kNet listener's settings from the node's config.
fn knet_options(config: &NodeConfig, tcp_limits: AddressLimits) -> KnetOptions {
    let udp = crate::knet::udp::UdpConfig {
        datagrams_per_sec: config.tundra.knet_datagrams_per_sec,
        max_unsent_bytes: KNET_UNSENT_BYTES,
        max_message_bytes: config.limits.max_frame_bytes,
        max_reassembly_bytes: KNET_REASSEMBLY_MESSAGES * config.limits.max_frame_bytes,
        reassembly_budget: Some(crate::knet::udp::reassembly::ReassemblyBudget::new(
            KNET_REASSEMBLY_NODE_BYTES.max(config.limits.max_frame_bytes),
        )),
        ..Default::default()
    };
    let tcp = crate::knet::tcp::TcpConfig {
        max_message_bytes: config.limits.max_frame_bytes,
        ..Default::default()
    };
    KnetOptions {
        udp: UdpServerOptions {
            connection: udp,
            max_half_open_per_address: config.limits.max_half_open_per_address,
            max_half_open: config.limits.max_half_open,
            budget: client_budget(config),
        },
        tcp,
        tcp_limits,
        tcp_budget: client_budget(config),
    }
}

/// How fast each client's messages are read, whatever its transport.
fn client_budget(config: &NodeConfig) -> BudgetConfig {
    BudgetConfig {
        per_second: config.limits.max_messages_per_second,
        burst: config.limits.max_message_burst,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a task on `runtime` and tells whether it ran on the thread that
    /// blocks on the runtime, and how many workers the runtime has.
    fn shape(runtime: tokio::runtime::Runtime) -> (bool, usize) {
        runtime.block_on(async {
            let here = std::thread::current().id();
            let there = tokio::spawn(async { std::thread::current().id() })
                .await
                .unwrap();
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            (here == there, workers)
        })
    }

    #[test]
    fn one_thread_serves_its_tasks_on_the_node_thread() {
        assert_eq!(shape(tokio_runtime(1).unwrap()), (true, 1));
    }

    #[test]
    fn more_threads_are_the_node_thread_and_workers() {
        // A spawned task runs on a worker, never on the blocking thread.
        assert_eq!(shape(tokio_runtime(3).unwrap()), (false, 2));
        let (same, workers) = shape(tokio_runtime(0).unwrap());
        assert!(!same);
        assert!(workers >= 1);
    }
}
