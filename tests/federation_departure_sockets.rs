//! Hand-off on departure through the real driver and sockets: three nodes
//! in a chain alpha - beta - gamma on 127.0.0.1 (QUIC control, UDP data,
//! generated identities and ports). Alpha hosts a scene and names beta in
//! `departure_to`; when alpha is stopped cleanly (the same path as SIGTERM
//! and Ctrl-C), its persistent entities stay on gamma, under the same
//! Tundra ids, with alpha gone, and beta simulates them
//! (docs/federation.md §7.8). Without `departure_to` they disappear, as
//! before.

mod common;
mod net_common;

use std::time::Duration;

use lessgate::config::NodeConfig;
use lessgate::peering::peer_file::PeerName;
use net_common::{star::has_link, wait_observers, wait_status, write_nodes, LiveNode, Observer};

/// A failure bound, never a pass criterion.
const BOUND: Duration = Duration::from_secs(30);

async fn chain(departure: bool) {
    let dir = tempfile::tempdir().unwrap();
    let seats = write_nodes(
        dir.path(),
        &["alpha", "beta", "gamma"],
        &[(0, 1), (1, 2)],
        None,
        "liveness_timeout_ms = 2000\n",
    );
    let mut alpha_config =
        NodeConfig::load(&seats[0].dir.join("node.toml")).expect("node file loads");
    alpha_config.tundra.scene = Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenes/nested.txml"),
    );
    if departure {
        alpha_config.authority.departure_to = vec![PeerName::new("beta").unwrap()];
    }
    let alpha = LiveNode::start_config("alpha", alpha_config).await;
    let beta = LiveNode::start(&seats[1]).await;
    let gamma = LiveNode::start(&seats[2]).await;
    let watcher = Observer::join(&gamma.url, "watcher").await;
    // The scene's two replicated entities reach gamma through beta.
    wait_observers(&[&watcher], BOUND, "alpha's scene at gamma", |seen| {
        seen[0].view.entities.len() == 2
    })
    .await;
    let before: Vec<_> = watcher.snapshot().view.entities.keys().copied().collect();

    alpha.stop().await;
    wait_status(&[&beta], BOUND, "beta's link to alpha gone", |status| {
        !has_link(status, "alpha")
    })
    .await;
    // Well past the moment the entities would have gone with alpha's link.
    let watch_until = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut kept = true;
    while tokio::time::Instant::now() < watch_until {
        let now: Vec<_> = watcher.snapshot().view.entities.keys().copied().collect();
        kept &= now == before;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if departure {
        assert!(
            kept,
            "gamma's client lost or renumbered alpha's entities: {:?} then {:?}",
            before,
            watcher.snapshot().view.entities.keys().collect::<Vec<_>>()
        );
        assert!(!watcher.closed());
        // Both present the two entities (each status is polled: it is
        // published on the node's own period).
        wait_status(
            &[&gamma, &beta],
            BOUND,
            "gamma and beta present both",
            |s| s.entities == 2,
        )
        .await;
    } else {
        wait_observers(&[&watcher], BOUND, "alpha's entities gone", |seen| {
            seen[0].view.entities.is_empty()
        })
        .await;
    }
    beta.stop().await;
    gamma.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_cleanly_leaves_its_persistent_entities_with_its_peer() {
    chain(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_departure_to_a_stopped_node_takes_its_entities_along() {
    chain(false).await;
}
