//! Tampering, truncation, forgery and replay have no effect on a LESS session
//! and are counted; framing and logic errors end it; permission errors do not.

mod less_harness;

use std::time::Duration;

use less_harness::*;
use lessgate::clock::Time;
use lessgate::less::codec::Reader;
use lessgate::less::ids::{Local, ObjectId, Remote, TypeId};
use lessgate::less::message::{DecodeContext, Message, MethodStatus};
use lessgate::less::packet::{open_datagram, seal_datagram, seal_stream_datagram, DatagramFraming};
use lessgate::less::schema::{ConnectionSchema, TypeSchema};
use lessgate::less::session::{FramingMode, Session, SessionConfig, Stats};
use lessgate::less::signature::{LinkRole, MacKey, SessionKeys};
use lessgate::less::value::Value;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn tolerant_b() -> SessionConfig {
    let mut config = config(LinkRole::Acceptor, FramingMode::Datagram);
    config.max_bad_signature_run = 0;
    config
}

/// A sim where A presents two entities that B has received.
fn converged_sim(seed: u64) -> Sim {
    let mut sim = Sim::with_configs(
        seed,
        LinkModel::PERFECT,
        config(LinkRole::Initiator, FramingMode::Datagram),
        tolerant_b(),
    );
    let type_id = crate_type(&mut sim.a);
    for i in 0..2 {
        let entity = sim.a.session.allocate_object_id();
        sim.a
            .session
            .introduce_entity(entity, type_id, entity_values(i, i as f32))
            .unwrap();
    }
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.b.model.entities.len(), 2);
    sim
}

fn accepted(stats: &Stats) -> u64 {
    stats.packets_received
}

#[test]
fn every_single_bit_flip_and_truncation_is_rejected() {
    let mut sim = converged_sim(1);
    let before_model = format!("{:?}", sim.b.model.entities);
    let before = sim.b.session.stats();
    let samples: Vec<Vec<u8>> = sim.captured_a.iter().take(3).cloned().collect();
    let mut injected = 0u64;
    for datagram in &samples {
        for bit in 0..datagram.len() * 8 {
            let mut tampered = datagram.clone();
            tampered[bit / 8] ^= 1 << (bit % 8);
            sim.inject_to_b(&tampered);
            injected += 1;
        }
        for len in 0..datagram.len() {
            sim.inject_to_b(&datagram[..len]);
            injected += 1;
        }
    }
    let after = sim.b.session.stats();
    assert_eq!(accepted(&after), accepted(&before));
    let refused = (after.rejected_bad_signature + after.rejected_malformed)
        - (before.rejected_bad_signature + before.rejected_malformed);
    assert_eq!(refused, injected);
    assert!(!sim.b.session.is_closed());
    assert_eq!(format!("{:?}", sim.b.model.entities), before_model);
}

#[test]
fn forged_datagrams_are_rejected() {
    let mut sim = converged_sim(2);
    let before = sim.b.session.stats();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for _ in 0..500 {
        let len = rng.gen_range(0..200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        sim.inject_to_b(&bytes);
    }
    // Well-formed, but signed with a key that is not the session's.
    let framing = DatagramFraming {
        sequence: 200 + 3,
        ack_last: 16,
        ack_bits: u64::MAX,
    };
    let forged = seal_datagram(&MacKey::new([1; 32]), &framing, 1 << 40, 1, &[0x05, 0x01]);
    sim.inject_to_b(&forged);
    // Signed with the key of the other direction (a reflected packet).
    let reflected = seal_datagram(
        &SessionKeys::derive(&[9; 32], LinkRole::Acceptor).send,
        &framing,
        1 << 40,
        1,
        &[0x05, 0x01],
    );
    sim.inject_to_b(&reflected);
    let after = sim.b.session.stats();
    assert_eq!(accepted(&after), accepted(&before));
    assert_eq!(after.rejected() - before.rejected(), 502);
    assert!(after.rejected_bad_signature - before.rejected_bad_signature >= 2);
    assert_eq!(sim.b.model.entities.len(), 2);
    sim.run_for(Duration::from_secs(1));
    assert!(!sim.b.session.is_closed());
}

/// Replays of every datagram ever sent, including ones from many laps of the
/// 8-bit sequence ago, are refused during and after heavy traffic.
#[test]
fn replays_from_earlier_laps_have_no_effect() {
    let mut sim = Sim::with_configs(
        3,
        LinkModel::HOSTILE,
        config(LinkRole::Initiator, FramingMode::Datagram),
        tolerant_b(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let entity = introduce_crate(&mut sim.a);
    let mut round = 0i64;
    while sim.a.session.stats().packets_sent < 2000 {
        round += 1;
        sim.a
            .session
            .update_entity(entity, entity_values(round, 0.0))
            .unwrap();
        sim.run_for(Duration::from_millis(33));
        if round % 50 == 0 {
            // Replay a burst of old datagrams mid-stream.
            let old: Vec<Vec<u8>> = (0..20)
                .map(|_| sim.captured_a[rng.gen_range(0..sim.captured_a.len())].clone())
                .collect();
            for datagram in old {
                sim.inject_to_b(&datagram);
            }
        }
    }
    sim.heal();
    sim.run_for(Duration::from_secs(3));
    let before = sim.b.session.stats();
    let model_before = format!("{:?}", sim.b.model.entities);
    let all = sim.captured_a.clone();
    for datagram in &all {
        sim.inject_to_b(datagram);
    }
    let after = sim.b.session.stats();
    assert_eq!(accepted(&after), accepted(&before), "no replay accepted");
    assert_eq!(after.rejected() - before.rejected(), all.len() as u64);
    assert!(
        after.rejected_stale > before.rejected_stale,
        "earlier-lap replays met the floor"
    );
    assert_eq!(format!("{:?}", sim.b.model.entities), model_before);
    assert_eq!(sim.b.model.rolled_back, 0);
    let counter_value = sim.b.model.entities[&entity.get()][&counter()].clone();
    assert_eq!(counter_value, Value::Integer(round));
    assert!(!sim.b.session.is_closed());
}

#[test]
fn bad_signature_datagrams_are_dropped_and_counted_and_never_close_the_session() {
    // Anyone who can send UDP from the peer's address can send these: they
    // must cost the link nothing, however many arrive in a row.
    let mut sim = converged_sim(4);
    let mut config = config(LinkRole::Acceptor, FramingMode::Datagram);
    config.max_bad_signature_run = 8;
    let mut session = Session::new(config, Time::ZERO).unwrap();
    let valid = sim.captured_a[0].clone();
    let mut garbage = valid.clone();
    let last = garbage.len() - 1;
    garbage[last] ^= 0xff;
    for _ in 0..1000 {
        session.handle_datagram(Time::ZERO, &garbage);
    }
    assert!(!session.is_closed());
    assert_eq!(session.stats().rejected_bad_signature, 1000);
    assert_eq!(session.stats().packets_received, 0);
    // The authentic packet still gets through after the flood.
    session.handle_datagram(Time::ZERO, &valid);
    assert_eq!(session.stats().packets_received, 1);
    assert!(!session.is_closed());
    sim.run_for(Duration::from_millis(10));
}

#[test]
fn a_run_of_bad_signatures_on_the_stream_closes_the_session() {
    // The stream is the TLS-authenticated peer's own: bad MACs there mean
    // the peer is broken.
    let mut config = config(LinkRole::Acceptor, FramingMode::Datagram);
    config.max_bad_signature_run = 8;
    let mut session = Session::new(config, Time::ZERO).unwrap();
    let wrong_key = SessionKeys::derive(&[3; 32], LinkRole::Initiator).send;
    let framing = DatagramFraming {
        sequence: 200,
        ack_last: 16,
        ack_bits: u64::MAX,
    };
    let forged = seal_stream_datagram(&wrong_key, &framing, 1, 0, &[]);
    for _ in 0..7 {
        session.handle_stream_frame(Time::ZERO, &forged);
    }
    assert!(!session.is_closed());
    session.handle_stream_frame(Time::ZERO, &forged);
    assert!(session.is_closed());
    assert_eq!(session.stats().rejected_bad_signature, 8);
}

struct NoContext(ConnectionSchema);

impl DecodeContext<Local, Remote> for NoContext {
    fn sender_type(&self, _: TypeId<Local>) -> Option<std::sync::Arc<TypeSchema>> {
        None
    }
    fn sender_entity_type(&self, _: ObjectId<Local>) -> Option<std::sync::Arc<TypeSchema>> {
        None
    }
    fn receiver_entity_type(&self, _: ObjectId<Remote>) -> Option<std::sync::Arc<TypeSchema>> {
        None
    }
    fn connection(&self) -> &ConnectionSchema {
        &self.0
    }
}

/// A lone acceptor session and a way to feed it packets as the initiator.
struct Crafter {
    session: Session,
    next_sequence: u8,
    timestamp: i64,
    send_key: MacKey,
}

impl Crafter {
    fn new() -> Crafter {
        let mut config = config(LinkRole::Acceptor, FramingMode::Datagram);
        config.max_bad_signature_run = 0;
        Crafter {
            session: Session::new(config, Time::ZERO).unwrap(),
            next_sequence: 200,
            timestamp: 100,
            send_key: SessionKeys::derive(&[9; 32], LinkRole::Initiator).send,
        }
    }

    fn send(&mut self, count: usize, messages: &[u8]) {
        let framing = DatagramFraming {
            sequence: self.next_sequence,
            ack_last: 16,
            ack_bits: u64::MAX,
        };
        self.next_sequence = self.next_sequence.wrapping_add(1);
        self.timestamp += 1;
        let datagram = seal_datagram(&self.send_key, &framing, self.timestamp, count, messages);
        self.session
            .handle_datagram(Time::from_millis(self.timestamp as u64), &datagram);
    }

    fn send_message(&mut self, message: Message<Remote, Local>) {
        let bytes = message.to_bytes();
        self.send(1, &bytes);
    }

    fn close_reason(&self) -> String {
        self.session
            .close_reason()
            .map(|r| r.to_string())
            .unwrap_or_default()
    }

    fn introduce_crate(&mut self) {
        self.send_message(Message::IntroduceType {
            type_id: TypeId::new(1),
            uri: CRATE.into(),
        });
    }
}

#[test]
fn framing_and_logic_errors_end_the_session() {
    let mut crafter = Crafter::new();
    crafter.send(1, &[0x0d]);
    assert!(
        crafter.close_reason().starts_with("framing error"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    crafter.send(1, &[0x07, 0x01, 0x07, 0x02]); // two request-entity messages, count 1
    assert!(
        crafter.close_reason().contains("bytes left"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    crafter.send(1, &[0x04, 0x01, 0x01, 0x00]); // entity of a type never introduced
    assert!(
        crafter.close_reason().contains("unknown sender type 1"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    crafter.introduce_crate();
    // Introduced but never subscribed.
    crafter.send(1, &[0x04, 0x01, 0x01, 0x00]);
    assert!(
        crafter.close_reason().contains("unsubscribed type"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    crafter.introduce_crate();
    crafter
        .session
        .subscribe_type(TypeId::new(1), &[counter()])
        .unwrap();
    // Entity 1 with info.name, which was not subscribed.
    crafter.send(1, &[0x04, 0x01, 0x01, 0x01, 0x02, 0x01, 0x01, 0x01, 0x41]);
    assert!(
        crafter.close_reason().contains("unsubscribed property 2.1"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    crafter.send_message(Message::MethodResult {
        request: lessgate::less::ids::RequestId::new(4),
        status: MethodStatus::SUCCESS,
        value: Value::Null,
    });
    assert!(
        crafter.close_reason().contains("unknown request"),
        "{}",
        crafter.close_reason()
    );

    let mut crafter = Crafter::new();
    let framing = DatagramFraming {
        sequence: 200,
        ack_last: 40, // we never sent anything
        ack_bits: 0,
    };
    let datagram = seal_datagram(&crafter.send_key, &framing, 5, 0, &[]);
    crafter.session.handle_datagram(Time::ZERO, &datagram);
    assert!(
        crafter.close_reason().contains("never sent"),
        "{}",
        crafter.close_reason()
    );
}

#[test]
fn permission_errors_answer_a_failure_and_keep_the_session() {
    let mut crafter = Crafter::new();
    crafter.send_message(Message::MethodInvocation {
        request: lessgate::less::ids::RequestId::new(1),
        entity: ObjectId::new(77),
        method: poke(),
        arguments: vec![Value::Integer(1), Value::String("x".into())],
    });
    assert!(!crafter.session.is_closed());
    let transmit = crafter
        .session
        .poll_transmit(Time::from_millis(200))
        .unwrap();
    let receive_key = SessionKeys::derive(&[9; 32], LinkRole::Initiator).receive;
    let (_, packet) = open_datagram(&receive_key, &transmit.bytes).unwrap();
    assert_eq!(packet.message_count, 1);
    let context = NoContext(ConnectionSchema::builtin());
    let message =
        Message::<Local, Remote>::decode(&mut Reader::new(packet.messages), &context).unwrap();
    assert_eq!(
        message,
        Message::MethodResult {
            request: lessgate::less::ids::RequestId::new(1),
            status: MethodStatus::NOT_FOUND,
            value: Value::String("no such entity".into()),
        }
    );
}
