//! Three real nodes on 127.0.0.1 in a full mesh (alpha dials beta and gamma,
//! beta dials gamma): every node offers an entity on every link and sees the
//! entities of both others arrive.

mod peer_common;

use std::collections::BTreeSet;

use lessgate::config::PeerLinkMode;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::Event;
use lessgate::less::value::Value;
use lessgate::transport::peer::{PeerEvent, PeerLink, PeerNode};
use peer_common::*;

/// Runs one node's side: offer on every link that comes up, subscribe to
/// every crate type, collect `(peer, entity name)` until `expected` arrive.
async fn converse(
    me: &'static str,
    mut events: Sessions,
    expected: usize,
) -> (BTreeSet<(String, String)>, Sessions) {
    let mut links: Vec<PeerLink> = Vec::new();
    let mut seen = BTreeSet::new();
    while seen.len() < expected {
        let event = tokio::time::timeout(PATIENCE, events.next())
            .await
            .unwrap_or_else(|_| panic!("{me} saw only {seen:?}"))
            .expect("events");
        match event {
            AppEvent::Peer(PeerEvent::LinkUp(link)) => {
                offer_crate(&mut events, &link, &format!("crate of {me}"));
                links.push(link);
            }
            AppEvent::Session { peer, event, link } => {
                let handle = links
                    .iter()
                    .find(|l| l.id() == link)
                    .expect("link before its events")
                    .clone();
                match event {
                    Event::TypeIntroduced { type_id, uri, .. } if uri == CRATE => events
                        .with_session(&handle, |s| s.subscribe_type(type_id, &[name_key()]))
                        .unwrap()
                        .unwrap(),
                    Event::EntityIntroduced { values, .. } => {
                        for PropertyValue { value, .. } in values {
                            if let Value::String(name) = value {
                                seen.insert((peer.to_string(), name));
                            }
                        }
                    }
                    _ => {}
                }
            }
            AppEvent::Peer(PeerEvent::LinkDown { peer, closure, .. }) => {
                panic!("{me}: link with {peer} went down: {}", closure.reason)
            }
            AppEvent::Peer(_) => {}
        }
    }
    (seen, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_see_each_others_entities() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let gamma = Seat::new("gamma", 0xc3, PeerLinkMode::Udp);
    let alpha_config = config(
        &alpha,
        vec![beta.as_peer(true), gamma.as_peer(true)],
        PeerLinkMode::Udp,
    );
    let beta_config = config(
        &beta,
        vec![alpha.as_peer(false), gamma.as_peer(true)],
        PeerLinkMode::Udp,
    );
    let gamma_config = config(
        &gamma,
        vec![alpha.as_peer(false), beta.as_peer(false)],
        PeerLinkMode::Udp,
    );
    let (alpha_node, alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, beta_events) = start(beta, beta_config).await;
    let (gamma_node, gamma_events) = start(gamma, gamma_config).await;

    let (a, b, c) = tokio::join!(
        converse("alpha", alpha_events, 2),
        converse("beta", beta_events, 2),
        converse("gamma", gamma_events, 2),
    );
    let pairs = |items: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        items
            .iter()
            .map(|(p, n)| (p.to_string(), n.to_string()))
            .collect()
    };
    assert_eq!(
        a.0,
        pairs(&[("beta", "crate of beta"), ("gamma", "crate of gamma")])
    );
    assert_eq!(
        b.0,
        pairs(&[("alpha", "crate of alpha"), ("gamma", "crate of gamma")])
    );
    assert_eq!(
        c.0,
        pairs(&[("alpha", "crate of alpha"), ("beta", "crate of beta")])
    );

    for node in [alpha_node, beta_node, gamma_node] {
        assert_eq!(node.unknown_source_datagrams(), 0);
        PeerNode::shutdown(node).await;
    }
}
