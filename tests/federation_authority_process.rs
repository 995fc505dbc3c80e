//! Authority hand-over between three nodes on real sockets (a line a - b -
//! c, in this process, WebSocket clients): a client on b takes a's entity
//! with the EntityAction `TakeAuthority` and drags it; a client on c sees
//! the entity move on, its authority change in c's `/status`, and is never
//! sent a RemoveEntity or a second CreateEntity for it (docs/federation.md
//! §7).

mod common;
mod net_common;

use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use lessgate::tundra::messages::{exec_type, EntityAction};
use lessgate::tundra::Message;
use net_common::{wait_observers, wait_status, LiveNode, Observer};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// A failure bound; a healthy run takes well under a second per step.
const CONVERGE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_takes_an_entity_and_drags_it_without_a_flicker_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let seats = net_common::write_nodes(dir.path(), &NAMES, &[(0, 1), (1, 2)], None, "");
    let mut nodes = Vec::new();
    for seat in &seats {
        nodes.push(LiveNode::start(seat).await);
    }
    for (n, node) in nodes.iter().enumerate() {
        let degree = if n == 1 { 2 } else { 1 };
        wait_status(&[node], CONVERGE, "every link up", |s| {
            s.links.len() == degree
        })
        .await;
    }
    let owner = Observer::join(&nodes[0].url, "owner").await;
    let dragger = Observer::join(&nodes[1].url, "dragger").await;
    let watcher = Observer::join(&nodes[2].url, "watcher").await;
    owner.create(1, named_box("ball")).await;
    let everyone = [&owner, &dragger, &watcher];
    wait_observers(&everyone, CONVERGE, "the ball everywhere", |seen| {
        seen.iter().all(|o| o.view.find("ball").is_some())
    })
    .await;

    let (ball, seen) = dragger
        .snapshot()
        .view
        .find("ball")
        .map(|(id, s)| (id, s.clone()))
        .unwrap();
    let placeable = seen.placeable.expect("a Placeable");
    dragger
        .send(&Message::EntityAction(EntityAction {
            entity_id: ball,
            name: "TakeAuthority".into(),
            execution_type: exec_type::SERVER,
            parameters: Vec::new(),
        }))
        .await;
    let b = nodes[1].status().uuid;
    wait_status(
        &[&nodes[0], &nodes[1], &nodes[2]],
        CONVERGE,
        "b simulates the ball",
        |s| s.authorities.iter().any(|a| a.uuid == b && a.entities == 1),
    )
    .await;
    // The old authority counts what it gave (polled: its snapshot is
    // published on its own period).
    let a_status = wait_status(&[&nodes[0]], CONVERGE, "a counts the hand-over", |s| {
        !s.handovers.given.is_empty()
    })
    .await
    .remove(0);
    assert_eq!(a_status.handovers.given.len(), 1);
    assert_eq!(a_status.handovers.given[0].peer_uuid, b);
    assert_eq!(a_status.handovers.given[0].reason, "request");

    // b's client drags it: edits that now apply at b, its authority.
    for step in 1..=20 {
        dragger.send(&move_to(ball, placeable, step as f32)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_observers(&everyone, CONVERGE, "the ball at 20 everywhere", |seen| {
        seen.iter()
            .all(|o| o.view.find("ball").is_some_and(|(_, s)| s.x == Some(20.0)))
    })
    .await;
    for (name, observer) in [("a", &owner), ("c", &watcher)] {
        let view = observer.snapshot().view;
        assert_eq!(view.removes, 0, "{name}'s client was sent a RemoveEntity");
    }
    // The watcher was sent the ball once (it joined before it existed).
    assert_eq!(watcher.snapshot().view.creates, 1);

    // a, the old authority, leaves: the ball stays with b and c.
    let a = nodes.remove(0);
    a.stop().await;
    dragger.send(&move_to(ball, placeable, 21.0)).await;
    wait_observers(
        &[&dragger, &watcher],
        CONVERGE,
        "the ball moves on without a",
        |seen| {
            seen.iter()
                .all(|o| o.view.find("ball").is_some_and(|(_, s)| s.x == Some(21.0)))
        },
    )
    .await;
    assert_eq!(watcher.snapshot().view.removes, 0);
    for node in nodes {
        node.stop().await;
    }
}
