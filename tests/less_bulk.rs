//! Bulk packets between two sessions (docs/less-wire.md §16.5): a large
//! backlog of introductions crosses as zstd-compressed stream datagrams when
//! both ends agreed `bulk:zstd/1`, and as datagrams otherwise; everything
//! arrives either way. Also the measurement of section 16.5: bytes on the
//! wire for introducing 10 000 Tundra entities (Placeable + Name).

mod less_harness;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use less_harness::*;
use lessgate::federation::mapping::{self, attribute_key};
use lessgate::federation::schemas::schema_registry;
use lessgate::federation::values::to_less;
use lessgate::less::bulk::seal_bulk;
use lessgate::less::encoding::link::offered_features;
use lessgate::less::encoding::LinkEncodings;
use lessgate::less::ids::{Local, ObjectId, PropertyKey, TypeId};
use lessgate::less::packet::DatagramFraming;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::{FramingMode, SessionConfig, Stats};
use lessgate::less::signature::{LinkRole, SessionKeys};
use lessgate::less::value::Value;
use lessgate::less::value_type::ValueType;
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{AttributeValue, Registry};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What A's application last set, per entity.
type Truth = BTreeMap<u64, BTreeMap<PropertyKey, Value>>;

fn bulk_config(role: LinkRole, bulk: bool) -> SessionConfig {
    let mut config = config(role, FramingMode::Datagram);
    config.bulk_packets = bulk;
    config
}

fn sim(seed: u64, model: LinkModel, bulk: bool) -> Sim {
    Sim::with_configs(
        seed,
        model,
        bulk_config(LinkRole::Initiator, bulk),
        bulk_config(LinkRole::Acceptor, bulk),
    )
}

fn record(truth: &mut Truth, entity: ObjectId<Local>, values: &[PropertyValue]) {
    let state = truth.entry(entity.get()).or_default();
    for value in values {
        state.insert(value.key.clone(), value.value.clone());
    }
}

/// Introduces `count` crates on A, then at once updates every seventh one
/// (so updates queue behind introductions still in the bulk path).
fn introduce_crates(sim: &mut Sim, count: i64) -> Truth {
    let mut truth = Truth::new();
    let type_id = crate_type(&mut sim.a);
    sim.run_for(Duration::from_secs(1));
    let mut entities = Vec::new();
    for i in 0..count {
        let entity = sim.a.session.allocate_object_id();
        let values = entity_values(i, i as f32);
        record(&mut truth, entity, &values);
        sim.a
            .session
            .introduce_entity(entity, type_id, values)
            .unwrap();
        entities.push(entity);
    }
    for (i, entity) in entities.iter().enumerate().step_by(7) {
        let values = entity_values(i as i64 + 1_000_000, -1.0);
        record(&mut truth, *entity, &values);
        sim.a.session.update_entity(*entity, values).unwrap();
    }
    truth
}

fn assert_converged(sim: &Sim, truth: &Truth, context: &str) {
    assert_eq!(sim.a.model.closed, None, "{context}: A closed");
    assert_eq!(sim.b.model.closed, None, "{context}: B closed");
    assert_eq!(
        sim.b.model.entities.len(),
        truth.len(),
        "{context}: entity counts differ"
    );
    for (entity, values) in truth {
        assert_eq!(
            sim.b.model.entities.get(entity),
            Some(values),
            "{context}: entity {entity} differs"
        );
    }
}

/// Runs 2 000 introductions; returns A's and B's stats.
fn run_crates(seed: u64, model: LinkModel, bulk: bool) -> (Stats, Stats) {
    let mut sim = sim(seed, model, bulk);
    let truth = introduce_crates(&mut sim, 2_000);
    sim.run_for(Duration::from_secs(2));
    sim.heal();
    sim.run_for(Duration::from_secs(5));
    assert_converged(&sim, &truth, &format!("seed {seed}, bulk {bulk}"));
    (sim.a.session.stats(), sim.b.session.stats())
}

#[test]
fn introductions_travel_in_bulk_packets() {
    let (bulk_a, bulk_b) = run_crates(1, LinkModel::PERFECT, true);
    let (plain_a, plain_b) = run_crates(1, LinkModel::PERFECT, false);
    assert!(bulk_a.bulk_packets_sent > 0, "{bulk_a:?}");
    assert_eq!(bulk_b.bulk_packets_received, bulk_a.bulk_packets_sent);
    assert_eq!(
        bulk_b.bulk_bytes_compressed_received,
        bulk_a.bulk_bytes_compressed_sent
    );
    assert!(
        bulk_a.bulk_bytes_compressed_sent * 2 < bulk_a.bulk_bytes_uncompressed_sent,
        "{bulk_a:?}"
    );
    // The 2 000 introductions alone take about 80 datagrams; with bulk
    // packets the link sends a handful of packets plus the updates.
    assert!(
        bulk_a.packets_sent * 3 < plain_a.packets_sent,
        "bulk {} packets, plain {}",
        bulk_a.packets_sent,
        plain_a.packets_sent
    );
    assert!(bulk_a.bytes_sent < plain_a.bytes_sent);
    assert_eq!(plain_a.bulk_packets_sent, 0);
    assert_eq!(plain_b.bulk_packets_received, 0);
}

#[test]
fn without_agreement_introductions_use_datagrams() {
    let (a, b) = run_crates(2, LinkModel::PERFECT, false);
    assert_eq!(a.bulk_packets_sent, 0);
    assert_eq!(a.stream_frames_sent, 0);
    assert_eq!(b.bulk_packets_received, 0);
}

#[test]
fn bulk_packets_cross_a_lossy_link() {
    for seed in seeds(3) {
        let (a, b) = run_crates(seed, LinkModel::HOSTILE, true);
        assert!(a.bulk_packets_sent > 0, "seed {seed}");
        assert_eq!(b.bulk_packets_received, a.bulk_packets_sent, "seed {seed}");
        // A refused stream datagram would never be re-sent.
        assert_eq!(b.rejected_overload, 0, "seed {seed}");
    }
}

#[test]
fn few_introductions_keep_the_datagram_path() {
    let mut sim = sim(3, LinkModel::PERFECT, true);
    let truth = introduce_crates(&mut sim, 40);
    sim.run_for(Duration::from_secs(2));
    assert_converged(&sim, &truth, "40 crates");
    let stats = sim.a.session.stats();
    assert_eq!(stats.bulk_packets_sent, 0);
    assert_eq!(stats.stream_frames_sent, 0);
}

#[test]
fn an_oversized_bulk_body_ends_the_session() {
    let mut sim = sim(4, LinkModel::PERFECT, true);
    sim.run_for(Duration::from_secs(1));
    // Signed with A's key: authentic, but 2 MiB decompressed.
    let keys = SessionKeys::derive(&[9u8; 32], LinkRole::Initiator);
    let framing = DatagramFraming {
        sequence: 200,
        ack_last: 16,
        ack_bits: u64::MAX,
    };
    let sealed = seal_bulk(&keys.send, &framing, 1 << 40, 1, &vec![0u8; 2 << 20]);
    let now = sim.now;
    sim.b.session.handle_stream_frame(now, &sealed.bytes);
    sim.run_for(Duration::from_millis(10));
    let reason = sim.b.model.closed.clone().expect("B closed");
    // Timestamp 2^40 takes 6 bytes, the count 1: 2 MiB + 7 bytes.
    assert_eq!(
        reason,
        "framing error: decompressed bulk body of 2097159 exceeds the limit 1048576"
    );
}

// ----- measurement: 10 000 Tundra entities -----

const ORIGIN: [u8; 16] = [0x5a; 16];

fn pv(component: u64, property: u64, value: Value) -> PropertyValue {
    PropertyValue {
        key: PropertyKey::new(component, property),
        value,
    }
}

fn tundra_config(role: LinkRole, bulk: bool) -> SessionConfig {
    let schemas = Arc::new(schema_registry(&Registry::builtin()));
    let mut config = config_with(role, FramingMode::Datagram, schemas.clone());
    config.encodings = Arc::new(LinkEncodings::from_features(
        &offered_features(),
        schemas.encoding_rules().to_vec(),
    ));
    config.bulk_packets = bulk;
    config
}

/// The owner component and the attributes of a component object, as the
/// federation exports them (src/federation/routing/export.rs).
fn component_values(owner: ObjectId<Local>, attributes: &[AttributeValue]) -> Vec<PropertyValue> {
    let mut values = vec![
        pv(
            mapping::component::OWNER,
            mapping::component::ENTITY,
            Value::ObjectId(owner.get()),
        ),
        pv(
            mapping::component::OWNER,
            mapping::component::NAME,
            Value::String(String::new()),
        ),
    ];
    for (index, attribute) in attributes.iter().enumerate() {
        values.push(PropertyValue {
            key: attribute_key(index as u8),
            value: to_less(attribute, &|_| Value::Null),
        });
    }
    values
}

/// Bytes and packets A sends to introduce `count` entities, each an entity
/// object with a Placeable (random position, yaw, unit scale) and a Name.
fn tundra_introductions(count: u64, bulk: bool) -> (u64, u64, Stats) {
    let mut sim = Sim::with_configs(
        5,
        LinkModel::PERFECT,
        tundra_config(LinkRole::Initiator, bulk),
        tundra_config(LinkRole::Acceptor, bulk),
    );
    let types: Vec<TypeId<Local>> = [
        mapping::ENTITY_URI.to_owned(),
        format!("{}Placeable", mapping::COMPONENT_URI),
        format!("{}Name", mapping::COMPONENT_URI),
    ]
    .iter()
    .map(|uri| sim.a.session.introduce_type(uri).unwrap())
    .collect();
    sim.run_for(Duration::from_secs(1));
    let before = sim.a.session.stats();
    let registry = Registry::builtin();
    let mut placeable = registry.get_by_name("Placeable").unwrap().default_values();
    let mut name = registry.get_by_name("Name").unwrap().default_values();
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for serial in 0..count {
        let entity = sim.a.session.allocate_object_id();
        let origin = uuid::Uuid::from_bytes(ORIGIN);
        let values = vec![
            pv(1, mapping::entity::ORIGIN, Value::Uuid(origin)),
            pv(1, mapping::entity::SERIAL, Value::Integer(serial as i64)),
            pv(
                1,
                mapping::entity::PATH,
                Value::List(ValueType::Uuid, vec![Value::Uuid(origin)]),
            ),
            pv(1, mapping::entity::TEMPORARY, Value::Integer(0)),
            pv(
                1,
                mapping::entity::PARENT,
                Value::Standalone(Box::new(Value::Null)),
            ),
        ];
        sim.a
            .session
            .introduce_entity(entity, types[0], values)
            .unwrap();
        placeable[0] = AttributeValue::Transform(Transform {
            pos: Float3 {
                x: rng.gen_range(-500.0..500.0),
                y: rng.gen_range(0.0..20.0),
                z: rng.gen_range(-500.0..500.0),
            },
            rot: Float3 {
                x: 0.0,
                y: rng.gen_range(-180.0..180.0),
                z: 0.0,
            },
            scale: Float3 {
                x: 1.0,
                y: 1.0,
                z: 1.0,
            },
        });
        name[0] = AttributeValue::String(format!("object-{serial}"));
        for (type_id, attributes) in [(types[1], &placeable), (types[2], &name)] {
            let object = sim.a.session.allocate_object_id();
            sim.a
                .session
                .introduce_entity(object, type_id, component_values(entity, attributes))
                .unwrap();
        }
    }
    sim.run_for(Duration::from_secs(10));
    assert_eq!(sim.a.model.closed, None);
    assert_eq!(sim.b.model.closed, None);
    assert_eq!(sim.b.model.entities.len() as u64, 3 * count);
    let after = sim.a.session.stats();
    (
        after.bytes_sent - before.bytes_sent,
        after.packets_sent - before.packets_sent,
        after,
    )
}

/// Not a timed test: prints the bytes of docs/less-wire.md §16.5 (run with
/// `--nocapture`) and checks that bulk packets make the introductions
/// substantially smaller.
#[test]
fn measure_tundra_introductions() {
    const COUNT: u64 = 10_000;
    let (plain_bytes, plain_packets, _) = tundra_introductions(COUNT, false);
    let (bulk_bytes, bulk_packets, stats) = tundra_introductions(COUNT, true);
    println!(
        "{COUNT} Tundra entities (entity + Placeable + Name objects): \
         datagrams {plain_bytes} bytes in {plain_packets} packets; \
         bulk {bulk_bytes} bytes in {bulk_packets} packets ({} bulk, body {} -> {} bytes); \
         ratio {:.2}",
        stats.bulk_packets_sent,
        stats.bulk_bytes_uncompressed_sent,
        stats.bulk_bytes_compressed_sent,
        plain_bytes as f64 / bulk_bytes as f64,
    );
    assert!(stats.bulk_packets_sent > 0);
    assert!(bulk_bytes * 2 < plain_bytes);
}
