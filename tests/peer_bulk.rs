//! Bulk packets between two real nodes on 127.0.0.1 (docs/less-wire.md
//! 16.5): both Hellos list `bulk:zstd/1`, so a backlog of 3 000
//! introductions crosses as zstd-compressed stream datagrams on QUIC, and
//! every entity arrives with its name.

mod peer_common;

use std::collections::BTreeSet;

use lessgate::config::PeerLinkMode;
use lessgate::less::bulk::BULK_FEATURE;
use lessgate::less::property_list::PropertyValue;
use lessgate::less::session::Event;
use lessgate::less::value::Value;
use peer_common::*;

const CRATES: usize = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_introductions_crosses_in_bulk_packets() {
    logs();
    let alpha = Seat::new("alpha", 0xa1, PeerLinkMode::Udp);
    let beta = Seat::new("beta", 0xb2, PeerLinkMode::Udp);
    let mut alpha_config = config(&alpha, vec![beta.as_peer(true)], PeerLinkMode::Udp);
    let mut beta_config = config(&beta, vec![alpha.as_peer(false)], PeerLinkMode::Udp);
    alpha_config.features = vec![BULK_FEATURE.to_owned()];
    beta_config.features = vec![BULK_FEATURE.to_owned()];
    let (alpha_node, mut alpha_events) = start(alpha, alpha_config).await;
    let (beta_node, mut beta_events) = start(beta, beta_config).await;
    let to_beta = link_up(&mut alpha_events, "beta").await;
    let to_alpha = link_up(&mut beta_events, "alpha").await;
    assert!(alpha_events
        .with_session(&to_beta, |s| s.config().bulk_packets)
        .unwrap());

    let type_id = offer_crate(&mut alpha_events, &to_beta, "crate 0");
    accept_crate(&mut beta_events, &to_alpha, "alpha").await;
    assert_eq!(introduced_name(&mut beta_events, "alpha").await, "crate 0");
    alpha_events
        .with_session(&to_beta, |session| {
            for i in 1..=CRATES {
                let entity = session.allocate_object_id();
                let values = vec![PropertyValue {
                    key: name_key(),
                    value: Value::String(format!("crate {i} of a large world")),
                }];
                session.introduce_entity(entity, type_id, values).unwrap();
            }
        })
        .unwrap();
    let mut names = BTreeSet::new();
    while names.len() < CRATES {
        let name = session_event(
            &mut beta_events,
            "alpha",
            "introductions",
            |event| match event {
                Event::EntityIntroduced { values, .. } => Some(values),
                _ => None,
            },
        )
        .await;
        for value in name {
            if let Value::String(name) = value.value {
                names.insert(name);
            }
        }
    }
    assert!(names.contains(&format!("crate {CRATES} of a large world")));
    let sent = alpha_events.with_session(&to_beta, |s| s.stats()).unwrap();
    let received = beta_events.with_session(&to_alpha, |s| s.stats()).unwrap();
    assert!(sent.bulk_packets_sent > 0, "{sent:?}");
    assert_eq!(received.bulk_packets_received, sent.bulk_packets_sent);
    assert!(sent.bulk_bytes_compressed_sent < sent.bulk_bytes_uncompressed_sent);
    assert!(!to_alpha.is_closed());
    alpha_node.shutdown().await;
    beta_node.shutdown().await;
}
