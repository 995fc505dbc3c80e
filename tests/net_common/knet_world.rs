//! A native Tundra world server scripted the way the real one behaves
//! toward a client that logs in over kNet (docs/knet-wire.md §5,
//! docs/tundra-wire.md §7): it answers Login with XML, acknowledges the
//! client's creations (117, 118), applies its edits without echoing them,
//! forwards what its own clients do (EditAttributes, CreateEntity), and with
//! physics on answers every transform the client sets with the correction
//! its physics writes back, sent to every native client as a quantized
//! RigidBodyUpdate (119). One client connection at a time, over UDP or TCP,
//! with the library's sans-IO kNet connections keeping acks and pings.
//!
//! Everything the client sent is recorded with its arrival time, and every
//! connection attempt too, so a test can read what the bridge told the
//! world and when it dialled. [`KnetWorld::kill`] ends the server as a
//! killed process does: sockets closed, nothing sent.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lessgate::clock::Time;
use lessgate::knet::tcp::{TcpConfig, TcpConnection, TcpEvent};
use lessgate::knet::udp::{tundra_frame, Role, UdpConfig, UdpConnection, UdpEvent};
use lessgate::tundra::messages::{
    CreateComponentsReply, CreateEntity, CreateEntityReply, EditAttributes, EditAttributesBlock,
    IdPair, LoginReply,
};
use lessgate::tundra::rigid_body::RigidBodyUpdate;
use lessgate::tundra::rigid_body_sender::{encode_body, BodyState, SendDecision};
use lessgate::tundra::values::Transform;
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentBody, ComponentData, ComponentId, DecodeContext,
    EntityId, Message, ProtocolVersion, Registry, UserId,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Built-in type ids the world reads: Placeable, RigidBody.
const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;

/// What a real server's LoginReply carries for a native client.
const REPLY_XML: &str =
    "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Scene\" />\n</asset>\n";

/// The native transport the world listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

impl Transport {
    pub fn scheme(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// One entity of the world's scene: its components by id.
#[derive(Debug, Clone, Default)]
pub struct WorldEntity {
    pub components: BTreeMap<ComponentId, ComponentData>,
}

impl WorldEntity {
    /// The first component of `type_id` (Tundra's `GetComponent<T>()`).
    pub fn component_of_type(&self, type_id: u32) -> Option<&ComponentData> {
        self.components.values().find(|c| c.type_id == type_id)
    }

    /// Static attribute `index` of the first component of `type_id`.
    pub fn value(&self, type_id: u32, index: usize) -> Option<&AttributeValue> {
        match &self.component_of_type(type_id)?.body {
            ComponentBody::Attributes(block) => block.values.get(index),
            ComponentBody::Opaque(_) => None,
        }
    }

    pub fn transform(&self) -> Option<Transform> {
        match self.value(PLACEABLE, 0)? {
            AttributeValue::Transform(t) => Some(*t),
            _ => None,
        }
    }

    /// The Name text (attribute 0 of type 26).
    pub fn name(&self) -> Option<&str> {
        match self.value(26, 0)? {
            AttributeValue::String(s) => Some(s),
            _ => None,
        }
    }
}

/// What the world knows and saw.
#[derive(Debug, Default)]
pub struct WorldState {
    pub entities: BTreeMap<EntityId, WorldEntity>,
    /// Every message the client sent, with when it arrived.
    pub received: Vec<(Instant, Message)>,
    /// When each connection attempt arrived (UDP connect datagram, TCP
    /// accept).
    pub dials: Vec<Instant>,
    /// When each Login arrived.
    pub logins: Vec<Instant>,
    /// Physics corrections sent (119 records).
    pub corrections: u64,
    next_entity: u32,
}

/// What the test asks the world to do.
enum Command {
    /// A frame for the connected client.
    Send(Vec<u8>),
}

/// The scripted world server.
pub struct KnetWorld {
    pub address: SocketAddr,
    pub transport: Transport,
    pub state: Arc<Mutex<WorldState>>,
    commands: mpsc::UnboundedSender<Command>,
    task: tokio::task::JoinHandle<()>,
}

/// The world's reaction to one message from its client.
struct Script {
    state: Arc<Mutex<WorldState>>,
    registry: Registry,
    protocol: ProtocolVersion,
    physics: bool,
}

impl Script {
    fn context(&self) -> DecodeContext<'_> {
        DecodeContext {
            protocol_version: self.protocol,
            registry: &self.registry,
        }
    }

    /// The frames the world sends back for `frame`.
    fn handle(&mut self, frame: &[u8]) -> Vec<Vec<u8>> {
        let Ok(message) = Message::decode_frame(frame, &self.context()) else {
            return Vec::new();
        };
        let mut state = self.state.lock().unwrap();
        state.received.push((Instant::now(), message.clone()));
        let mut out = Vec::new();
        match message {
            Message::Login(login) => {
                state.logins.push(Instant::now());
                let version = login.protocol_version.unwrap_or(1).min(4);
                self.protocol = ProtocolVersion(version);
                out.push(Message::LoginReply(LoginReply {
                    success: true,
                    user_id: UserId(7),
                    reply_data: REPLY_XML.into(),
                    protocol_version: Some(version),
                }));
                // The world's own entities, as after login (section 7.2).
                for (id, entity) in &state.entities {
                    out.push(create_message(*id, entity));
                }
            }
            Message::CreateEntity(create) => {
                state.next_entity += 1;
                let id = EntityId(100 + state.next_entity);
                let mut entity = WorldEntity::default();
                let mut pairs = Vec::new();
                for (n, mut data) in create.components.into_iter().enumerate() {
                    let assigned = ComponentId(n as u32 + 1);
                    pairs.push(IdPair {
                        sender: data.id,
                        id: assigned,
                    });
                    data.id = assigned;
                    entity.components.insert(assigned, data);
                }
                state.entities.insert(id, entity);
                out.push(Message::CreateEntityReply(CreateEntityReply {
                    scene_id: 0,
                    sender_entity_id: create.entity_id,
                    entity_id: id,
                    components: pairs,
                }));
            }
            Message::CreateComponents(create) => {
                if let Some(entity) = state.entities.get_mut(&create.entity_id) {
                    let mut pairs = Vec::new();
                    for mut data in create.components {
                        let assigned = ComponentId(entity.components.len() as u32 + 1);
                        pairs.push(IdPair {
                            sender: data.id,
                            id: assigned,
                        });
                        data.id = assigned;
                        entity.components.insert(assigned, data);
                    }
                    out.push(Message::CreateComponentsReply(CreateComponentsReply {
                        scene_id: 0,
                        entity_id: create.entity_id,
                        components: pairs,
                    }));
                }
            }
            Message::EditAttributes(edit) => {
                let moved = apply_edit(&mut state, &edit, &self.registry);
                // Physics writes the body's transform back: a change of the
                // server's own, sent to every native client as 119.
                if moved && self.physics {
                    if let Some(correction) = correction(&state, edit.entity_id) {
                        state.corrections += 1;
                        out.push(correction);
                    }
                }
            }
            Message::RemoveEntity(remove) => {
                state.entities.remove(&remove.entity_id);
            }
            _ => {}
        }
        drop(state);
        out.iter()
            .filter_map(|m| m.encode_frame(self.protocol).ok())
            .collect()
    }
}

/// Applies a client's edit to the world's scene; whether it set a transform.
fn apply_edit(state: &mut WorldState, edit: &EditAttributes, registry: &Registry) -> bool {
    let Some(entity) = state.entities.get_mut(&edit.entity_id) else {
        return false;
    };
    let mut moved = false;
    for block in &edit.blocks {
        let Some(component) = entity.components.get_mut(&block.component_id) else {
            continue;
        };
        let Some(schema) = registry.get(component.type_id) else {
            continue;
        };
        let Ok(decoded) = block.decode(&schema.slot_types()) else {
            continue;
        };
        let ComponentBody::Attributes(values) = &mut component.body else {
            continue;
        };
        for change in decoded.edits {
            let index = usize::from(change.index);
            if values.values.len() <= index {
                values.values.resize(index + 1, AttributeValue::Bool(false));
            }
            moved |= component.type_id == PLACEABLE && index == 0;
            values.values[index] = change.value;
        }
    }
    moved
}

/// The RigidBodyUpdate a real server sends its native clients for the
/// transform entity `id` holds (position and rotation, quantized by the
/// sender's own rules), when the entity has a RigidBody.
fn correction(state: &WorldState, id: EntityId) -> Option<Message> {
    let entity = state.entities.get(&id)?;
    entity.component_of_type(RIGID_BODY)?;
    let body = BodyState {
        transform: entity.transform()?,
        ..BodyState::default()
    };
    let decision = SendDecision {
        position: true,
        rotation: true,
        ..SendDecision::default()
    };
    let record = encode_body(id, &body, &decision)?;
    Some(Message::RigidBodyUpdate(RigidBodyUpdate {
        entities: vec![record],
    }))
}

fn create_message(id: EntityId, entity: &WorldEntity) -> Message {
    Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: id,
        temporary: false,
        parent: Some(EntityId(0)),
        components: entity.components.values().cloned().collect(),
    })
}

impl KnetWorld {
    /// Starts a world on 127.0.0.1 (a free port, or `at`). With `physics`,
    /// every transform the client sets on a body is answered with a 119.
    pub async fn start(transport: Transport, physics: bool, at: Option<SocketAddr>) -> KnetWorld {
        let bind = at.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap());
        let state = Arc::new(Mutex::new(WorldState::default()));
        let (commands, inbox) = mpsc::unbounded_channel();
        let script = Script {
            state: state.clone(),
            registry: Registry::builtin(),
            protocol: ProtocolVersion(1),
            physics,
        };
        let (address, task) = match transport {
            Transport::Udp => {
                let socket = UdpSocket::bind(bind).await.unwrap();
                let address = socket.local_addr().unwrap();
                (address, tokio::spawn(serve_udp(socket, script, inbox)))
            }
            Transport::Tcp => {
                let listener = TcpListener::bind(bind).await.unwrap();
                let address = listener.local_addr().unwrap();
                (address, tokio::spawn(serve_tcp(listener, script, inbox)))
            }
        };
        KnetWorld {
            address,
            transport,
            state,
            commands,
            task,
        }
    }

    /// The bridge's `[upstream] url` for this world.
    pub fn url(&self) -> String {
        format!("knet+{}://{}", self.transport.scheme(), self.address)
    }

    /// Ends the server as a killed process: sockets closed, nothing sent.
    pub fn kill(&self) {
        self.task.abort();
    }

    fn send(&self, message: &Message) {
        let protocol = ProtocolVersion(4);
        let frame = message.encode_frame(protocol).expect("encodes");
        let _ = self.commands.send(Command::Send(frame));
    }

    /// A world entity created by one of the world's clients: added to the
    /// scene and sent to the connected client; its id.
    pub fn create(&self, components: Vec<ComponentData>) -> EntityId {
        let (id, message) = {
            let mut state = self.state.lock().unwrap();
            state.next_entity += 1;
            let id = EntityId(100 + state.next_entity);
            let mut entity = WorldEntity::default();
            for (n, mut data) in components.into_iter().enumerate() {
                data.id = ComponentId(n as u32 + 1);
                entity.components.insert(data.id, data);
            }
            let message = create_message(id, &entity);
            state.entities.insert(id, entity);
            (id, message)
        };
        self.send(&message);
        id
    }

    /// One of the world's clients edits attribute `index` of the first
    /// component of `type_id` of `entity`: applied here, and forwarded to
    /// the connected client (the editor's own client is not it).
    pub fn client_edit(&self, entity: EntityId, type_id: u32, index: u8, value: AttributeValue) {
        let registry = Registry::builtin();
        let edit = {
            let state = self.state.lock().unwrap();
            let component = state.entities[&entity]
                .component_of_type(type_id)
                .expect("the entity has the component")
                .id;
            let slots = registry.get(type_id).unwrap().slot_types();
            EditAttributes {
                scene_id: 0,
                entity_id: entity,
                blocks: vec![EditAttributesBlock::encode(
                    component,
                    &[AttributeEdit { index, value }],
                    &slots,
                )
                .unwrap()],
            }
        };
        apply_edit(&mut self.state.lock().unwrap(), &edit, &registry);
        self.send(&Message::EditAttributes(edit));
    }

    /// The world's physics corrects `entity`: its transform goes to the
    /// client as a 119 record.
    pub fn correct(&self, entity: EntityId) {
        let message = {
            let mut state = self.state.lock().unwrap();
            state.corrections += 1;
            correction(&state, entity).expect("a body with a Placeable")
        };
        self.send(&message);
    }

    /// The id of the entity named `name`, if the world has it.
    pub fn named(&self, name: &str) -> Option<EntityId> {
        let state = self.state.lock().unwrap();
        state
            .entities
            .iter()
            .find(|(_, e)| e.name() == Some(name))
            .map(|(id, _)| *id)
    }

    pub fn entity(&self, id: EntityId) -> Option<WorldEntity> {
        self.state.lock().unwrap().entities.get(&id).cloned()
    }

    /// Every message the client sent, in arrival order.
    pub fn received(&self) -> Vec<Message> {
        let state = self.state.lock().unwrap();
        state.received.iter().map(|(_, m)| m.clone()).collect()
    }

    /// When each connection attempt arrived.
    pub fn dials(&self) -> Vec<Instant> {
        self.state.lock().unwrap().dials.clone()
    }

    pub fn logins(&self) -> usize {
        self.state.lock().unwrap().logins.len()
    }
}

impl Drop for KnetWorld {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn clock() -> impl Fn() -> Time {
    let origin = Instant::now();
    move || Time::from_micros(origin.elapsed().as_micros() as u64)
}

/// The world over kNet UDP: a datagram from a new address is a new
/// connection attempt (the client dialled again), whose bytes are not
/// parsed (docs/knet-wire.md §4.8); the server talks first.
async fn serve_udp(
    socket: UdpSocket,
    mut script: Script,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let now = clock();
    let mut peer: Option<(SocketAddr, UdpConnection)> = None;
    let (mut buffer, mut out) = (vec![0; 64 * 1024], Vec::new());
    loop {
        if let Some((address, connection)) = &mut peer {
            while let Some(event) = connection.poll_event() {
                if let UdpEvent::Message { id, payload, .. } = event {
                    if let Some(frame) = tundra_frame(id, &payload) {
                        for reply in script.handle(&frame) {
                            connection.send_tundra(&reply);
                        }
                    }
                }
            }
            while connection.poll_transmit(now(), &mut out) {
                let _ = socket.send_to(&out, *address).await;
            }
        }
        let wake = peer
            .as_ref()
            .and_then(|(_, c)| c.poll_timeout())
            .map_or(Duration::from_secs(1), |at| {
                at.saturating_duration_since(now())
            });
        tokio::select! {
            received = socket.recv_from(&mut buffer) => {
                let Ok((length, from)) = received else { continue };
                match &mut peer {
                    Some((address, connection)) if *address == from => {
                        connection.handle_datagram(now(), &buffer[..length]);
                    }
                    _ => {
                        script.state.lock().unwrap().dials.push(Instant::now());
                        let connection = UdpConnection::new(Role::Server, UdpConfig::default(), now());
                        peer = Some((from, connection));
                    }
                }
            }
            command = commands.recv() => match command {
                Some(Command::Send(frame)) => {
                    if let Some((_, connection)) = &mut peer {
                        connection.send_tundra(&frame);
                    }
                }
                None => return,
            },
            () = tokio::time::sleep(wake) => {
                if let Some((_, connection)) = &mut peer {
                    connection.handle_timeout(now());
                }
            }
        }
    }
}

/// One accepted TCP client: its write half, its kNet connection, and
/// what its reader task read (`None`: the stream ended).
struct TcpPeer {
    writer: tokio::net::tcp::OwnedWriteHalf,
    connection: TcpConnection,
    bytes: mpsc::UnboundedReceiver<Option<Vec<u8>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for TcpPeer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn tcp_peer(socket: TcpStream, now: Time) -> TcpPeer {
    let _ = socket.set_nodelay(true);
    let (mut read, writer) = socket.into_split();
    let (tx, bytes) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            match read.read(&mut buffer).await {
                Ok(0) | Err(_) => {
                    let _ = tx.send(None);
                    return;
                }
                Ok(n) => {
                    if tx.send(Some(buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    TcpPeer {
        writer,
        connection: TcpConnection::new(TcpConfig::default(), now),
        bytes,
        reader,
    }
}

/// The world over kNet TCP: one connection at a time, the newest wins.
async fn serve_tcp(
    listener: TcpListener,
    mut script: Script,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let now = clock();
    let mut peer: Option<TcpPeer> = None;
    loop {
        if let Some(p) = &mut peer {
            let mut replies = Vec::new();
            while let Some(event) = p.connection.poll_event() {
                if let TcpEvent::Message { id, payload } = event {
                    if let Some(frame) = tundra_frame(id, &payload) {
                        replies.extend(script.handle(&frame));
                    }
                }
            }
            for reply in replies {
                let _ = p.connection.send_tundra(&reply);
            }
            let mut failed = p.connection.is_closed();
            while let Some(bytes) = p.connection.poll_transmit() {
                failed |= p.writer.write_all(&bytes).await.is_err();
            }
            if failed {
                peer = None;
            }
        }
        let wake = peer
            .as_ref()
            .and_then(|p| p.connection.poll_timeout())
            .map_or(Duration::from_secs(1), |at| {
                at.saturating_duration_since(now())
            });
        let connected = peer.is_some();
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((socket, _)) = accepted {
                    script.state.lock().unwrap().dials.push(Instant::now());
                    peer = Some(tcp_peer(socket, now()));
                }
            }
            read = async { peer.as_mut().unwrap().bytes.recv().await }, if connected => match read {
                Some(Some(bytes)) => {
                    if let Some(p) = &mut peer {
                        p.connection.handle_bytes(now(), &bytes);
                    }
                }
                _ => peer = None,
            },
            command = commands.recv() => match command {
                Some(Command::Send(frame)) => {
                    if let Some(p) = &mut peer {
                        let _ = p.connection.send_tundra(&frame);
                    }
                }
                None => return,
            },
            () = tokio::time::sleep(wake) => {
                if let Some(p) = &mut peer {
                    p.connection.handle_timeout(now());
                }
            }
        }
    }
}
