//! Partition and heal, in simulation: a triangle is split into {A} and
//! {B, C}; both sides keep editing (creating, moving, removing their own
//! entities) over lossy links; after the links come back (new sessions, as
//! a real reconnect makes) every client of every node sees one scene: each
//! live entity once, at its last value, and nothing removed during the split.

mod sim;

use std::time::Duration;

use sim::{LinkModel, Sim};

const SETTLE: Duration = Duration::from_secs(10);

/// Every (name, x) a client sees, sorted; names repeat if duplicated.
fn picture(
    sim: &Sim,
    node: usize,
    client: lessgate::scene::ClientId,
) -> Vec<(String, Option<f32>)> {
    let view = sim.view(node, client);
    let mut out: Vec<_> = view
        .entities
        .iter()
        .map(|(id, components)| {
            let name = components
                .values()
                .find(|(t, _)| *t == 26)
                .and_then(|(_, v)| match v.first() {
                    Some(lessgate::tundra::AttributeValue::String(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            (name, sim.x_of(node, client, *id))
        })
        .collect();
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

#[test]
fn a_split_triangle_heals_into_one_scene() {
    for seed in 40..43 {
        let mut sim = Sim::new(3, seed);
        let (ab, _) = sim.connect(0, 1, LinkModel::LOSSY);
        sim.connect(1, 2, LinkModel::LOSSY);
        let (ca, _) = sim.connect(2, 0, LinkModel::LOSSY);
        let clients: Vec<_> = (0..3).map(|n| sim.add_client(n)).collect();
        for (n, client) in clients.iter().enumerate() {
            for i in 0..3 {
                sim.create_box(n, *client, i + 1, &format!("n{n}b{i}"), 0.0);
            }
        }
        sim.run(SETTLE);
        for (n, client) in clients.iter().enumerate() {
            assert_eq!(
                picture(&sim, n, *client).len(),
                9,
                "seed {seed}: before the split"
            );
        }

        // Split: A alone, B and C together.
        sim.disconnect(0, ab);
        sim.disconnect(2, ca);
        sim.run(SETTLE);
        assert_eq!(
            picture(&sim, 0, clients[0]).len(),
            3,
            "seed {seed}: A keeps only its own"
        );
        assert_eq!(
            picture(&sim, 1, clients[1]).len(),
            6,
            "seed {seed}: B sees B and C"
        );

        // Both sides edit during the split.
        let at_a = sim.find(0, clients[0], "n0b0")[0];
        sim.move_entity(0, clients[0], at_a, 5.0);
        let gone = sim.find(0, clients[0], "n0b2")[0];
        sim.remove_entity(0, clients[0], gone);
        sim.create_box(0, clients[0], 10, "n0new", 9.0);
        let at_c = sim.find(2, clients[2], "n2b1")[0];
        sim.move_entity(2, clients[2], at_c, 7.0);
        let gone = sim.find(1, clients[1], "n1b0")[0];
        sim.remove_entity(1, clients[1], gone);
        sim.create_box(1, clients[1], 10, "n1new", 3.0);
        sim.run(SETTLE);

        // Heal: new sessions on both cut links.
        sim.connect(0, 1, LinkModel::LOSSY);
        sim.connect(2, 0, LinkModel::LOSSY);
        sim.run(SETTLE * 2);

        let mut want: Vec<(String, Option<f32>)> = [
            ("n0b0", 5.0),
            ("n0b1", 0.0),
            ("n0new", 9.0),
            ("n1b1", 0.0),
            ("n1b2", 0.0),
            ("n1new", 3.0),
            ("n2b0", 0.0),
            ("n2b1", 7.0),
            ("n2b2", 0.0),
        ]
        .into_iter()
        .map(|(n, x)| (n.to_owned(), Some(x)))
        .collect();
        want.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for (n, client) in clients.iter().enumerate() {
            assert_eq!(
                picture(&sim, n, *client),
                want,
                "seed {seed}: node {n}'s client after healing"
            );
            assert_eq!(
                sim.nodes[n].scene().len(),
                want.len(),
                "seed {seed}: node {n}'s scene"
            );
        }
    }
}
