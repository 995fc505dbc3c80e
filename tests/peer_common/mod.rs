//! Shared set-up for the peer-link tests: in-process nodes on 127.0.0.1
//! with ephemeral ports, generated identities, and event helpers.

#![allow(dead_code)]

#[path = "../common/patience.rs"]
mod patience;

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lessgate::config::PeerLinkMode;
use lessgate::less::ids::{Local, PropertyKey, Remote, TypeId};
use lessgate::less::property_list::PropertyValue;
use lessgate::less::schema::{ConnectionSchema, SchemaRegistry};
use lessgate::less::schema_toml::types_from_toml;
use lessgate::less::session::Event;
use lessgate::less::value::Value;
use lessgate::peering::fingerprint::Fingerprint;
use lessgate::peering::hello::NodeId;
use lessgate::peering::peer_file::{PeerConfig, PeerName, PeerSet, TypeFilter};
use lessgate::transport::identity::{self, NodeIdentity};
use lessgate::transport::peer::{PeerEvent, PeerLink, PeerNode, PeerNodeConfig, SessionOwnership};
use tokio::sync::mpsc;

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
        control,
        fingerprint,
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
        sessions: SessionOwnership::Driver,
    }
}

pub async fn start(seat: Seat, config: PeerNodeConfig) -> (PeerNode, mpsc::Receiver<PeerEvent>) {
    PeerNode::start_on(config, seat.control, seat.data)
        .await
        .unwrap()
}

/// Waits for the first event `pick` accepts, skipping others.
pub async fn wait_for<T>(
    events: &mut mpsc::Receiver<PeerEvent>,
    what: &str,
    mut pick: impl FnMut(PeerEvent) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}"))
            .unwrap_or_else(|| panic!("event channel closed before {what}"));
        if let Some(found) = pick(event) {
            return found;
        }
    }
}

/// Waits for a link with `peer` to come up.
pub async fn link_up(events: &mut mpsc::Receiver<PeerEvent>, peer: &str) -> PeerLink {
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
    events: &mut mpsc::Receiver<PeerEvent>,
    peer: &str,
    what: &str,
    mut pick: impl FnMut(Event) -> Option<T>,
) -> T {
    wait_for(events, what, |event| match event {
        PeerEvent::Session {
            peer: from, event, ..
        } if from.as_str() == peer => pick(event),
        _ => None,
    })
    .await
}

/// The origin side introduces the crate type and one entity named `name`.
pub fn offer_crate(link: &PeerLink, name: &str) -> TypeId<Local> {
    let name = name.to_owned();
    link.with_session(move |session| {
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
pub async fn accept_crate(
    events: &mut mpsc::Receiver<PeerEvent>,
    link: &PeerLink,
    from: &str,
) -> TypeId<Remote> {
    let type_id = session_event(events, from, "type introduced", |event| match event {
        Event::TypeIntroduced { type_id, uri, .. } if uri == CRATE => Some(type_id),
        _ => None,
    })
    .await;
    link.with_session(|session| {
        session
            .subscribe_type(type_id, &[name_key(), counter_key(), blob_key()])
            .unwrap()
    })
    .unwrap();
    type_id
}

/// Waits for an entity introduced by `from` and returns its name value.
pub async fn introduced_name(events: &mut mpsc::Receiver<PeerEvent>, from: &str) -> String {
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
