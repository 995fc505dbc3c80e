//! The embedded demo: three real nodes (alpha, beta, gamma) in one process
//! on 127.0.0.1, peered in a triangle with identities generated at start,
//! each hosting a bundled Tundra world plus a few simulated movers.
//!
//! Nothing here is a shortcut around the real system: every node is started
//! by [`crate::runtime::start`] from a `node.toml` written to a
//! temporary directory, links are real QUIC/UDP peer links pinned by
//! fingerprint, and clients connect over real WebSockets. This module owns
//! only the orchestration (files, start order, progress, shutdown); it must
//! not reach into a node other than through `Running`.

pub mod setup;
pub mod simulator;
pub mod worlds;

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::runtime::status::NodeStatus;
use crate::runtime::{self, StartError};
pub use setup::DemoPorts;
use simulator::Simulator;
use worlds::WORLDS;

/// Movers per node unless told otherwise.
pub const DEFAULT_MOVERS: usize = 5;
/// How long the progress monitor waits for the triangle before it says
/// which links are still down (the nodes keep running and retrying).
const READY_PATIENCE: Duration = Duration::from_secs(20);

/// Why the demo could not start; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(
        "{node}: the {what} port {addr} is in use ({source}). Stop the program \
         using it, or move the demo's ports: `lessgate demo {flag} {suggestion}` \
         (or `{flag} 0` for any free ports)"
    )]
    PortTaken {
        node: &'static str,
        what: &'static str,
        addr: SocketAddr,
        flag: &'static str,
        suggestion: u16,
        source: std::io::Error,
    },
    #[error("{flag} {base}: the three nodes need consecutive ports above it; pick a base of at most 65000")]
    PortRange { base: u16, flag: &'static str },
    #[error("cannot prepare the demo's files: {0} (set TMPDIR to a writable directory)")]
    Setup(String),
    #[error("demo set-up: {0}")]
    Io(std::io::Error),
    #[error("node {node} did not start: {source}")]
    Start {
        node: &'static str,
        source: StartError,
    },
}

/// What the demo is asked to do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub ports: DemoPorts,
    /// Simulated moving entities per node.
    pub movers: usize,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            ports: DemoPorts::default(),
            movers: DEFAULT_MOVERS,
        }
    }
}

/// Where to print progress (stdout in the CLI, nothing in tests).
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// A progress sink that prints nothing.
pub fn quiet() -> Progress {
    Arc::new(|_| {})
}

/// One node of a started demo.
#[derive(Debug, Clone)]
pub struct DemoNode {
    pub name: &'static str,
    /// `ws://127.0.0.1:2345` and so on.
    pub tundra_url: String,
    /// Where native Tundra clients connect (kNet, UDP and TCP).
    pub knet_addr: Option<std::net::SocketAddr>,
    /// The node's web viewer, `/status` and `/metrics`.
    pub http_url: String,
    /// The node's published status.
    pub status: watch::Receiver<NodeStatus>,
}

/// A started demo, ready to run.
pub struct Demo {
    dir: tempfile::TempDir,
    nodes: Vec<DemoNode>,
    running: Vec<runtime::Running>,
    progress: Progress,
}

impl Demo {
    /// Generates the identities and files, starts the three nodes (their
    /// sockets are bound when this returns) and spawns the movers.
    pub async fn start(options: DemoOptions, progress: Progress) -> Result<Demo, DemoError> {
        let plans = setup::plan(options.ports, &WORLDS)?;
        let dir = tempfile::Builder::new()
            .prefix("lessgate-demo-")
            .tempdir()
            .map_err(|e| DemoError::Setup(format!("cannot create a temporary directory: {e}")))?;
        let files = setup::write_federation(dir.path(), &plans)?;
        for node in &files {
            progress(&format!(
                "identity  {:<5}  generated, fingerprint {}",
                node.plan.name, node.fingerprint
            ));
        }
        progress(&format!(
            "files     node.toml, peer files and identities in {}",
            dir.path().display()
        ));
        let mut nodes = Vec::with_capacity(files.len());
        let mut running = Vec::with_capacity(files.len());
        for node in files {
            let name = node.plan.name;
            let mut started = runtime::start(node.config)
                .await
                .map_err(|source| DemoError::Start { node: name, source })?;
            let world = node.plan.world;
            let loaded = started.scene_mut().len();
            let simulator = Simulator::spawn(
                started.scene_mut(),
                name,
                options.movers,
                world.movers_center,
            )
            .map_err(|e| DemoError::Setup(format!("{name}: cannot create the movers: {e}")))?;
            let movers = simulator.movers().len();
            started.set_tick_hook(Box::new(move |scene, now| {
                simulator.step(scene, now);
            }));
            progress(&format!(
                "scene     {name:<5}  {}: {loaded} entities, plus {movers} moving entities",
                world.title
            ));
            let knet = started
                .knet_addr()
                .map_or_else(|| "off".to_owned(), |addr| format!("{addr}/udp+tcp"));
            progress(&format!(
                "listening {name:<5}  Tundra {}  kNet {knet}  peers {}/udp (control), {}/udp (data)",
                started.tundra_url(),
                node.plan.control,
                node.plan.data
            ));
            nodes.push(DemoNode {
                name,
                tundra_url: started.tundra_url(),
                knet_addr: started.knet_addr(),
                http_url: format!("http://{}/", node.plan.http),
                status: started.status(),
            });
            running.push(started);
        }
        Ok(Demo {
            dir,
            nodes,
            running,
            progress,
        })
    }

    /// The nodes, in start order.
    pub fn nodes(&self) -> &[DemoNode] {
        &self.nodes
    }

    /// Where the generated files are (removed when the demo ends).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Runs the three nodes until `shutdown` completes, reporting links as
    /// they come up and a summary once the triangle is complete; then stops
    /// every node (links say goodbye) and removes the files.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Demo {
            dir,
            nodes,
            running,
            progress,
        } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = Vec::with_capacity(running.len());
        for node in running {
            let mut stop = stop_rx.clone();
            tasks.push(tokio::spawn(node.run(async move {
                let _ = stop.wait_for(|stop| *stop).await;
            })));
        }
        let monitor = tokio::spawn(monitor(nodes.clone(), progress.clone()));
        shutdown.await;
        monitor.abort();
        progress("stopping  all nodes (links say goodbye)");
        let _ = stop_tx.send(true);
        for task in tasks {
            let _ = task.await;
        }
        let path = dir.path().display().to_string();
        match dir.close() {
            Ok(()) => progress(&format!("stopped   removed {path}")),
            Err(e) => progress(&format!("stopped   could not remove {path}: {e}")),
        }
    }
}

/// Every link among the demo's nodes that is up, as sorted name pairs.
fn links_up(nodes: &[DemoNode]) -> BTreeSet<(String, String)> {
    let mut up = BTreeSet::new();
    for node in nodes {
        for link in &node.status.borrow().links {
            let pair = if node.name < link.peer.as_str() {
                (node.name.to_owned(), link.peer.clone())
            } else {
                (link.peer.clone(), node.name.to_owned())
            };
            up.insert(pair);
        }
    }
    up
}

/// Origins a node presents entities of.
fn origins_seen(status: &NodeStatus) -> usize {
    status.origins.iter().filter(|o| o.entities > 0).count()
}

/// Prints each link as it comes up, then the summary once every node sees
/// entities of every origin.
async fn monitor(nodes: Vec<DemoNode>, progress: Progress) {
    let all_pairs = nodes.len() * nodes.len().saturating_sub(1) / 2;
    let started = tokio::time::Instant::now();
    let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
    let mut warned = false;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        for pair in links_up(&nodes) {
            if reported.insert(pair.clone()) {
                progress(&format!("link      {}-{} up", pair.0, pair.1));
            }
        }
        let complete = nodes
            .iter()
            .all(|n| origins_seen(&n.status.borrow()) == nodes.len());
        if reported.len() == all_pairs && complete {
            break;
        }
        if !warned && started.elapsed() > READY_PATIENCE {
            warned = true;
            progress(&format!(
                "waiting   only {} of {all_pairs} links up after {} s; the log lines above say why (nodes keep retrying)",
                reported.len(),
                READY_PATIENCE.as_secs()
            ));
        }
    }
    for node in &nodes {
        let status = node.status.borrow().clone();
        progress(&format!(
            "entities  {:<5}  {} in its scene: {}",
            node.name,
            status.entities,
            crate::logging::origins_summary(&status)
        ));
    }
    progress(&summary(&nodes));
}

/// The final table: where a Tundra client and a browser connect.
pub fn summary(nodes: &[DemoNode]) -> String {
    let mut text = format!(
        "\nlessgate demo: {} nodes federated on 127.0.0.1, every link up.\n\n  node   Tundra client          native client (kNet)   browser\n",
        nodes.len()
    );
    for node in nodes {
        let knet = node
            .knet_addr
            .map_or_else(|| "-".to_owned(), |addr| addr.to_string());
        text.push_str(&format!(
            "  {:<6} {:<22} {:<22} {}\n",
            node.name, node.tundra_url, knet, node.http_url
        ));
    }
    text.push_str("\nEach node shows its own world, the other two worlds and everyone's moving entities.\nPress Ctrl-C to stop.");
    text
}
