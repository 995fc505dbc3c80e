//! Native clients in a federation: two in-process nodes peered on
//! 127.0.0.1, each also listening for kNet. A kNet/UDP client on one node
//! and a WebSocket client and a kNet/TCP client on the other see each
//! other's entities, their moves (native clients get them as
//! RigidBodyUpdate) and their removal, and move each other's entities
//! through the entity's authority.

mod common;
mod net_common;

use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::RemoveEntity;
use lessgate::tundra::{ComponentId, EntityId, Message};
use net_common::{wait_observers, write_mesh, LiveNode, Observed, Observer};

/// A failure bound only: link setup and sync take well under a second.
const BOUND: Duration = Duration::from_secs(30);

fn at(observed: &Observed, name: &str, x: f32) -> bool {
    observed
        .view
        .find(name)
        .is_some_and(|(_, seen)| seen.x == Some(x))
}

/// The entity's id and Placeable as `observer` knows it.
fn known(observer: &Observer, name: &str) -> (EntityId, ComponentId) {
    let seen = observer.snapshot();
    let (id, entity) = seen.view.find(name).expect("seen");
    (id, entity.placeable.expect("has a Placeable"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_websocket_clients_on_peered_nodes_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let seats = write_mesh(dir.path(), &["a", "b"], None, "");
    let mut nodes = Vec::new();
    for seat in &seats {
        let config = NodeConfig::load(&seat.dir.join("node.toml")).expect("node file loads");
        nodes.push(LiveNode::start_knet(&seat.name, config).await);
    }
    let native_a = Observer::join(&nodes[0].knet_url("udp"), "native-a").await;
    let web_b = Observer::join(&nodes[1].url, "web-b").await;
    let tcp_b = Observer::join(&nodes[1].knet_url("tcp"), "tcp-b").await;
    let everyone = [&native_a, &web_b, &tcp_b];

    // Each side creates one; all three clients see both.
    let (kite, kite_placeable) = native_a.create(1, named_box("kite")).await;
    let (boat, boat_placeable) = web_b.create(1, named_box("boat")).await;
    wait_observers(&everyone, BOUND, "both entities everywhere", |o| {
        o.iter().all(|o| at(o, "kite", 0.0) && at(o, "boat", 0.0))
    })
    .await;

    // Each moves its own: the other node's clients see the move.
    native_a
        .send(&move_to(kite, kite_placeable.unwrap(), 5.0))
        .await;
    web_b
        .send(&move_to(boat, boat_placeable.unwrap(), -5.0))
        .await;
    wait_observers(&everyone, BOUND, "own moves everywhere", |o| {
        o.iter().all(|o| at(o, "kite", 5.0) && at(o, "boat", -5.0))
    })
    .await;

    // Each moves the other's (under the id its own node gave it): the edit
    // goes to the authority and comes back to everyone.
    let (boat_at_a, boat_placeable_at_a) = known(&native_a, "boat");
    let (kite_at_b, kite_placeable_at_b) = known(&web_b, "kite");
    native_a
        .send(&move_to(boat_at_a, boat_placeable_at_a, 11.0))
        .await;
    web_b
        .send(&move_to(kite_at_b, kite_placeable_at_b, 12.0))
        .await;
    wait_observers(&everyone, BOUND, "crossed moves everywhere", |o| {
        o.iter().all(|o| at(o, "kite", 12.0) && at(o, "boat", 11.0))
    })
    .await;

    // Removal at either origin reaches the other node's clients.
    native_a
        .send(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: kite,
        }))
        .await;
    wait_observers(&everyone, BOUND, "kite gone", |o| {
        o.iter()
            .all(|o| o.view.find("kite").is_none() && o.view.find("boat").is_some())
    })
    .await;
    web_b
        .send(&Message::RemoveEntity(RemoveEntity {
            scene_id: 0,
            entity_id: boat,
        }))
        .await;
    wait_observers(&everyone, BOUND, "boat gone", |o| {
        o.iter().all(|o| o.view.entities.is_empty())
    })
    .await;
    for client in everyone {
        assert!(!client.closed(), "{:?}", client.snapshot().end);
    }
    drop((native_a, web_b, tcp_b));
    for node in nodes {
        node.stop().await;
    }
}
