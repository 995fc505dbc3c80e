//! An origin's export restrictions hold across the federation
//! (docs/federation.md §4.1): a relay forwards a component of the
//! origin's entity to a node only if the origin would send it there itself.

mod sim;

use std::collections::BTreeSet;
use std::time::Duration;

use lessgate::federation::{LinkId, LinkPolicy, TypeFilter};
use lessgate::scene::ClientId;
use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(2);
const PLACEABLE: u32 = 20;
const RIGID_BODY: u32 = 23;
const NAME: u32 = 26;

/// A peer file that exports only Placeable, Mesh and Name.
fn scenery_only() -> LinkPolicy {
    LinkPolicy {
        export: TypeFilter::Only(
            ["EC_Placeable", "EC_Mesh", "EC_Name"]
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ),
        accept: TypeFilter::All,
    }
}

/// Tells a node the export lists of all its peer files.
fn peer_files(sim: &mut Sim, node: usize, exports: Vec<TypeFilter>) {
    let node = &mut sim.nodes[node];
    node.set_configured_exports(exports);
}

/// The component types a client sees on the one entity called `name`.
fn types_seen(sim: &Sim, node: usize, client: ClientId, name: &str) -> BTreeSet<u32> {
    let found = sim.find(node, client, name);
    assert_eq!(
        found.len(),
        1,
        "node {node} sees {name} {} times",
        found.len()
    );
    sim.view(node, client).entities[&found[0]]
        .values()
        .map(|(type_id, _)| *type_id)
        .collect()
}

/// The link through which `node` presents the entity called `name`.
fn route(sim: &Sim, node: usize, client: ClientId, name: &str) -> LinkId {
    let entity = sim.find(node, client, name)[0];
    let federation = sim.nodes[node].federation();
    let global = federation.global_of(entity).expect("a federated entity");
    federation.route_of(global).expect("a route").0
}

#[test]
fn triangle_relay_withholds_what_the_origin_withholds_and_the_direct_route_returns() {
    let (alpha, beta, gamma) = (0, 1, 2);
    let mut sim = Sim::new(3, 21);
    // alpha's peer files: beta gets everything, gamma only scenery.
    peer_files(
        &mut sim,
        alpha,
        vec![TypeFilter::All, scenery_only().export],
    );
    sim.connect(alpha, beta, LinkModel::CLEAN);
    let (gamma_to_beta, _) = sim.connect(gamma, beta, LinkModel::CLEAN);
    let (alpha_to_gamma, gamma_to_alpha) = sim.connect_policies(
        alpha,
        gamma,
        LinkModel::CLEAN,
        scenery_only(),
        LinkPolicy::default(),
    );
    let a = sim.add_client(alpha);
    let b = sim.add_client(beta);
    let g = sim.add_client(gamma);
    sim.create_box_with(alpha, a, 1, "crate", 1.0, &[RIGID_BODY]);
    sim.run(SETTLE);
    let scenery = BTreeSet::from([PLACEABLE, NAME]);
    let everything = BTreeSet::from([PLACEABLE, NAME, RIGID_BODY]);
    assert_eq!(types_seen(&sim, beta, b, "crate"), everything);
    assert_eq!(types_seen(&sim, gamma, g, "crate"), scenery, "direct");
    assert_eq!(route(&sim, gamma, g, "crate"), gamma_to_alpha);

    // The direct link fails: gamma sees the crate through beta, which
    // forwards only what alpha sends gamma itself.
    sim.disconnect(alpha, alpha_to_gamma);
    sim.run(SETTLE);
    assert_eq!(route(&sim, gamma, g, "crate"), gamma_to_beta);
    assert_eq!(types_seen(&sim, gamma, g, "crate"), scenery, "via beta");
    let at_alpha = sim.find(alpha, a, "crate")[0];
    sim.move_entity(alpha, a, at_alpha, 5.0);
    sim.run(SETTLE);
    let at_gamma = sim.find(gamma, g, "crate")[0];
    assert_eq!(sim.x_of(gamma, g, at_gamma), Some(5.0), "updates via beta");

    // The direct link comes back: the shortest path is chosen again.
    let (_, gamma_to_alpha) = sim.connect_policies(
        alpha,
        gamma,
        LinkModel::CLEAN,
        scenery_only(),
        LinkPolicy::default(),
    );
    sim.run(SETTLE);
    assert_eq!(
        route(&sim, gamma, g, "crate"),
        gamma_to_alpha,
        "direct again"
    );
    assert_eq!(types_seen(&sim, gamma, g, "crate"), scenery);
    assert_eq!(types_seen(&sim, beta, b, "crate"), everything);
}

#[test]
fn chain_relay_withholds_what_the_origin_withholds_from_a_node_it_never_linked() {
    let (a, b, c) = (0, 1, 2);
    let mut sim = Sim::new(3, 22);
    // a has peer files for b (everything) and c (scenery), but only the
    // a-b link is up: c is reached through b alone.
    peer_files(&mut sim, a, vec![TypeFilter::All, scenery_only().export]);
    sim.connect(a, b, LinkModel::CLEAN);
    sim.connect(b, c, LinkModel::CLEAN);
    let ca = sim.add_client(a);
    let cb = sim.add_client(b);
    let cc = sim.add_client(c);
    sim.create_box_with(a, ca, 1, "crate", 1.0, &[RIGID_BODY]);
    sim.run(SETTLE);
    assert_eq!(
        types_seen(&sim, b, cb, "crate"),
        BTreeSet::from([PLACEABLE, NAME, RIGID_BODY])
    );
    assert_eq!(
        types_seen(&sim, c, cc, "crate"),
        BTreeSet::from([PLACEABLE, NAME])
    );
}
