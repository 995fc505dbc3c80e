//! An in-process federation under fake time: production node cores driven
//! through the same calls as the node's driver (`handle_*` in, `poll_*`
//! out), LESS links joined by a simulated network with latency, jitter,
//! loss, duplication and reordering from a seed, and Tundra clients that
//! keep their own copy of the scene from what they are sent. Time jumps to
//! the next deadline: the earliest of every node's `poll_timeout` and the
//! next datagram's arrival.
#![allow(dead_code)]

pub mod authority;
#[path = "../common/link_model.rs"]
mod link_model;
#[path = "../common/tundra_values.rs"]
pub mod tundra_values;
pub mod world;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use lessgate::clock::Time;
use lessgate::config::PeeringSection;
use lessgate::federation::{schemas::schema_registry, LinkId, LinkPolicy};
use lessgate::less::message::MethodStatus;
use lessgate::less::schema::ConnectionSchema;
use lessgate::less::session::Path;
use lessgate::less::value::Value;
use lessgate::node::{Event, LinkUp, Node, Transmit};
use lessgate::peering::keys::Role;
use lessgate::peering::link_settings::{link_settings, Agreement, LocalSettings};
use lessgate::peering::negotiate::LinkFraming;
use lessgate::scene::{ClientId, Scene};
use lessgate::server::{ServerConfig, TundraServer};
use lessgate::transport::client::ClientTransport;
use lessgate::tundra::messages::{
    CreateEntity, EditAttributes, EditAttributesBlock, EntityAction, Login, RemoveEntity,
};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentBody, ComponentData, ComponentId, DecodeContext,
    EntityId, Message, ProtocolVersion, Registry,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use uuid::Uuid;

pub use link_model::LinkModel;
use tundra_values::named_box_at;
pub use tundra_values::transform;

/// What one client has been told: entity → component → (type, values).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ClientView {
    pub entities: BTreeMap<EntityId, BTreeMap<ComponentId, (u32, Vec<AttributeValue>)>>,
}

pub struct SimClient {
    pub view: ClientView,
    pub registry: Registry,
    /// Entities this client created, by unacked id, until the reply names them.
    pending: HashMap<u32, Vec<ComponentData>>,
    /// EntityActions the node sent this client.
    pub actions: Vec<lessgate::tundra::messages::EntityAction>,
    /// CreateEntity and RemoveEntity messages the node sent this client.
    pub creates: usize,
    pub removes: usize,
}

struct Packet {
    to_node: usize,
    link: LinkId,
    path: Path,
    bytes: Vec<u8>,
}

pub struct Sim {
    pub now: Time,
    pub nodes: Vec<Node>,
    pub clients: Vec<BTreeMap<ClientId, SimClient>>,
    rng: ChaCha8Rng,
    /// Packets on the wire by (arrival, order sent).
    in_flight: BTreeMap<(Time, u64), Packet>,
    sent_packets: u64,
    /// (node, link) → (peer node, peer's link id, model)
    wiring: HashMap<(usize, LinkId), (usize, LinkId, LinkModel)>,
    next_link: u64,
    next_client: u64,
    /// Frames each node sent its world server (upstream mode), not yet taken.
    pub upstream_sent: Vec<Vec<Vec<u8>>>,
    /// EntityActions each node executed as the authority, from peers.
    pub executed_actions: Vec<Vec<(EntityId, EntityAction)>>,
    /// Answers remote authorities gave each node's clients' actions.
    pub action_results: Vec<Vec<(MethodStatus, Value)>>,
    /// Bytes each (node, link) has transmitted, datagrams and stream frames.
    pub bytes_sent: HashMap<(usize, LinkId), usize>,
    /// Links made from now on put every packet on the reliable stream.
    pub stream_mode: bool,
    /// The `[peering]` section links connected from now on are set up
    /// with (its MTU and liveness timeout); the default node's.
    pub peering: PeeringSection,
    /// (node, from, to): every transmission of that node in [from, to) is
    /// lost, stream frames included (a fault no LESS re-send repairs).
    pub blackout: Option<(usize, Time, Time)>,
    /// Nodes stopped by `kill`.
    pub dead: Vec<usize>,
}

/// `features` and the federation's own (docs/peer-link.md §5.2), as a
/// lessgate node's Hello lists them.
pub fn with_federation_features(features: &[String]) -> Vec<String> {
    let mut all = features.to_vec();
    all.extend(
        lessgate::federation::wire::features::LinkFeatures::offered()
            .into_iter()
            .map(str::to_owned),
    );
    all
}

/// The built-in registry, parsed once per test binary.
fn registry() -> Registry {
    tundra_values::builtin().clone()
}

impl Sim {
    pub fn new(nodes: usize, seed: u64) -> Sim {
        Sim::with_server(nodes, seed, ServerConfig::default())
    }

    /// Nodes whose Tundra servers run with this configuration.
    pub fn with_server(nodes: usize, seed: u64, config: ServerConfig) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let nodes = (0..nodes)
            .map(|_| {
                let id = Uuid::from_u128(rng.gen());
                let server = TundraServer::new(config.clone());
                Node::new(Scene::new(registry()), server, id)
            })
            .collect::<Vec<_>>();
        let clients = nodes.iter().map(|_| BTreeMap::new()).collect();
        let count = nodes.len();
        Sim {
            now: Time::ZERO,
            nodes,
            clients,
            rng,
            in_flight: BTreeMap::new(),
            sent_packets: 0,
            wiring: HashMap::new(),
            next_link: 1,
            next_client: 1,
            upstream_sent: vec![Vec::new(); count],
            executed_actions: vec![Vec::new(); count],
            action_results: vec![Vec::new(); count],
            bytes_sent: HashMap::new(),
            stream_mode: false,
            peering: PeeringSection::default(),
            blackout: None,
            dead: Vec::new(),
        }
    }

    /// Peers two lessgate nodes (the federation's features agreed, no
    /// compact encodings); returns each side's link id.
    pub fn connect(&mut self, a: usize, b: usize, model: LinkModel) -> (LinkId, LinkId) {
        self.connect_with(a, b, model, &[], &[])
    }

    /// Peers two nodes whose Hellos offer these features (docs/peer-link.md
    /// 6.2: the link uses those both offer, e.g. compact encodings) beside
    /// the federation's own, which a lessgate node always offers.
    pub fn connect_with(
        &mut self,
        a: usize,
        b: usize,
        model: LinkModel,
        features_a: &[String],
        features_b: &[String],
    ) -> (LinkId, LinkId) {
        self.connect_hellos(
            a,
            b,
            model,
            &with_federation_features(features_a),
            &with_federation_features(features_b),
        )
    }

    /// Peers two nodes whose Hellos list exactly these features: a peer of
    /// another version, which lacks some of the federation's own.
    pub fn connect_hellos(
        &mut self,
        a: usize,
        b: usize,
        model: LinkModel,
        hello_a: &[String],
        hello_b: &[String],
    ) -> (LinkId, LinkId) {
        self.connect_full(
            a,
            b,
            model,
            (hello_a, hello_b),
            (LinkPolicy::default(), LinkPolicy::default()),
        )
    }

    /// Peers two nodes whose peer files for each other say `policy_a` (a's
    /// file for b) and `policy_b` (b's file for a).
    pub fn connect_policies(
        &mut self,
        a: usize,
        b: usize,
        model: LinkModel,
        policy_a: LinkPolicy,
        policy_b: LinkPolicy,
    ) -> (LinkId, LinkId) {
        let federation = with_federation_features(&[]);
        self.connect_full(
            a,
            b,
            model,
            (&federation, &federation),
            (policy_a, policy_b),
        )
    }

    fn connect_full(
        &mut self,
        a: usize,
        b: usize,
        model: LinkModel,
        (features_a, features_b): (&[String], &[String]),
        (policy_a, policy_b): (LinkPolicy, LinkPolicy),
    ) -> (LinkId, LinkId) {
        let agreed: Vec<String> = features_a
            .iter()
            .filter(|f| features_b.contains(f))
            .cloned()
            .collect();
        let stream_mode = self.stream_mode;
        let (la, lb) = (LinkId(self.next_link), LinkId(self.next_link + 1));
        self.next_link += 2;
        let secret: [u8; 32] = self.rng.gen();
        let (sa, sb): (u8, u8) = (self.rng.gen(), self.rng.gen());
        // The link's settings as the peer driver derives them from a real
        // handshake, with `self.peering`'s MTU and liveness.
        let peering = &self.peering;
        let framing = if stream_mode {
            LinkFraming::Stream
        } else {
            LinkFraming::Datagram
        };
        let settings = |node: &Node, role, local, remote| {
            let agreement = Agreement {
                role,
                secret: &secret,
                local_first_sequence: local,
                peer_first_sequence: remote,
                framing,
                mtu: peering.mtu,
                features: &agreed,
            };
            let local = LocalSettings {
                schemas: Arc::new(schema_registry(node.scene().registry())),
                connection_schema: Arc::new(ConnectionSchema::builtin()),
                timestamp_quantum: Duration::from_millis(1),
                liveness_timeout: peering.liveness_timeout(),
            };
            link_settings(&agreement, &local).expect("valid link settings")
        };
        let settings_a = settings(&self.nodes[a], Role::Dialer, sa, sb);
        let settings_b = settings(&self.nodes[b], Role::Listener, sb, sa);
        let (ida, idb) = (
            self.nodes[a].federation().node_id(),
            self.nodes[b].federation().node_id(),
        );
        let now = self.now;
        let up = |id, peer, name, policy, settings| LinkUp {
            id,
            peer,
            peer_name: name,
            policy,
            settings,
        };
        self.nodes[a]
            .handle_link_up(now, up(la, idb, format!("n{b}"), policy_a, settings_a))
            .expect("valid session config");
        self.nodes[b]
            .handle_link_up(now, up(lb, ida, format!("n{a}"), policy_b, settings_b))
            .expect("valid session config");
        self.wiring.insert((a, la), (b, lb, model));
        self.wiring.insert((b, lb), (a, la, model));
        self.drain(a);
        self.drain(b);
        (la, lb)
    }

    /// Cuts a link both ways, as a failed peer link is torn down.
    pub fn disconnect(&mut self, a: usize, la: LinkId) {
        if let Some((b, lb, _)) = self.wiring.remove(&(a, la)) {
            self.wiring.remove(&(b, lb));
            self.nodes[a].handle_link_down(la);
            self.nodes[b].handle_link_down(lb);
            self.drain(a);
            self.drain(b);
        }
    }

    /// The node stops: every link of it goes down at both ends and it is
    /// never driven again (its packets in flight are lost with it).
    pub fn kill(&mut self, node: usize) {
        let links: Vec<LinkId> = self
            .wiring
            .keys()
            .filter(|(n, _)| *n == node)
            .map(|(_, l)| *l)
            .collect();
        for link in links {
            self.disconnect(node, link);
        }
        self.in_flight.retain(|_, p| p.to_node != node);
        self.dead.push(node);
    }

    /// Datagrams and frames put on the simulated wire so far (copies
    /// included, losses not counted).
    pub fn sent_packet_count(&self) -> u64 {
        self.sent_packets
    }

    /// A client sends an EntityAction on an entity it sees.
    pub fn action(
        &mut self,
        node: usize,
        client: ClientId,
        entity: EntityId,
        name: &str,
        execution_type: u8,
        parameters: Vec<String>,
    ) {
        let message = Message::EntityAction(EntityAction {
            entity_id: entity,
            name: name.to_owned(),
            execution_type,
            parameters,
        });
        self.send(node, client, &message);
    }

    /// Logs a protocol 3 client into a node.
    pub fn add_client(&mut self, node: usize) -> ClientId {
        self.add_client_over(node, ClientTransport::WebSocket)
    }

    /// Logs a native viewer into a node over kNet UDP: its login data is
    /// XML, and it takes moves as RigidBodyUpdate (119).
    pub fn add_native_client(&mut self, node: usize) -> ClientId {
        self.add_client_over(node, ClientTransport::KnetUdp)
    }

    fn add_client_over(&mut self, node: usize, transport: ClientTransport) -> ClientId {
        let id = ClientId(self.next_client);
        self.next_client += 1;
        self.nodes[node].handle_client_connect(id, self.now, transport);
        let login_data = match transport {
            ClientTransport::WebSocket => "{\"username\":\"sim\"}".to_owned(),
            _ => "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"sim\" />\n</login>\n"
                .to_owned(),
        };
        let login = Message::Login(Login {
            login_data,
            protocol_version: Some(3),
        });
        self.nodes[node].handle_client_frame(
            id,
            self.now,
            &login.encode_frame(ProtocolVersion(1)).unwrap(),
        );
        self.clients[node].insert(
            id,
            SimClient {
                view: ClientView::default(),
                registry: registry(),
                pending: HashMap::new(),
                actions: Vec::new(),
                creates: 0,
                removes: 0,
            },
        );
        self.drain(node);
        id
    }

    pub fn send(&mut self, node: usize, client: ClientId, message: &Message) {
        let frame = message.encode_frame(ProtocolVersion(3)).unwrap();
        let now = self.now;
        self.nodes[node].handle_client_frames(client, now, &[frame]);
        self.drain(node);
    }

    /// A client creates an entity with a Placeable at `x` and a Name.
    pub fn create_box(&mut self, node: usize, client: ClientId, tag: u32, name: &str, x: f32) {
        self.create_box_with(node, client, tag, name, x, &[]);
    }

    /// As `create_box`, with default components of `extra` types too.
    pub fn create_box_with(
        &mut self,
        node: usize,
        client: ClientId,
        tag: u32,
        name: &str,
        x: f32,
        extra: &[u32],
    ) {
        let mut components = named_box_at(name, x);
        for (n, type_id) in extra.iter().enumerate() {
            let schema = tundra_values::builtin()
                .get(*type_id)
                .expect("a registry type");
            let values = schema.default_values();
            components.push(ComponentData::with_values(
                ComponentId(0x4000_0003 + n as u32),
                schema,
                values,
            ));
        }
        // The client's own scene holds it at once, under its unacked id.
        if let Some(state) = self.clients[node].get_mut(&client) {
            state.pending.insert(tag, components.clone());
        }
        let message = Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0000 | tag),
            temporary: false,
            parent: None,
            components,
        });
        self.send(node, client, &message);
    }

    /// A client creates an entity of `components` (under unacked component
    /// ids), the child of `parent` (an id the client sees) if given.
    pub fn create_entity(
        &mut self,
        node: usize,
        client: ClientId,
        tag: u32,
        components: Vec<ComponentData>,
        parent: Option<EntityId>,
    ) {
        if let Some(state) = self.clients[node].get_mut(&client) {
            state.pending.insert(tag, components.clone());
        }
        let message = Message::CreateEntity(CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0000 | tag),
            temporary: false,
            parent,
            components,
        });
        self.send(node, client, &message);
    }

    /// A client moves an entity it sees (by its node's ids).
    pub fn move_entity(&mut self, node: usize, client: ClientId, entity: EntityId, x: f32) {
        self.set_transform(node, client, entity, transform(x));
    }

    /// A client sets an entity's whole Placeable transform.
    pub fn set_transform(
        &mut self,
        node: usize,
        client: ClientId,
        entity: EntityId,
        value: AttributeValue,
    ) {
        let view = &self.clients[node][&client].view;
        let Some(components) = view.entities.get(&entity) else {
            panic!("client does not see {entity}")
        };
        let (component, _) = components
            .iter()
            .find(|(_, (t, _))| *t == 20)
            .expect("a Placeable");
        let slots = registry().get(20).unwrap().slot_types();
        let edit = AttributeEdit {
            index: 0,
            value: value.clone(),
        };
        let component = *component;
        let message = Message::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: entity,
            blocks: vec![EditAttributesBlock::encode(component, &[edit], &slots).unwrap()],
        });
        // A Tundra client changes its own scene at once; the server does not
        // echo the change back.
        if let Some(values) = self.clients[node]
            .get_mut(&client)
            .and_then(|c| c.view.entities.get_mut(&entity))
            .and_then(|e| e.get_mut(&component))
        {
            values.1[0] = value;
        }
        self.send(node, client, &message);
    }

    pub fn remove_entity(&mut self, node: usize, client: ClientId, entity: EntityId) {
        if let Some(c) = self.clients[node].get_mut(&client) {
            c.view.entities.remove(&entity);
        }
        self.send(
            node,
            client,
            &Message::RemoveEntity(RemoveEntity {
                scene_id: 0,
                entity_id: entity,
            }),
        );
    }

    /// A frame from the world server to a node in upstream mode.
    pub fn upstream_frame(&mut self, node: usize, frame: &[u8]) {
        let now = self.now;
        self.nodes[node].handle_upstream_frame(now, frame);
        self.drain(node);
    }

    /// The connection of a node in upstream mode to its world server opens.
    pub fn upstream_connected(&mut self, node: usize) {
        let now = self.now;
        self.nodes[node].handle_upstream_connected(now);
        self.drain(node);
    }

    /// The connection of a node in upstream mode to its world server ends.
    pub fn upstream_disconnected(&mut self, node: usize, reason: &str) {
        let now = self.now;
        self.nodes[node].handle_upstream_disconnected(now, reason);
        self.drain(node);
    }

    /// The frames a node sent its world server since the last call.
    pub fn take_upstream(&mut self, node: usize) -> Vec<Vec<u8>> {
        self.drain(node);
        std::mem::take(&mut self.upstream_sent[node])
    }

    /// Takes every output of a node, as its driver does after each input:
    /// client frames reach the clients' views, link packets enter the
    /// simulated network, events are acted on.
    pub fn drain(&mut self, node: usize) {
        let now = self.now;
        while let Some(transmit) = self.nodes[node].poll_transmit(now) {
            match transmit {
                Transmit::Client(client, frame) => {
                    let Some(state) = self.clients[node].get_mut(&client) else {
                        continue;
                    };
                    let context = DecodeContext {
                        protocol_version: ProtocolVersion(3),
                        registry: &state.registry,
                    };
                    let message =
                        Message::decode_frame(&frame, &context).expect("node frames decode");
                    apply(state, message);
                }
                Transmit::Link(link, transmit) => self.put_on_wire(node, link, transmit),
                Transmit::Upstream(frame) => self.upstream_sent[node].push(frame),
            }
        }
        while let Some(event) = self.nodes[node].poll_event() {
            match event {
                // The peer sees its link go down, as the transport's Goodbye
                // tells it.
                Event::CloseLink(link, _) => {
                    if let Some((peer, peer_link, _)) = self.wiring.remove(&(node, link)) {
                        self.wiring.remove(&(peer, peer_link));
                        self.nodes[peer].handle_link_down(peer_link);
                    }
                }
                Event::ActionExecuted(entity, action) => {
                    self.executed_actions[node].push((entity, action));
                }
                Event::ActionAnswered(status, detail) => {
                    self.action_results[node].push((status, detail));
                }
                Event::CloseClient(..) | Event::Upstream(_) => {}
            }
        }
    }

    /// Sends one packet of a node's link through the link's model.
    fn put_on_wire(
        &mut self,
        node: usize,
        link: LinkId,
        transmit: lessgate::less::session::Transmit,
    ) {
        let Some(&(peer, peer_link, model)) = self.wiring.get(&(node, link)) else {
            return;
        };
        let now = self.now;
        *self.bytes_sent.entry((node, link)).or_default() += transmit.bytes.len();
        let stream = transmit.path == Path::Stream;
        let blacked_out = self
            .blackout
            .is_some_and(|(from, start, end)| from == node && start <= now && now < end);
        let copies = if blacked_out {
            0
        } else if stream {
            1
        } else if self.rng.gen_bool(model.loss) {
            0
        } else if self.rng.gen_bool(model.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter = if model.jitter.is_zero() || stream {
                Duration::ZERO
            } else {
                model.jitter.mul_f64(self.rng.gen::<f64>())
            };
            let at = now + model.latency + jitter;
            self.sent_packets += 1;
            self.in_flight.insert(
                (at, self.sent_packets),
                Packet {
                    to_node: peer,
                    link: peer_link,
                    path: transmit.path,
                    bytes: transmit.bytes.clone(),
                },
            );
        }
    }

    /// Advances fake time by `duration`, from deadline to deadline.
    pub fn run(&mut self, duration: Duration) {
        let end = self.now + duration;
        loop {
            let next = self.next_deadline();
            if next > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(next);
            self.step();
        }
    }

    /// The earliest of every node's timer and the next packet's arrival.
    fn next_deadline(&self) -> Time {
        let timers = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| !self.dead.contains(n))
            .filter_map(|(_, node)| node.poll_timeout());
        let arrival = self.in_flight.keys().next().map(|(at, _)| *at);
        timers.chain(arrival).min().unwrap_or(Time::MAX)
    }

    /// Delivers the packets due now, runs the timers due now, and drains
    /// every node.
    fn step(&mut self) {
        let now = self.now;
        // Due packets in the order they arrive (the order the model
        // produced), so a seed always gives the same run.
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let packet = entry.remove();
            let node = &mut self.nodes[packet.to_node];
            match packet.path {
                Path::Datagram => node.handle_link_datagram(now, packet.link, &packet.bytes),
                Path::Stream => node.handle_link_frame(now, packet.link, &packet.bytes),
            }
        }
        for node in 0..self.nodes.len() {
            if self.dead.contains(&node) {
                continue;
            }
            if self.nodes[node].poll_timeout().is_some_and(|t| t <= now) {
                self.nodes[node].handle_timeout(now, &|_| 0);
            }
            self.drain(node);
        }
    }

    pub fn view(&self, node: usize, client: ClientId) -> &ClientView {
        &self.clients[node][&client].view
    }

    /// The entity a client sees with this Name.
    pub fn find(&self, node: usize, client: ClientId, name: &str) -> Vec<EntityId> {
        self.view(node, client)
            .entities
            .iter()
            .filter(|(_, components)| {
                components.values().any(|(t, v)| {
                    *t == 26 && v.first() == Some(&AttributeValue::String(name.to_owned()))
                })
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// The Placeable x of an entity in a node's own scene.
    pub fn scene_x(&self, node: usize, entity: EntityId) -> Option<f32> {
        let entity = self.nodes[node].scene().entity(entity)?;
        match &entity.component_of_type(20)?.attribute(0)?.value {
            AttributeValue::Transform(t) => Some(t.pos.x),
            _ => None,
        }
    }

    /// The Placeable transform of an entity in a node's own scene.
    pub fn scene_transform(
        &self,
        node: usize,
        entity: EntityId,
    ) -> Option<lessgate::tundra::values::Transform> {
        let entity = self.nodes[node].scene().entity(entity)?;
        match &entity.component_of_type(20)?.attribute(0)?.value {
            AttributeValue::Transform(t) => Some(*t),
            _ => None,
        }
    }

    /// The Placeable x a client sees for an entity.
    pub fn x_of(&self, node: usize, client: ClientId, entity: EntityId) -> Option<f32> {
        let components = self.view(node, client).entities.get(&entity)?;
        components
            .values()
            .find(|(t, _)| *t == 20)
            .and_then(|(_, values)| match values.first() {
                Some(AttributeValue::Transform(t)) => Some(t.pos.x),
                _ => None,
            })
    }
}

/// A client applies what its node sends, as a Tundra client's scene does.
fn apply(client: &mut SimClient, message: Message) {
    let view = &mut client.view;
    match message {
        Message::CreateEntityReply(reply) => {
            // HandleCreateEntityReply: the unacked entity and components
            // take the ids the server gave.
            let Some(components) = client.pending.remove(&reply.sender_entity_id.wire()) else {
                return;
            };
            let mut entity = BTreeMap::new();
            for component in components {
                let sender = component.id.wire();
                let id = reply
                    .components
                    .iter()
                    .find(|pair| pair.sender.wire() == sender)
                    .map_or(component.id, |pair| pair.id);
                entity.insert(id, component_values(component));
            }
            view.entities.insert(reply.entity_id, entity);
        }
        Message::CreateEntity(create) => {
            client.creates += 1;
            let components = create
                .components
                .into_iter()
                .map(|c| (c.id, component_values(c)))
                .collect();
            assert!(
                view.entities.insert(create.entity_id, components).is_none(),
                "CreateEntity for an entity the client already has"
            );
        }
        Message::CreateComponents(create) => {
            if let Some(entity) = view.entities.get_mut(&create.entity_id) {
                for c in create.components {
                    entity.insert(c.id, component_values(c));
                }
            }
        }
        Message::RemoveComponents(remove) => {
            if let Some(entity) = view.entities.get_mut(&remove.entity_id) {
                for c in remove.component_ids {
                    entity.remove(&c);
                }
            }
        }
        Message::RemoveEntity(remove) => {
            client.removes += 1;
            view.entities.remove(&remove.entity_id);
        }
        Message::EditAttributes(edit) => {
            let Some(entity) = view.entities.get_mut(&edit.entity_id) else {
                return;
            };
            for block in edit.blocks {
                let Some((type_id, values)) = entity.get_mut(&block.component_id) else {
                    continue;
                };
                let slots = client
                    .registry
                    .get(*type_id)
                    .map(|s| s.slot_types())
                    .unwrap_or_default();
                if let Ok(decoded) = block.decode(&slots) {
                    for e in decoded.edits {
                        if let Some(slot) = values.get_mut(usize::from(e.index)) {
                            *slot = e.value;
                        }
                    }
                }
            }
        }
        Message::RigidBodyUpdate(update) => {
            // As a native viewer reads it: each record onto the Placeable
            // transform it holds (tundra `HandleRigidBodyChanges`).
            for record in update.entities {
                let Some(entity) = view.entities.get_mut(&record.entity_id) else {
                    continue;
                };
                let Some((_, values)) = entity.values_mut().find(|(t, _)| *t == 20) else {
                    continue;
                };
                let Some(AttributeValue::Transform(current)) = values.first().cloned() else {
                    continue;
                };
                let received = lessgate::tundra::rigid_body_receiver::receive(&record, current);
                if let Some(transform) = received.transform {
                    values[0] = AttributeValue::Transform(transform);
                }
            }
        }
        Message::EntityAction(action) => client.actions.push(action),
        Message::RegisterComponentType(register) => {
            register.register(&mut client.registry);
        }
        _ => {}
    }
}

fn component_values(c: ComponentData) -> (u32, Vec<AttributeValue>) {
    let values = match c.body {
        ComponentBody::Attributes(block) => block.values,
        ComponentBody::Opaque(_) => Vec::new(),
    };
    (c.type_id, values)
}
