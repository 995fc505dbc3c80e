//! Upstream mode in simulation (fake time): node 0 bridges a scripted world
//! server, node 1 is its peer.
//! - a replaced peer link (down, and a new one up at once, as when two nodes
//!   dialled each other): the world server sees neither a removal nor a
//!   second creation;
//! - an EntityAction with Server|Peers from node 1's client on a world
//!   entity reaches the world server's clients once;
//! - a world-server client's edit of a federation entity comes back through
//!   the federation quantized: the bridge does not write that copy back;
//! - a world server restart within the default grace period keeps the
//!   world's entities at every peer (no removal, no new creation).

mod sim;

use std::time::Duration;

use lessgate::config::UpstreamSection;
use lessgate::less::encoding::link::offered_features;
use lessgate::tundra::messages::{exec_type, EntityAction};
use lessgate::tundra::{EntityId, Message};
use lessgate::upstream::Bridge;
use sim::world::{
    accept_login, bridge, from_world, reply_to, rotated, to_world, world_edit, world_login,
    PROTOCOL,
};
use sim::{LinkModel, Sim};

/// Runs the simulation (node 0's upstream timers are among its deadlines).
fn run(sim: &mut Sim, duration: Duration) {
    sim.run(duration);
}

#[test]
fn a_replaced_peer_link_does_not_remove_and_recreate_in_the_world_server() {
    let mut sim = Sim::new(2, 7);
    sim.nodes[0].attach_upstream(bridge(Duration::from_secs(30)));
    accept_login(&mut sim);
    let (link, _) = sim.connect(0, 1, LinkModel::CLEAN);
    let client = sim.add_client(1);
    sim.create_box(1, client, 1, "visitor", 2.0);
    run(&mut sim, Duration::from_secs(1));

    let out = to_world(&mut sim);
    let [Message::CreateEntity(create)] = out.as_slice() else {
        panic!("node 1's entity created in the world server: {out:?}");
    };
    from_world(&mut sim, reply_to(create, 50));
    run(&mut sim, Duration::from_millis(200));
    assert!(to_world(&mut sim).is_empty());

    // The link is replaced: down, and a new one up at once.
    sim.disconnect(0, link);
    sim.connect(0, 1, LinkModel::CLEAN);
    run(&mut sim, Duration::from_secs(2));
    let out = to_world(&mut sim);
    assert!(
        !out.iter().any(|m| matches!(
            m,
            Message::RemoveEntity(_) | Message::CreateEntity(_) | Message::RemoveComponents(_)
        )),
        "no removal or second creation in the world server: {out:?}"
    );
    let bridge = sim.nodes[0].upstream().unwrap();
    assert!(bridge.held_removals().is_empty(), "it came back");
    assert!(
        matches!(
            bridge.ids().resolve(EntityId(50)),
            lessgate::upstream::ids::UpstreamEntity::Exported(_)
        ),
        "still mapped to the world server's entity 50"
    );

    // It is kept current under the world server's id.
    let at_1 = sim.find(1, client, "visitor")[0];
    sim.move_entity(1, client, at_1, 6.0);
    run(&mut sim, Duration::from_secs(1));
    let out = to_world(&mut sim);
    assert!(
        out.iter()
            .any(|m| matches!(m, Message::EditAttributes(e) if e.entity_id == EntityId(50))),
        "the move reaches the world server's entity 50: {out:?}"
    );
}

#[test]
fn a_server_and_peers_action_from_a_peer_reaches_the_world_server_once() {
    let mut sim = Sim::new(2, 3);
    sim.nodes[0].attach_upstream(bridge(Duration::from_secs(30)));
    world_login(&mut sim, 7, 0.0);
    sim.connect(0, 1, LinkModel::CLEAN);
    let client = sim.add_client(1);
    run(&mut sim, Duration::from_secs(1));
    to_world(&mut sim);
    let fountain = sim.find(1, client, "fountain")[0];
    sim.send(
        1,
        client,
        &Message::EntityAction(EntityAction {
            entity_id: fountain,
            name: "Splash".into(),
            execution_type: exec_type::SERVER | exec_type::PEERS,
            parameters: vec!["high".into()],
        }),
    );
    run(&mut sim, Duration::from_secs(1));
    let actions: Vec<EntityAction> = to_world(&mut sim)
        .into_iter()
        .filter_map(|m| match m {
            Message::EntityAction(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(actions
        .iter()
        .all(|a| a.entity_id == EntityId(7) && a.name == "Splash"));
    let with = |bit: u8| {
        actions
            .iter()
            .filter(|a| a.execution_type & bit != 0)
            .count()
    };
    assert_eq!(
        (with(exec_type::SERVER), with(exec_type::PEERS)),
        (1, 1),
        "the world server runs it once and hands it to its clients once: {actions:?}"
    );
}

#[test]
fn a_world_value_come_back_quantized_is_not_written_back() {
    let mut sim = Sim::new(2, 5);
    sim.nodes[0].attach_upstream(bridge(Duration::from_secs(30)));
    world_login(&mut sim, 7, 0.0);
    // The link carries transforms compactly, as real nodes agree to.
    let features = offered_features();
    sim.connect_with(0, 1, LinkModel::CLEAN, &features, &features);
    let client = sim.add_client(1);
    sim.create_box(1, client, 1, "visitor", 2.0);
    run(&mut sim, Duration::from_secs(1));
    let out = to_world(&mut sim);
    let Some(create) = out.iter().find_map(|m| match m {
        Message::CreateEntity(c) => Some(c.clone()),
        _ => None,
    }) else {
        panic!("node 1's entity created in the world server: {out:?}");
    };
    from_world(&mut sim, reply_to(&create, 50));
    run(&mut sim, Duration::from_millis(500));
    to_world(&mut sim);

    // A world client turns it to 30 degrees, then the world server's
    // physics settles it at 89.98: each goes to the authority (node 1),
    // whose update crosses the link quantized (29.970703125, 90).
    let at_1 = sim.find(1, client, "visitor")[0];
    for y in [30.0, 89.98] {
        from_world(&mut sim, world_edit(50, rotated(y)));
        run(&mut sim, Duration::from_secs(1));
        let held = sim.scene_transform(1, at_1).unwrap();
        assert!(
            (held.rot.y - y).abs() < 0.1,
            "the authority took {y}: {held:?}"
        );
        let out = to_world(&mut sim);
        assert!(
            !out.iter()
                .any(|m| matches!(m, Message::EditAttributes(e) if e.entity_id == EntityId(50))),
            "the world server's {y} is not overwritten by its quantized copy: {out:?}"
        );
    }
    // A federation client's own edit still reaches the world server.
    sim.move_entity(1, client, at_1, 6.0);
    run(&mut sim, Duration::from_secs(1));
    let out = to_world(&mut sim);
    assert!(
        out.iter()
            .any(|m| matches!(m, Message::EditAttributes(e) if e.entity_id == EntityId(50))),
        "{out:?}"
    );
}

#[test]
fn a_world_server_restart_within_the_default_grace_keeps_its_entities_everywhere() {
    let defaults = UpstreamSection {
        url: "ws://127.0.0.1:2345".into(),
        ..UpstreamSection::default()
    };
    let mut settings = defaults.bridge_settings();
    settings.login.protocol = PROTOCOL;
    let grace = settings.grace;
    let mut sim = Sim::new(2, 9);
    sim.nodes[0].attach_upstream(Bridge::new(settings));
    world_login(&mut sim, 7, 10.0);
    sim.connect(0, 1, LinkModel::CLEAN);
    let client = sim.add_client(1);
    run(&mut sim, Duration::from_secs(2));
    let before = sim.find(1, client, "fountain");
    assert_eq!(before.len(), 1);

    // The world server restarts: its port is free again after TIME_WAIT
    // (about 61 s), it starts up, and the next redial comes up to 30 s
    // later: logged in again 100 s after the drop.
    sim.upstream_disconnected(0, "closed by the world server");
    let outage = Duration::from_secs(100);
    assert!(
        outage < grace,
        "the default grace ({grace:?}) outlasts a restart"
    );
    run(&mut sim, outage);
    assert_eq!(
        sim.find(1, client, "fountain"),
        before,
        "still there at node 1"
    );
    // The restarted server numbers its entities anew.
    world_login(&mut sim, 12, 10.0);
    run(&mut sim, Duration::from_secs(2));
    assert_eq!(
        sim.find(1, client, "fountain"),
        before,
        "the same entity at node 1: no removal, no new creation"
    );
    assert_eq!(sim.nodes[1].scene().entities().count(), 1);
    let bridge = sim.nodes[0].upstream().unwrap();
    assert!(matches!(
        bridge.state(),
        lessgate::upstream::LinkState::Ready { .. }
    ));
}
