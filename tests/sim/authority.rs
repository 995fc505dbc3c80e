//! What every authority scenario checks of a simulated federation: one
//! authority everywhere, no remove or second create on any client's wire,
//! and every client at the last value.

use lessgate::scene::{ClientId, Origin};
use lessgate::tundra::EntityId;
use uuid::Uuid;

use super::Sim;

/// A client asks for `entity` for its node: EntityAction `TakeAuthority`
/// with exec type Server and no parameters.
pub fn take_authority(sim: &mut Sim, node: usize, client: ClientId, entity: EntityId) {
    sim.action(
        node,
        client,
        entity,
        "TakeAuthority",
        lessgate::tundra::messages::exec_type::SERVER,
        Vec::new(),
    );
}

pub fn node_id(sim: &Sim, node: usize) -> Uuid {
    sim.nodes[node].federation().node_id()
}

/// The one entity named `name` a client sees (panics unless exactly one).
pub fn the(sim: &Sim, node: usize, client: ClientId, name: &str) -> EntityId {
    let seen = sim.find(node, client, name);
    assert_eq!(
        seen.len(),
        1,
        "node {node}'s client sees {name} once: {seen:?}"
    );
    seen[0]
}

/// The authority and epoch a node states for `entity`.
pub fn authority(sim: &Sim, node: usize, entity: EntityId) -> (Uuid, u64) {
    sim.nodes[node]
        .federation()
        .authority_of(entity)
        .expect("a federated entity")
}

/// The node simulates `entity` itself.
pub fn is_local(sim: &Sim, node: usize, entity: EntityId) -> bool {
    sim.nodes[node].scene().entity(entity).map(|e| e.origin) == Some(Origin::Local)
}

/// Every node agrees on the authority and epoch, and exactly the authority
/// holds the entity as its own.
pub fn assert_one_authority(sim: &Sim, nodes: &[(usize, ClientId)], name: &str) -> (Uuid, u64) {
    let mut agreed = None;
    let mut owners = Vec::new();
    for &(node, client) in nodes {
        let entity = the(sim, node, client, name);
        let seen = authority(sim, node, entity);
        if let Some(first) = agreed {
            assert_eq!(seen, first, "node {node} disagrees on {name}'s authority");
        }
        agreed = Some(seen);
        if is_local(sim, node, entity) {
            owners.push(node_id(sim, node));
        }
    }
    let agreed = agreed.expect("at least one node");
    assert_eq!(
        owners,
        vec![agreed.0],
        "exactly the authority simulates {name}"
    );
    agreed
}

/// Each client was sent each of `entities` entities once and never a
/// removal.
pub fn assert_no_flicker(sim: &Sim, nodes: &[(usize, ClientId)], entities: usize) {
    for &(node, client) in nodes {
        let state = &sim.clients[node][&client];
        assert_eq!(
            state.removes, 0,
            "node {node}'s client was sent a RemoveEntity"
        );
        assert!(
            state.creates <= entities,
            "node {node}'s client was sent {} CreateEntity for {entities} entities",
            state.creates
        );
    }
}

/// Every client sees `name` once at `x`.
pub fn assert_everywhere_at(sim: &Sim, nodes: &[(usize, ClientId)], name: &str, x: f32) {
    for &(node, client) in nodes {
        let entity = the(sim, node, client, name);
        assert_eq!(
            sim.x_of(node, client, entity),
            Some(x),
            "node {node}'s client"
        );
    }
}
