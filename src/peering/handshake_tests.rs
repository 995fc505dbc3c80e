//! Handshake state machine tests: two machines wired back to back, and
//! hand-made byte sequences for the refusals.

use super::*;
use crate::peering::control::{ControlMessage, PROTOCOL_VERSION};
use crate::peering::hello::tests::example;
use crate::peering::hello::NodeId;

fn hellos() -> (Hello, Hello) {
    let dialer = example();
    let mut listener = example();
    listener.node = NodeId(uuid::Uuid::from_u128(0xbeef));
    listener.name = "beta".into();
    listener.initial_sequence = 7;
    (dialer, listener)
}

/// Moves every queued transmission from `from` to `to`.
fn deliver(from: &mut Handshake, to: &mut Handshake) {
    while let Some(bytes) = from.poll_transmit() {
        to.handle_bytes(&bytes);
    }
}

fn events(handshake: &mut Handshake) -> Vec<HandshakeEvent> {
    std::iter::from_fn(|| handshake.poll_event()).collect()
}

#[test]
fn dialer_and_listener_establish_with_four_messages() {
    let (dialer_hello, listener_hello) = hellos();
    let mut dialer = Handshake::new(Role::Dialer, dialer_hello.clone());
    let mut listener = Handshake::new(Role::Listener, listener_hello.clone());
    assert_eq!(listener.poll_transmit(), None, "the listener speaks second");

    deliver(&mut dialer, &mut listener);
    assert_eq!(events(&mut listener), vec![HandshakeEvent::PeerDeclared]);
    assert_eq!(listener.negotiated().unwrap().peer, dialer_hello);
    listener.commit();
    deliver(&mut listener, &mut dialer);
    assert_eq!(events(&mut dialer), vec![HandshakeEvent::PeerDeclared]);
    assert_eq!(dialer.negotiated().unwrap().peer.initial_sequence, 7);
    dialer.commit();
    deliver(&mut dialer, &mut listener);
    assert_eq!(events(&mut listener), vec![HandshakeEvent::Established]);
    deliver(&mut listener, &mut dialer);
    assert_eq!(events(&mut dialer), vec![HandshakeEvent::Established]);
    assert!(dialer.is_established() && listener.is_established());
}

#[test]
fn goodbye_ends_an_established_link_on_both_sides() {
    let (dialer_hello, listener_hello) = hellos();
    let mut dialer = Handshake::new(Role::Dialer, dialer_hello);
    let mut listener = Handshake::new(Role::Listener, listener_hello);
    deliver(&mut dialer, &mut listener);
    listener.commit();
    deliver(&mut listener, &mut dialer);
    dialer.commit();
    deliver(&mut dialer, &mut listener);
    deliver(&mut listener, &mut dialer);
    events(&mut dialer);
    events(&mut listener);

    dialer.goodbye(Reason::new(ReasonCode::SHUTDOWN, "node stopping"));
    let goodbye = dialer.poll_transmit().unwrap();
    assert_eq!(
        hex::encode(&goodbye),
        format!(
            "4c45535350454552010000041100000001000d00{}",
            hex::encode("node stopping")
        )
    );
    listener.handle_bytes(&goodbye);
    let closure = Closure {
        reason: Reason::new(ReasonCode::SHUTDOWN, "node stopping"),
        initiator: Initiator::Remote,
        peer_version: Some(PROTOCOL_VERSION),
        was_established: true,
    };
    assert_eq!(events(&mut listener), vec![HandshakeEvent::Closed(closure)]);
    assert!(listener.is_closed());
}

#[test]
fn version_two_hello_is_refused_with_a_reason() {
    let (_, listener_hello) = hellos();
    let mut listener = Handshake::new(Role::Listener, listener_hello);
    let mut hello = ControlMessage::Hello(example()).to_bytes();
    hello[8..10].copy_from_slice(&2u16.to_le_bytes());
    listener.handle_bytes(&hello);
    let refuse = listener.poll_transmit().unwrap();
    let text = "peer speaks peer-link version 2, this node speaks 1: \
                upgrade the node with the older version";
    assert_eq!(
        hex::encode(&refuse[..20]),
        format!(
            "4c4553535045455201000003{}0200{}",
            hex::encode((4 + text.len() as u32).to_le_bytes()),
            hex::encode((text.len() as u16).to_le_bytes())
        )
    );
    match events(&mut listener).as_slice() {
        [HandshakeEvent::Closed(closure)] => {
            assert_eq!(closure.reason.code, ReasonCode::VERSION_MISMATCH);
            assert_eq!(closure.reason.text, text);
            assert_eq!(closure.initiator, Initiator::Local);
        }
        other => panic!("unexpected events {other:?}"),
    }
}

#[test]
fn a_refusal_from_a_newer_peer_is_reported_with_its_version() {
    let (dialer_hello, _) = hellos();
    let mut dialer = Handshake::new(Role::Dialer, dialer_hello);
    dialer.poll_transmit();
    let refuse = hex::decode("4c45535350454552020000030700000002000300763220").unwrap();
    dialer.handle_bytes(&refuse);
    match events(&mut dialer).as_slice() {
        [HandshakeEvent::Closed(closure)] => {
            assert_eq!(closure.peer_version, Some(2));
            assert_eq!(closure.initiator, Initiator::Remote);
            assert_eq!(closure.reason.text, "v2 ");
            assert!(!closure.was_established);
        }
        other => panic!("unexpected events {other:?}"),
    }
    assert_eq!(dialer.poll_transmit(), None, "no answer to a refusal");
}

#[test]
fn bad_hellos_are_refused_with_their_reason_codes() {
    let (_, listener_hello) = hellos();
    let own = ControlMessage::Hello(listener_hello.clone()).to_bytes();
    let mut incompatible_hello = example();
    incompatible_hello.mtu = 10;
    let mut other_schema = example();
    other_schema.schema_uri = "urn:x".into();
    let cases = [
        (b"HTTP/1.1 200 OK".to_vec(), ReasonCode::BAD_MAGIC),
        (own, ReasonCode::SELF_CONNECTION),
        (
            ControlMessage::Hello(incompatible_hello).to_bytes(),
            ReasonCode::INCOMPATIBLE,
        ),
        (
            ControlMessage::Hello(other_schema).to_bytes(),
            ReasonCode::INCOMPATIBLE,
        ),
        (
            ControlMessage::Ready.to_bytes(),
            ReasonCode::UNEXPECTED_MESSAGE,
        ),
    ];
    for (bytes, code) in cases {
        let mut listener = Handshake::new(Role::Listener, listener_hello.clone());
        listener.handle_bytes(&bytes);
        assert!(listener.is_closed(), "{code}");
        let sent = listener.poll_transmit().expect("a Refuse is sent");
        assert_eq!(sent[11], crate::peering::control::kind::REFUSE);
        assert_eq!(u16::from_le_bytes([sent[16], sent[17]]), code.0);
    }
}

#[test]
fn timeout_and_stream_end_close_only_unfinished_handshakes() {
    let (dialer_hello, _) = hellos();
    let mut dialer = Handshake::new(Role::Dialer, dialer_hello);
    dialer.poll_transmit();
    dialer.handle_timeout();
    assert!(dialer.is_closed());
    let sent = dialer.poll_transmit().unwrap();
    assert_eq!(u16::from_le_bytes([sent[16], sent[17]]), 0x000b);
    dialer.handle_stream_end();
    assert_eq!(events(&mut dialer).len(), 1, "closed once");

    let (_, listener_hello) = hellos();
    let mut listener = Handshake::new(Role::Listener, listener_hello);
    listener.handle_stream_end();
    let sent = listener.poll_transmit().expect("a Refuse is sent");
    assert_eq!(u16::from_le_bytes([sent[16], sent[17]]), 0x000c);
    assert!(listener.is_closed());
}

#[test]
fn arbitration_refusal_sends_duplicate_link() {
    let (dialer_hello, listener_hello) = hellos();
    let mut dialer = Handshake::new(Role::Dialer, dialer_hello);
    let mut listener = Handshake::new(Role::Listener, listener_hello);
    deliver(&mut dialer, &mut listener);
    events(&mut listener);
    listener.refuse(Reason::new(
        ReasonCode::DUPLICATE_LINK,
        "another link survives",
    ));
    deliver(&mut listener, &mut dialer);
    match events(&mut dialer).as_slice() {
        [HandshakeEvent::Closed(closure)] => {
            assert_eq!(closure.reason.code, ReasonCode::DUPLICATE_LINK)
        }
        other => panic!("unexpected events {other:?}"),
    }
}
