//! Refusals over real QUIC on 127.0.0.1: a certificate no peer file pins, a
//! pinned fingerprint the peer does not match, and a peer speaking another
//! peer-link version, each refused with its reason on both sides.

mod peer_common;

use std::sync::Arc;

use lessgate::config::PeerLinkMode;
use lessgate::peering::control::{kind, ControlBuffer, ControlMessage};
use lessgate::peering::fingerprint::Fingerprint;
use lessgate::peering::handshake::Initiator;
use lessgate::peering::hello::{DataPath, Hello, NodeId};
use lessgate::peering::keys::Role;
use lessgate::peering::reason::{Reason, ReasonCode};
use lessgate::transport::identity;
use lessgate::transport::peer::PeerEvent;
use lessgate::transport::peer_tls;
use peer_common::*;

/// What a `Refused` event says.
#[derive(Debug)]
struct Refusal {
    peer: Option<String>,
    role: Role,
    reason: Reason,
    initiator: Initiator,
    peer_version: Option<u16>,
}

async fn refusal(events: &mut Sessions, what: &str) -> Refusal {
    wait_for(events, what, |event| match event {
        PeerEvent::Refused {
            peer,
            role,
            reason,
            initiator,
            peer_version,
            ..
        } => Some(Refusal {
            peer: peer.map(|p| p.to_string()),
            role,
            reason,
            initiator,
            peer_version,
        }),
        PeerEvent::LinkUp(link) => panic!("unexpected link with {}", link.peer()),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_no_peer_file_pins_is_refused() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let mallory = Seat::new("mallory", 0xee, PeerLinkMode::Udp);
    // alpha pins only beta; mallory knows alpha's real fingerprint.
    let alpha_config = config(&alpha, vec![beta.as_peer(false)], PeerLinkMode::Udp);
    let mallory_config = config(&mallory, vec![alpha.as_peer(true)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (mallory_node, mut mallory_events) = start(mallory, mallory_config).await;

    let at_alpha = refusal(&mut alpha_events, "alpha refusing mallory").await;
    assert_eq!(at_alpha.peer, None, "an unpinned certificate names no peer");
    assert_eq!(at_alpha.role, Role::Listener);
    let expected = format!(
        "certificate {} is not pinned by any peer file",
        mallory_node.fingerprint()
    );
    assert!(
        at_alpha.reason.text.contains(&expected),
        "{}",
        at_alpha.reason
    );

    let at_mallory = refusal(&mut mallory_events, "mallory refused").await;
    assert_eq!(at_mallory.peer.as_deref(), Some("alpha"));
    assert_eq!(at_mallory.role, Role::Dialer);
    // TLS 1.3: the client may finish before the server rejects its
    // certificate, so the refusal arrives as the server's close.
    assert!(
        at_mallory.reason.text.contains(&expected),
        "{}",
        at_mallory.reason
    );

    mallory_node.shutdown().await;
    alpha_node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_certificate_does_not_match_the_pin_is_refused() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    // alpha's file for beta pins some other certificate.
    let wrong = identity::generate("impostor").unwrap().fingerprint;
    let mut beta_entry = beta.as_peer(true);
    beta_entry.fingerprint = wrong;
    let alpha_config = config(&alpha, vec![beta_entry], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let at_alpha = refusal(&mut alpha_events, "alpha refusing beta's certificate").await;
    assert_eq!(at_alpha.peer.as_deref(), Some("beta"));
    let expected = format!(
        "certificate {} is not pinned for the dialled peer",
        beta_node.fingerprint()
    );
    assert!(
        at_alpha.reason.text.contains(&expected),
        "{}",
        at_alpha.reason
    );
    let at_beta = refusal(&mut beta_events, "beta's side of the refusal").await;
    assert_eq!(at_beta.role, Role::Listener);
    assert_eq!(at_beta.peer, None);

    alpha_node.shutdown().await;
    beta_node.shutdown().await;
}

fn raw_hello(node: u128, name: &str) -> Hello {
    Hello {
        node: NodeId(uuid::Uuid::from_u128(node)),
        name: name.to_owned(),
        incarnation: 9,
        schema_uri: "urn:lessgate:less:connection:1".to_owned(),
        timestamp_quantum_micros: 1000,
        initial_sequence: 3,
        data_path: DataPath::Stream,
        mtu: 1200,
        tick_hz: 20,
        features: vec![],
    }
}

/// Reads control messages until the peer ends the stream.
async fn read_all(mut recv: quinn::RecvStream) -> Vec<(u16, ControlMessage)> {
    let bytes = recv.read_to_end(64 * 1024).await.unwrap();
    let mut buffer = ControlBuffer::default();
    buffer.push(&bytes);
    std::iter::from_fn(|| buffer.next_message().unwrap())
        .map(|(envelope, message)| (envelope.version, message))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_of_another_version_is_refused_with_a_reason() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let alpha_address = alpha.control_address();
    let alpha_fingerprint: Fingerprint = alpha.identity.fingerprint;
    let alpha_config = config(&alpha, vec![beta.as_peer(false)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;

    // A "version 2" beta: right certificate, right ALPN, newer envelope.
    let client = peer_tls::client_config(&beta.identity, alpha_fingerprint, PATIENCE).unwrap();
    let endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let connection = endpoint
        .connect_with(client, alpha_address, peer_tls::SERVER_NAME)
        .unwrap()
        .await
        .unwrap();
    let (mut send, recv) = connection.open_bi().await.unwrap();
    let mut hello = ControlMessage::Hello(raw_hello(0xb2, "beta")).to_bytes();
    hello[8..10].copy_from_slice(&2u16.to_le_bytes());
    send.write_all(&hello).await.unwrap();

    let text = "peer speaks peer-link version 2, this node speaks 1: \
                upgrade the node with the older version";
    let answers = read_all(recv).await;
    assert_eq!(
        answers,
        vec![(
            1,
            ControlMessage::Refuse(Reason::new(ReasonCode::VERSION_MISMATCH, text))
        )]
    );
    match connection.closed().await {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 0x0002);
            assert_eq!(&close.reason[..], text.as_bytes());
        }
        other => panic!("unexpected close {other}"),
    }
    let at_alpha = refusal(&mut alpha_events, "alpha refusing version 2").await;
    assert_eq!(at_alpha.peer.as_deref(), Some("beta"));
    assert_eq!(at_alpha.initiator, Initiator::Local);
    assert_eq!(
        at_alpha.reason,
        Reason::new(ReasonCode::VERSION_MISMATCH, text)
    );
    alpha_node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_dialling_a_newer_peer_reports_the_peers_version() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    // beta is a raw "version 2" listener that refuses version 1.
    let server =
        peer_tls::server_config(&beta.identity, [alpha.identity.fingerprint], PATIENCE).unwrap();
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server),
        beta.control.try_clone().unwrap(),
        Arc::new(quinn::TokioRuntime),
    )
    .unwrap();
    let listener = tokio::spawn(async move {
        let connection = endpoint.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = connection.accept_bi().await.unwrap();
        let mut envelope = [0u8; 16];
        recv.read_exact(&mut envelope).await.unwrap();
        assert_eq!(&envelope[..8], b"LESSPEER");
        assert_eq!(u16::from_le_bytes([envelope[8], envelope[9]]), 1);
        assert_eq!(envelope[11], kind::HELLO);
        let mut refuse = ControlMessage::Refuse(Reason::new(
            ReasonCode::VERSION_MISMATCH,
            "this node speaks peer-link version 2 only",
        ))
        .to_bytes();
        refuse[8..10].copy_from_slice(&2u16.to_le_bytes());
        send.write_all(&refuse).await.unwrap();
        send.finish().unwrap();
        connection.closed().await;
    });
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;

    let at_alpha = refusal(&mut alpha_events, "beta refusing alpha").await;
    assert_eq!(at_alpha.peer.as_deref(), Some("beta"));
    assert_eq!(at_alpha.initiator, Initiator::Remote);
    assert_eq!(at_alpha.peer_version, Some(2));
    assert_eq!(at_alpha.reason.code, ReasonCode::VERSION_MISMATCH);
    assert_eq!(
        at_alpha.reason.text,
        "this node speaks peer-link version 2 only"
    );
    listener.await.unwrap();
    alpha_node.shutdown().await;
}

/// Two nodes configured with one `[node] uuid`: the listener refuses with
/// `self-connection`, both sides count it, and the link never comes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_with_one_uuid_are_refused_and_counted_on_both_sides() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let twin = Seat::new("twin", 0xa1, PeerLinkMode::Udp);
    let alpha_config = config(&alpha, vec![twin.as_peer(false)], PeerLinkMode::Udp);
    let twin_config = config(&twin, vec![alpha.as_peer(true)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (twin_node, mut twin_events) = start(twin, twin_config).await;

    let at_alpha = refusal(&mut alpha_events, "alpha refusing its twin").await;
    assert_eq!(at_alpha.reason.code, ReasonCode::SELF_CONNECTION);
    assert_eq!(at_alpha.initiator, Initiator::Local);
    assert_eq!(at_alpha.peer.as_deref(), Some("twin"));
    let at_twin = refusal(&mut twin_events, "the twin refused").await;
    assert_eq!(at_twin.reason.code, ReasonCode::SELF_CONNECTION);
    assert_eq!(at_twin.initiator, Initiator::Remote);
    assert!(alpha_node.identity_conflicts() >= 1);
    assert!(twin_node.identity_conflicts() >= 1);

    twin_node.shutdown().await;
    alpha_node.shutdown().await;
}

/// Two peers of alpha (two certificates, two peer files) declare one node
/// UUID: the first links, the second is refused with `identity-conflict`
/// and counted, and the first link stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_peer_claiming_a_linked_peers_uuid_is_refused() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let copy = Seat::new("copy", 0xb2, PeerLinkMode::Udp);
    let alpha_config = config(
        &alpha,
        vec![beta.as_peer(false), copy.as_peer(false)],
        PeerLinkMode::Udp,
    );
    let beta_config = config(&beta, vec![alpha.as_peer(true)], PeerLinkMode::Udp);
    let copy_config = config(&copy, vec![alpha.as_peer(true)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;
    link_up(&mut alpha_events, "beta").await;
    link_up(&mut beta_events, "alpha").await;

    let (copy_node, mut copy_events) = start(copy, copy_config).await;
    let at_alpha = wait_for(
        &mut alpha_events,
        "alpha refusing the copy",
        |event| match event {
            PeerEvent::Refused { peer, reason, .. } => Some((peer, reason)),
            PeerEvent::LinkDown { .. } => panic!("a link went down"),
            PeerEvent::LinkUp(link) => panic!("unexpected link with {}", link.peer()),
            _ => None,
        },
    )
    .await;
    assert_eq!(at_alpha.0.map(|p| p.to_string()).as_deref(), Some("copy"));
    assert_eq!(at_alpha.1.code, ReasonCode::IDENTITY_CONFLICT);
    assert!(
        at_alpha.1.text.contains("already linked here as peer beta"),
        "{}",
        at_alpha.1
    );
    let at_copy = refusal(&mut copy_events, "the copy refused").await;
    assert_eq!(at_copy.reason.code, ReasonCode::IDENTITY_CONFLICT);
    assert_eq!(at_copy.initiator, Initiator::Remote);
    assert!(alpha_node.identity_conflicts() >= 1);
    assert!(copy_node.identity_conflicts() >= 1);
    assert_eq!(beta_node.identity_conflicts(), 0);

    copy_node.shutdown().await;
    beta_node.shutdown().await;
    alpha_node.shutdown().await;
}

/// alpha's peer file for beta names a uuid that is not beta's: the link is
/// refused with `identity-conflict`, the reason naming both uuids and the
/// file, and counted; beta is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_uuid_is_not_the_one_its_file_names_is_refused() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let mut beta_entry = beta.as_peer(true);
    let named = uuid::Uuid::from_u128(0xb3);
    beta_entry.uuid = Some(named);
    let alpha_config = config(&alpha, vec![beta_entry], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let at_alpha = refusal(&mut alpha_events, "alpha refusing beta's uuid").await;
    assert_eq!(at_alpha.peer.as_deref(), Some("beta"));
    assert_eq!(at_alpha.reason.code, ReasonCode::IDENTITY_CONFLICT);
    let text = &at_alpha.reason.text;
    assert!(
        text.contains(&uuid::Uuid::from_u128(0xb2).to_string())
            && text.contains(&named.to_string())
            && text.contains("peers/beta.toml"),
        "{text}"
    );
    let at_beta = refusal(&mut beta_events, "beta told why").await;
    assert_eq!(at_beta.reason.code, ReasonCode::IDENTITY_CONFLICT);
    assert!(alpha_node.identity_conflicts() >= 1);

    beta_node.shutdown().await;
    alpha_node.shutdown().await;
}
