//! Two LESS sessions over a simulated link: convergence, ordering, wrap-around,
//! id reuse, oversized entities, stream mode and the update rate.

mod less_harness;

use std::collections::BTreeMap;
use std::time::Duration;

use less_harness::*;
use lessgate::clock::Time;
use lessgate::less::ids::{Local, ObjectId, PropertyKey, TypeId};
use lessgate::less::message::MethodStatus;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::FramingMode;
use lessgate::less::value::Value;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TICK: Duration = Duration::from_millis(33);

/// What A's application last set, per entity.
type Truth = BTreeMap<u64, BTreeMap<PropertyKey, Value>>;

fn set(sim: &mut Sim, truth: &mut Truth, entity: ObjectId<Local>, values: Vec<PropertyValue>) {
    let state = truth.entry(entity.get()).or_default();
    for value in &values {
        state.insert(value.key.clone(), value.value.clone());
    }
    sim.a.session.update_entity(entity, values).unwrap();
}

fn introduce(
    sim: &mut Sim,
    truth: &mut Truth,
    type_id: TypeId<Local>,
    values: Vec<PropertyValue>,
) -> ObjectId<Local> {
    let entity = sim.a.session.allocate_object_id();
    let state = truth.entry(entity.get()).or_default();
    state.clear();
    for value in &values {
        state.insert(value.key.clone(), value.value.clone());
    }
    sim.a
        .session
        .introduce_entity(entity, type_id, values)
        .unwrap();
    entity
}

fn assert_converged(sim: &Sim, truth: &Truth, context: &str) {
    assert_eq!(sim.a.model.closed, None, "{context}: A closed");
    assert_eq!(sim.b.model.closed, None, "{context}: B closed");
    assert_eq!(
        sim.b.model.entities.keys().collect::<Vec<_>>(),
        truth.keys().collect::<Vec<_>>(),
        "{context}: entity sets differ"
    );
    for (entity, values) in truth {
        assert_eq!(
            &sim.b.model.entities[entity], values,
            "{context}: entity {entity} differs"
        );
    }
    assert_eq!(
        sim.b.model.rolled_back, 0,
        "{context}: a stale value rolled a counter back"
    );
}

fn random_values(rng: &mut ChaCha8Rng, counter_value: i64) -> Vec<PropertyValue> {
    entity_values(counter_value, rng.gen_range(-100.0..100.0))
}

/// Properties converge, method calls arrive exactly once and in order per
/// entity, results arrive once, and no stale value ever rolls one back.
#[test]
fn converges_under_loss_duplication_and_reordering() {
    for seed in seeds(24) {
        let mut sim = Sim::new(seed, LinkModel::HOSTILE, FramingMode::Datagram);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xabcdef);
        let mut truth = Truth::new();
        sim.a.model.refuse_multiple_of = Some(7);
        let type_id = crate_type(&mut sim.a);
        let entities: Vec<ObjectId<Local>> = (0..6)
            .map(|i| introduce(&mut sim, &mut truth, type_id, entity_values(0, i as f32)))
            .collect();
        let mut counters = vec![0i64; entities.len()];
        let mut invoked: BTreeMap<u64, i64> = BTreeMap::new();
        let mut requests = 0usize;
        let mut last_tweak: BTreeMap<u64, Value> = BTreeMap::new();
        for tick in 0..240 {
            for (index, entity) in entities.iter().enumerate() {
                if rng.gen_bool(0.5) {
                    counters[index] += 1;
                    let values = random_values(&mut rng, counters[index]);
                    set(&mut sim, &mut truth, *entity, values);
                }
            }
            let known: Vec<u64> = sim.b.model.entities.keys().copied().collect();
            if !known.is_empty() && rng.gen_bool(0.6) {
                let target = known[rng.gen_range(0..known.len())];
                let sequence = invoked.entry(target).or_insert(0);
                *sequence += 1;
                let arguments = vec![Value::Integer(*sequence), Value::String("go".into())];
                sim.b
                    .session
                    .invoke_method(remote(target), poke(), arguments)
                    .unwrap();
                requests += 1;
            }
            if !known.is_empty() && tick % 10 == 0 {
                let target = known[rng.gen_range(0..known.len())];
                let value = Value::String(format!("tweak {tick}"));
                sim.b
                    .session
                    .tweak_entity(remote(target), name(), value.clone())
                    .unwrap();
                last_tweak.insert(target, value);
            }
            sim.run_for(TICK);
        }
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        let context = format!("seed {seed}");
        assert_converged(&sim, &truth, &context);
        for (entity, count) in &invoked {
            let expected: Vec<i64> = (1..=*count).collect();
            assert_eq!(
                sim.a.model.invocations.get(entity),
                Some(&expected),
                "{context}: calls on {entity}"
            );
        }
        assert_eq!(
            sim.b.model.results.len(),
            requests,
            "{context}: one result per call"
        );
        let refused = sim
            .b
            .model
            .results
            .values()
            .filter(|(s, _)| *s == MethodStatus::FORBIDDEN)
            .count();
        let expected_refused: i64 = invoked.values().map(|n| n / 7).sum();
        assert_eq!(
            refused as i64, expected_refused,
            "{context}: permission errors answered"
        );
        for (entity, value) in &last_tweak {
            let last = sim
                .a
                .model
                .tweaks
                .iter()
                .rev()
                .find(|(e, k, _)| e == entity && *k == name());
            assert_eq!(
                last.map(|(_, _, v)| v),
                Some(value),
                "{context}: last tweak of {entity}"
            );
        }
        let stats = sim.a.session.stats();
        assert!(
            stats.packets_resent > 0 && stats.packets_lost > 0,
            "{context}: loss exercised"
        );
        assert!(
            sim.b.session.stats().rejected_duplicate > 0,
            "{context}: duplicates exercised"
        );
    }
}

/// Thousands of packets with long idle gaps: the 8-bit sequence wraps many
/// times while only keepalives flow.
#[test]
fn sequence_wraps_with_sparse_traffic() {
    for seed in 0..3u64 {
        let mut model = LinkModel::HOSTILE;
        model.loss = 0.1;
        let mut sim = Sim::new(seed, model, FramingMode::Datagram);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut truth = Truth::new();
        let type_id = crate_type(&mut sim.a);
        let entity = introduce(&mut sim, &mut truth, type_id, entity_values(0, 0.0));
        for round in 1..=300i64 {
            let values = random_values(&mut rng, round);
            set(&mut sim, &mut truth, entity, values);
            sim.run_for(Duration::from_millis(rng.gen_range(500..5000)));
        }
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        assert_converged(&sim, &truth, &format!("sparse seed {seed}"));
        assert!(
            sim.a.session.stats().packets_sent > 3 * 256,
            "wrapped several times"
        );
        assert!(
            sim.b.session.stats().packets_sent > 3 * 256,
            "wrapped several times"
        );
    }
}

/// Bursts that fill the 64-packet window, for more than 256 x 10 packets.
#[test]
fn sequence_wraps_with_bursts() {
    for seed in 0..2u64 {
        let mut sim = Sim::new(seed, LinkModel::HOSTILE, FramingMode::Datagram);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut truth = Truth::new();
        let type_id = crate_type(&mut sim.a);
        let entities: Vec<ObjectId<Local>> = (0..40)
            .map(|_| introduce(&mut sim, &mut truth, type_id, entity_values(0, 0.0)))
            .collect();
        let mut round = 0i64;
        while sim.a.session.stats().packets_sent < 256 * 10 {
            if rng.gen_bool(0.3) {
                round += 1;
                for entity in &entities {
                    let mut values = random_values(&mut rng, round);
                    values.push(PropertyValue {
                        key: blob(),
                        value: Value::VariableBinary(vec![round as u8; rng.gen_range(100..600)]),
                    });
                    set(&mut sim, &mut truth, *entity, values);
                }
            }
            sim.run_for(TICK);
            assert!(
                sim.now < Time::from_millis(600_000),
                "seed {seed}: too slow"
            );
        }
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        assert_converged(&sim, &truth, &format!("burst seed {seed}"));
    }
}

/// Entities come and go; removed ids are reused once safe, and the peer's
/// view always converges.
#[test]
fn object_ids_are_reused_after_removal() {
    for seed in seeds(8) {
        let mut sim = Sim::new(seed, LinkModel::HOSTILE, FramingMode::Datagram);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut truth = Truth::new();
        let type_id = crate_type(&mut sim.a);
        let mut alive: Vec<ObjectId<Local>> = Vec::new();
        let mut ever = BTreeMap::<u64, usize>::new();
        for tick in 0..400i64 {
            if alive.len() < 5 || rng.gen_bool(0.15) {
                let entity =
                    introduce(&mut sim, &mut truth, type_id, random_values(&mut rng, tick));
                *ever.entry(entity.get()).or_default() += 1;
                alive.push(entity);
            }
            if alive.len() > 3 && rng.gen_bool(0.15) {
                let entity = alive.remove(rng.gen_range(0..alive.len()));
                sim.a.session.remove_entity(entity).unwrap();
                truth.remove(&entity.get());
            }
            if let Some(entity) = alive.first().copied() {
                set(
                    &mut sim,
                    &mut truth,
                    entity,
                    random_values(&mut rng, tick + 1000),
                );
            }
            sim.run_for(TICK);
        }
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        assert_converged(&sim, &truth, &format!("reuse seed {seed}"));
        assert!(
            ever.values().any(|&uses| uses > 1),
            "seed {seed}: some id was reused"
        );
    }
}

/// An entity larger than one datagram crosses as introduce + updates, and a
/// single value larger than any datagram crosses on the reliable stream.
#[test]
fn entities_larger_than_the_mtu_cross() {
    for seed in seeds(6) {
        let mut sim = Sim::new(seed, LinkModel::HOSTILE, FramingMode::Datagram);
        let mut truth = Truth::new();
        let type_id = crate_type(&mut sim.a);
        let tags = Value::List(
            lessgate::less::value_type::ValueType::String,
            (0..5)
                .map(|i| Value::String(format!("{i}").repeat(200)))
                .collect(),
        );
        let mut values = entity_values(1, 1.0);
        values.push(PropertyValue {
            key: key(2, 5),
            value: tags,
        });
        values.push(PropertyValue {
            key: name(),
            value: Value::String("n".repeat(900)),
        });
        values.push(PropertyValue {
            key: blob(),
            value: Value::VariableBinary(vec![0x5a; 900]),
        });
        let big = introduce(&mut sim, &mut truth, type_id, values);
        let huge = introduce(&mut sim, &mut truth, type_id, entity_values(2, 2.0));
        set(
            &mut sim,
            &mut truth,
            huge,
            vec![PropertyValue {
                key: blob(),
                value: Value::VariableBinary((0..20_000u32).map(|i| i as u8).collect()),
            }],
        );
        sim.run_for(Duration::from_secs(3));
        set(&mut sim, &mut truth, big, entity_values(3, 3.0));
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        assert_converged(&sim, &truth, &format!("mtu seed {seed}"));
        assert!(
            sim.a.session.stats().stream_frames_sent >= 1,
            "the huge value took the stream"
        );
    }
}

/// Every introduce-entity of a burst, first sent or re-sent, carries every
/// property of a small entity: none is squeezed into a full packet with part
/// of its values, and a re-send whose values a later refresh or update has
/// carried since still carries them (at their current value), so a receiver
/// can always build the object from its introduction.
#[test]
fn introductions_in_a_burst_carry_every_value() {
    for seed in seeds(6) {
        let mut sim = Sim::new(seed, LinkModel::HOSTILE, FramingMode::Datagram);
        let mut truth = Truth::new();
        let type_id = crate_type(&mut sim.a);
        sim.run_for(Duration::from_secs(1));
        let entities: Vec<ObjectId<Local>> = (0..300)
            .map(|i| introduce(&mut sim, &mut truth, type_id, entity_values(i, i as f32)))
            .collect();
        for _ in 0..10 {
            sim.run_for(TICK);
            // Supersede the introductions' values while some are still in
            // flight or lost: same identity, a new name and position.
            let x = sim.now.as_micros() as f32;
            for (i, entity) in entities.iter().enumerate().step_by(3) {
                sim.a.session.refresh_entity(*entity).unwrap();
                set(&mut sim, &mut truth, *entity, entity_values(i as i64, x));
            }
        }
        sim.heal();
        sim.run_for(Duration::from_secs(5));
        assert_converged(&sim, &truth, &format!("burst introductions seed {seed}"));
        let full: std::collections::BTreeSet<_> =
            entity_values(0, 0.0).into_iter().map(|v| v.key).collect();
        assert!(sim.b.model.introductions.len() >= entities.len());
        for (entity, keys) in &sim.b.model.introductions {
            assert_eq!(
                keys, &full,
                "seed {seed}: entity {entity} introduced without all its values"
            );
        }
    }
}

/// A whole link on one reliable ordered stream.
#[test]
fn stream_mode_converges() {
    let mut sim = Sim::new(5, LinkModel::PERFECT, FramingMode::Stream);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut truth = Truth::new();
    let type_id = crate_type(&mut sim.a);
    let mut alive: Vec<ObjectId<Local>> = (0..4)
        .map(|_| introduce(&mut sim, &mut truth, type_id, entity_values(0, 0.0)))
        .collect();
    for tick in 1..200i64 {
        for entity in &alive {
            let values = random_values(&mut rng, tick);
            set(&mut sim, &mut truth, *entity, values);
        }
        if tick % 50 == 0 {
            let gone = alive.remove(0);
            sim.a.session.remove_entity(gone).unwrap();
            truth.remove(&gone.get());
            alive.push(introduce(
                &mut sim,
                &mut truth,
                type_id,
                entity_values(tick, 0.0),
            ));
        }
        if tick % 20 == 0 {
            let target = alive[0].get();
            sim.b
                .session
                .invoke_method(
                    remote(target),
                    poke(),
                    vec![Value::Integer(tick), Value::String("s".into())],
                )
                .unwrap();
        }
        sim.run_for(TICK);
    }
    sim.run_for(Duration::from_secs(2));
    assert_converged(&sim, &truth, "stream mode");
    assert_eq!(sim.b.model.results.len(), 9);
    let stats = sim.a.session.stats();
    assert_eq!(stats.packets_resent, 0);
    assert_eq!(stats.stream_frames_sent, stats.packets_sent);
}

/// The receiver's update-rate request bounds what the sender transmits.
#[test]
fn update_rate_is_honoured() {
    let mut sim = Sim::new(1, LinkModel::PERFECT, FramingMode::Datagram);
    let mut truth = Truth::new();
    let type_id = crate_type(&mut sim.a);
    let entity = introduce(&mut sim, &mut truth, type_id, entity_values(0, 0.0));
    sim.b.session.request_update_rate(10).unwrap();
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.a.session.peer_update_rate(), Some(10));
    let before = sim.a.session.stats().packets_sent;
    for round in 1..=400i64 {
        set(&mut sim, &mut truth, entity, entity_values(round, 0.0));
        sim.run_for(Duration::from_millis(5));
    }
    let sent = sim.a.session.stats().packets_sent - before;
    assert!(sent <= 2 * 10 + 1, "sent {sent} packets in 2 s at 10/s");
    assert!(sent >= 15, "still sending: {sent}");
    sim.run_for(Duration::from_secs(1));
    assert_converged(&sim, &truth, "update rate");
}

/// Subscriptions decide what crosses: a narrow subscription sends only its
/// properties, widening it sends the rest, unsubscribing withdraws the
/// entities and subscribing again brings them back.
#[test]
fn subscription_changes_control_what_crosses() {
    let mut model = LinkModel::HOSTILE;
    model.loss = 0.1;
    let mut sim = Sim::new(11, model, FramingMode::Datagram);
    sim.b.model.auto_subscribe = false;
    let mut truth = Truth::new();
    let type_id = crate_type(&mut sim.a);
    let entity = introduce(&mut sim, &mut truth, type_id, entity_values(1, 1.0));
    sim.run_for(Duration::from_secs(2));
    assert!(
        sim.b.model.entities.is_empty(),
        "nothing before a subscription"
    );
    let remote_type = sim.b.model.remote_types[CRATE];
    sim.b
        .session
        .subscribe_type(remote_type, &[counter()])
        .unwrap();
    sim.run_for(Duration::from_secs(5));
    let seen = &sim.b.model.entities[&entity.get()];
    assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), vec![counter()]);
    assert_eq!(
        sim.a.session.peer_subscription(type_id),
        Some(vec![counter()])
    );

    let all = vec![position(), name(), counter()];
    sim.b.session.subscribe_type(remote_type, &all).unwrap();
    sim.run_for(Duration::from_secs(5));
    assert_eq!(sim.b.model.entities[&entity.get()].len(), 3);

    sim.b.session.unsubscribe_type(remote_type).unwrap();
    sim.run_for(Duration::from_secs(5));
    assert!(
        sim.b.model.entities.is_empty(),
        "withdrawn after unsubscribe"
    );

    set(&mut sim, &mut truth, entity, entity_values(2, 2.0));
    sim.b.session.subscribe_type(remote_type, &all).unwrap();
    sim.heal();
    sim.run_for(Duration::from_secs(3));
    assert_converged(&sim, &truth, "resubscribed");
}

/// Interactions and connection control reach the peer's application.
#[test]
fn interactions_and_connection_control_arrive() {
    use lessgate::less::ids::{InteractionId, PropertyId};
    use lessgate::less::property_list::FieldValue;
    let mut sim = Sim::new(12, LinkModel::PERFECT, FramingMode::Datagram);
    let values = vec![
        FieldValue {
            id: PropertyId(1),
            value: Value::ObjectId(5),
        },
        FieldValue {
            id: PropertyId(2),
            value: Value::ObjectId(6),
        },
    ];
    sim.a
        .session
        .send_interaction(InteractionId(1), values.clone())
        .unwrap();
    assert!(sim
        .a
        .session
        .send_interaction(InteractionId(9), vec![])
        .is_err());
    sim.a.session.request_update_rate(25).unwrap();
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.b.model.interactions, vec![(InteractionId(1), values)]);
    assert_eq!(
        sim.b.model.controls,
        vec![vec![FieldValue {
            id: PropertyId(1),
            value: Value::Integer(25),
        }]]
    );
    assert_eq!(sim.b.session.peer_update_rate(), Some(25));
}
