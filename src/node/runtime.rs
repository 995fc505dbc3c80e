//! The tokio driver of one node: sockets and timers in, [`Node`] calls,
//! frames out. Its loop is small on purpose; all decisions are in the core.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tracing::{debug, error, info};

use super::Node;
use crate::clock::Time;
use crate::config::NodeConfig;
use crate::scene::{ClientId, Scene};
use crate::server::{ServerConfig, ServerEvent, TundraServer};
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
}

/// Maps the process clock onto protocol time.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    pub fn start() -> Clock {
        Clock(Instant::now())
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
    Ok(Running {
        tundra_addr,
        node: Node::new(scene, server, uuid::Uuid::new_v4()),
        config,
        listener: Some(listener),
        tls,
    })
}

impl Running {
    /// The URL a Tundra WebSocket client connects to.
    pub fn tundra_url(&self) -> String {
        let scheme = if self.tls.is_some() { "wss" } else { "ws" };
        format!("{scheme}://{}", self.tundra_addr)
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
        let mut tick = tokio::time::interval(self.config.tick_period());
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let stats_period =
            std::time::Duration::from_secs(self.config.log.stats_interval_secs.max(1));
        let mut stats =
            tokio::time::interval_at(tokio::time::Instant::now() + stats_period, stats_period);
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
                _ = tick.tick() => {
                    let backlog = |id: ClientId| handles.get(&id).map_or(0, ClientHandle::queued_bytes);
                    self.node.handle_tick(clock.now(), &backlog);
                }
                _ = stats.tick(), if self.config.log.stats_interval_secs > 0 => {
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
                _ = &mut shutdown => {
                    info!("shutting down");
                    break;
                }
            }
            self.drain(&mut handles);
        }
        for handle in handles.values() {
            handle.close("node shutting down");
        }
    }

    fn drain(&mut self, handles: &mut HashMap<ClientId, ClientHandle>) {
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
