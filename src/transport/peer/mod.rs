//! The peer-link driver: QUIC endpoint, UDP data socket, dialers with
//! backoff, and one task per connection (docs/peer-link.md).
//!
//! Thin by design: the control protocol is `peering::handshake`, LESS is
//! `less::session::Session`; tasks here move bytes between them and the
//! network, keep timers, and report [`PeerEvent`]s. The federation layer sees
//! only events and [`PeerLink`] handles.
//!
//! The application owns each link's LESS `Session` (built from
//! [`PeerLink::take_link_settings`]) and runs it with its own clock, as the
//! node core does; the driver only moves frames ([`PeerEvent::Frame`] in,
//! [`PeerLink::transmit`] out) and keeps a liveness fallback. Every session
//! of a node is in one single-threaded, deterministic place, testable under
//! fake time.
//!
//! ```text
//!  dialer (per peer) ──connect──┐         ┌── accept loop
//!                               ▼         ▼
//!                   connection task: handshake ─▶ data loop (frames)
//!                          ▲                          │
//!   UDP socket task ──routes by peer data address─────┘──▶ PeerEvent channel
//! ```

mod connection;
mod control;
mod data;
mod dialer;
mod link;
mod node_config;
mod registry;
mod stream_capture;
mod udp;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, watch};
use tracing::{info, info_span, warn, Instrument};

pub use link::{Frame, LinkClosed, LinkId, PeerLink};
pub use node_config::{PeerNodeConfig, PeerStartError};
pub use stream_capture::STREAM_CAPTURE_ENV;
pub use udp::ROUTE_QUEUE;

use crate::clock::Time;
use crate::config::PeerLinkMode;
use crate::peering::handshake::{Closure, Initiator};
use crate::peering::hello::{DataPath, Hello};
use crate::peering::keys::Role;
use crate::peering::peer_diff::PeerChange;
use crate::peering::peer_file::{PeerConfig, PeerName, PeerSet};
use crate::peering::reason::Reason;
use crate::transport::peer_tls::{self, PeerTlsError};
use crate::transport::udp_buffers::enlarge_buffers;

/// Capacity of the node's event channel; a federation that stops reading
/// stalls the links (backpressure) rather than growing memory.
pub const EVENT_QUEUE: usize = 4096;
/// How long a node waits, after sending Refuse or Goodbye, for the peer to
/// close the connection before closing it itself.
pub const CLOSE_LINGER: Duration = Duration::from_millis(500);
/// How long shutdown waits for links to say goodbye.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// What happens on the node's peer links, in order per link.
#[derive(Debug)]
pub enum PeerEvent {
    /// A link is established; LESS commands go through the handle.
    LinkUp(PeerLink),
    /// An established link ended.
    LinkDown {
        link: LinkId,
        peer: PeerName,
        closure: Closure,
    },
    /// A connection failed before establishment: TLS refused a certificate,
    /// the handshake was refused by either side, or the dial failed.
    Refused {
        /// The peer, when known (always on a dial; after TLS on an accept).
        peer: Option<PeerName>,
        remote: SocketAddr,
        role: Role,
        reason: Reason,
        initiator: Initiator,
        /// The envelope version of the peer's Refuse, when it sent one.
        peer_version: Option<u16>,
    },
    /// A frame for the link's session, which the application runs.
    Frame {
        link: LinkId,
        peer: PeerName,
        frame: Frame,
    },
}

/// State shared by every task of one node.
#[derive(Debug)]
struct Shared {
    /// The configuration the node started with; its peer set is the
    /// first of `peers`.
    config: PeerNodeConfig,
    /// The peers configured now: replaced by [`PeerNode::reconfigure`].
    peers: Mutex<PeerSet>,
    incarnation: u64,
    origin: tokio::time::Instant,
    endpoint: quinn::Endpoint,
    udp: Option<Arc<tokio::net::UdpSocket>>,
    data_address: Option<SocketAddr>,
    routes: Arc<udp::Routes>,
    registry: registry::Registry,
    events: mpsc::Sender<PeerEvent>,
    shutdown: watch::Receiver<bool>,
    rng: Mutex<ChaCha8Rng>,
    next_link: AtomicU64,
    /// Connections refused because two nodes share one node UUID.
    identity_conflicts: AtomicU64,
}

impl Shared {
    /// Protocol time: microseconds since the node started.
    fn now(&self) -> Time {
        let elapsed = self.origin.elapsed();
        Time::from_micros(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
    }

    /// The tokio instant of a protocol time.
    fn instant(&self, time: Time) -> tokio::time::Instant {
        self.origin + Duration::from_micros(time.as_micros().min(u64::MAX / 2))
    }

    /// The peers configured now.
    fn peers(&self) -> std::sync::MutexGuard<'_, PeerSet> {
        self.peers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `peer` is still configured with the certificate it was
    /// dialled or accepted with (a reload may have removed it meanwhile).
    fn is_configured(&self, peer: &PeerConfig) -> bool {
        self.peers()
            .by_name(&peer.name)
            .is_some_and(|now| now.fingerprint == peer.fingerprint)
    }

    fn draw<T>(&self, draw: impl FnOnce(&mut ChaCha8Rng) -> T) -> T {
        draw(
            &mut self
                .rng
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    fn next_link_id(&self) -> LinkId {
        LinkId(self.next_link.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// This node's Hello for a new connection, with a fresh initial
    /// sequence number.
    fn local_hello(&self) -> Hello {
        let config = &self.config;
        // An advertised address (a relay or proxy in front of the socket)
        // replaces the bound one; stream mode has no data address at all.
        let announced = self
            .data_address
            .map(|bound| config.data_advertise.unwrap_or(bound));
        let data_path = match announced {
            Some(address) => DataPath::Udp {
                ip: (!address.ip().is_unspecified()).then_some(address.ip()),
                port: address.port(),
            },
            None => DataPath::Stream,
        };
        Hello {
            node: config.node,
            name: config.name.clone(),
            incarnation: self.incarnation,
            schema_uri: config.connection_schema.uri.clone(),
            timestamp_quantum_micros: u32::try_from(config.timestamp_quantum.as_micros())
                .unwrap_or(u32::MAX),
            initial_sequence: self.draw(|rng| rng.gen()),
            data_path,
            mtu: config.mtu,
            tick_hz: config.tick_hz,
            features: config.features.clone(),
        }
    }

    async fn emit(&self, event: PeerEvent) {
        // A dropped receiver means the node is being torn down.
        let _ = self.events.send(event).await;
    }
}

/// A running peer-link driver.
#[derive(Debug)]
pub struct PeerNode {
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    /// Every task holds a clone; all dropped means all tasks ended.
    alive: mpsc::Sender<()>,
    finished: mpsc::Receiver<()>,
    control_address: SocketAddr,
    udp_task: Option<tokio::task::JoinHandle<()>>,
    /// Stops each running dialer, by peer.
    dialers: HashMap<PeerName, watch::Sender<bool>>,
    span: tracing::Span,
}

impl PeerNode {
    /// Binds the configured addresses and starts.
    pub async fn start(
        config: PeerNodeConfig,
    ) -> Result<(PeerNode, mpsc::Receiver<PeerEvent>), PeerStartError> {
        let bind = |what, address| {
            std::net::UdpSocket::bind(address).map_err(|source| PeerStartError::Bind {
                what,
                address,
                source,
            })
        };
        let control = bind("peering.control_listen", config.control_listen)?;
        let data = match config.mode {
            PeerLinkMode::Udp => Some(bind("peering.data_listen", config.data_listen)?),
            PeerLinkMode::Stream => None,
        };
        PeerNode::start_on(config, control, data).await
    }

    /// Starts on sockets bound by the caller (tests bind port 0 first to
    /// learn every node's addresses); `data: None` means stream mode.
    pub async fn start_on(
        config: PeerNodeConfig,
        control: std::net::UdpSocket,
        data: Option<std::net::UdpSocket>,
    ) -> Result<(PeerNode, mpsc::Receiver<PeerEvent>), PeerStartError> {
        let server = peer_tls::server_config(
            &config.identity,
            config.peers.iter().map(|peer| peer.fingerprint),
            config.liveness_timeout,
        )?;
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some(server),
            control,
            Arc::new(quinn::TokioRuntime),
        )?;
        let control_address = endpoint.local_addr()?;
        let (udp, data_address) = match data {
            Some(socket) => {
                socket.set_nonblocking(true)?;
                enlarge_buffers(socket2::SockRef::from(&socket), "peer data");
                let socket = tokio::net::UdpSocket::from_std(socket)?;
                let address = socket.local_addr()?;
                (Some(Arc::new(socket)), Some(address))
            }
            None => (None, None),
        };
        let (shutdown, shutdown_receiver) = watch::channel(false);
        let (events, event_receiver) = mpsc::channel(EVENT_QUEUE);
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let incarnation = rng.gen();
        let span = info_span!("peer_node", node = %config.name);
        let shared = Arc::new(Shared {
            peers: Mutex::new(config.peers.clone()),
            config,
            incarnation,
            origin: tokio::time::Instant::now(),
            endpoint,
            udp,
            data_address,
            routes: Arc::new(udp::Routes::default()),
            registry: registry::Registry::new(),
            events,
            shutdown: shutdown_receiver,
            rng: Mutex::new(rng),
            next_link: AtomicU64::new(0),
            identity_conflicts: AtomicU64::new(0),
        });
        let (alive, finished) = mpsc::channel(1);
        span.in_scope(|| {
            info!(
                control = %control_address,
                data = %data_address.map_or("none".to_owned(), |a| a.to_string()),
                fingerprint = %shared.config.identity.fingerprint,
                peers = shared.config.peers.len(),
                "peer links listening"
            )
        });
        let udp_task = shared.udp.as_ref().map(|socket| {
            tokio::spawn(udp::run(
                socket.clone(),
                shared.routes.clone(),
                shared.shutdown.clone(),
            ))
        });
        tokio::spawn(accept_loop(shared.clone(), alive.clone()).instrument(span.clone()));
        let mut node = PeerNode {
            shared,
            shutdown,
            alive,
            finished,
            control_address,
            udp_task,
            dialers: HashMap::new(),
            span,
        };
        for peer in node.shared.config.peers.clone().iter() {
            node.start_dialer(peer);
        }
        Ok((node, event_receiver))
    }

    /// Starts dialling `peer` if its file has a `control` address.
    fn start_dialer(&mut self, peer: &PeerConfig) {
        let Some(address) = peer.control.clone() else {
            return;
        };
        let seed = self.shared.draw(|rng| rng.gen());
        let (stop, stopped) = watch::channel(false);
        let task = dialer::run(
            self.shared.clone(),
            peer.clone(),
            address,
            seed,
            stopped,
            self.alive.clone(),
        );
        tokio::spawn(task.instrument(self.span.clone()));
        if let Some(previous) = self.dialers.insert(peer.name.clone(), stop) {
            previous.send_replace(true);
        }
    }

    /// Stops dialling `peer`. A connection the dialer runs is not cut: the
    /// application ends its link with a goodbye (`PeerLink::close`).
    fn stop_dialer(&mut self, peer: &PeerName) {
        if let Some(stop) = self.dialers.remove(peer) {
            stop.send_replace(true);
        }
    }

    /// This node's peer-link identity (its certificate and key).
    pub fn identity(&self) -> &crate::transport::identity::NodeIdentity {
        &self.shared.config.identity
    }

    /// The peers configured now.
    pub fn peers(&self) -> PeerSet {
        self.shared.peers().clone()
    }

    /// Replaces the configured peers with `peers` (a reload), given the
    /// `changes` that lead there (`peering::peer_diff::diff`): incoming
    /// connections are pinned to the new set at once, dialers of removed
    /// or replaced peers stop and new ones start. Links are left to the
    /// application, which ends those the changes name with a goodbye; a
    /// connection still in its handshake with a peer no longer configured
    /// is refused when it would commit. On an error nothing changed.
    pub fn reconfigure(
        &mut self,
        peers: PeerSet,
        changes: &[PeerChange],
    ) -> Result<(), PeerTlsError> {
        let config = &self.shared.config;
        let server = peer_tls::server_config(
            &config.identity,
            peers.iter().map(|peer| peer.fingerprint),
            config.liveness_timeout,
        )?;
        *self.shared.peers() = peers;
        self.shared.endpoint.set_server_config(Some(server));
        for change in changes {
            match change {
                PeerChange::Removed(name) => self.stop_dialer(name),
                PeerChange::Added(peer) | PeerChange::Replaced(peer) => {
                    self.stop_dialer(&peer.name);
                    self.start_dialer(peer);
                }
                // Same pin and address: the running dialer redials the
                // link the application ends, or keeps the live one.
                PeerChange::Relinked(_) | PeerChange::RulesChanged(_) => {}
            }
        }
        Ok(())
    }

    /// The bound QUIC control address.
    pub fn control_address(&self) -> SocketAddr {
        self.control_address
    }

    /// The bound UDP data address (`None` in stream mode).
    pub fn data_address(&self) -> Option<SocketAddr> {
        self.shared.data_address
    }

    /// This node's certificate fingerprint.
    pub fn fingerprint(&self) -> crate::peering::fingerprint::Fingerprint {
        self.shared.config.identity.fingerprint
    }

    /// Connections refused, by either side, because the peer has this
    /// node's UUID or another linked peer's (a configuration error).
    pub fn identity_conflicts(&self) -> u64 {
        self.shared.identity_conflicts.load(Ordering::Relaxed)
    }

    /// Datagrams dropped because no link expects their source address.
    pub fn unknown_source_datagrams(&self) -> u64 {
        self.shared.routes.unknown_source.load(Ordering::Relaxed)
    }

    /// Datagrams from a peer's address dropped because that link's receive
    /// queue ([`ROUTE_QUEUE`]) was full.
    pub fn queue_full_datagrams(&self) -> u64 {
        self.shared.routes.queue_full.load(Ordering::Relaxed)
    }

    /// Says goodbye on every link (reason `shutdown`), waits for the links to
    /// close, and releases the sockets. The QUIC socket is freed by quinn's
    /// endpoint driver shortly after this returns.
    pub async fn shutdown(self) {
        let PeerNode {
            shared,
            shutdown,
            alive,
            mut finished,
            udp_task,
            ..
        } = self;
        info!(node = %shared.config.name, "peer links shutting down");
        shutdown.send_replace(true);
        drop(alive);
        if tokio::time::timeout(SHUTDOWN_GRACE, finished.recv())
            .await
            .is_err()
        {
            warn!(node = %shared.config.name, "peer links did not close in time");
        }
        shared
            .endpoint
            .close(quinn::VarInt::from_u32(0), b"shutdown");
        let _ = tokio::time::timeout(CLOSE_LINGER, shared.endpoint.wait_idle()).await;
        if let Some(task) = udp_task {
            let _ = task.await;
        }
    }
}

/// Resolves once shutdown is signalled (or the node is gone). Returns no
/// borrow of the watch value, so callers stay `Send` across later awaits.
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Accepts connections until shutdown; each runs in its own task.
async fn accept_loop(shared: Arc<Shared>, alive: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let incoming = tokio::select! {
            _ = stopped(&mut shutdown) => return,
            incoming = shared.endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => return,
            },
        };
        let shared = shared.clone();
        let alive = alive.clone();
        tokio::spawn(
            async move {
                let _alive = alive;
                connection::accept(shared, incoming).await;
            }
            .in_current_span(),
        );
    }
}
