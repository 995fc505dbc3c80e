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

/// Metres of open ground between two worlds of the demo.
pub const WORLD_GAP: f64 = 20.0;

/// Where each world stands in the federation's space (docs/federation.md
/// §2.7): in a row along x, in start order, the first at the origin and
/// each next one [`WORLD_GAP`] beyond the one before, at whole metres, so
/// the worlds stand side by side instead of on top of each other.
pub fn placements(worlds: &[World]) -> Vec<[f64; 3]> {
    let mut placements = Vec::with_capacity(worlds.len());
    let mut east_edge: Option<f64> = None;
    for world in worlds {
        let bounds = extent(world);
        let x = match (east_edge, bounds) {
            (None, _) | (_, None) => 0.0,
            (Some(edge), Some(b)) => (edge + WORLD_GAP - b.min[0]).ceil(),
        };
        if let Some(b) = bounds {
            east_edge = Some(east_edge.map_or(b.max[0] + x, |e| e.max(b.max[0] + x)));
        }
        placements.push([x, 0.0, 0.0]);
    }
    placements
}

/// The box a world's scene takes up, in its own coordinates.
pub fn extent(world: &World) -> Option<crate::scene::position::Bounds> {
    let mut scene = crate::scene::Scene::new(crate::tundra::Registry::builtin());
    let file = crate::tundra::txml::load(world.txml, scene.registry()).ok()?;
    scene.import_txml(&file);
    crate::scene::position::scene_bounds(&scene)
}

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

    #[test]
    fn the_worlds_stand_side_by_side_without_overlapping() {
        let placements = placements(&WORLDS);
        assert_eq!(placements[0], [0.0, 0.0, 0.0], "alpha at the origin");
        let placed: Vec<_> = WORLDS
            .iter()
            .zip(&placements)
            .map(|(world, at)| extent(world).unwrap().translated(*at))
            .collect();
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                assert!(!a.overlaps(b), "{a:?} and {b:?} overlap");
            }
        }
        // In a row: each one east of the one before, the gap apart.
        for pair in placed.windows(2) {
            assert!(pair[1].min[0] >= pair[0].max[0] + WORLD_GAP - 1e-9);
        }
        for at in &placements {
            assert_eq!(at[0], at[0].round(), "whole metres, on every grid");
        }
    }
}
