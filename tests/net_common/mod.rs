//! Real-socket federation helpers for the reliability tests: a UDP
//! impairment proxy on the peer data path, in-process nodes peered through
//! it on 127.0.0.1, and a Tundra client that keeps the scene it is told.
//!
//! The proxy owns one UDP socket per node, `P[i]`; node `i` announces `P[i]`
//! as its data address (`[peering] data_advertise`). A datagram node `j`
//! sends to `P[i]` arrives from `j`'s bound socket; the proxy forwards it to
//! node `i` *from `P[j]`*, the address node `i` knows `j` by
//! (docs/peer-link.md §7.1), after loss, duplication and a random delay
//! (jitter reorders). The same sockets let a test inject forged datagrams
//! that node `i` takes to come from `j`.
//!
//! It builds on `tests/common` (the link model, the Tundra test values): a
//! binary that declares `mod net_common;` declares `mod common;` too.
#![allow(dead_code)]

pub mod knet_world;
pub mod star;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lessgate::config::NodeConfig;
use lessgate::runtime::status::NodeStatus;
use lessgate::tundra::{AttributeValue, ComponentData, ComponentId, EntityId, Message, Registry};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::net::UdpSocket;
use tokio::sync::{oneshot, watch};

pub use crate::common::link_model::LinkModel;
use crate::common::tundra_values::{builtin, NAME, PLACEABLE};

/// What the proxy saw and did, over all directions.
#[derive(Debug, Default)]
pub struct ProxyCounters {
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    pub duplicated: AtomicU64,
    pub forwarded: AtomicU64,
    /// Forwarded copies that left after a datagram received later.
    pub reordered: AtomicU64,
    pub unknown_source: AtomicU64,
}

/// Datagrams kept per direction for replay tests.
const CAPTURE: usize = 256;

struct ProxyState {
    rng: ChaCha8Rng,
    model: LinkModel,
    /// Each node's bound data address, once known.
    real: Vec<Option<SocketAddr>>,
    /// (from, to) → recent datagrams, oldest first.
    captured: BTreeMap<(usize, usize), Vec<Vec<u8>>>,
    /// Every datagram received, in order, once `record_all` was called.
    recorded: Option<Vec<Recorded>>,
    /// Receive order number of the latest datagram sent on.
    received_serial: u64,
}

/// One datagram the proxy received, for a test that reads the whole link.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub time: std::time::SystemTime,
    pub from: usize,
    pub to: usize,
    pub bytes: Vec<u8>,
}

/// The impairment proxy: one socket per node.
#[derive(Clone)]
pub struct Proxy {
    sockets: Arc<Vec<Arc<UdpSocket>>>,
    state: Arc<Mutex<ProxyState>>,
    pub counters: Arc<ProxyCounters>,
    /// Send order number of the latest forwarded copy, by receive serial.
    last_sent_serial: Arc<AtomicU64>,
}

impl Proxy {
    /// Binds `nodes` sockets on 127.0.0.1 and starts forwarding.
    pub async fn start(nodes: usize, model: LinkModel, seed: u64) -> Proxy {
        let mut sockets = Vec::new();
        for _ in 0..nodes {
            sockets.push(Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap()));
        }
        let proxy = Proxy {
            sockets: Arc::new(sockets),
            state: Arc::new(Mutex::new(ProxyState {
                rng: ChaCha8Rng::seed_from_u64(seed),
                model,
                real: vec![None; nodes],
                captured: BTreeMap::new(),
                recorded: None,
                received_serial: 0,
            })),
            counters: Arc::default(),
            last_sent_serial: Arc::default(),
        };
        for to in 0..nodes {
            tokio::spawn(proxy.clone().forward(to));
        }
        proxy
    }

    /// The address node `i` announces to its peers.
    pub fn address(&self, node: usize) -> SocketAddr {
        self.sockets[node].local_addr().unwrap()
    }

    /// Tells the proxy where node `i`'s data socket is bound.
    pub fn set_real(&self, node: usize, address: SocketAddr) {
        self.state.lock().unwrap().real[node] = Some(address);
    }

    pub fn set_model(&self, model: LinkModel) {
        self.state.lock().unwrap().model = model;
    }

    /// Datagrams `from` sent toward `to`, oldest first (the last 256).
    pub fn captured(&self, from: usize, to: usize) -> Vec<Vec<u8>> {
        let state = self.state.lock().unwrap();
        state.captured.get(&(from, to)).cloned().unwrap_or_default()
    }

    /// Keeps every datagram from now on (not only the last 256 per
    /// direction), with its time, for [`Proxy::recorded`].
    pub fn record_all(&self) {
        self.state.lock().unwrap().recorded = Some(Vec::new());
    }

    /// Every datagram received since [`Proxy::record_all`], in order.
    pub fn recorded(&self) -> Vec<Recorded> {
        let state = self.state.lock().unwrap();
        state.recorded.clone().unwrap_or_default()
    }

    /// Sends `bytes` to node `to` from the address it knows node `from` by,
    /// untouched by the impairment model.
    pub async fn inject(&self, from: usize, to: usize, bytes: &[u8]) {
        let target = self.state.lock().unwrap().real[to].expect("node address known");
        self.sockets[from].send_to(bytes, target).await.unwrap();
    }

    async fn forward(self, to: usize) {
        let socket = self.sockets[to].clone();
        let mut buffer = vec![0u8; 65_536];
        loop {
            let Ok((len, source)) = socket.recv_from(&mut buffer).await else {
                continue;
            };
            let datagram = buffer[..len].to_vec();
            self.counters.received.fetch_add(1, Ordering::Relaxed);
            let plan = {
                let mut state = self.state.lock().unwrap();
                let Some(from) = state.real.iter().position(|a| *a == Some(source)) else {
                    self.counters.unknown_source.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let Some(target) = state.real[to] else {
                    continue;
                };
                let kept = state.captured.entry((from, to)).or_default();
                if kept.len() == CAPTURE {
                    kept.remove(0);
                }
                kept.push(datagram.clone());
                if let Some(recorded) = state.recorded.as_mut() {
                    recorded.push(Recorded {
                        time: std::time::SystemTime::now(),
                        from,
                        to,
                        bytes: datagram.clone(),
                    });
                }
                state.received_serial += 1;
                let serial = state.received_serial;
                let model = state.model;
                let copies = model.copies(&mut state.rng);
                let delays: Vec<Duration> =
                    (0..copies).map(|_| model.delay(&mut state.rng)).collect();
                (from, target, serial, delays)
            };
            let (from, target, serial, delays) = plan;
            match delays.len() {
                0 => {
                    self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                }
                2 => {
                    self.counters.duplicated.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
            for delay in delays {
                let out = self.sockets[from].clone();
                let counters = self.counters.clone();
                let last = self.last_sent_serial.clone();
                let bytes = datagram.clone();
                tokio::spawn(async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    if last.fetch_max(serial, Ordering::Relaxed) > serial {
                        counters.reordered.fetch_add(1, Ordering::Relaxed);
                    }
                    if out.send_to(&bytes, target).await.is_ok() {
                        counters.forwarded.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
    }
}

/// A free UDP port on 127.0.0.1 (bound, read, released).
/// Replaces `from` by `to` in a node's file (which must contain it).
pub fn edit(file: &std::path::Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", file.display());
    std::fs::write(file, text.replace(from, to)).unwrap();
}

pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node's files and addresses, as [`write_nodes`] wrote them.
pub struct NodeFiles {
    pub name: String,
    pub dir: PathBuf,
    pub control: SocketAddr,
    pub data: SocketAddr,
    pub fingerprint: String,
}

/// Writes identities, peer files and node files for a full mesh of `names`
/// in `root`: node `i` dials every node after it. With a proxy, each node
/// announces its proxy socket as its data address.
pub fn write_mesh(
    root: &Path,
    names: &[&str],
    proxy: Option<&Proxy>,
    extra: &str,
) -> Vec<NodeFiles> {
    let mut pairs = Vec::new();
    for i in 0..names.len() {
        for j in i + 1..names.len() {
            pairs.push((i, j));
        }
    }
    write_nodes(root, names, &pairs, proxy, extra)
}

/// As [`write_mesh`], with peer links only between the `pairs` given
/// (`(i, j)` with `i < j`: node `i` dials node `j`).
pub fn write_nodes(
    root: &Path,
    names: &[&str],
    pairs: &[(usize, usize)],
    proxy: Option<&Proxy>,
    extra: &str,
) -> Vec<NodeFiles> {
    let mut seats = Vec::new();
    for name in names {
        let dir = root.join(name);
        let (_, _, fingerprint) =
            lessgate::transport::identity::generate_into(&dir.join("identity"), "node", true)
                .unwrap();
        seats.push(NodeFiles {
            name: (*name).to_owned(),
            dir,
            control: SocketAddr::from(([127, 0, 0, 1], free_udp_port())),
            data: SocketAddr::from(([127, 0, 0, 1], free_udp_port())),
            fingerprint: fingerprint.to_string(),
        });
    }
    for (i, seat) in seats.iter().enumerate() {
        let peers = seat.dir.join("peers");
        std::fs::create_dir_all(&peers).unwrap();
        for (j, other) in seats.iter().enumerate() {
            if !pairs.contains(&(i.min(j), i.max(j))) || i == j {
                continue;
            }
            let control = if j > i {
                format!("control = \"{}\"\n", other.control)
            } else {
                String::new()
            };
            std::fs::write(
                peers.join(format!("{}.toml", other.name)),
                format!(
                    "name = \"{}\"\n{control}fingerprint = \"{}\"\nexport = \"all\"\naccept = \"all\"\n",
                    other.name, other.fingerprint
                ),
            )
            .unwrap();
        }
        let advertise = proxy
            .map(|p| format!("data_advertise = \"{}\"\n", p.address(i)))
            .unwrap_or_default();
        let text = format!(
            "[node]\nname = \"{name}\"\nuuid = \"{uuid}\"\ntick_hz = 20\n\n\
             [tundra]\nlisten = \"127.0.0.1:0\"\n\n\
             [peering]\ncontrol_listen = \"{control}\"\ndata_listen = \"{data}\"\n{advertise}\
             certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
             peers_dir = \"peers\"\nreconnect_min_ms = 100\nreconnect_max_ms = 1000\n\
             stats_interval_secs = 0\n{extra}",
            name = seat.name,
            uuid = uuid::Uuid::from_u128(0x1000 + i as u128),
            control = seat.control,
            data = seat.data,
        );
        std::fs::write(seat.dir.join("node.toml"), text).unwrap();
        if let Some(proxy) = proxy {
            proxy.set_real(i, seat.data);
        }
    }
    seats
}

/// A node running in this process.
pub struct LiveNode {
    pub url: String,
    /// Where native clients connect (UDP, and TCP on the same port), when
    /// the node listens for them.
    pub knet: Option<SocketAddr>,
    /// Whether kNet over TCP is served on that port too (it is not when the
    /// TCP port was taken: the node then serves UDP only).
    pub knet_tcp: bool,
    pub status: watch::Receiver<NodeStatus>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl LiveNode {
    pub async fn start(seat: &NodeFiles) -> LiveNode {
        let config = NodeConfig::load(&seat.dir.join("node.toml")).expect("node file loads");
        LiveNode::start_config(&seat.name, config).await
    }

    /// Starts a node from a config built by the test.
    pub async fn start_config(name: &str, config: NodeConfig) -> LiveNode {
        let running = lessgate::runtime::start(config).await.expect("node starts");
        let url = running.tundra_url();
        let knet = running.knet_addr();
        let knet_tcp = running.knet_tcp();
        let status = running.status();
        let (stop, stopped) = oneshot::channel::<()>();
        // The node's name on every line it logs (RUST_LOG diagnosis).
        let span = tracing::info_span!("live", node = %name);
        let task = tokio::spawn(tracing::Instrument::instrument(
            running.run(async {
                let _ = stopped.await;
            }),
            span,
        ));
        LiveNode {
            url,
            knet,
            knet_tcp,
            status,
            stop: Some(stop),
            task,
        }
    }

    /// As [`LiveNode::start_config`] with `tundra.knet_listen` on a free
    /// port of 127.0.0.1 for both UDP and TCP. With port 0 the node takes
    /// the UDP socket's port for TCP, which a TCP socket may already hold;
    /// the node then serves UDP only, so this starts it again.
    pub async fn start_knet(name: &str, mut config: NodeConfig) -> LiveNode {
        config.tundra.knet_listen = Some("127.0.0.1:0".parse().unwrap());
        for _ in 0..20 {
            let node = LiveNode::start_config(name, config.clone()).await;
            if node.knet_tcp {
                return node;
            }
            node.stop().await;
        }
        panic!("no port free for both kNet UDP and TCP in 20 tries");
    }

    /// The node's native URL for `scheme` (`"udp"` or `"tcp"`).
    pub fn knet_url(&self, scheme: &str) -> String {
        let addr = self.knet.expect("the node listens for native clients");
        format!("knet+{scheme}://{addr}")
    }

    /// The latest published status.
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// Waits until `check` holds on a fresh status of every node, polling each
/// published snapshot; panics after `limit` (a failure bound, not a pass
/// criterion). Returns the statuses it held on, so a test asserts on the
/// very values it waited for.
pub async fn wait_status(
    nodes: &[&LiveNode],
    limit: Duration,
    what: &str,
    check: impl Fn(&NodeStatus) -> bool,
) -> Vec<NodeStatus> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let statuses: Vec<NodeStatus> = nodes.iter().map(|n| n.status()).collect();
        if statuses.iter().all(&check) {
            return statuses;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not reached in {limit:?}: {:#?}",
            nodes.iter().map(|n| n.status()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An entity as a client knows it: Name text and description, Placeable x.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub name: Option<String>,
    pub placeable: Option<ComponentId>,
    pub x: Option<f32>,
    pub name_component: Option<ComponentId>,
    /// Name's second attribute.
    pub description: Option<String>,
    /// Type ids of every component the client was sent.
    pub types: std::collections::BTreeSet<u32>,
    /// Type ids of the components that came after the entity, in
    /// CreateComponents (an entity sent whole has none).
    pub added_later: std::collections::BTreeSet<u32>,
    /// Placeable rotation (Euler degrees), as last told.
    pub rot: Option<lessgate::tundra::values::Float3>,
}

/// The scene a Tundra client was told about, by entity id.
#[derive(Debug, Default, Clone)]
pub struct SceneView {
    pub entities: BTreeMap<EntityId, Seen>,
    /// CreateEntity and RemoveEntity messages the client was sent.
    pub creates: usize,
    pub removes: usize,
}

impl SceneView {
    /// Applies one message the node sent.
    pub fn apply(&mut self, message: &Message) {
        let registry = builtin();
        match message {
            Message::CreateEntity(create) => {
                self.creates += 1;
                let mut seen = Seen {
                    name: None,
                    placeable: None,
                    x: None,
                    name_component: None,
                    description: None,
                    types: create.components.iter().map(|c| c.type_id).collect(),
                    added_later: Default::default(),
                    rot: None,
                };
                for component in &create.components {
                    let lessgate::tundra::ComponentBody::Attributes(body) = &component.body else {
                        continue;
                    };
                    match (component.type_id, body.values.first()) {
                        (NAME, Some(AttributeValue::String(text))) => {
                            seen.name = Some(text.clone());
                            seen.name_component = Some(component.id);
                            if let Some(AttributeValue::String(text)) = body.values.get(1) {
                                seen.description = Some(text.clone());
                            }
                        }
                        (PLACEABLE, Some(AttributeValue::Transform(t))) => {
                            seen.placeable = Some(component.id);
                            seen.x = Some(t.pos.x);
                            seen.rot = Some(t.rot);
                        }
                        _ => {}
                    }
                }
                self.entities.insert(create.entity_id, seen);
            }
            Message::EditAttributes(edit) => {
                let Some(seen) = self.entities.get_mut(&edit.entity_id) else {
                    return;
                };
                for block in &edit.blocks {
                    let type_id = if Some(block.component_id) == seen.placeable {
                        PLACEABLE
                    } else if Some(block.component_id) == seen.name_component {
                        NAME
                    } else {
                        continue;
                    };
                    let slots = registry.get(type_id).unwrap().slot_types();
                    let Ok(decoded) = block.decode(&slots) else {
                        continue;
                    };
                    for change in decoded.edits {
                        match (change.index, &change.value) {
                            (0, AttributeValue::Transform(t)) => {
                                seen.x = Some(t.pos.x);
                                seen.rot = Some(t.rot);
                            }
                            (0, AttributeValue::String(text)) => seen.name = Some(text.clone()),
                            (1, AttributeValue::String(text)) => {
                                seen.description = Some(text.clone())
                            }
                            _ => {}
                        }
                    }
                }
            }
            // Native clients (and protocol 4 WebSocket ones) get transform
            // changes as RigidBodyUpdate instead of Placeable edits.
            Message::RigidBodyUpdate(update) => {
                for record in &update.entities {
                    let Some(seen) = self.entities.get_mut(&record.entity_id) else {
                        continue;
                    };
                    if let Some(pos) = record.position.value() {
                        seen.x = Some(pos.x);
                    }
                    let current = lessgate::tundra::values::Transform {
                        rot: seen.rot.unwrap_or_default(),
                        ..Default::default()
                    };
                    let received = lessgate::tundra::rigid_body_receiver::receive(record, current);
                    let rotated =
                        record.rotation.forward().is_some() || record.rotation.quat().is_some();
                    if let (Some(t), true) = (received.transform, rotated) {
                        seen.rot = Some(t.rot);
                    }
                }
            }
            Message::RemoveEntity(remove) => {
                self.removes += 1;
                self.entities.remove(&remove.entity_id);
            }
            Message::CreateComponents(create) => {
                if let Some(seen) = self.entities.get_mut(&create.entity_id) {
                    seen.types
                        .extend(create.components.iter().map(|c| c.type_id));
                    seen.added_later
                        .extend(create.components.iter().map(|c| c.type_id));
                }
            }
            // The Name text stays: entities are found by it.
            Message::RemoveComponents(remove) => {
                let Some(seen) = self.entities.get_mut(&remove.entity_id) else {
                    return;
                };
                let removed = |id: Option<ComponentId>| {
                    id.is_some_and(|id| remove.component_ids.contains(&id))
                };
                if removed(seen.placeable) {
                    seen.placeable = None;
                    seen.x = None;
                    seen.types.remove(&PLACEABLE);
                }
                if removed(seen.name_component) {
                    seen.name_component = None;
                    seen.types.remove(&NAME);
                }
            }
            _ => {}
        }
    }

    /// Name → every x seen under that name (one entry per entity), sorted:
    /// the id-independent picture two nodes' clients can be compared by.
    pub fn by_name(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for seen in self.entities.values() {
            out.entry(seen.name.clone().unwrap_or_default())
                .or_default()
                .push(format!("{:?}", seen.x));
        }
        for xs in out.values_mut() {
            xs.sort();
        }
        out
    }

    /// The entity named `name`, if exactly one.
    pub fn find(&self, name: &str) -> Option<(EntityId, &Seen)> {
        let mut found = self
            .entities
            .iter()
            .filter(|(_, s)| s.name.as_deref() == Some(name));
        let first = found.next()?;
        found.next().is_none().then_some((*first.0, first.1))
    }
}

/// Captures the log events a node's runtime emits, for counting what the
/// logs say happened (the only view of, for example, actions executed at an
/// authority).
pub mod capture {
    use std::sync::{Mutex, OnceLock};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer;

    /// One event: its message and its other fields, as text.
    #[derive(Debug, Clone, Default)]
    pub struct Line {
        pub level: String,
        pub message: String,
        pub fields: Vec<(String, String)>,
    }

    impl Line {
        pub fn field(&self, name: &str) -> Option<&str> {
            self.fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());
    static INSTALLED: OnceLock<()> = OnceLock::new();
    /// Keep only warnings and errors (long runs must not grow the record).
    static WARN_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    struct Recorder;

    impl Visit for Line {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let text = format!("{value:?}");
            if field.name() == "message" {
                self.message = text;
            } else {
                self.fields.push((field.name().to_owned(), text));
            }
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "message" {
                self.message = value.to_owned();
            } else {
                self.fields
                    .push((field.name().to_owned(), value.to_owned()));
            }
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Recorder {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let floor = if WARN_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
                tracing::Level::WARN
            } else {
                tracing::Level::INFO
            };
            if *event.metadata().level() > floor {
                return;
            }
            let mut line = Line {
                level: event.metadata().level().to_string(),
                ..Line::default()
            };
            event.record(&mut line);
            LINES.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    }

    /// Installs the recorder as this test binary's subscriber (once).
    pub fn install() {
        INSTALLED.get_or_init(|| {
            // RUST_LOG, when set, also prints to stderr (diagnosis only;
            // the recorder decides what the tests assert).
            let print = std::env::var("RUST_LOG").ok().map(|filter| {
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .with_filter(tracing_subscriber::EnvFilter::new(filter))
            });
            let subscriber = tracing_subscriber::registry().with(Recorder).with(print);
            let _ = tracing::subscriber::set_global_default(subscriber);
        });
    }

    /// Installs the recorder keeping only warnings and errors.
    pub fn install_warnings_only() {
        WARN_ONLY.store(true, std::sync::atomic::Ordering::Relaxed);
        install();
    }

    /// Every recorded warning or error.
    pub fn warnings() -> Vec<Line> {
        LINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|l| l.level == "WARN" || l.level == "ERROR")
            .cloned()
            .collect()
    }

    /// Every recorded event whose message is `message`.
    pub fn lines(message: &str) -> Vec<Line> {
        LINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|l| l.message == message)
            .cloned()
            .collect()
    }

    /// Every recorded event whose message contains `part`.
    pub fn containing(part: &str) -> Vec<Line> {
        LINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|l| l.message.contains(part))
            .cloned()
            .collect()
    }
}

/// What an [`Observer`] has been told so far.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    pub view: SceneView,
    /// EntityActions the node sent this client.
    pub actions: Vec<lessgate::tundra::messages::EntityAction>,
    /// CreateEntityReplies to this client's own creations.
    pub replies: Vec<lessgate::tundra::messages::CreateEntityReply>,
    /// Users the node said left (ClientLeft).
    pub left: Vec<u32>,
    /// RigidBodyUpdate (119) messages received.
    pub rigid_body_updates: u64,
    /// Every DynamicComponent (type 25) the node sent, in CreateEntity or
    /// CreateComponents, with its entity: what a native client echoes.
    pub dynamic_components: Vec<(EntityId, ComponentData)>,
    pub messages: u64,
    /// Whether the connection ended (the node closed it or it broke).
    pub closed: bool,
    /// Why it ended, when it did.
    pub end: Option<String>,
}

/// The Tundra protocol version an observer asks for: 3 over WebSocket (no
/// RigidBodyUpdate), 4 natively, as a real native client asks (docs/knet-wire.md
/// §5.3); native clients get 119 either way.
fn requested_protocol(url: &str) -> u32 {
    if lessgate::transport::knet::parse_knet_url(url).is_some() {
        4
    } else {
        3
    }
}

/// The login data for `url`'s transport: JSON over WebSocket, the native
/// XML over kNet (username, password, protocol, then `extra`).
pub fn login_data(url: &str, username: &str, extra: &[(&str, &str)]) -> String {
    match lessgate::transport::knet::parse_knet_url(url) {
        Some((transport, _)) => {
            let protocol = transport.to_string();
            let mut properties = vec![
                ("username", username),
                ("password", ""),
                ("protocol", protocol.as_str()),
            ];
            properties.extend_from_slice(extra);
            lessgate::tundra::login_xml::login_xml(&properties)
        }
        None => {
            let mut map = serde_json::Map::new();
            map.insert("username".into(), username.into());
            for (key, value) in extra {
                map.insert((*key).into(), (*value).into());
            }
            serde_json::Value::Object(map).to_string()
        }
    }
}

/// A logged-in Tundra client over any transport `Link` dials (`ws://`,
/// `knet+udp://`, `knet+tcp://`) that reads in its own task, keeping the
/// scene it is told. It sends only what the test asks it to and never
/// closes its side while it lives.
pub struct Observer {
    state: Arc<Mutex<Observed>>,
    pub user: u32,
    /// The data of its successful LoginReply (the node's asset storages,
    /// JSON over WebSocket, XML over kNet).
    pub reply_data: String,
    /// The negotiated protocol, for encoding what it sends.
    pub protocol: lessgate::tundra::ProtocolVersion,
    /// Locked per send, so a test can send through a shared reference.
    sink: tokio::sync::Mutex<lessgate::loadgen::link::LinkSink>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Connects to `url` and logs in as `username`; panics if refused.
    pub async fn join(url: &str, username: &str) -> Observer {
        match Observer::join_with(url, username, &[]).await {
            Ok(observer) => observer,
            Err(reason) => panic!("login to {url} refused: {reason}"),
        }
    }

    /// Connects to `url` and logs in with `extra` login properties; the
    /// LoginReply's data when the node refuses the login.
    pub async fn join_with(
        url: &str,
        username: &str,
        extra: &[(&str, &str)],
    ) -> Result<Observer, String> {
        use lessgate::loadgen::link::Link;
        use lessgate::tundra::{DecodeContext, ProtocolVersion};

        let mut link = Link::connect(url)
            .await
            .unwrap_or_else(|error| panic!("{url}: cannot connect: {error}"));
        let login = Message::Login(lessgate::tundra::messages::Login {
            login_data: login_data(url, username, extra),
            protocol_version: Some(requested_protocol(url)),
        });
        link.feed(login.encode_frame(ProtocolVersion(1)).unwrap())
            .await
            .unwrap();
        link.flush().await.unwrap();
        let (sink, mut stream) = link.split();
        let state = Arc::new(Mutex::new(Observed::default()));
        let (reply_tx, reply_rx) = oneshot::channel();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut registry = Registry::builtin();
            let mut protocol = ProtocolVersion(1);
            let mut reply_tx = Some(reply_tx);
            let mut end = "connection ended".to_owned();
            while let Some(next) = stream.next_frame().await {
                let frame = match next {
                    Ok(frame) => frame,
                    Err(error) => {
                        end = format!("connection error: {error}");
                        break;
                    }
                };
                let context = DecodeContext {
                    protocol_version: protocol,
                    registry: &registry,
                };
                let message = match Message::decode_frame(&frame, &context) {
                    Ok(message) => message,
                    Err(error) => {
                        end = format!("undecodable frame: {error}");
                        break;
                    }
                };
                match &message {
                    Message::RegisterComponentType(m) => {
                        m.register(&mut registry);
                    }
                    Message::LoginReply(reply) => {
                        protocol = ProtocolVersion(reply.protocol_version.unwrap_or(1));
                        if let Some(tx) = reply_tx.take() {
                            let _ = tx.send(reply.clone());
                        }
                    }
                    _ => {}
                }
                let mut state = shared.lock().unwrap();
                state.messages += 1;
                match &message {
                    Message::EntityAction(action) => state.actions.push(action.clone()),
                    Message::CreateEntityReply(reply) => state.replies.push(reply.clone()),
                    Message::ClientLeft(left) => state.left.push(left.user_id.0),
                    Message::RigidBodyUpdate(_) => state.rigid_body_updates += 1,
                    Message::CreateEntity(create) => state.dynamic_components.extend(
                        create
                            .components
                            .iter()
                            .filter(|c| c.type_id == 25)
                            .map(|c| (create.entity_id, c.clone())),
                    ),
                    Message::CreateComponents(create) => state.dynamic_components.extend(
                        create
                            .components
                            .iter()
                            .filter(|c| c.type_id == 25)
                            .map(|c| (create.entity_id, c.clone())),
                    ),
                    _ => {}
                }
                state.view.apply(&message);
            }
            let mut state = shared.lock().unwrap();
            state.closed = true;
            state.end = Some(end);
        });
        let reply = tokio::time::timeout(Duration::from_secs(10), reply_rx)
            .await
            .expect("login reply in time")
            .expect("a login reply before the connection ended");
        if !reply.success {
            task.abort();
            return Err(reply.reply_data);
        }
        Ok(Observer {
            state,
            user: reply.user_id.0,
            reply_data: reply.reply_data,
            protocol: ProtocolVersion(reply.protocol_version.unwrap_or(1)),
            sink: tokio::sync::Mutex::new(sink),
            task,
        })
    }

    pub fn snapshot(&self) -> Observed {
        self.state.lock().unwrap().clone()
    }

    pub fn closed(&self) -> bool {
        self.state.lock().unwrap().closed
    }

    /// Sends one message in the negotiated protocol.
    /// Edits and removals apply to the client's own view too, as a real
    /// client changes its scene when it sends them (the node does not echo
    /// a client's own changes back to it).
    pub async fn send(&self, message: &Message) {
        if matches!(
            message,
            Message::EditAttributes(_) | Message::RemoveEntity(_)
        ) {
            self.state.lock().unwrap().view.apply(message);
        }
        let frame = message.encode_frame(self.protocol).expect("encodes");
        let mut sink = self.sink.lock().await;
        sink.feed(frame).await.expect("sends");
        sink.flush().await.expect("flushes");
    }

    /// Creates an entity as a client does (unacked id `0x40000000 |
    /// unacked`) and waits for the CreateEntityReply: the entity's id and
    /// the id of the component sent as `0x40000001` (a [`crate::common::tundra_values::named_box`]'s
    /// Placeable).
    pub async fn create(
        &self,
        unacked: u32,
        components: Vec<ComponentData>,
    ) -> (EntityId, Option<ComponentId>) {
        let mut create = lessgate::tundra::messages::CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0000 | unacked),
            temporary: false,
            parent: None,
            components,
        };
        self.send(&Message::CreateEntity(create.clone())).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let state = self.snapshot();
            if let Some(reply) = state
                .replies
                .iter()
                .find(|r| r.sender_entity_id.wire() == unacked)
            {
                let first = reply.components.iter().find(|p| p.sender.wire() == 1);
                // The client now has the entity under the node's ids, as a
                // real client does: later changes to it apply to the view.
                create.entity_id = reply.entity_id;
                for component in &mut create.components {
                    if let Some(pair) = reply
                        .components
                        .iter()
                        .find(|p| p.sender.wire() == component.id.wire())
                    {
                        component.id = pair.id;
                    }
                }
                let mut state = self.state.lock().unwrap();
                if !state.view.entities.contains_key(&reply.entity_id) {
                    state.view.apply(&Message::CreateEntity(create));
                }
                return (reply.entity_id, first.map(|p| p.id));
            }
            assert!(
                !state.closed && tokio::time::Instant::now() < deadline,
                "no CreateEntityReply for {unacked}: {:?}",
                state.end
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Closes the connection (WebSocket close, kNet Disconnect or FIN).
    pub async fn close(&self) {
        self.sink.lock().await.close().await;
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until `check` holds on every observer's snapshot; panics after
/// `limit` with what each saw. Returns the snapshots it held on.
pub async fn wait_observers(
    observers: &[&Observer],
    limit: Duration,
    what: &str,
    check: impl Fn(&[Observed]) -> bool,
) -> Vec<Observed> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let seen: Vec<Observed> = observers.iter().map(|o| o.snapshot()).collect();
        if check(&seen) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not reached in {limit:?}: {:#?}",
            seen.iter().map(|o| o.view.by_name()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
