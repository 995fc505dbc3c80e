//! Authority hand-over across the bridge (docs/upstream.md §8), in
//! simulation: node 0 bridges a scripted world server, node 1 is its peer.
//! - A world entity that node 1's client takes leaves the world server (a
//!   RemoveEntity) and is created there again as node 1's federation
//!   entity; every client of the federation keeps it under the same id, and
//!   the world server's late edits of its old copy change nothing.
//! - An entity handed to node 0 becomes the world server's: the export the
//!   bridge created there is mirrored from then on, so the world server's
//!   edits are its state and node 0's clients' edits go to the world server.
//! - Either way under 20 % loss with duplication and reordering.
//! - While the world server is unreachable a world entity is not handed out.
//! - A removal lost with the connection is sent again at the next login;
//!   an unrelated entity the restarted server numbers the same is kept.
//! - A leaving bridge node does not hand the world's entities away.
//! - A world entity with children in the world server stays (its removal
//!   would take them); a child can go.

mod sim;

use std::time::Duration;

use lessgate::federation::HandoverReason;
use lessgate::peering::peer_file::PeerName;
use lessgate::scene::ClientId;
use lessgate::tundra::messages::CreateEntity;
use lessgate::tundra::{EntityId, Message};
use lessgate::upstream::ids::UpstreamEntity;
use sim::authority::{
    assert_no_flicker, assert_one_authority, authority, node_id, take_authority, the,
};
use sim::world::{
    accept_login, bridge, from_world, reply_to, rotated, to_world, world_edit, world_entity,
    world_login,
};
use sim::{transform, LinkModel, Sim};

/// Node 0 bridges a world with "fountain" (world id 7) and is linked to
/// node 1; each node has one client.
fn bridged(seed: u64, model: LinkModel) -> (Sim, [ClientId; 2]) {
    let settle = if model.loss > 0.0 { 20 } else { 3 };
    let mut sim = Sim::new(2, seed);
    sim.nodes[0].attach_upstream(bridge(Duration::from_secs(30)));
    world_login(&mut sim, 7, 0.0);
    sim.connect(0, 1, model);
    let clients = [sim.add_client(0), sim.add_client(1)];
    sim.run(Duration::from_secs(settle));
    assert!(sim.nodes[0].upstream().unwrap().is_ready());
    to_world(&mut sim);
    (sim, clients)
}

fn creations(out: &[Message]) -> Vec<CreateEntity> {
    out.iter()
        .filter_map(|m| match m {
            Message::CreateEntity(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

/// Whether `out` edits the world server's entity `id`.
fn edits(out: &[Message], id: u32) -> bool {
    out.iter()
        .any(|m| matches!(m, Message::EditAttributes(e) if e.entity_id == EntityId(id)))
}

fn removals(out: &[Message]) -> Vec<EntityId> {
    out.iter()
        .filter_map(|m| match m {
            Message::RemoveEntity(r) => Some(r.entity_id),
            _ => None,
        })
        .collect()
}

fn hand_world_entity_out(seed: u64, model: LinkModel) {
    let (mut sim, [c0, c1]) = bridged(seed, model);
    let clients = [(0, c0), (1, c1)];
    let at_0 = the(&sim, 0, c0, "fountain");
    let at_1 = the(&sim, 1, c1, "fountain");
    assert!(sim.nodes[0].scene().is_proxied(at_0));

    take_authority(&mut sim, 1, c1, at_1);
    sim.run(Duration::from_secs(5));
    let (owner, epoch) = assert_one_authority(&sim, &clients, "fountain");
    assert_eq!((owner, epoch), (node_id(&sim, 1), 1));
    assert_eq!(the(&sim, 0, c0, "fountain"), at_0, "same id at node 0");
    assert!(!sim.nodes[0].scene().is_proxied(at_0));

    // The world server's copy is removed, and the entity is created there
    // again as a federation entity, by the bridge's client path.
    let out = to_world(&mut sim);
    assert_eq!(removals(&out), vec![EntityId(7)], "{out:?}");
    let created = creations(&out);
    assert_eq!(created.len(), 1, "{out:?}");
    let bridge = sim.nodes[0].upstream().unwrap();
    assert_eq!(bridge.ids().resolve(EntityId(7)), UpstreamEntity::Unknown);
    assert_eq!(bridge.stats().handed_out, 1);
    from_world(&mut sim, reply_to(&created[0], 31));
    sim.run(Duration::from_secs(1));
    assert_eq!(
        sim.nodes[0].upstream().unwrap().ids().resolve(EntityId(31)),
        UpstreamEntity::Exported(at_0)
    );

    // A late edit of the old world copy changes nothing.
    from_world(&mut sim, world_edit(7, rotated(45.0)));
    sim.run(Duration::from_secs(2));
    let held = sim.scene_transform(1, at_1).unwrap();
    assert_eq!(held.rot.y, 0.0, "the old world copy no longer decides");

    // Node 1 simulates it: its client's move applies there directly and
    // reaches node 0's client and the world server's new copy.
    sim.move_entity(1, c1, at_1, 9.0);
    sim.run(Duration::from_secs(5));
    assert!(sim.nodes[1].scene().entity(at_1).is_some());
    assert_eq!(sim.x_of(0, c0, at_0), Some(9.0));
    assert_eq!(sim.x_of(1, c1, at_1), Some(9.0));
    let out = to_world(&mut sim);
    assert!(
        edits(&out, 31),
        "the move reaches the world server's new copy: {out:?}"
    );
    // A world client's edit of the new copy goes to node 1, the authority.
    from_world(&mut sim, world_edit(31, transform(12.0)));
    sim.run(Duration::from_secs(5));
    assert_eq!(sim.x_of(1, c1, at_1), Some(12.0));
    assert_eq!(sim.x_of(0, c0, at_0), Some(12.0));
    assert_no_flicker(&sim, &clients, 1);
}

#[test]
fn a_world_entity_a_peer_takes_leaves_the_world_server_and_stays_in_the_federation() {
    hand_world_entity_out(1, LinkModel::CLEAN);
}

#[test]
fn a_world_entity_leaves_the_world_server_over_a_lossy_link() {
    for seed in 2..5 {
        hand_world_entity_out(seed, LinkModel::LOSSY);
    }
}

fn hand_entity_in(seed: u64, model: LinkModel) {
    let (mut sim, [c0, c1]) = bridged(seed, model);
    let clients = [(0, c0), (1, c1)];
    sim.create_box(1, c1, 1, "visitor", 2.0);
    sim.run(Duration::from_secs(5));
    let out = to_world(&mut sim);
    let created = creations(&out);
    assert_eq!(created.len(), 1, "{out:?}");
    from_world(&mut sim, reply_to(&created[0], 50));
    sim.run(Duration::from_secs(1));
    let at_0 = the(&sim, 0, c0, "visitor");
    let at_1 = the(&sim, 1, c1, "visitor");

    // Node 0's client takes it: it becomes the world server's.
    take_authority(&mut sim, 0, c0, at_0);
    sim.run(Duration::from_secs(5));
    let (owner, _) = assert_one_authority(&sim, &clients, "visitor");
    assert_eq!(owner, node_id(&sim, 0));
    let bridge = sim.nodes[0].upstream().unwrap();
    assert_eq!(
        bridge.ids().resolve(EntityId(50)),
        UpstreamEntity::Mirrored(at_0)
    );
    assert_eq!(bridge.stats().adopted, 1);
    assert_eq!(bridge.adopting(), 0);
    assert!(sim.nodes[0].scene().is_proxied(at_0));
    let out = to_world(&mut sim);
    assert!(
        removals(&out).is_empty() && creations(&out).is_empty(),
        "the world server keeps the copy it has: {out:?}"
    );

    // The world server's edit is the entity's state everywhere.
    from_world(&mut sim, world_edit(50, transform(7.0)));
    sim.run(Duration::from_secs(5));
    assert_eq!(sim.x_of(0, c0, at_0), Some(7.0));
    assert_eq!(sim.x_of(1, c1, at_1), Some(7.0));

    // Node 0's client's edit goes to the world server, which decides.
    sim.move_entity(0, c0, at_0, 3.0);
    sim.run(Duration::from_secs(1));
    let out = to_world(&mut sim);
    assert!(edits(&out, 50), "{out:?}");
    // So does node 1's, through node 0.
    sim.move_entity(1, c1, at_1, 4.0);
    sim.run(Duration::from_secs(5));
    let out = to_world(&mut sim);
    assert!(edits(&out, 50), "{out:?}");
    assert_eq!(sim.x_of(1, c1, at_1), Some(4.0));
    // The fountain and the visitor, each created once.
    assert_no_flicker(&sim, &clients, 2);
}

#[test]
fn an_entity_handed_to_the_bridge_node_becomes_the_world_servers() {
    hand_entity_in(11, LinkModel::CLEAN);
}

#[test]
fn an_entity_becomes_the_world_servers_over_a_lossy_link() {
    for seed in 12..15 {
        hand_entity_in(seed, LinkModel::LOSSY);
    }
}

#[test]
fn an_entity_handed_in_before_the_world_server_acknowledged_it_waits_for_the_reply() {
    let (mut sim, [c0, c1]) = bridged(21, LinkModel::CLEAN);
    sim.create_box(1, c1, 1, "visitor", 2.0);
    sim.run(Duration::from_secs(2));
    let created = creations(&to_world(&mut sim));
    assert_eq!(created.len(), 1);
    let at_0 = the(&sim, 0, c0, "visitor");
    take_authority(&mut sim, 0, c0, at_0);
    sim.run(Duration::from_secs(2));
    assert_eq!(authority(&sim, 0, at_0).0, node_id(&sim, 0));
    // Node 0 simulates it meanwhile; its client's edit applies at once.
    sim.move_entity(0, c0, at_0, 5.0);
    sim.run(Duration::from_secs(1));
    assert_eq!(sim.nodes[0].upstream().unwrap().adopting(), 1);
    assert!(!sim.nodes[0].scene().is_proxied(at_0));
    from_world(&mut sim, reply_to(&created[0], 60));
    sim.run(Duration::from_secs(1));
    // The reply brings the world server the move, then it is the world's.
    let out = to_world(&mut sim);
    assert!(edits(&out, 60), "the latest state goes first: {out:?}");
    let bridge = sim.nodes[0].upstream().unwrap();
    assert_eq!(
        bridge.ids().resolve(EntityId(60)),
        UpstreamEntity::Mirrored(at_0)
    );
    assert!(sim.nodes[0].scene().is_proxied(at_0));
}

#[test]
fn a_world_entity_is_not_handed_out_while_the_world_server_is_unreachable() {
    let (mut sim, [c0, c1]) = bridged(31, LinkModel::CLEAN);
    let at_1 = the(&sim, 1, c1, "fountain");
    sim.upstream_disconnected(0, "closed by the world server");
    take_authority(&mut sim, 1, c1, at_1);
    sim.run(Duration::from_secs(3));
    let (owner, epoch) = assert_one_authority(&sim, &[(0, c0), (1, c1)], "fountain");
    assert_eq!((owner, epoch), (node_id(&sim, 0), 0));
    let refused = sim.nodes[0].federation().stats().handover_refusals.clone();
    assert_eq!(refused.get("world-server"), Some(&1), "{refused:?}");
    // The operator's push is refused the same way.
    let at_0 = the(&sim, 0, c0, "fountain");
    let to = node_id(&sim, 1);
    assert!(sim.nodes[0]
        .hand_over(at_0, to, HandoverReason::Operator)
        .is_err());
}

#[test]
fn a_removal_lost_with_the_connection_is_sent_again_at_the_next_login() {
    let (mut sim, [c0, c1]) = bridged(41, LinkModel::CLEAN);
    let at_1 = the(&sim, 1, c1, "fountain");
    take_authority(&mut sim, 1, c1, at_1);
    sim.run(Duration::from_secs(3));
    assert_eq!(removals(&to_world(&mut sim)), vec![EntityId(7)]);
    // The connection failed before the world server read the removal: at
    // the next login it still has the fountain, and a new "pond" under an
    // id it reused.
    sim.upstream_disconnected(0, "connection reset");
    sim.run(Duration::from_secs(1));
    to_world(&mut sim);
    accept_login(&mut sim);
    from_world(&mut sim, world_entity(7, "fountain", rotated(0.0)));
    sim.run(Duration::from_secs(2));
    let out = to_world(&mut sim);
    assert!(
        removals(&out).contains(&EntityId(7)),
        "removed again: {out:?}"
    );
    the(&sim, 0, c0, "fountain");
    the(&sim, 1, c1, "fountain");

    // The removal took effect this time; the next session's id 7 is
    // another entity, mirrored as usual.
    sim.upstream_disconnected(0, "connection reset");
    sim.run(Duration::from_secs(1));
    to_world(&mut sim);
    accept_login(&mut sim);
    sim.run(Duration::from_secs(1));
    sim.upstream_disconnected(0, "connection reset");
    sim.run(Duration::from_secs(1));
    to_world(&mut sim);
    accept_login(&mut sim);
    from_world(&mut sim, world_entity(7, "fountain", rotated(0.0)));
    sim.run(Duration::from_secs(2));
    let out = to_world(&mut sim);
    assert!(!removals(&out).contains(&EntityId(7)), "{out:?}");
    assert_eq!(
        sim.find(1, c1, "fountain").len(),
        2,
        "node 1's and the world's new one"
    );
}

#[test]
fn a_leaving_bridge_node_keeps_the_world_entities_with_the_world() {
    let (mut sim, [c0, c1]) = bridged(51, LinkModel::CLEAN);
    sim.create_box(0, c0, 1, "own", 1.0);
    sim.run(Duration::from_secs(2));
    let now = sim.now;
    let offered =
        sim.nodes[0].begin_departure(now, &[PeerName::new("n1").unwrap()], Duration::from_secs(5));
    assert_eq!(offered, 1, "its own entity, not the world's fountain");
    sim.run(Duration::from_secs(3));
    assert_eq!(
        authority(&sim, 1, the(&sim, 1, c1, "fountain")).0,
        node_id(&sim, 0)
    );
    assert!(to_world(&mut sim)
        .iter()
        .all(|m| !matches!(m, Message::RemoveEntity(_))));
}

#[test]
fn a_world_entity_with_children_in_the_world_server_stays_there() {
    let (mut sim, [c0, c1]) = bridged(61, LinkModel::CLEAN);
    let Message::CreateEntity(mut spout) = world_entity(8, "spout", rotated(0.0)) else {
        unreachable!()
    };
    spout.parent = Some(EntityId(7));
    from_world(&mut sim, Message::CreateEntity(spout));
    sim.run(Duration::from_secs(2));
    let fountain = the(&sim, 1, c1, "fountain");
    // Its RemoveEntity would take the spout with it: refused.
    take_authority(&mut sim, 1, c1, fountain);
    sim.run(Duration::from_secs(2));
    assert_eq!(authority(&sim, 1, fountain).0, node_id(&sim, 0));
    let refused = &sim.nodes[0].federation().stats().handover_refusals;
    assert_eq!(refused.get("world-server"), Some(&1), "{refused:?}");
    assert!(removals(&to_world(&mut sim)).is_empty());
    // The child itself can go: created again under its world parent.
    let spout = the(&sim, 1, c1, "spout");
    take_authority(&mut sim, 1, c1, spout);
    sim.run(Duration::from_secs(2));
    assert_eq!(authority(&sim, 1, spout).0, node_id(&sim, 1));
    let out = to_world(&mut sim);
    assert_eq!(removals(&out), vec![EntityId(8)]);
    let created = creations(&out);
    assert_eq!(created.len(), 1, "{out:?}");
    assert_eq!(created[0].parent, Some(EntityId(7)));
    assert_no_flicker(&sim, &[(0, c0), (1, c1)], 2);
}
