//! Simulation harness for LESS sessions: two nodes, each a session plus a
//! small application model, joined by a link with latency, jitter, loss,
//! duplication and reordering drawn from a seeded PRNG, under fake time.

#![allow(dead_code)]

#[path = "../common/link_model.rs"]
mod link_model;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use lessgate::clock::Time;
use lessgate::less::ids::{InteractionId, Local, ObjectId, PropertyKey, Remote, RequestId, TypeId};
use lessgate::less::message::MethodStatus;
use lessgate::less::property_list::{FieldValue, PropertyValue};
use lessgate::less::schema::{ConnectionSchema, SchemaRegistry};
use lessgate::less::schema_toml::types_from_toml;
use lessgate::less::session::{Event, FramingMode, Path, Session, SessionConfig, Transmit};
use lessgate::less::signature::{LinkRole, SessionKeys};
use lessgate::less::value::Value;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use link_model::LinkModel;

pub const CRATE: &str = "urn:lessgate:test:crate";
pub const LAMP: &str = "urn:lessgate:test:lamp";

pub fn registry() -> Arc<SchemaRegistry> {
    Arc::new(types_from_toml(include_str!("../../schemas/less/test-types.toml")).unwrap())
}

pub fn key(component: u64, property: u64) -> PropertyKey {
    PropertyKey::new(component, property)
}

pub fn position() -> PropertyKey {
    key(1, 1)
}
pub fn name() -> PropertyKey {
    key(2, 1)
}
pub fn counter() -> PropertyKey {
    key(2, 2)
}
pub fn blob() -> PropertyKey {
    key(2, 3)
}
pub fn poke() -> PropertyKey {
    key(2, 8)
}

/// What one node's application has seen.
#[derive(Debug, Default)]
pub struct Model {
    /// Peer entities and the latest value of each property.
    pub entities: BTreeMap<u64, BTreeMap<PropertyKey, Value>>,
    /// Counter values seen per peer entity, in order of arrival.
    pub counters: BTreeMap<u64, Vec<i64>>,
    /// Invocations received per own entity: argument 0, in order of arrival.
    pub invocations: BTreeMap<u64, Vec<i64>>,
    /// Results received for our invocations.
    pub results: BTreeMap<RequestId<Local>, (MethodStatus, Value)>,
    pub tweaks: Vec<(u64, PropertyKey, Value)>,
    pub interactions: Vec<(InteractionId, Vec<FieldValue>)>,
    pub controls: Vec<Vec<FieldValue>>,
    pub closed: Option<String>,
    pub remote_types: BTreeMap<String, TypeId<Remote>>,
    pub subscribed_types: BTreeSet<TypeId<Local>>,
    pub rolled_back: u64,
    /// The property keys each introduce-entity event carried, in order.
    pub introductions: Vec<(u64, BTreeSet<PropertyKey>)>,
    /// Refuse (403) invocations whose argument is a multiple of this.
    pub refuse_multiple_of: Option<i64>,
    /// Subscribe automatically to every property of introduced types.
    pub auto_subscribe: bool,
}

pub struct Node {
    pub session: Session,
    pub model: Model,
}

impl Node {
    fn drain_events(&mut self) {
        while let Some(event) = self.session.poll_event() {
            self.apply(event);
        }
    }

    fn record(&mut self, entity: u64, values: Vec<PropertyValue>) {
        let state = self.model.entities.entry(entity).or_default();
        for value in values {
            if value.key == counter() {
                if let Value::Integer(count) = value.value {
                    let history = self.model.counters.entry(entity).or_default();
                    if history.last().is_some_and(|&last| count < last) {
                        self.model.rolled_back += 1;
                    }
                    history.push(count);
                }
            }
            state.insert(value.key, value.value);
        }
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::TypeIntroduced {
                type_id,
                uri,
                schema,
            } => {
                self.model.remote_types.insert(uri, type_id);
                if self.model.auto_subscribe {
                    if let Some(schema) = schema {
                        let keys: Vec<PropertyKey> =
                            schema.properties().into_iter().map(|(k, _)| k).collect();
                        self.session.subscribe_type(type_id, &keys).unwrap();
                    }
                }
            }
            Event::TypeSubscribed { type_id, .. } => {
                self.model.subscribed_types.insert(type_id);
            }
            Event::TypeUnsubscribed { type_id } => {
                self.model.subscribed_types.remove(&type_id);
            }
            Event::EntityIntroduced { entity, values, .. } => {
                self.model
                    .introductions
                    .push((entity.get(), values.iter().map(|v| v.key.clone()).collect()));
                self.model.entities.insert(entity.get(), BTreeMap::new());
                self.model.counters.remove(&entity.get());
                self.record(entity.get(), values);
            }
            Event::EntityUpdated { entity, values } => {
                assert!(
                    self.model.entities.contains_key(&entity.get()),
                    "update before introduce"
                );
                self.record(entity.get(), values);
            }
            Event::EntityRemoved { entity } => {
                self.model.entities.remove(&entity.get());
            }
            Event::MethodInvoked {
                request,
                entity,
                arguments,
                ..
            } => {
                let Some(Value::Integer(sequence)) = arguments.first() else {
                    panic!("unexpected arguments {arguments:?}")
                };
                self.model
                    .invocations
                    .entry(entity.get())
                    .or_default()
                    .push(*sequence);
                let refuse = self
                    .model
                    .refuse_multiple_of
                    .is_some_and(|m| sequence % m == 0);
                if refuse {
                    self.session
                        .send_method_result(
                            request,
                            MethodStatus::FORBIDDEN,
                            Value::String("not allowed".into()),
                        )
                        .unwrap();
                } else {
                    self.session
                        .send_method_result(
                            request,
                            MethodStatus::SUCCESS,
                            Value::Integer(*sequence),
                        )
                        .unwrap();
                }
            }
            Event::MethodResult {
                request,
                status,
                value,
            } => {
                assert!(
                    self.model
                        .results
                        .insert(request, (status, value))
                        .is_none(),
                    "duplicate result"
                );
            }
            Event::Tweaked {
                entity,
                property,
                value,
            } => self.model.tweaks.push((entity.get(), property, value)),
            Event::Closed { reason } => self.model.closed = Some(reason.to_string()),
            Event::Interaction {
                interaction,
                values,
            } => self.model.interactions.push((interaction, values)),
            Event::ConnectionControl { values } => self.model.controls.push(values),
        }
    }
}

struct InFlight {
    deliver_at: Time,
    order: u64,
    to_b: bool,
    path: Path,
    bytes: Vec<u8>,
}

/// Two nodes and a link under fake time.
pub struct Sim {
    pub now: Time,
    pub a: Node,
    pub b: Node,
    pub model: LinkModel,
    rng: ChaCha8Rng,
    flight: Vec<InFlight>,
    order: u64,
    /// Stream frames are delivered in order: the last delivery time per direction.
    stream_tail: [Time; 2],
    /// Every datagram A sent, for replay tests.
    pub captured_a: Vec<Vec<u8>>,
    /// Drop everything in flight instead of delivering it (a partition).
    pub partitioned: bool,
    /// Datagrams each way (index 1: towards B) handed to the link, and
    /// those the loss model dropped: the link's real drop rate.
    pub datagrams_offered: [u64; 2],
    pub datagrams_dropped: [u64; 2],
}

pub fn config(role: LinkRole, mode: FramingMode) -> SessionConfig {
    config_with(role, mode, registry())
}

/// A test session's configuration over `schemas`.
pub fn config_with(
    role: LinkRole,
    mode: FramingMode,
    schemas: Arc<SchemaRegistry>,
) -> SessionConfig {
    let keys = SessionKeys::derive(&[9u8; 32], role);
    let (local_first, remote_first) = match role {
        LinkRole::Initiator => (200, 17),
        LinkRole::Acceptor => (17, 200),
    };
    let mut config = SessionConfig::new(
        keys,
        local_first,
        remote_first,
        schemas,
        Arc::new(ConnectionSchema::builtin()),
    );
    config.mode = mode;
    config
}

impl Sim {
    pub fn new(seed: u64, model: LinkModel, mode: FramingMode) -> Sim {
        Sim::with_configs(
            seed,
            model,
            config(LinkRole::Initiator, mode),
            config(LinkRole::Acceptor, mode),
        )
    }

    pub fn with_configs(seed: u64, model: LinkModel, a: SessionConfig, b: SessionConfig) -> Sim {
        let node = |config| Node {
            session: Session::new(config, Time::ZERO).unwrap(),
            model: Model {
                auto_subscribe: true,
                ..Model::default()
            },
        };
        Sim {
            now: Time::ZERO,
            a: node(a),
            b: node(b),
            model,
            rng: ChaCha8Rng::seed_from_u64(seed),
            flight: Vec::new(),
            order: 0,
            stream_tail: [Time::ZERO; 2],
            captured_a: Vec::new(),
            partitioned: false,
            datagrams_offered: [0; 2],
            datagrams_dropped: [0; 2],
        }
    }

    fn send(&mut self, to_b: bool, transmit: Transmit) {
        let model = self.model;
        if transmit.path == Path::Stream {
            // Reliable and ordered: fixed latency, never before the previous frame.
            let tail = &mut self.stream_tail[usize::from(to_b)];
            let at = (self.now + model.latency).max(*tail);
            *tail = at;
            self.push(at, to_b, transmit);
            return;
        }
        assert!(
            transmit.bytes.len() <= 1200,
            "datagram of {} bytes exceeds the MTU",
            transmit.bytes.len()
        );
        if to_b {
            self.captured_a.push(transmit.bytes.clone());
        }
        self.datagrams_offered[usize::from(to_b)] += 1;
        let copies = model.copies(&mut self.rng);
        if copies == 0 {
            self.datagrams_dropped[usize::from(to_b)] += 1;
        }
        for _ in 0..copies {
            let at = self.now + model.delay(&mut self.rng);
            self.push(at, to_b, transmit.clone());
        }
    }

    fn push(&mut self, deliver_at: Time, to_b: bool, transmit: Transmit) {
        self.order += 1;
        self.flight.push(InFlight {
            deliver_at,
            order: self.order,
            to_b,
            path: transmit.path,
            bytes: transmit.bytes,
        });
    }

    /// Sends everything both sessions want to send now and drains events.
    pub fn pump(&mut self) {
        for _ in 0..10_000 {
            let mut moved = false;
            while let Some(transmit) = self.a.session.poll_transmit(self.now) {
                self.send(true, transmit);
                moved = true;
            }
            while let Some(transmit) = self.b.session.poll_transmit(self.now) {
                self.send(false, transmit);
                moved = true;
            }
            self.a.drain_events();
            self.b.drain_events();
            if !moved {
                return;
            }
        }
        panic!("sessions never stop transmitting");
    }

    /// Injects a raw datagram into B.
    pub fn inject_to_b(&mut self, bytes: &[u8]) {
        self.b.session.handle_datagram(self.now, bytes);
        self.b.drain_events();
    }

    /// Runs the link and timers until `end`.
    pub fn run_until(&mut self, end: Time) {
        loop {
            self.pump();
            let next_delivery = self.flight.iter().map(|f| f.deliver_at).min();
            let mut next = end;
            for candidate in [
                next_delivery,
                self.a.session.poll_timeout(),
                self.b.session.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            {
                next = next.min(candidate);
            }
            if next >= end && self.now >= end {
                return;
            }
            self.now = if next > self.now {
                next.min(end)
            } else {
                self.now + Duration::from_millis(1)
            };
            self.flight.sort_by_key(|f| (f.deliver_at, f.order));
            let now = self.now;
            let due: Vec<InFlight> = {
                let split = self.flight.partition_point(|f| f.deliver_at <= now);
                self.flight.drain(..split).collect()
            };
            for frame in due {
                if self.partitioned {
                    continue;
                }
                let node = if frame.to_b { &mut self.b } else { &mut self.a };
                match frame.path {
                    Path::Datagram => node.session.handle_datagram(now, &frame.bytes),
                    Path::Stream => node.session.handle_stream_frame(now, &frame.bytes),
                }
            }
            for node in [&mut self.a, &mut self.b] {
                if node.session.poll_timeout().is_some_and(|t| t <= now) {
                    node.session.handle_timeout(now);
                }
            }
        }
    }

    /// Runs for `duration` more.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.now + duration;
        self.run_until(end);
    }

    /// Clears the link model (for convergence after a lossy phase).
    pub fn heal(&mut self) {
        self.model = LinkModel::PERFECT;
    }
}

/// Introduces the crate type on a node's session.
pub fn crate_type(node: &mut Node) -> TypeId<Local> {
    node.session.introduce_type(CRATE).unwrap()
}

/// Introduces the crate type and one crate (counter 0, at the origin) on a
/// node's session; returns the crate.
pub fn introduce_crate(node: &mut Node) -> ObjectId<Local> {
    let type_id = crate_type(node);
    let entity = node.session.allocate_object_id();
    node.session
        .introduce_entity(entity, type_id, entity_values(0, 0.0))
        .unwrap();
    entity
}

pub fn entity_values(counter_value: i64, x: f32) -> Vec<PropertyValue> {
    vec![
        PropertyValue {
            key: position(),
            value: Value::floats(&[x, 0.0, -x]),
        },
        PropertyValue {
            key: counter(),
            value: Value::Integer(counter_value),
        },
        PropertyValue {
            key: name(),
            value: Value::String(format!("crate {counter_value}")),
        },
    ]
}

pub fn local(id: u64) -> ObjectId<Local> {
    ObjectId::new(id)
}

pub fn remote(id: u64) -> ObjectId<Remote> {
    ObjectId::new(id)
}

/// Seeds to run: `0..default`, or `0..N` with `LESS_SIM_SEEDS=N` set (for
/// longer soak runs outside CI).
pub fn seeds(default: u64) -> std::ops::Range<u64> {
    let count = std::env::var("LESS_SIM_SEEDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default);
    0..count
}
