//! Interest-scoped federation across real node cores under fake time
//! (docs/federation.md §8): in spatial mode a node receives only the
//! entities near its clients, wherever in the federation they are and
//! through however many relays; entities enter with their current state
//! and leave with hysteresis; trees travel whole; a peer without the
//! feature, and a node in `all` mode, get everything as before.

mod sim;

use std::time::Duration;

use lessgate::federation::interest::own::{InterestMode, InterestSettings};
use lessgate::federation::space::placement::Placement;
use lessgate::federation::wire::features::INTEREST_FEATURE;
use lessgate::scene::ClientId;
use lessgate::tundra::messages::{Message, ObserverPosition};
use lessgate::tundra::rigid_body_parts::PositionUpdate;
use lessgate::tundra::values::Float3;
use sim::tundra_values::{entity_named, move_to, name_component, placeable_component};
use sim::{with_federation_features, LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(3);
/// Worlds 1 km apart, as an operator lays them out.
const SPACING: f64 = 1000.0;

fn spatial(radius: f32, hysteresis: f32) -> InterestSettings {
    InterestSettings {
        mode: InterestMode::Spatial,
        radius,
        hysteresis,
        centre: None,
    }
}

/// `n` nodes in a chain, world `i` placed at `i * SPACING`, every node in
/// spatial mode (radius 100 m, hysteresis 10 m), a client each, and a box
/// named `w{i}` at each world's origin.
fn spatial_chain(n: usize, model: LinkModel, seed: u64) -> (Sim, Vec<ClientId>) {
    let mut sim = Sim::new(n, seed);
    for node in 0..n {
        sim.nodes[node].set_placement(Placement::new([node as f64 * SPACING, 0.0, 0.0]).unwrap());
        sim.nodes[node].set_interest_settings(spatial(100.0, 10.0));
    }
    for node in 1..n {
        sim.connect(node - 1, node, model);
    }
    let clients: Vec<ClientId> = (0..n).map(|node| sim.add_client(node)).collect();
    for (node, client) in clients.iter().enumerate() {
        sim.create_box(node, *client, 1, &format!("w{node}"), 0.0);
    }
    (sim, clients)
}

/// Client `client` of `node` looks from `x` (its world's coordinates).
fn observe(sim: &mut Sim, node: usize, client: ClientId, x: f32) {
    let message = Message::ObserverPosition(ObserverPosition {
        scene_id: 0,
        position: PositionUpdate::Full(Float3::new(x, 0.0, 0.0)),
        rotation: Default::default(),
    });
    sim.send(node, client, &message);
}

/// The link of node `from` whose peer is node `to`.
fn link_towards(sim: &Sim, from: usize, to: usize) -> lessgate::federation::LinkId {
    let peer = sim.nodes[to].federation().node_id();
    sim.nodes[from]
        .federation()
        .links()
        .find(|l| l.peer == peer)
        .map(|l| l.id)
        .expect("a link between the two nodes")
}

fn sees(sim: &Sim, node: usize, client: ClientId, name: &str) -> usize {
    sim.find(node, client, name).len()
}

/// Runs until `done` holds, at most `limit` of fake time.
fn run_until(sim: &mut Sim, limit: Duration, done: impl Fn(&Sim) -> bool) -> bool {
    let step = Duration::from_millis(100);
    let mut spent = Duration::ZERO;
    while spent < limit {
        if done(sim) {
            return true;
        }
        sim.run(step);
        spent += step;
    }
    done(sim)
}

#[test]
fn a_node_receives_only_what_its_clients_look_at_and_follows_them() {
    let (mut sim, clients) = spatial_chain(4, LinkModel::CLEAN, 1);
    sim.run(SETTLE);
    // Each node sees its own world, and nothing of the others 1 km away.
    for (node, client) in clients.iter().enumerate() {
        assert_eq!(sees(&sim, node, *client, &format!("w{node}")), 1);
        for other in (0..4).filter(|o| *o != node) {
            assert_eq!(
                sees(&sim, node, *client, &format!("w{other}")),
                0,
                "node {node} sees world {other}"
            );
        }
    }
    // Node 1 withholds its own world from node 0, and says so.
    let towards_0 = link_towards(&sim, 1, 0);
    assert_eq!(sim.nodes[1].federation().withheld(towards_0), 1);
    // Node 0's client walks to world 3 (three links away): it appears,
    // through the two relays.
    observe(&mut sim, 0, clients[0], 3000.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 0, clients[0], "w3"
    ) == 1));
    assert_eq!(sees(&sim, 0, clients[0], "w1"), 0);
    // The relays carry it, their own clients' interest unchanged.
    assert_eq!(
        sim.nodes[1]
            .scene()
            .entities()
            .filter(|e| e.parent.is_none())
            .count(),
        2
    );
    // Back home: world 3 leaves node 0 again.
    observe(&mut sim, 0, clients[0], 0.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 0, clients[0], "w3"
    ) == 0));
    assert_eq!(sees(&sim, 0, clients[0], "w0"), 1);
    for node in 0..4 {
        sim.nodes[node].federation().check_invariants().unwrap();
    }
}

/// An entity that walks out of a node's area stays while within the
/// margin, leaves beyond it, and comes back with its current position.
#[test]
fn an_entity_leaves_beyond_the_margin_and_returns_with_its_current_state() {
    let (mut sim, clients) = spatial_chain(2, LinkModel::CLEAN, 2);
    // Node 1's client looks at world 0's origin.
    observe(&mut sim, 1, clients[1], -1000.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 1, clients[1], "w0"
    ) == 1));
    let entity = sim.find(0, clients[0], "w0")[0];
    // 105 m out: beyond the 100 m box, within the 10 m margin.
    sim.move_entity(0, clients[0], entity, 105.0);
    sim.run(SETTLE);
    let at_1 = sim.find(1, clients[1], "w0");
    assert_eq!(at_1.len(), 1, "kept within the margin");
    assert_eq!(sim.x_of(1, clients[1], at_1[0]), Some(-895.0));
    // 115 m: gone.
    sim.move_entity(0, clients[0], entity, 115.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 1, clients[1], "w0"
    ) == 0));
    // Moved on while away, then back in: it arrives where it is now.
    sim.move_entity(0, clients[0], entity, 300.0);
    sim.run(Duration::from_millis(500));
    sim.move_entity(0, clients[0], entity, 42.0);
    assert!(run_until(&mut sim, SETTLE, |s| {
        let found = s.find(1, clients[1], "w0");
        found.len() == 1 && s.x_of(1, clients[1], found[0]) == Some(-958.0)
    }));
}

/// A child inside the area brings its parent far outside it, and the
/// parent's other children with it: trees travel whole.
#[test]
fn a_tree_travels_whole_when_one_of_it_is_in_interest() {
    let (mut sim, clients) = spatial_chain(2, LinkModel::CLEAN, 3);
    sim.run(SETTLE);
    let root = sim.find(0, clients[0], "w0")[0];
    // A child 600 m from its parent (world position 600 m): node 1's
    // client looks there (federation 600 = node 1's -400).
    sim.create_entity(
        0,
        clients[0],
        2,
        vec![
            placeable_component(1, placed(600.0)),
            name_component(2, "child"),
        ],
        Some(root),
    );
    sim.run(SETTLE);
    assert_eq!(sees(&sim, 1, clients[1], "child"), 0);
    observe(&mut sim, 1, clients[1], -400.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 1, clients[1], "child"
    ) == 1));
    assert_eq!(
        sees(&sim, 1, clients[1], "w0"),
        1,
        "the parent came with it"
    );
    observe(&mut sim, 1, clients[1], 0.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 1, clients[1], "child"
    ) == 0
        && sees(s, 1, clients[1], "w0") == 0));
}

fn placed(x: f32) -> lessgate::tundra::AttributeValue {
    lessgate::tundra::AttributeValue::Transform(lessgate::tundra::values::Transform {
        pos: Float3::new(x, 0.0, 0.0),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// Two clients of one node: the node receives what either looks at, and
/// shows each only what lies in its own area; a client cannot act on what
/// it is not shown; a client that teleports sees its new area at once and
/// loses the old one.
#[test]
fn each_client_is_shown_its_own_area_and_acts_only_on_it() {
    let (mut sim, clients) = spatial_chain(3, LinkModel::CLEAN, 8);
    let home = clients[0];
    let traveller = sim.add_client(0);
    observe(&mut sim, 0, home, 0.0);
    observe(&mut sim, 0, traveller, 2000.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(s, 0, traveller, "w2") == 1));
    assert!(entity_named(sim.nodes[0].scene(), "w2").is_some());
    assert_eq!(
        sees(&sim, 0, home, "w2"),
        0,
        "the home client is not shown it"
    );
    assert_eq!(sees(&sim, 0, traveller, "w0"), 1, "its own world always");
    // The home client names the entity anyway (the node's id for it):
    // refused as unknown, and it does not move at gamma.
    let id = sim.find(0, traveller, "w2")[0];
    let refused = sim.nodes[0].server().stats().refused_messages;
    let placeable = sim.view(0, traveller).entities[&id]
        .iter()
        .find(|(_, (type_id, _))| *type_id == 20)
        .map(|(component, _)| *component)
        .unwrap();
    sim.send(0, home, &move_to(id, placeable, 50.0));
    assert_eq!(sim.nodes[0].server().stats().refused_messages, refused + 1);
    // The traveller teleports to world 1: world 2 leaves it, world 1 comes.
    observe(&mut sim, 0, traveller, 1000.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(s, 0, traveller, "w1")
        == 1
        && sees(s, 0, traveller, "w2") == 0));
    let gamma = sim.find(2, clients[2], "w2")[0];
    assert_eq!(
        sim.x_of(2, clients[2], gamma),
        Some(0.0),
        "the refused move did not happen"
    );
}

/// A peer that does not list the feature is sent everything, and so is a
/// node in `all` mode behind a spatial one: the relay subscribes for it.
#[test]
fn a_peer_without_interest_and_an_all_mode_node_still_get_everything() {
    let mut sim = Sim::new(3, 4);
    for node in 0..3 {
        sim.nodes[node].set_placement(Placement::new([node as f64 * SPACING, 0.0, 0.0]).unwrap());
    }
    // Node 1 is spatial; node 0 is an older node (no interest feature);
    // node 2 is a lessgate node in the default mode.
    sim.nodes[1].set_interest_settings(spatial(100.0, 10.0));
    let old: Vec<String> = with_federation_features(&[])
        .into_iter()
        .filter(|f| f != INTEREST_FEATURE)
        .collect();
    sim.connect_hellos(0, 1, LinkModel::CLEAN, &old, &with_federation_features(&[]));
    sim.connect(1, 2, LinkModel::CLEAN);
    let clients: Vec<ClientId> = (0..3).map(|node| sim.add_client(node)).collect();
    for (node, client) in clients.iter().enumerate() {
        sim.create_box(node, *client, 1, &format!("w{node}"), 0.0);
    }
    sim.run(SETTLE);
    for node in [0, 2] {
        for world in 0..3 {
            assert_eq!(
                sees(&sim, node, clients[node], &format!("w{world}")),
                1,
                "node {node}, world {world}"
            );
        }
    }
    // The spatial node in the middle presents what it relays, and shows
    // its client only what lies near it.
    assert!(entity_named(sim.nodes[1].scene(), "w2").is_some());
    assert_eq!(sees(&sim, 1, clients[1], "w2"), 0);
}

/// Over a lossy link the subscription and the entities it admits still
/// converge, and withdraw.
#[test]
fn interest_converges_over_a_lossy_link() {
    let (mut sim, clients) = spatial_chain(3, LinkModel::LOSSY, 5);
    sim.run(SETTLE);
    observe(&mut sim, 0, clients[0], 2000.0);
    assert!(run_until(&mut sim, Duration::from_secs(20), |s| sees(
        s, 0, clients[0], "w2"
    ) == 1));
    observe(&mut sim, 0, clients[0], 0.0);
    assert!(run_until(&mut sim, Duration::from_secs(20), |s| sees(
        s, 0, clients[0], "w2"
    ) == 0));
    for node in 0..3 {
        sim.nodes[node].federation().check_invariants().unwrap();
    }
}

/// The point of it: with every client at home, the far end of a chain of
/// eight costs node 0 what its one neighbour costs, not what all seven
/// worlds cost (bytes on the simulated wire, deterministic per seed).
#[test]
fn a_longer_chain_does_not_cost_the_first_node_more() {
    fn bytes_into_node_0(n: usize, spatial_mode: bool) -> usize {
        let mut sim = Sim::new(n, 6);
        for node in 0..n {
            sim.nodes[node]
                .set_placement(Placement::new([node as f64 * SPACING, 0.0, 0.0]).unwrap());
            if spatial_mode {
                sim.nodes[node].set_interest_settings(spatial(100.0, 10.0));
            }
        }
        let mut towards_0 = None;
        for node in 1..n {
            let (_, at_node) = sim.connect(node - 1, node, LinkModel::CLEAN);
            towards_0.get_or_insert(at_node);
        }
        let key = (1, towards_0.unwrap());
        let clients: Vec<ClientId> = (0..n).map(|node| sim.add_client(node)).collect();
        let mut boxes = Vec::new();
        for (node, client) in clients.iter().enumerate() {
            for i in 0..10 {
                sim.create_box(node, *client, i + 1, &format!("b{node}-{i}"), i as f32);
            }
        }
        sim.run(SETTLE);
        for (node, client) in clients.iter().enumerate() {
            for i in 0..10 {
                boxes.push((
                    node,
                    *client,
                    sim.find(node, *client, &format!("b{node}-{i}"))[0],
                ));
            }
        }
        let before = sim.bytes_sent.get(&key).copied().unwrap_or(0);
        // Ten seconds of every box moving at 10 Hz.
        for step in 0..100 {
            for (node, client, entity) in &boxes {
                sim.move_entity(*node, *client, *entity, (step % 7) as f32);
            }
            sim.run(Duration::from_millis(100));
        }
        let after = sim.bytes_sent.get(&key).copied().unwrap_or(0);
        after - before
    }
    let all_3 = bytes_into_node_0(3, false);
    let all_8 = bytes_into_node_0(8, false);
    let spatial_3 = bytes_into_node_0(3, true);
    let spatial_8 = bytes_into_node_0(8, true);
    println!("bytes node 1 sent: all 3 {all_3}, all 8 {all_8}, spatial 3 {spatial_3}, spatial 8 {spatial_8}");
    assert!(all_8 > all_3 * 2, "all mode grows with the federation");
    // Spatial: node 1 sends node 0 nothing placed of its own or beyond,
    // and a longer chain adds nothing but its share of acknowledgements.
    assert!(spatial_8 * 3 < all_3, "{spatial_8} vs {all_3}");
    assert!(
        spatial_8 <= spatial_3 + spatial_3 / 2,
        "{spatial_8} vs {spatial_3}"
    );
}

/// Measurement, not a check (run with `cargo test --release --test
/// federation_interest measure_grid_costs -- --ignored --nocapture`;
/// figures in BENCHMARKS.md): nodes in a square grid, worlds 1 km apart,
/// linked to their grid neighbours, each with one client at home and
/// 1,000 entities its own simulation moves every tick (20 Hz) within 50 m
/// of its origin. Reports, for the node at the grid's centre, the updates
/// (property values) and bytes per second its links bring it and the
/// entities it presents, and for the whole run the CPU per node, in `all`
/// and in `spatial` mode.
#[test]
#[ignore]
fn measure_grid_costs() {
    use lessgate::scene::{ChangeSource, Origin};
    use lessgate::tundra::values::Transform;
    use lessgate::tundra::AttributeValue;
    const MOVERS: usize = 1000;
    fn at(x: f32, z: f32) -> AttributeValue {
        AttributeValue::Transform(Transform {
            pos: Float3::new(x, 0.0, z),
            rot: Float3::new(0.0, 0.0, 0.0),
            scale: Float3::new(1.0, 1.0, 1.0),
        })
    }
    fn run(side: usize, spatial_mode: bool, seconds: u64) -> (f64, f64, usize, f64) {
        let n = side * side;
        let mut sim = Sim::new(n, 7);
        for node in 0..n {
            let (x, y) = ((node % side) as f64, (node / side) as f64);
            sim.nodes[node].set_placement(Placement::new([x * SPACING, y * SPACING, 0.0]).unwrap());
            if spatial_mode {
                sim.nodes[node].set_interest_settings(spatial(100.0, 10.0));
            }
            let scene = sim.nodes[node].scene_mut();
            let mut movers = Vec::with_capacity(MOVERS);
            for i in 0..MOVERS {
                let components = vec![
                    placeable_component(1, at((i % 32) as f32, (i / 32) as f32)),
                    name_component(2, &format!("m{i}")),
                ];
                let created = scene
                    .create_entity(
                        ChangeSource::Node,
                        None,
                        Origin::Local,
                        false,
                        None,
                        components,
                    )
                    .unwrap();
                movers.push((created.id, created.components[0].1));
            }
            sim.nodes[node].set_tick_hook(Box::new(move |scene, now| {
                let t = now.as_micros() as f32 / 1e6;
                for (i, (entity, placeable)) in movers.iter().enumerate() {
                    let phase = t + i as f32 * 0.01;
                    let value = at((i % 32) as f32 + phase.sin(), (i / 32) as f32 + phase.cos());
                    let _ = scene.edit_attribute(ChangeSource::Node, *entity, *placeable, 0, value);
                }
            }));
        }
        for node in 0..n {
            if node % side + 1 < side {
                sim.connect(node, node + 1, LinkModel::CLEAN);
            }
            if node + side < n {
                sim.connect(node, node + side, LinkModel::CLEAN);
            }
        }
        let _clients: Vec<ClientId> = (0..n).map(|node| sim.add_client(node)).collect();
        sim.run(Duration::from_secs(3));
        let centre = (side / 2) * side + side / 2;
        let received = |sim: &Sim| -> (u64, u64) {
            sim.nodes[centre]
                .federation()
                .links()
                .fold((0, 0), |(v, b), l| {
                    let stats = l.session.stats();
                    (v + stats.values_received, b + stats.bytes_received)
                })
        };
        let (values_before, bytes_before) = received(&sim);
        let started = std::time::Instant::now();
        sim.run(Duration::from_secs(seconds));
        let cpu_per_node = started.elapsed().as_secs_f64() / seconds as f64 / n as f64;
        let (values_after, bytes_after) = received(&sim);
        (
            (values_after - values_before) as f64 / seconds as f64,
            (bytes_after - bytes_before) as f64 / seconds as f64,
            sim.nodes[centre].scene().len(),
            cpu_per_node,
        )
    }
    println!("| nodes | mode | updates/s into the centre node | link bytes/s into it | entities it presents | CPU per node (share of a core) |");
    println!("|---|---|---|---|---|---|");
    for side in [2usize, 4, 8, 10] {
        for spatial_mode in [false, true] {
            if !spatial_mode && side > 4 {
                continue; // every node carries every world: the sim itself cannot keep up
            }
            let seconds = if spatial_mode { 5 } else { 2 };
            let (values, bytes, entities, cpu) = run(side, spatial_mode, seconds);
            let mode = if spatial_mode { "spatial" } else { "all" };
            println!(
                "| {} | {mode} | {values:.0} | {bytes:.0} | {entities} | {:.1}% |",
                side * side,
                cpu * 100.0
            );
        }
    }
}

/// In a triangle, an entity reaches an interested node by the direct link
/// only: the relay does not send it a second copy.
#[test]
fn in_a_triangle_an_entity_takes_the_direct_link_only() {
    let mut sim = Sim::new(3, 9);
    for node in 0..3 {
        sim.nodes[node].set_placement(Placement::new([node as f64 * SPACING, 0.0, 0.0]).unwrap());
        sim.nodes[node].set_interest_settings(spatial(100.0, 10.0));
    }
    let (l01, _) = sim.connect(0, 1, LinkModel::CLEAN);
    let (_, l21) = sim.connect(1, 2, LinkModel::CLEAN);
    let (l02, _) = sim.connect(0, 2, LinkModel::CLEAN);
    let clients: Vec<ClientId> = (0..3).map(|node| sim.add_client(node)).collect();
    for (node, client) in clients.iter().enumerate() {
        sim.create_box(node, *client, 1, &format!("w{node}"), 0.0);
    }
    // Nodes 0 and 1 both look at world 2.
    observe(&mut sim, 0, clients[0], 2000.0);
    observe(&mut sim, 1, clients[1], 1000.0);
    assert!(run_until(&mut sim, SETTLE, |s| sees(
        s, 0, clients[0], "w2"
    ) == 1
        && sees(s, 1, clients[1], "w2") == 1));
    sim.run(SETTLE);
    let at_0 = sim.find(0, clients[0], "w2")[0];
    let federation = sim.nodes[0].federation();
    let global = federation.global_of(at_0).unwrap();
    assert_eq!(federation.route_of(global).map(|r| r.0), Some(l02));
    // Node 1 holds world 2 but does not relay it to node 0.
    let at_1 = entity_named(sim.nodes[1].scene(), "w2").unwrap();
    let towards_0 = link_towards(&sim, 1, 0);
    assert!(sim.nodes[1]
        .federation()
        .exported_objects(towards_0, at_1)
        .is_none());
    // Nor node 0 world 2's copy back to node 1 (it came from 2 directly).
    let _ = (l01, l21);
    let at_0_scene = entity_named(sim.nodes[0].scene(), "w2").unwrap();
    assert!(sim.nodes[0]
        .federation()
        .exported_objects(l01, at_0_scene)
        .is_none());
    // The direct link fails: world 2 comes over the relay instead.
    sim.disconnect(0, l02);
    assert!(run_until(&mut sim, SETTLE, |s| {
        let Some(at_0) = s.find(0, clients[0], "w2").first().copied() else {
            return false;
        };
        let federation = s.nodes[0].federation();
        federation
            .global_of(at_0)
            .and_then(|g| federation.route_of(g))
            .map(|r| r.0)
            == Some(l01)
    }));
    assert_eq!(sees(&sim, 0, clients[0], "w2"), 1);
}

/// Export policy applies on top of interest: an entity that re-enters a
/// link's interest comes back with only the components its origin lets
/// that peer have.
#[test]
fn export_policy_holds_for_an_entity_that_enters_interest_again() {
    use lessgate::federation::{LinkPolicy, TypeFilter};
    const RIGID_BODY: u32 = 23;
    let mut sim = Sim::new(2, 10);
    for node in 0..2 {
        sim.nodes[node].set_placement(Placement::new([node as f64 * SPACING, 0.0, 0.0]).unwrap());
        sim.nodes[node].set_interest_settings(spatial(100.0, 10.0));
    }
    let scenery = LinkPolicy {
        export: TypeFilter::Only(
            ["EC_Placeable", "EC_Name"]
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ),
        accept: TypeFilter::All,
    };
    sim.nodes[0].set_configured_exports(vec![scenery.export.clone()]);
    sim.connect_policies(0, 1, LinkModel::CLEAN, scenery, LinkPolicy::default());
    let a = sim.add_client(0);
    let b = sim.add_client(1);
    sim.create_box_with(0, a, 1, "cart", 0.0, &[RIGID_BODY]);
    let types = |sim: &Sim| -> Vec<u32> {
        sim.find(1, b, "cart")
            .first()
            .map(|id| {
                sim.view(1, b).entities[id]
                    .values()
                    .map(|(t, _)| *t)
                    .collect()
            })
            .unwrap_or_default()
    };
    for _ in 0..2 {
        observe(&mut sim, 1, b, -1000.0);
        assert!(run_until(&mut sim, SETTLE, |s| sees(s, 1, b, "cart") == 1));
        sim.run(Duration::from_millis(500));
        let mut seen = types(&sim);
        seen.sort();
        assert_eq!(seen, vec![20, 26], "Placeable and Name only");
        observe(&mut sim, 1, b, 0.0);
        assert!(run_until(&mut sim, SETTLE, |s| sees(s, 1, b, "cart") == 0));
    }
}

/// A zone takes an entity over whatever the zone's node's clients look
/// at (its zones are in its interest), and a node that took an entity over
/// keeps simulating it when its clients look away; the origin's client,
/// which looks at it, keeps seeing it move.
#[test]
fn hand_over_works_into_and_out_of_interest() {
    use lessgate::federation::zones::{Hysteresis, Zone, ZoneSet};
    let (mut sim, clients) = spatial_chain(2, LinkModel::CLEAN, 11);
    // Node 1 owns the box around its world's origin (its own coordinates).
    let zone = Zone::new_box([-50.0, -50.0, -50.0], [50.0, 50.0, 50.0]).unwrap();
    sim.nodes[1].set_zones(
        ZoneSet::new(vec![zone]).unwrap(),
        Hysteresis {
            time: Duration::from_millis(500),
            distance: 1.0,
        },
    );
    // Node 1's client looks far away from its zone.
    observe(&mut sim, 1, clients[1], 500.0);
    sim.run(SETTLE);
    let cart = sim.find(0, clients[0], "w0")[0];
    // World 0's box walks into node 1's zone (federation x 1000).
    observe(&mut sim, 0, clients[0], 1000.0);
    sim.move_entity(0, clients[0], cart, 1000.0);
    let node_1 = sim.nodes[1].federation().node_id();
    assert!(run_until(&mut sim, Duration::from_secs(10), |s| {
        s.nodes[0].federation().authority_of(cart).map(|a| a.0) == Some(node_1)
    }));
    assert_eq!(
        sees(&sim, 1, clients[1], "w0"),
        0,
        "node 1's client still looks away"
    );
    // Node 1 simulates it now; node 0's client still sees it and its moves.
    assert!(entity_named(sim.nodes[1].scene(), "w0").is_some());
    sim.move_entity(0, clients[0], cart, 1010.0);
    assert!(run_until(&mut sim, SETTLE, |s| s.x_of(0, clients[0], cart)
        == Some(1010.0)));
    for node in 0..2 {
        sim.nodes[node].federation().check_invariants().unwrap();
    }
}
