//! Upstream mode over native kNet with real sockets on 127.0.0.1: node A is
//! a lessgate node with a TXML scene acting as the Tundra world server,
//! reachable by node B only through its kNet listener (`[upstream] url =
//! "knet+udp://…"`, and again with `knet+tcp://`). B mirrors A's entities;
//! B's client edits one and A's client sees it; B's client creates an
//! entity that A gets once, that A's client edits (B's client sees it) and
//! that leaves A when removed; A restarts on the same address and B logs in
//! again, reconciling without duplicates and keeping its entities in place
//! (over UDP and over TCP).
//!
//! Over kNet a world server sends transform changes as RigidBodyUpdate
//! (119) to the bridge, a native client; a move by A's client reaching B's
//! client shows the bridge applies it. Other edits from A's side change the
//! Name's description, which travels as EditAttributes on every transport.

mod common;
mod net_common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::tundra_values::{move_to, name_edit, named_box};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::RemoveEntity;
use lessgate::tundra::{ComponentId, EntityId, Message};
use net_common::{wait_observers, LiveNode, Observed, Observer};

/// A failure bound only. The longest expected wait is the bridge noticing
/// that A went away and logging in again.
const BOUND: Duration = Duration::from_secs(60);

fn world(knet: SocketAddr) -> NodeConfig {
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenes/nested.txml");
    let text = format!(
        "[node]\nname = \"world\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         knet_listen = \"{knet}\"\nscene = \"{}\"\n",
        scene.display()
    );
    NodeConfig::parse(Path::new("world.toml"), &text).expect("world config")
}

fn bridge(url: &str) -> NodeConfig {
    let text = format!(
        "[node]\nname = \"bridge\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         [upstream]\nurl = \"{url}\"\nreconnect_min_ms = 100\nreconnect_max_ms = 500\n\
         settle_ms = 300\ngrace_secs = 60\n[upstream.login]\nusername = \"bridge\"\n"
    );
    NodeConfig::parse(Path::new("bridge.toml"), &text).expect("bridge config")
}

/// How many entities named `name` the client sees (more than one is a
/// duplicate).
fn count(observed: &Observed, name: &str) -> usize {
    observed
        .view
        .entities
        .values()
        .filter(|s| s.name.as_deref() == Some(name))
        .count()
}

fn description(observed: &Observed, name: &str) -> Option<String> {
    observed.view.find(name)?.1.description.clone()
}

/// An edit of the Name description of `name` as `observer` knows it.
fn describe(observer: &Observer, name: &str, text: &str) -> Message {
    let seen = observer.snapshot();
    let (entity, known) = seen.view.find(name).expect("entity seen");
    let component: ComponentId = known.name_component.expect("has a Name");
    name_edit(entity, component, 1, text)
}

fn id_of(observer: &Observer, name: &str) -> EntityId {
    observer.snapshot().view.find(name).expect("entity seen").0
}

async fn bridged_over(scheme: &str, restart: bool) {
    // RUST_LOG prints the nodes' logs (diagnosis only).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let a = LiveNode::start_knet("world", world("127.0.0.1:0".parse().unwrap())).await;
    let a_knet = a.knet.unwrap();
    let b = LiveNode::start_config("bridge", bridge(&a.knet_url(scheme))).await;

    // B's client sees A's world, as does A's own client.
    let at_b = Observer::join(&b.url, "bea").await;
    let at_a = Observer::join(&a.url, "walt").await;
    let seen_world = |o: &[Observed]| {
        o.iter()
            .all(|o| count(o, "table") == 1 && count(o, "lamp") == 1)
    };
    wait_observers(&[&at_a, &at_b], BOUND, "the world at A and B", seen_world).await;
    let lamp_at_b = id_of(&at_b, "lamp");

    // B's client moves A's table: A applies it.
    let (table_b, table_b_seen) = {
        let seen = at_b.snapshot();
        let (id, entity) = seen.view.find("table").unwrap();
        (id, entity.placeable.unwrap())
    };
    at_b.send(&move_to(table_b, table_b_seen, 42.0)).await;
    wait_observers(&[&at_a], BOUND, "A sees B's move", |o| {
        o[0].view.find("table").unwrap().1.x == Some(42.0)
    })
    .await;

    // A's client moves the table back: the world server sends the move to
    // the bridge (a native client) as a RigidBodyUpdate, and B's client
    // sees it.
    let (table_a, table_a_placeable) = {
        let seen = at_a.snapshot();
        let (id, entity) = seen.view.find("table").unwrap();
        (id, entity.placeable.unwrap())
    };
    at_a.send(&move_to(table_a, table_a_placeable, 7.0)).await;
    wait_observers(
        &[&at_b],
        BOUND,
        "B sees A's move (a 119 at the bridge)",
        |o| o[0].view.find("table").unwrap().1.x == Some(7.0),
    )
    .await;

    // A's client edits A's lamp: B's client sees it.
    at_a.send(&describe(&at_a, "lamp", "lit")).await;
    wait_observers(&[&at_b], BOUND, "B sees A's edit", |o| {
        description(&o[0], "lamp").as_deref() == Some("lit")
    })
    .await;

    // B's client creates an entity: it reaches A once; A's client edits
    // it and B's client sees the edit; removed at B, it leaves A.
    let (visitor, _) = at_b.create(1, named_box("visitor")).await;
    wait_observers(&[&at_a], BOUND, "visitor at A", |o| {
        count(&o[0], "visitor") == 1
    })
    .await;
    at_a.send(&describe(&at_a, "visitor", "welcome")).await;
    wait_observers(&[&at_b], BOUND, "B sees A's edit of its entity", |o| {
        description(&o[0], "visitor").as_deref() == Some("welcome")
    })
    .await;
    at_b.send(&Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: visitor,
    }))
    .await;
    wait_observers(&[&at_a], BOUND, "visitor leaves A", |o| {
        count(&o[0], "visitor") == 0
    })
    .await;

    // A second one stays through A's restart.
    at_b.create(2, named_box("guest")).await;
    wait_observers(&[&at_a], BOUND, "guest at A", |o| {
        count(&o[0], "guest") == 1
    })
    .await;
    assert_eq!(count(&at_a.snapshot(), "visitor"), 0);
    drop(at_a);
    if !restart {
        drop(at_b);
        b.stop().await;
        a.stop().await;
        return;
    }

    // A restarts on the same address, its scene from its file again.
    a.stop().await;
    let a = LiveNode::start_config("world", world(a_knet)).await;
    assert_eq!(a.knet, Some(a_knet));
    assert!(a.knet_tcp, "TCP on the same port again");
    let again = Observer::join(&a.url, "wes").await;
    wait_observers(&[&again], BOUND, "B logged in again", |o| {
        ["table", "lamp", "guest"]
            .iter()
            .all(|n| count(&o[0], n) >= 1)
    })
    .await;
    // A barrier through the whole path: anything duplicated by the new
    // login would have reached A before this marker does.
    at_b.create(3, named_box("marker")).await;
    wait_observers(&[&again], BOUND, "marker at A", |o| {
        count(&o[0], "marker") == 1
    })
    .await;
    let seen = again.snapshot();
    for name in ["table", "lamp", "guest", "marker"] {
        assert_eq!(count(&seen, name), 1, "{name} once in A: {:?}", seen.view);
    }
    assert_eq!(count(&seen, "visitor"), 0, "removed stays removed");

    // And B kept its view: A's lamp is updated in place, not recreated.
    again.send(&describe(&again, "lamp", "relit")).await;
    wait_observers(&[&at_b], BOUND, "B sees the new A's edit", |o| {
        description(&o[0], "lamp").as_deref() == Some("relit")
    })
    .await;
    let seen = at_b.snapshot();
    assert_eq!(id_of(&at_b, "lamp"), lamp_at_b, "the lamp kept its id at B");
    for name in ["table", "lamp", "guest", "marker"] {
        assert_eq!(count(&seen, name), 1, "{name} once at B");
    }
    assert!(!at_b.closed(), "{:?}", seen.end);

    drop((at_b, again));
    b.stop().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_server_reached_over_knet_udp() {
    bridged_over("udp", false).await;
}

/// As above, then A restarts. Over UDP this fails about every second run:
/// A's stopping does not always send Disconnect (its connection tasks can
/// see their datagram queue close before the node's close request), and
/// B's connection then never times out, because the restarted A answers
/// B's pings from the same address and every datagram, even one dropped as
/// an old PacketID, counts as heard; B is never told to log in again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_world_server_restarted_behind_knet_udp() {
    bridged_over("udp", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_server_reached_over_knet_tcp_and_restarted() {
    bridged_over("tcp", true).await;
}
