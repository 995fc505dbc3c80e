//! Two real nodes on 127.0.0.1: QUIC with pinned mutual TLS, the Hello
//! exchange, then LESS messages both ways over UDP (and over a QUIC stream
//! in stream mode), including a packet too large for a datagram.

mod peer_common;

use lessgate::config::PeerLinkMode;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::Event;
use lessgate::less::value::Value;
use lessgate::peering::keys::Role;
use lessgate::peering::negotiate::LinkFraming;
use lessgate::peering::reason::ReasonCode;
use lessgate::transport::peer::PeerEvent;
use peer_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_exchange_entities_over_udp_both_ways() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    // alpha dials; beta only accepts.
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let to_beta = link_up(&mut alpha_events, "beta").await;
    let to_alpha = link_up(&mut beta_events, "alpha").await;
    assert_eq!(to_beta.role(), Role::Dialer);
    assert_eq!(to_alpha.role(), Role::Listener);
    assert_eq!(to_beta.framing(), LinkFraming::Datagram);
    assert_eq!(to_beta.peer_hello().name, "beta");
    assert_eq!(
        to_alpha.peer_node(),
        lessgate::peering::hello::NodeId(uuid::Uuid::from_u128(0xa1))
    );

    // alpha -> beta: introduce-type, subscribe, introduce-entity.
    offer_crate(&mut alpha_events, &to_beta, "crate of alpha");
    accept_crate(&mut beta_events, &to_alpha, "alpha").await;
    assert_eq!(
        introduced_name(&mut beta_events, "alpha").await,
        "crate of alpha"
    );

    // beta -> alpha, the other direction with its own sequence space and key.
    offer_crate(&mut beta_events, &to_alpha, "crate of beta");
    accept_crate(&mut alpha_events, &to_beta, "beta").await;
    assert_eq!(
        introduced_name(&mut alpha_events, "beta").await,
        "crate of beta"
    );

    // An update, then a value too large for one datagram (MTU 1200): the
    // session tags it for the stream and the driver sends it on QUIC.
    let entity = alpha_events
        .with_session(&to_beta, |session| {
            let entity = lessgate::less::ids::ObjectId::new(1);
            session
                .update_entity(
                    entity,
                    vec![PropertyValue {
                        key: counter_key(),
                        value: Value::Integer(42),
                    }],
                )
                .map(|()| entity)
        })
        .unwrap()
        .unwrap();
    let counter = session_event(
        &mut beta_events,
        "alpha",
        "counter update",
        |event| match event {
            Event::EntityUpdated { values, .. } => values.into_iter().find_map(|v| match v.value {
                Value::Integer(n) if v.key == counter_key() => Some(n),
                _ => None,
            }),
            _ => None,
        },
    )
    .await;
    assert_eq!(counter, 42);
    let blob = vec![0x5a; 4000];
    alpha_events
        .with_session(&to_beta, |session| {
            session.update_entity(
                entity,
                vec![PropertyValue {
                    key: blob_key(),
                    value: Value::VariableBinary(blob.clone()),
                }],
            )
        })
        .unwrap()
        .unwrap();
    let received = session_event(
        &mut beta_events,
        "alpha",
        "blob update",
        |event| match event {
            Event::EntityUpdated { values, .. } => values.into_iter().find_map(|v| match v.value {
                Value::VariableBinary(bytes) => Some(bytes),
                _ => None,
            }),
            _ => None,
        },
    )
    .await;
    assert_eq!(received, blob);
    let sent_on_stream = alpha_events
        .with_session(&to_beta, |session| session.stats().stream_frames_sent)
        .unwrap();
    assert!(sent_on_stream >= 1, "the oversize packet took the stream");

    // A datagram from an address no link knows is counted and dropped.
    let stray = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    stray
        .send_to(b"not a peer", beta_node.data_address().unwrap())
        .unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while beta_node.unknown_source_datagrams() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "stray datagram not counted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(beta_node.unknown_source_datagrams(), 1);
    assert!(!to_alpha.is_closed());

    // Graceful shutdown: beta hears a goodbye with reason `shutdown`.
    alpha_node.shutdown().await;
    let closure = wait_for(&mut beta_events, "link down", |event| match event {
        PeerEvent::LinkDown { closure, .. } => Some(closure),
        _ => None,
    })
    .await;
    assert_eq!(closure.reason.code, ReasonCode::SHUTDOWN);
    assert!(closure.was_established);
    assert!(to_alpha.is_closed());
    beta_node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_mode_carries_every_packet_on_quic() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Stream);
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Stream);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;
    assert_eq!(beta_node.data_address(), None);

    let to_beta = link_up(&mut alpha_events, "beta").await;
    let to_alpha = link_up(&mut beta_events, "alpha").await;
    // One side without UDP makes the whole link stream-framed.
    assert_eq!(to_beta.framing(), LinkFraming::Stream);
    assert_eq!(to_alpha.framing(), LinkFraming::Stream);

    offer_crate(&mut beta_events, &to_alpha, "streamed crate");
    accept_crate(&mut alpha_events, &to_beta, "beta").await;
    assert_eq!(
        introduced_name(&mut alpha_events, "beta").await,
        "streamed crate"
    );
    offer_crate(&mut alpha_events, &to_beta, "reply");
    accept_crate(&mut beta_events, &to_alpha, "alpha").await;
    assert_eq!(introduced_name(&mut beta_events, "alpha").await, "reply");
    assert_eq!(alpha_node.unknown_source_datagrams(), 0);

    beta_node.shutdown().await;
    alpha_node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_dials_leave_exactly_the_link_dialled_by_the_smaller_uuid() {
    logs();
    // alpha's UUID is smaller, so the connection alpha dialled survives.
    let alpha = Seat::new("alpha", 0x01, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0x02, PeerLinkMode::Udp);
    let alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let beta_config = config(&beta, vec![alpha.as_peer(true)], PeerLinkMode::Udp);
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;

    let mut transient = Vec::new();
    let on_alpha = wait_for(
        &mut alpha_events,
        "alpha's dialled link",
        |event| match event {
            PeerEvent::LinkUp(link) if link.role() == Role::Dialer => Some(link),
            PeerEvent::LinkUp(link) => {
                transient.push(link);
                None
            }
            _ => None,
        },
    )
    .await;
    let on_beta = wait_for(
        &mut beta_events,
        "beta's accepted link",
        |event| match event {
            PeerEvent::LinkUp(link) if link.role() == Role::Listener => Some(link),
            PeerEvent::LinkUp(link) => {
                transient.push(link);
                None
            }
            _ => None,
        },
    )
    .await;

    offer_crate(&mut alpha_events, &on_alpha, "one link");
    accept_crate(&mut beta_events, &on_beta, "alpha").await;
    assert_eq!(introduced_name(&mut beta_events, "alpha").await, "one link");

    // Any connection beta dialled was superseded and has ended.
    for link in &transient {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !link.is_closed() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} still open",
                link.id()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    assert!(!on_alpha.is_closed() && !on_beta.is_closed());
    alpha_node.shutdown().await;
    beta_node.shutdown().await;
}
