//! Link lifecycle over real sockets: a restarted peer is redialled with
//! backoff and resynchronises on a new session (fresh keys, fresh sequence
//! numbers, new incarnation); a peer that stops sending LESS packets is
//! ended by the liveness timeout.

mod peer_common;

use std::time::Duration;

use lessgate::config::PeerLinkMode;
use lessgate::peering::handshake::{Handshake, HandshakeEvent, Initiator};
use lessgate::peering::hello::{DataPath, Hello, NodeId};
use lessgate::peering::keys::Role;
use lessgate::peering::reason::ReasonCode;
use lessgate::transport::peer::PeerEvent;
use lessgate::transport::peer_tls;
use peer_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_peer_is_redialled_and_resynchronised() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let beta_identity = beta.identity.clone();
    let beta_control = beta.control_address();
    let beta_data = beta.data_address().unwrap();
    let alpha_entry = alpha.as_peer(false);
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha_entry.clone()], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let first = link_up(&mut alpha_events, "beta").await;
    let first_on_beta = link_up(&mut beta_events, "alpha").await;
    offer_crate(&mut alpha_events, &first, "before restart");
    accept_crate(&mut beta_events, &first_on_beta, "alpha").await;
    assert_eq!(
        introduced_name(&mut beta_events, "alpha").await,
        "before restart"
    );
    let first_key = alpha_events
        .with_session(&first, |s| s.config().keys.send.clone())
        .unwrap();

    // beta stops (saying goodbye) and comes back on the same addresses with
    // the same identity but a new process incarnation.
    beta_node.shutdown().await;
    let down = wait_for(&mut alpha_events, "link down", |event| match event {
        PeerEvent::LinkDown { closure, .. } => Some(closure),
        _ => None,
    })
    .await;
    assert_eq!(down.reason.code, ReasonCode::SHUTDOWN);
    assert_eq!(down.initiator, Initiator::Remote);
    assert!(first.is_closed());
    assert!(
        alpha_events.with_session(&first, |_| ()).is_err(),
        "commands on an ended link fail"
    );

    let beta = Seat::rebind("beta", 0xb2, beta_identity, beta_control, beta_data).await;
    let mut beta_config = config(&beta, vec![alpha_entry], PeerLinkMode::Udp);
    beta_config.seed ^= 0x5eed;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let second = link_up(&mut alpha_events, "beta").await;
    let second_on_beta = link_up(&mut beta_events, "alpha").await;
    assert_ne!(second.id(), first.id());
    assert_eq!(second.role(), Role::Dialer, "alpha redialled");
    assert_ne!(
        second.peer_hello().incarnation,
        first.peer_hello().incarnation
    );
    let second_key = alpha_events
        .with_session(&second, |s| s.config().keys.send.clone())
        .unwrap();
    assert_ne!(
        second_key, first_key,
        "a new TLS session gives new MAC keys"
    );

    // The new session starts empty: the origin offers again, the peer sees it.
    offer_crate(&mut alpha_events, &second, "after restart");
    accept_crate(&mut beta_events, &second_on_beta, "alpha").await;
    assert_eq!(
        introduced_name(&mut beta_events, "alpha").await,
        "after restart"
    );
    offer_crate(&mut beta_events, &second_on_beta, "beta is back");
    accept_crate(&mut alpha_events, &second, "beta").await;
    assert_eq!(
        introduced_name(&mut alpha_events, "beta").await,
        "beta is back"
    );

    beta_node.shutdown().await;
    alpha_node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_goes_silent_is_ended_by_the_liveness_timeout() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let alpha_address = alpha.control_address();
    let alpha_fingerprint = alpha.identity.fingerprint;
    let mut alpha_config = config(&alpha, vec![beta.as_peer(false)], PeerLinkMode::Udp);
    alpha_config.liveness_timeout = Duration::from_millis(600);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;

    // beta completes the real handshake with the library's state machine,
    // then never sends a LESS packet (its UDP socket stays silent).
    let client = peer_tls::client_config(&beta.identity, alpha_fingerprint, PATIENCE).unwrap();
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let connection = endpoint
        .connect_with(client, alpha_address, peer_tls::SERVER_NAME)
        .unwrap()
        .await
        .unwrap();
    let (mut send, mut recv) = connection.open_bi().await.unwrap();
    let data = beta.data_address().unwrap();
    let hello = Hello {
        node: NodeId(uuid::Uuid::from_u128(0xb2)),
        name: "beta".into(),
        incarnation: 1,
        schema_uri: "urn:lessgate:less:connection:1".into(),
        timestamp_quantum_micros: 1000,
        initial_sequence: 200,
        data_path: DataPath::Udp {
            ip: Some(data.ip()),
            port: data.port(),
        },
        mtu: 1200,
        tick_hz: 20,
        features: vec![],
    };
    let mut handshake = Handshake::new(Role::Dialer, hello);
    let mut buffer = [0u8; 4096];
    loop {
        while let Some(bytes) = handshake.poll_transmit() {
            send.write_all(&bytes).await.unwrap();
        }
        match handshake.poll_event() {
            Some(HandshakeEvent::PeerDeclared) => handshake.commit(),
            Some(HandshakeEvent::Established) => break,
            Some(HandshakeEvent::Closed(closure)) => panic!("refused: {}", closure.reason),
            None => {
                let len = recv.read(&mut buffer).await.unwrap().unwrap();
                handshake.handle_bytes(&buffer[..len]);
            }
        }
    }
    let link = link_up(&mut alpha_events, "beta").await;
    assert_eq!(link.peer_hello().initial_sequence, 200);

    let closure = wait_for(&mut alpha_events, "liveness timeout", |event| match event {
        PeerEvent::LinkDown { closure, .. } => Some(closure),
        _ => None,
    })
    .await;
    assert_eq!(closure.reason.code, ReasonCode::LIVENESS_TIMEOUT);
    assert_eq!(closure.initiator, Initiator::Local);
    // alpha's Goodbye reaches the silent peer on the control stream.
    let len = recv.read(&mut buffer).await.unwrap().unwrap();
    handshake.handle_bytes(&buffer[..len]);
    match handshake.poll_event() {
        Some(HandshakeEvent::Closed(closure)) => {
            assert_eq!(closure.reason.code, ReasonCode::LIVENESS_TIMEOUT);
            assert_eq!(closure.reason.text, "no valid packet for 600 ms");
        }
        other => panic!("expected a goodbye, got {other:?}"),
    }
    alpha_node.shutdown().await;
}
