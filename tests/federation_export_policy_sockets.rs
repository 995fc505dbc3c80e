//! Export restrictions across relays over real sockets (docs/federation.md
//! section 4.1): three in-process nodes on 127.0.0.1 (generated ports). a
//! exports only Placeable, Mesh and Name to c, and the a - c link never
//! comes up (c does not pin a): c's client sees a's entity through b
//! without its RigidBody, while b's client sees all of it.

mod common;
mod net_common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::tundra_values::{move_to, named_box};
use lessgate::tundra::{ComponentData, ComponentId, Registry};
use net_common::{wait_observers, wait_status, LiveNode, Observer};

const NAMES: [&str; 3] = ["a", "b", "c"];
const TRIANGLE: [(usize, usize); 3] = [(0, 1), (1, 2), (0, 2)];
/// A failure bound; a healthy run takes about a second. Three waits'
/// worth: a round trips a triangle of nodes.
const BOUND: Duration = common::PATIENCE.saturating_mul(3);
const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
const NAME: u32 = 26;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_does_not_forward_what_the_origin_withholds_from_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let seats = net_common::write_nodes(dir.path(), &NAMES, &TRIANGLE, None, "");
    // a's file for c exports only scenery; c has no file for a, so the
    // a - c link is refused and c is reached through b alone.
    let a_for_c = seats[0].dir.join("peers/c.toml");
    let text = std::fs::read_to_string(&a_for_c).unwrap().replace(
        "export = \"all\"",
        "export = [\"EC_Placeable\", \"EC_Mesh\", \"EC_Name\"]",
    );
    std::fs::write(&a_for_c, text).unwrap();
    std::fs::remove_file(seats[2].dir.join("peers/a.toml")).unwrap();

    let mut nodes = Vec::new();
    for seat in &seats {
        nodes.push(LiveNode::start(seat).await);
    }
    wait_status(&[&nodes[1]], BOUND, "b linked to a and c", |s| {
        s.links.len() == 2
    })
    .await;
    let writer = Observer::join(&nodes[0].url, "writer").await;
    let at_b = Observer::join(&nodes[1].url, "watch-b").await;
    let at_c = Observer::join(&nodes[2].url, "watch-c").await;

    let mut components = named_box("crate");
    let registry = Registry::builtin();
    let rigid_body = registry.get(RIGID_BODY).unwrap();
    let values = rigid_body.default_values();
    components.push(ComponentData::with_values(
        ComponentId(0x4000_0003),
        rigid_body,
        values,
    ));
    let (entity, placeable) = writer.create(1, components).await;

    wait_observers(&[&at_b, &at_c], BOUND, "crate on b and c", |seen| {
        seen.iter().all(|o| o.view.find("crate").is_some())
    })
    .await;
    // A later move is the barrier: b forwards it after every component
    // it forwards, so once c has the move it has all it will get.
    writer
        .send(&move_to(entity, placeable.expect("a Placeable"), 7.0))
        .await;
    wait_observers(&[&at_b, &at_c], BOUND, "the move on b and c", |seen| {
        seen.iter()
            .all(|o| o.view.find("crate").is_some_and(|(_, s)| s.x == Some(7.0)))
    })
    .await;
    let types = |observer: &Observer| {
        observer
            .snapshot()
            .view
            .find("crate")
            .map(|(_, seen)| seen.types.clone())
            .unwrap()
    };
    assert_eq!(types(&at_b), BTreeSet::from([PLACEABLE, RIGID_BODY, NAME]));
    assert_eq!(types(&at_c), BTreeSet::from([PLACEABLE, NAME]));
    // Both ends dial, so for a moment c may hold two links to b: polled.
    let c = wait_status(&[&nodes[2]], BOUND, "c linked to b only", |s| {
        s.links.len() == 1
    })
    .await
    .remove(0);
    assert_eq!(c.links[0].peer, "b", "c is linked to b only");

    drop((writer, at_b, at_c));
    for node in nodes {
        node.stop().await;
    }
}
