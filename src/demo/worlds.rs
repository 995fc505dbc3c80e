//! The three worlds the demo federation hosts: real Tundra scene files from
//! the realXtend repositories (Apache License 2.0; see
//! `tests/data/txml/README.md`), embedded so the demo needs no files.

use crate::tundra::values::Float3;

/// One demo node's world.
#[derive(Debug)]
pub struct World {
    /// The node that hosts it.
    pub node: &'static str,
    /// What the scene is, for the progress output.
    pub title: &'static str,
    /// The TXML text.
    pub txml: &'static str,
    /// Centre of the node's simulated movers; the three centres differ so
    /// the movers of different origins are told apart in a shared view.
    pub movers_center: Float3,
}

/// alpha, beta and gamma, in start order.
pub static WORLDS: [World; 3] = [
    World {
        node: "alpha",
        title: "Tundra Physics (a field of falling boxes)",
        txml: include_str!("worlds/alpha-physics.txml"),
        movers_center: Float3::new(0.0, 0.0, 0.0),
    },
    World {
        node: "beta",
        title: "Tundra CompositeScene (a green plane and parts)",
        txml: include_str!("worlds/beta-composite.txml"),
        movers_center: Float3::new(20.0, 0.0, 0.0),
    },
    World {
        node: "gamma",
        title: "Tundra VolumeTrigger (a trigger volume)",
        txml: include_str!("worlds/gamma-volume-trigger.txml"),
        movers_center: Float3::new(-20.0, 0.0, 0.0),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;
    use crate::tundra::{txml, Registry};

    #[test]
    fn every_world_loads_with_replicated_entities_and_nothing_left_out() {
        for world in &WORLDS {
            let mut scene = Scene::new(Registry::builtin());
            let file = txml::load(world.txml, scene.registry()).unwrap();
            let report = scene.import_txml(&file);
            assert!(
                report.skipped.is_empty(),
                "{}: {:?}",
                world.node,
                report.skipped
            );
            let replicated = scene.entities().filter(|e| e.is_replicated()).count();
            assert!(replicated >= 2, "{}: {replicated}", world.node);
        }
    }
}
