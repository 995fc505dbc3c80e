//! Shared set-up for the peer-link tests: in-process nodes on 127.0.0.1
//! with ephemeral ports, generated identities, and [`Sessions`]: the
//! application side of a node, which owns a LESS session per link as the
//! node core does (the transport only moves frames).

#![allow(dead_code)]

#[path = "../common/patience.rs"]
mod patience;

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lessgate::clock::Time;
use lessgate::config::PeerLinkMode;
use lessgate::less::ids::{Local, PropertyKey, Remote, TypeId};
use lessgate::less::property_list::PropertyValue;
use lessgate::less::schema::{ConnectionSchema, SchemaRegistry};
use lessgate::less::schema_toml::types_from_toml;
use lessgate::less::session::{Event, Session};
use lessgate::less::value::Value;
use lessgate::peering::fingerprint::Fingerprint;
use lessgate::peering::hello::NodeId;
use lessgate::peering::peer_file::{PeerConfig, PeerName, PeerSet, TypeFilter};
use lessgate::transport::identity::{self, NodeIdentity};
use lessgate::transport::peer::{
    Frame, LinkClosed, LinkId, PeerEvent, PeerLink, PeerNode, PeerNodeConfig,
};
use tokio::sync::{mpsc, Notify};

pub use patience::PATIENCE;

pub const CRATE: &str = "urn:lessgate:test:crate";

pub fn name_key() -> PropertyKey {
    PropertyKey::new(2, 1)
}
pub fn counter_key() -> PropertyKey {
    PropertyKey::new(2, 2)
}
pub fn blob_key() -> PropertyKey {
    PropertyKey::new(2, 3)
}

pub fn schemas() -> Arc<SchemaRegistry> {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/less/test-types.toml"),
    )
    .unwrap();
    Arc::new(types_from_toml(&text).unwrap())
}

/// Installs a log subscriber once so failures show the link's story.
pub fn logs() {
    lessgate::logging::init(lessgate::config::LogFormat::Human, "warn").expect("RUST_LOG parses");
}

/// One node's fixed parts: identity, UUID and pre-bound sockets.
pub struct Seat {
    pub name: &'static str,
    pub node: NodeId,
    pub identity: NodeIdentity,
    pub control: UdpSocket,
    pub data: Option<UdpSocket>,
}

impl Seat {
    pub fn new(name: &'static str, uuid: u128, mode: PeerLinkMode) -> Seat {
        let identity = identity::generate(name).unwrap().to_node_identity();
        Seat::with_identity(name, uuid, identity, mode, "127.0.0.1:0", "127.0.0.1:0")
    }

    pub fn with_identity(
        name: &'static str,
        uuid: u128,
        identity: NodeIdentity,
        mode: PeerLinkMode,
        control: &str,
        data: &str,
    ) -> Seat {
        let control = UdpSocket::bind(control).unwrap();
        let data = match mode {
            PeerLinkMode::Udp => Some(UdpSocket::bind(data).unwrap()),
            PeerLinkMode::Stream => None,
        };
        Seat {
            name,
            node: NodeId(uuid::Uuid::from_u128(uuid)),
            identity,
            control,
            data,
        }
    }

    /// Binds again the addresses of a node that was shut down. quinn frees
    /// the QUIC socket from its own task just after shutdown, so the bind is
    /// retried until it succeeds (bounded by PATIENCE).
    pub async fn rebind(
        name: &'static str,
        uuid: u128,
        identity: NodeIdentity,
        control: SocketAddr,
        data: SocketAddr,
    ) -> Seat {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let retry = |address: SocketAddr| async move {
            loop {
                match UdpSocket::bind(address) {
                    Ok(socket) => return socket,
                    Err(error) if tokio::time::Instant::now() < deadline => {
                        let _ = error;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(error) => panic!("cannot bind {address} again: {error}"),
                }
            }
        };
        Seat {
            name,
            node: NodeId(uuid::Uuid::from_u128(uuid)),
            identity,
            control: retry(control).await,
            data: Some(retry(data).await),
        }
    }

    pub fn control_address(&self) -> SocketAddr {
        self.control.local_addr().unwrap()
    }

    pub fn data_address(&self) -> Option<SocketAddr> {
        self.data
            .as_ref()
            .map(|socket| socket.local_addr().unwrap())
    }

    /// A peer file entry for this node, as another node would write it.
    pub fn as_peer(&self, dial: bool) -> PeerConfig {
        peer_entry(
            self.name,
            dial.then(|| self.control_address()),
            self.identity.fingerprint,
        )
    }
}

pub fn peer_entry(name: &str, control: Option<SocketAddr>, fingerprint: Fingerprint) -> PeerConfig {
    PeerConfig {
        source: PathBuf::from(format!("peers/{name}.toml")),
        name: PeerName::new(name).unwrap(),
        control: control.map(Into::into),
        fingerprint,
        uuid: None,
        export: TypeFilter::All,
        accept: TypeFilter::All,
    }
}

pub fn config(seat: &Seat, peers: Vec<PeerConfig>, mode: PeerLinkMode) -> PeerNodeConfig {
    let mut set = PeerSet::default();
    for peer in peers {
        set.insert(peer).unwrap();
    }
    PeerNodeConfig {
        node: seat.node,
        name: seat.name.to_owned(),
        identity: seat.identity.clone(),
        peers: set,
        control_listen: seat.control_address(),
        data_listen: seat.data_address().unwrap_or(seat.control_address()),
        data_advertise: None,
        mode,
        mtu: 1200,
        tick_hz: 20,
        timestamp_quantum: Duration::from_millis(1),
        reconnect_min: Duration::from_millis(50),
        reconnect_max: Duration::from_millis(400),
        liveness_timeout: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(5),
        stats_interval: Some(Duration::from_secs(1)),
        schemas: schemas(),
        connection_schema: Arc::new(ConnectionSchema::builtin()),
        features: Vec::new(),
        seed: seat.node.0.as_u128() as u64,
    }
}

pub async fn start(seat: Seat, config: PeerNodeConfig) -> (PeerNode, Sessions) {
    let (node, events) = PeerNode::start_on(config, seat.control, seat.data)
        .await
        .unwrap();
    (node, Sessions::new(events))
}

/// What the application side of a node sees: the transport's events (never
/// `Frame`: frames go to the sessions) and its sessions' events.
#[derive(Debug)]
pub enum AppEvent {
    Peer(PeerEvent),
    Session {
        link: LinkId,
        peer: PeerName,
        event: Event,
    },
}

/// One node's application side: a `Session` per link, built from the link's
/// settings when it comes up and run on this side's clock, as the node core
/// does. A task feeds received frames to the link's session, runs its
/// timers and hands what it queues to the link; the test reads the events
/// and runs session commands with [`Sessions::with_session`].
pub struct Sessions {
    state: Arc<Mutex<SessionsState>>,
    wake: Arc<Notify>,
    events: mpsc::UnboundedReceiver<AppEvent>,
    task: tokio::task::JoinHandle<()>,
}

struct SessionsState {
    links: BTreeMap<LinkId, (PeerLink, Session)>,
    origin: tokio::time::Instant,
}

impl Drop for Sessions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sessions {
    pub fn new(mut peer_events: mpsc::Receiver<PeerEvent>) -> Sessions {
        let state = Arc::new(Mutex::new(SessionsState {
            links: BTreeMap::new(),
            origin: tokio::time::Instant::now(),
        }));
        let wake = Arc::new(Notify::new());
        let (sender, events) = mpsc::unbounded_channel();
        let task = tokio::spawn({
            let (state, wake) = (state.clone(), wake.clone());
            async move {
                loop {
                    let deadline = {
                        let mut state = lock(&state);
                        state.flush();
                        state.next_deadline()
                    };
                    let ready = tokio::select! {
                        event = peer_events.recv() => match event {
                            Some(event) => lock(&state).handle(event),
                            None => return,
                        },
                        _ = async { tokio::time::sleep_until(deadline?).await; Some(()) }, if deadline.is_some() => {
                            lock(&state).handle_timeouts()
                        }
                        () = wake.notified() => Vec::new(),
                    };
                    for event in ready {
                        if sender.send(event).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Sessions {
            state,
            wake,
            events,
            task,
        }
    }

    /// Runs session commands on a link's session and sends what they
    /// queued; fails on a link that has ended.
    pub fn with_session<R>(
        &mut self,
        link: &PeerLink,
        commands: impl FnOnce(&mut Session) -> R,
    ) -> Result<R, LinkClosed> {
        if link.is_closed() {
            return Err(LinkClosed);
        }
        let result = {
            let mut state = lock(&self.state);
            let (_, session) = state.links.get_mut(&link.id()).ok_or(LinkClosed)?;
            let result = commands(session);
            state.flush();
            result
        };
        // The session's next deadline may be earlier now.
        self.wake.notify_one();
        Ok(result)
    }

    /// The next event.
    pub async fn next(&mut self) -> Option<AppEvent> {
        self.events.recv().await
    }
}

/// The sessions' state is a map and sessions that never panic on remote
/// input: a poisoned lock is taken back.
fn lock(state: &Mutex<SessionsState>) -> MutexGuard<'_, SessionsState> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SessionsState {
    fn now(&self) -> Time {
        Time::from_micros(self.origin.elapsed().as_micros() as u64)
    }

    /// The sessions' earliest timer, at least a millisecond away: a timer
    /// still due after it ran (a paced session waiting for its window) must
    /// not spin the task.
    fn next_deadline(&self) -> Option<tokio::time::Instant> {
        let soonest = self.now() + Duration::from_millis(1);
        self.links
            .values()
            .filter_map(|(_, session)| session.poll_timeout())
            .min()
            .map(|at| self.origin + Duration::from_micros(at.max(soonest).as_micros()))
    }

    fn handle(&mut self, event: PeerEvent) -> Vec<AppEvent> {
        let now = self.now();
        let mut ready = Vec::new();
        match event {
            PeerEvent::LinkUp(link) => {
                let settings = link.take_link_settings().expect("a fresh link's settings");
                let session =
                    Session::new(settings.session, now).expect("negotiated settings are valid");
                self.links.insert(link.id(), (link.clone(), session));
                ready.push(AppEvent::Peer(PeerEvent::LinkUp(link)));
            }
            PeerEvent::Frame { link, frame, .. } => {
                if let Some((link, session)) = self.links.get_mut(&link) {
                    match frame {
                        Frame::Datagram(bytes) => session.handle_datagram(now, &bytes),
                        Frame::Stream(bytes) => session.handle_stream_frame(now, &bytes),
                    }
                    take_events(link, session, &mut ready);
                }
            }
            PeerEvent::LinkDown { link, .. } => {
                self.links.remove(&link);
                ready.push(AppEvent::Peer(event));
            }
            other => ready.push(AppEvent::Peer(other)),
        }
        ready
    }

    fn handle_timeouts(&mut self) -> Vec<AppEvent> {
        let now = self.now();
        let mut ready = Vec::new();
        for (link, session) in self.links.values_mut() {
            if session.poll_timeout().is_some_and(|at| at <= now) {
                session.handle_timeout(now);
            }
            take_events(link, session, &mut ready);
        }
        ready
    }

    /// Hands every session's due packets to its link.
    fn flush(&mut self) {
        let now = self.now();
        for (link, session) in self.links.values_mut() {
            while let Some(transmit) = session.poll_transmit(now) {
                if link.transmit(transmit).is_err() {
                    break;
                }
            }
            link.report_stats(session.stats());
        }
    }
}

/// Moves a session's events out; a session that closed ends its link, as
/// the node's driver does.
fn take_events(link: &PeerLink, session: &mut Session, ready: &mut Vec<AppEvent>) {
    while let Some(event) = session.poll_event() {
        if let Event::Closed { reason } = &event {
            link.close_for_session(reason);
        }
        ready.push(AppEvent::Session {
            link: link.id(),
            peer: link.peer().clone(),
            event,
        });
    }
}

/// Waits for the first transport event `pick` accepts, skipping others.
pub async fn wait_for<T>(
    events: &mut Sessions,
    what: &str,
    mut pick: impl FnMut(PeerEvent) -> Option<T>,
) -> T {
    wait_for_any(events, what, |event| match event {
        AppEvent::Peer(event) => pick(event),
        AppEvent::Session { .. } => None,
    })
    .await
}

/// Waits for the first event `pick` accepts, skipping others.
pub async fn wait_for_any<T>(
    events: &mut Sessions,
    what: &str,
    mut pick: impl FnMut(AppEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let event = tokio::time::timeout_at(deadline, events.next())
            .await
            .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}"))
            .unwrap_or_else(|| panic!("event channel closed before {what}"));
        if let Some(found) = pick(event) {
            return found;
        }
    }
}

/// Waits for a link with `peer` to come up.
pub async fn link_up(events: &mut Sessions, peer: &str) -> PeerLink {
    wait_for(
        events,
        &format!("link up with {peer}"),
        |event| match event {
            PeerEvent::LinkUp(link) if link.peer().as_str() == peer => Some(link),
            _ => None,
        },
    )
    .await
}

/// Waits for a LESS event from `peer`.
pub async fn session_event<T>(
    events: &mut Sessions,
    peer: &str,
    what: &str,
    mut pick: impl FnMut(Event) -> Option<T>,
) -> T {
    wait_for_any(events, what, |event| match event {
        AppEvent::Session {
            peer: from, event, ..
        } if from.as_str() == peer => pick(event),
        _ => None,
    })
    .await
}

/// The origin side introduces the crate type and one entity named `name`.
pub fn offer_crate(events: &mut Sessions, link: &PeerLink, name: &str) -> TypeId<Local> {
    let name = name.to_owned();
    events
        .with_session(link, move |session| {
            let type_id = session.introduce_type(CRATE).unwrap();
            let entity = session.allocate_object_id();
            session
                .introduce_entity(
                    entity,
                    type_id,
                    vec![PropertyValue {
                        key: name_key(),
                        value: Value::String(name),
                    }],
                )
                .unwrap();
            type_id
        })
        .unwrap()
}

/// The receiving side subscribes to the crate type when it is introduced.
pub async fn accept_crate(events: &mut Sessions, link: &PeerLink, from: &str) -> TypeId<Remote> {
    let type_id = session_event(events, from, "type introduced", |event| match event {
        Event::TypeIntroduced { type_id, uri, .. } if uri == CRATE => Some(type_id),
        _ => None,
    })
    .await;
    events
        .with_session(link, |session| {
            session
                .subscribe_type(type_id, &[name_key(), counter_key(), blob_key()])
                .unwrap()
        })
        .unwrap();
    type_id
}

/// Waits for an entity introduced by `from` and returns its name value.
pub async fn introduced_name(events: &mut Sessions, from: &str) -> String {
    session_event(events, from, "entity introduced", |event| match event {
        Event::EntityIntroduced { values, .. } => values.into_iter().find_map(|v| match v {
            PropertyValue {
                value: Value::String(name),
                ..
            } => Some(name),
            _ => None,
        }),
        _ => None,
    })
    .await
}
