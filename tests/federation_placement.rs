//! World placement across real node cores under fake time
//! (docs/federation.md §2.7): each world stands where its node is placed
//! in the federation's shared space, its own clients see it as authored,
//! positions travel in federation coordinates, relays add no error, and a
//! reload moves worlds by updates.

mod sim;

use std::time::Duration;

use lessgate::federation::space::placement::Placement;
use lessgate::federation::zones::{Hysteresis, Zone, ZoneSet};
use lessgate::scene::ClientId;
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{AttributeValue, EntityId};
use sim::tundra_values::{name_component, placeable_component};
use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(2);

fn at(x: f64) -> Placement {
    Placement::new([x, 0.0, 0.0]).unwrap()
}

/// The compact encodings real nodes agree on (docs/less-wire.md §16).
fn encodings() -> Vec<String> {
    lessgate::less::encoding::link::offered_features()
}

/// Nodes 0..n in a chain, placed at `placements` (x only), a client each;
/// `compact` links agree on the compact encodings as real nodes do.
fn placed_chain(placements: &[f64], compact: bool, seed: u64) -> (Sim, Vec<ClientId>) {
    let mut sim = Sim::new(placements.len(), seed);
    for (node, x) in placements.iter().enumerate() {
        sim.nodes[node].set_placement(at(*x));
    }
    let features = if compact { encodings() } else { Vec::new() };
    for node in 1..placements.len() {
        sim.connect_with(node - 1, node, LinkModel::CLEAN, &features, &features);
    }
    let clients = (0..placements.len()).map(|n| sim.add_client(n)).collect();
    (sim, clients)
}

/// The one entity named `name` client `client` of `node` sees.
fn seen(sim: &Sim, node: usize, client: ClientId, name: &str) -> EntityId {
    let found = sim.find(node, client, name);
    assert_eq!(
        found.len(),
        1,
        "node {node} sees {name} {} times",
        found.len()
    );
    found[0]
}

/// The position a client sees for an entity.
fn position_of(sim: &Sim, node: usize, client: ClientId, entity: EntityId) -> Option<Float3> {
    let components = sim.view(node, client).entities.get(&entity)?;
    components
        .values()
        .find(|(t, _)| *t == 20)
        .and_then(|(_, values)| match values.first() {
            Some(AttributeValue::Transform(t)) => Some(t.pos),
            _ => None,
        })
}

fn placed_at(x: f32, y: f32, z: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, y, z),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// A client creates an entity named `name` with its transform at
/// `transform`, child of `parent` (the client's id for it) if given.
fn create(
    sim: &mut Sim,
    node: usize,
    client: ClientId,
    tag: u32,
    name: &str,
    transform: AttributeValue,
    parent: Option<EntityId>,
) {
    let components = vec![placeable_component(1, transform), name_component(2, name)];
    sim.create_entity(node, client, tag, components, parent);
}

/// World A at the origin, world B at (100, 0, 0): A's entity at (1, 2, 3)
/// appears to B's client at (-99, 2, 3); B's client moves it to (-95, 0, 0)
/// and it is at (5, 0, 0) in A. And the other way round.
#[test]
fn two_placed_worlds_see_and_move_each_other_where_they_stand() {
    let (mut sim, clients) = placed_chain(&[0.0, 100.0], true, 1);
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "a",
        placed_at(1.0, 2.0, 3.0),
        None,
    );
    create(
        &mut sim,
        1,
        clients[1],
        1,
        "b",
        placed_at(0.0, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let a_at_b = seen(&sim, 1, clients[1], "a");
    assert_eq!(
        position_of(&sim, 1, clients[1], a_at_b),
        Some(Float3::new(-99.0, 2.0, 3.0))
    );
    let b_at_a = seen(&sim, 0, clients[0], "b");
    assert_eq!(
        position_of(&sim, 0, clients[0], b_at_a),
        Some(Float3::new(100.0, 0.0, 0.0))
    );
    // Each world's own clients see it as authored.
    let a_at_a = seen(&sim, 0, clients[0], "a");
    assert_eq!(
        position_of(&sim, 0, clients[0], a_at_a),
        Some(Float3::new(1.0, 2.0, 3.0))
    );

    sim.set_transform(1, clients[1], a_at_b, placed_at(-95.0, 0.0, 0.0));
    sim.set_transform(0, clients[0], b_at_a, placed_at(110.0, 0.0, 0.0));
    sim.run(SETTLE);
    assert_eq!(
        sim.scene_transform(0, a_at_a).map(|t| t.pos),
        Some(Float3::new(5.0, 0.0, 0.0))
    );
    assert_eq!(
        position_of(&sim, 0, clients[0], a_at_a),
        Some(Float3::new(5.0, 0.0, 0.0))
    );
    let b_at_b = seen(&sim, 1, clients[1], "b");
    assert_eq!(
        position_of(&sim, 1, clients[1], b_at_b),
        Some(Float3::new(10.0, 0.0, 0.0))
    );
    assert_eq!(
        position_of(&sim, 1, clients[1], a_at_b),
        Some(Float3::new(-95.0, 0.0, 0.0))
    );
}

/// A child's transform is relative to its parent: it travels as it is,
/// only the root moves with the placement.
#[test]
fn a_child_stays_relative_to_its_parent() {
    let (mut sim, clients) = placed_chain(&[0.0, 100.0], true, 2);
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "parent",
        placed_at(1.0, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let parent = seen(&sim, 0, clients[0], "parent");
    create(
        &mut sim,
        0,
        clients[0],
        2,
        "child",
        placed_at(0.0, 2.0, 0.0),
        Some(parent),
    );
    sim.run(SETTLE);
    let (parent_b, child_b) = (
        seen(&sim, 1, clients[1], "parent"),
        seen(&sim, 1, clients[1], "child"),
    );
    assert_eq!(
        position_of(&sim, 1, clients[1], parent_b),
        Some(Float3::new(-99.0, 0.0, 0.0))
    );
    assert_eq!(
        position_of(&sim, 1, clients[1], child_b),
        Some(Float3::new(0.0, 2.0, 0.0))
    );
    let entity = sim.nodes[1].scene().entity(child_b).unwrap();
    assert_eq!(entity.parent, Some(parent_b), "the child keeps its parent");
}

/// A relay passes a position on as it received it: over A (0) - B
/// (5000.3) - C (200) a value A holds off the grid reaches C as one
/// translation from A's frame to C's, not two (B's frame is coarser there).
#[test]
fn a_relay_adds_no_error_to_positions() {
    let b = 5_000.3;
    let x = 0.1f32;
    let twice = ((f64::from((f64::from(x) - b) as f32) + b) as f32 as f64 - 200.0) as f32;
    let once = (f64::from(x) - 200.0) as f32;
    assert_ne!(twice, once, "the values chosen show a double translation");
    // Plain f32 values on the links: nothing but the placements rounds.
    let (mut sim, clients) = placed_chain(&[0.0, b, 200.0], false, 3);
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "far",
        placed_at(x, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let at_c = seen(&sim, 2, clients[2], "far");
    assert_eq!(
        position_of(&sim, 2, clients[2], at_c).map(|p| p.x),
        Some(once)
    );
}

/// A reload that moves world B moves every other world for B's clients
/// and B's world for theirs, as updates: nobody is sent a removal or a
/// re-creation.
#[test]
fn a_changed_placement_moves_worlds_by_updates() {
    let (mut sim, clients) = placed_chain(&[0.0, 100.0], true, 4);
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "a",
        placed_at(1.0, 2.0, 3.0),
        None,
    );
    create(
        &mut sim,
        1,
        clients[1],
        1,
        "b",
        placed_at(0.0, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let counts = |sim: &Sim| {
        [(0, clients[0]), (1, clients[1])].map(|(node, client)| {
            let c = &sim.clients[node][&client];
            (c.creates, c.removes)
        })
    };
    let before = counts(&sim);
    sim.nodes[1].set_placement(at(50.0));
    sim.drain(1);
    sim.run(SETTLE);
    let a_at_b = seen(&sim, 1, clients[1], "a");
    assert_eq!(
        position_of(&sim, 1, clients[1], a_at_b),
        Some(Float3::new(-49.0, 2.0, 3.0))
    );
    let b_at_a = seen(&sim, 0, clients[0], "b");
    assert_eq!(
        position_of(&sim, 0, clients[0], b_at_a),
        Some(Float3::new(50.0, 0.0, 0.0))
    );
    assert_eq!(counts(&sim), before, "no removal, no re-creation");
}

/// The entity's world's client and another world's client take turns
/// moving it a thousand times, each from where it sees it: it ends exactly
/// where the same edits end between unplaced worlds. Steps and placements
/// lie on the compact encoding's 1/256 m grid (docs/federation.md §2.7), so
/// a client's own arithmetic is exact in either frame and any drift would
/// be the nodes'.
#[test]
fn a_thousand_edits_through_two_placements_do_not_drift() {
    let step = (5.0 / 256.0, -3.0 / 256.0);
    let run = |placement: f64| {
        let (mut sim, clients) = placed_chain(&[0.0, placement], true, 5);
        create(
            &mut sim,
            0,
            clients[0],
            1,
            "walker",
            placed_at(1.0, 0.0, 0.0),
            None,
        );
        sim.run(SETTLE);
        let at = [
            seen(&sim, 0, clients[0], "walker"),
            seen(&sim, 1, clients[1], "walker"),
        ];
        for turn in 0..1000 {
            let node = turn % 2;
            let here = position_of(&sim, node, clients[node], at[node]).unwrap();
            let next = placed_at(here.x + step.0, here.y + step.1, here.z);
            sim.set_transform(node, clients[node], at[node], next);
            sim.run(Duration::from_millis(50));
        }
        sim.run(SETTLE);
        sim.scene_transform(0, at[0]).unwrap().pos
    };
    let unplaced = run(0.0);
    assert!(unplaced.x > 5.0, "the walker moved: {unplaced:?}");
    assert_eq!(
        unplaced,
        Float3::new(1.0 + 1000.0 * step.0, 1000.0 * step.1, 0.0)
    );
    assert_eq!(run(100.0), unplaced);
    assert_eq!(run(-3_000.5), unplaced);
    assert_eq!(run(12_345.25), unplaced);
}

/// A zone is declared in its node's own coordinates: with B placed at
/// (100, 0, 0), B's zone x >= 0 is federation x >= 100, and A's entity
/// settling at federation x = 150 is handed to B.
#[test]
fn zones_lie_in_their_own_world_coordinates() {
    let mut sim = Sim::new(2, 6);
    sim.nodes[1].set_placement(at(100.0));
    let zone = ZoneSet::new(vec![Zone::new_half_space([1.0, 0.0, 0.0], 0.0).unwrap()]).unwrap();
    sim.nodes[1].set_zones(
        zone,
        Hysteresis {
            time: Duration::from_millis(500),
            distance: 1.0,
        },
    );
    sim.connect(0, 1, LinkModel::CLEAN);
    let clients = [sim.add_client(0), sim.add_client(1)];
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "mover",
        placed_at(50.0, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let own = seen(&sim, 0, clients[0], "mover");
    let at_b = seen(&sim, 1, clients[1], "mover");
    assert_eq!(
        sim.nodes[1].federation().authority_of(at_b).map(|(_, e)| e),
        Some(0)
    );
    assert!(
        sim.nodes[1].scene().entity(at_b).unwrap().origin == lessgate::scene::Origin::Remote,
        "x = 50 is outside B's zone (B's x = -50)"
    );
    sim.set_transform(0, clients[0], own, placed_at(150.0, 0.0, 0.0));
    sim.run(Duration::from_secs(5));
    assert_eq!(
        sim.nodes[1].scene().entity(at_b).map(|e| e.origin),
        Some(lessgate::scene::Origin::Local),
        "B took the entity in its zone"
    );
    assert_eq!(
        sim.scene_transform(1, at_b).map(|t| t.pos),
        Some(Float3::new(50.0, 0.0, 0.0))
    );
}

/// A bridge node placed at (100, 0, 0): its world server's scene keeps its
/// own coordinates, the world appears to other nodes' clients where it is
/// placed, and their entities appear in the world server where they stand
/// relative to it.
#[test]
fn a_world_server_behind_a_placed_bridge_keeps_its_coordinates() {
    use sim::world::{bridge, from_world, reply_to, to_world, world_edit, world_login};
    let mut sim = Sim::new(2, 7);
    sim.nodes[0].attach_upstream(bridge(Duration::from_secs(30)));
    sim.nodes[0].set_placement(at(100.0));
    world_login(&mut sim, 7, 0.0);
    sim.connect_with(0, 1, LinkModel::CLEAN, &encodings(), &encodings());
    let client = sim.add_client(1);
    sim.run(SETTLE);
    let fountain = seen(&sim, 1, client, "fountain");
    assert_eq!(
        position_of(&sim, 1, client, fountain),
        Some(Float3::new(104.0, 0.0, 0.0))
    );
    to_world(&mut sim);

    sim.create_box(1, client, 1, "visitor", 2.0);
    sim.run(SETTLE);
    let out = to_world(&mut sim);
    let created = out.iter().find_map(|m| match m {
        lessgate::tundra::Message::CreateEntity(create) => Some(create.clone()),
        _ => None,
    });
    let created = created.expect("the visitor is created in the world server");
    let transform = created
        .components
        .iter()
        .find(|c| c.type_id == 20)
        .and_then(|c| match &c.body {
            lessgate::tundra::ComponentBody::Attributes(block) => block.values.first().cloned(),
            _ => None,
        });
    assert_eq!(transform, Some(placed_at(-98.0, 0.0, 0.0)));
    from_world(&mut sim, reply_to(&created, 50));

    from_world(&mut sim, world_edit(7, placed_at(10.0, 1.0, 0.0)));
    sim.run(SETTLE);
    assert_eq!(
        position_of(&sim, 1, client, fountain),
        Some(Float3::new(110.0, 1.0, 0.0))
    );
}

/// A native viewer on a placed node takes another world's moving entity as
/// RigidBodyUpdate (119) records in its own world's coordinates.
#[test]
fn a_native_viewer_takes_moves_in_its_worlds_coordinates() {
    let (mut sim, clients) = placed_chain(&[0.0, 100.0], true, 8);
    let viewer = sim.add_native_client(1);
    create(
        &mut sim,
        0,
        clients[0],
        1,
        "mover",
        placed_at(1.0, 0.0, 0.0),
        None,
    );
    sim.run(SETTLE);
    let own = seen(&sim, 0, clients[0], "mover");
    let at_b = seen(&sim, 1, viewer, "mover");
    assert_eq!(
        position_of(&sim, 1, viewer, at_b),
        Some(Float3::new(-99.0, 0.0, 0.0)),
        "created in B's coordinates"
    );
    for step in 1..=20 {
        sim.set_transform(0, clients[0], own, placed_at(1.0 + step as f32, 2.0, 0.0));
        sim.run(Duration::from_millis(100));
    }
    sim.run(SETTLE);
    let seen_at = position_of(&sim, 1, viewer, at_b).unwrap();
    // 119 quantizes positions (docs/tundra-wire.md §6.1): centimetres here.
    assert!(
        (seen_at.x - -79.0).abs() < 0.01 && (seen_at.y - 2.0).abs() < 0.01,
        "moved to B's (-79, 2, 0), seen at {seen_at:?}"
    );
}
