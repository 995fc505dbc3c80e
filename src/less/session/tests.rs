//! The session as a whole: keepalives, the window, batching, idle close,
//! events and command validation.

use super::*;
use crate::less::ids::{PropertyKey, RequestId};
use crate::less::message::MethodStatus;
use crate::less::packet::open_datagram;
use crate::less::property_list::PropertyValue;
use crate::less::schema::ConnectionSchema;
use crate::less::schema_toml::types_from_toml;
use crate::less::signature::{LinkRole, SessionKeys};
use crate::less::value::Value;
use std::sync::Arc;

const SECRET: [u8; 32] = [1; 32];

fn session(mode: FramingMode) -> Session {
    let registry = types_from_toml(include_str!("../../../schemas/less/test-types.toml")).unwrap();
    let mut config = SessionConfig::new(
        SessionKeys::derive(&SECRET, LinkRole::Initiator),
        250,
        40,
        Arc::new(registry),
        Arc::new(ConnectionSchema::builtin()),
    );
    config.mode = mode;
    Session::new(config, Time::ZERO).unwrap()
}

fn peer_key() -> crate::less::signature::MacKey {
    SessionKeys::derive(&SECRET, LinkRole::Acceptor).receive
}

/// Drains transmits at `now`, returning (sequence, timestamp, message count).
fn drain(session: &mut Session, now: Time) -> Vec<(u8, i64, usize)> {
    let mut out = Vec::new();
    while let Some(transmit) = session.poll_transmit(now) {
        assert_eq!(transmit.path, Path::Datagram);
        let (framing, packet) = open_datagram(&peer_key(), &transmit.bytes).unwrap();
        out.push((framing.sequence, packet.timestamp, packet.message_count));
    }
    out
}

#[test]
fn sessions_can_move_between_threads() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Session>();
    assert_send::<Event>();
}

#[test]
fn keepalive_is_an_empty_packet_with_initial_acks() {
    let mut session = session(FramingMode::Datagram);
    assert!(drain(&mut session, Time::ZERO).is_empty());
    let keepalive = session.poll_timeout().unwrap();
    assert_eq!(keepalive, Time::from_millis(1000));
    let sent = session.poll_transmit(keepalive).unwrap();
    let (framing, packet) = open_datagram(&peer_key(), &sent.bytes).unwrap();
    assert_eq!(
        (framing.sequence, framing.ack_last, framing.ack_bits),
        (250, 39, u64::MAX)
    );
    assert_eq!((packet.timestamp, packet.message_count), (1000, 0));
}

#[test]
fn window_caps_unacknowledged_packets_and_timestamps_always_increase() {
    let mut session = session(FramingMode::Datagram);
    session.introduce_type("urn:lessgate:test:crate").unwrap();
    for round in 0..100 {
        session
            .queue_message(Message::IntroduceType {
                type_id: TypeId::new(1000 + round),
                uri: "x".repeat(1000),
            })
            .unwrap();
    }
    let mut sent = drain(&mut session, Time::ZERO);
    assert_eq!(sent.len(), 64, "the window holds 64 packets");
    let mut now = Time::ZERO;
    while now < Time::from_millis(10_000) {
        now = session.poll_timeout().unwrap();
        session.handle_timeout(now);
        sent.extend(drain(&mut session, now));
    }
    assert!(!session.is_closed());
    let sequences: std::collections::BTreeSet<u8> = sent.iter().map(|s| s.0).collect();
    assert_eq!(sequences.len(), 64, "re-sends reuse their sequence numbers");
    assert!(
        sent.windows(2).all(|pair| pair[1].1 > pair[0].1),
        "timestamps strictly increase"
    );
    assert!(session.stats().packets_resent > 0);
}

/// The peer's first datagram, empty, acknowledging every packet up to
/// sequence `last`.
fn acknowledgement_up_to(last: u8) -> Vec<u8> {
    let framing = crate::less::packet::DatagramFraming {
        sequence: 40,
        ack_last: last,
        ack_bits: u64::MAX,
    };
    let key = SessionKeys::derive(&SECRET, LinkRole::Acceptor).send;
    crate::less::packet::seal_datagram(&key, &framing, 1, 0, &[])
}

/// Queues an IntroduceType whose uri is `len` bytes long.
fn queue_type(session: &mut Session, id: u64, len: usize) {
    session
        .queue_message(Message::IntroduceType {
            type_id: TypeId::new(id),
            uri: "x".repeat(len),
        })
        .unwrap();
}

#[test]
fn an_idle_link_sends_at_once_and_a_busy_one_sends_what_waited_together() {
    let mut session = session(FramingMode::Datagram);
    let now = Time::from_millis(1);
    // Idle, within its window: a message leaves when it is queued, alone,
    // with no timer or tick to wait for.
    queue_type(&mut session, 1000, 10);
    let counts: Vec<usize> = drain(&mut session, now).iter().map(|s| s.2).collect();
    assert_eq!(counts, [1]);
    // Busy: 63 packets of one large message each fill the window of 64;
    // what is queued then waits for acknowledgements ...
    for id in 1001..1064 {
        queue_type(&mut session, id, 1000);
    }
    assert_eq!(drain(&mut session, now).len(), 63);
    for id in 2000..2040 {
        queue_type(&mut session, id, 10);
    }
    assert!(drain(&mut session, now).is_empty(), "the window is full");
    // ... and leaves with the first one, in one packet rather than forty.
    let later = Time::from_millis(2);
    session.handle_datagram(later, &acknowledgement_up_to(57));
    let counts: Vec<usize> = drain(&mut session, later).iter().map(|s| s.2).collect();
    assert_eq!(counts, [40]);
}

#[test]
fn silence_closes_after_the_idle_timeout() {
    let mut session = session(FramingMode::Stream);
    let mut now = Time::ZERO;
    while !session.is_closed() {
        now = session.poll_timeout().unwrap();
        session.handle_timeout(now);
        while session.poll_transmit(now).is_some() {}
    }
    assert_eq!(now, Time::from_millis(15_000));
    assert_eq!(session.close_reason(), Some(&CloseReason::IdleTimeout));
    assert!(matches!(session.poll_event(), Some(Event::Closed { .. })));
    assert_eq!(
        session.introduce_type("urn:lessgate:test:crate"),
        Err(CommandError::Closed)
    );
}

#[test]
fn pending_events_are_listed_without_being_taken() {
    let mut session = session(FramingMode::Stream);
    assert_eq!(session.pending_events().count(), 0);
    while !session.is_closed() {
        let now = session.poll_timeout().unwrap();
        session.handle_timeout(now);
        while session.poll_transmit(now).is_some() {}
    }
    let pending: Vec<&Event> = session.pending_events().collect();
    assert!(matches!(pending[..], [Event::Closed { .. }]), "{pending:?}");
    assert_eq!(session.pending_events().count(), 1, "listing takes nothing");
    assert!(matches!(session.poll_event(), Some(Event::Closed { .. })));
    assert_eq!(session.pending_events().count(), 0);
}

#[test]
fn commands_are_validated() {
    let mut session = session(FramingMode::Datagram);
    assert!(matches!(
        session.introduce_type("urn:nope"),
        Err(CommandError::UnknownSchema(_))
    ));
    let type_id = session.introduce_type("urn:lessgate:test:crate").unwrap();
    let entity = session.allocate_object_id();
    let bad = vec![PropertyValue {
        key: PropertyKey::new(2, 2),
        value: Value::String("not an integer".into()),
    }];
    assert!(matches!(
        session.introduce_entity(entity, type_id, bad),
        Err(CommandError::TypeMismatch(_))
    ));
    session.introduce_entity(entity, type_id, vec![]).unwrap();
    assert_eq!(
        session.introduce_entity(entity, type_id, vec![]),
        Err(CommandError::IdInUse)
    );
    assert!(matches!(
        session.set_property(entity, PropertyKey::new(9, 9), Value::Null),
        Err(CommandError::UnknownProperty(_))
    ));
    assert_eq!(
        session.request_entity(ObjectId::new(5)),
        Err(CommandError::UnknownEntity)
    );
    assert_eq!(
        session.send_method_result(RequestId::new(1), MethodStatus::SUCCESS, Value::Null),
        Err(CommandError::UnknownRequest)
    );
    session.remove_entity(entity).unwrap();
    // Never introduced to the peer: free again at once.
    assert!(session.object_id_available(entity));
}
