//! The tokio driver of one node, as quinn drives quinn-proto: [`start`]
//! binds the sockets and builds the [`Node`] core; [`Running::run`] hands
//! the loop to a [`driver::Driver`], which owns the loop's state and the one
//! [`Clock`], feeds the node its inputs and sends its outputs. All protocol
//! decisions are in the core.
//!
//! ```text
//!  inputs.rs ── one Input per wake-up ─▶ driver.rs: turn(input, now)
//!   client, peer, upstream events         ├─ clients.rs, peers.rs: inputs to the node
//!   the node's deadline, timers,          ├─ output.rs: frames and events out
//!   admin, reload, shutdown               └─ report.rs: status, /metrics, stats lines
//! ```

mod clients;
mod clock;
mod driver;
mod inputs;
mod listeners;
pub mod loop_lag;
mod output;
pub mod peer_health;
mod peers;
mod reload;
mod report;
mod start;
pub mod status;

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::config::NodeConfig;
use crate::http;
use crate::node::Node;
use crate::scene::Scene;
use crate::transport::knet::listener::KnetListener;
use crate::transport::peer::{PeerEvent, PeerNode, PeerStartError};
use peer_health::PeerHealth;
use status::NodeStatus;

pub use crate::node::TickHook;
pub use clock::Clock;
pub use reload::{ConfigLoader, ReloadSource};
pub use start::start;

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
    /// The HTTP listener while not yet serving, and its address.
    http: Option<TcpListener>,
    http_addr: Option<SocketAddr>,
    view: watch::Sender<http::ViewSnapshot>,
    /// The configured peers (the peer files at start), for the status and
    /// `/readyz`.
    peer_health: PeerHealth,
    /// Reload requests and how to read the configuration again.
    reload: Option<ReloadSource>,
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

    /// The node's status, refreshed every [`status::STATUS_PERIOD`] while
    /// it runs.
    pub fn status(&self) -> watch::Receiver<NodeStatus> {
        self.status.subscribe()
    }

    /// The scene before the node runs: an embedding program may add its
    /// own entities (they are local, like the scene file's).
    pub fn scene_mut(&mut self) -> &mut Scene {
        self.node.scene_mut()
    }

    /// Installs the per-tick work on the scene (see [`TickHook`]).
    pub fn set_tick_hook(&mut self, hook: TickHook) {
        self.node.set_tick_hook(hook);
    }

    /// Where the web viewer, `/status` and `/metrics` are served, when
    /// `[http] listen` is set.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// Where peers dial this node's control connection, with `[peering]`.
    pub fn peer_control_addr(&self) -> Option<SocketAddr> {
        self.peers
            .as_ref()
            .map(|(peers, _)| peers.control_address())
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
