//! `lessgate check` on world placement (docs/federation.md §2.7): each
//! node's place in the federation's space, whether it lies on the compact
//! encoding's grid, and whether two nodes' worlds would stand on top of
//! each other.

use std::fmt::Write;
use std::path::Path;

use crate::scene::position::{scene_bounds, Bounds};
use crate::scene::Scene;
use crate::tundra::txml::Scene as TxmlFile;

/// The compact position encoding's step (docs/less-wire.md §16.3): a
/// placement on it translates every position that encoding carries
/// exactly.
pub const GRID: f64 = 1.0 / 256.0;

/// One node's world as placed: its name and the box its scene takes up in
/// federation coordinates (none without a scene or a placed entity).
pub struct PlacedWorld {
    pub node: String,
    pub bounds: Option<Bounds>,
}

/// The summary line of a node's placement, and a warning when it is off
/// the grid.
pub fn placement_line(
    file: &Path,
    placement: [f64; 3],
    summary: &mut String,
    warnings: &mut Vec<String>,
) {
    let [x, y, z] = placement;
    let _ = writeln!(summary, "  placement [{x}, {y}, {z}] m in federation space");
    let off_grid: Vec<f64> = placement
        .iter()
        .copied()
        .filter(|c| (c / GRID).fract() != 0.0)
        .collect();
    if !off_grid.is_empty() {
        let nearest = placement.map(|c| (c / GRID).round() * GRID);
        warnings.push(format!(
            "{}: node.placement {:?} is not a multiple of 1/256 m: positions crossing the federation then round by up to half an f32 step, and a client that edits from what it sees can drift; [{}, {}, {}] (or whole metres) translates them exactly",
            file.display(),
            placement,
            nearest[0],
            nearest[1],
            nearest[2]
        ));
    }
}

/// The box a loaded scene file takes up once placed at `placement`.
pub fn placed_bounds(file: &TxmlFile, placement: [f64; 3]) -> Option<Bounds> {
    let mut scene = Scene::new(crate::tundra::Registry::builtin());
    scene.import_txml(file);
    Some(scene_bounds(&scene)?.translated(placement))
}

/// A warning for each pair of worlds whose boxes overlap in federation
/// space.
pub fn overlap_warnings(worlds: &[PlacedWorld]) -> Vec<String> {
    let mut warnings = Vec::new();
    for (i, a) in worlds.iter().enumerate() {
        for b in &worlds[i + 1..] {
            let (Some(ba), Some(bb)) = (a.bounds, b.bounds) else {
                continue;
            };
            if ba.overlaps(&bb) {
                warnings.push(format!(
                    "the worlds of `{}` (x {:.1}..{:.1}, y {:.1}..{:.1}, z {:.1}..{:.1}) and `{}` (x {:.1}..{:.1}, y {:.1}..{:.1}, z {:.1}..{:.1}) overlap in federation space: their clients see the two scenes tangled into one; give one of them another node.placement (docs/operations.md §2.10)",
                    a.node,
                    ba.min[0], ba.max[0], ba.min[1], ba.max[1], ba.min[2], ba.max[2],
                    b.node,
                    bb.min[0], bb.max[0], bb.min[1], bb.max[1], bb.min[2], bb.max[2],
                ));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(node: &str, min: [f64; 3], max: [f64; 3]) -> PlacedWorld {
        PlacedWorld {
            node: node.to_owned(),
            bounds: Some(Bounds { min, max }),
        }
    }

    #[test]
    fn overlapping_worlds_are_named_and_separate_ones_are_not() {
        let worlds = [
            world("alpha", [-10.0, 0.0, -10.0], [10.0, 5.0, 10.0]),
            world("beta", [5.0, 0.0, 5.0], [20.0, 5.0, 20.0]),
            world("gamma", [100.0, 0.0, 0.0], [110.0, 5.0, 10.0]),
        ];
        let warnings = overlap_warnings(&worlds);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("`alpha`") && warnings[0].contains("`beta`"));
    }

    #[test]
    fn a_placement_off_the_grid_is_warned_with_the_nearest_on_it() {
        let (mut summary, mut warnings) = (String::new(), Vec::new());
        placement_line(
            Path::new("n.toml"),
            [100.0, 0.5, 0.0],
            &mut summary,
            &mut warnings,
        );
        assert!(summary.contains("placement [100, 0.5, 0] m"), "{summary}");
        assert!(warnings.is_empty());
        placement_line(
            Path::new("n.toml"),
            [100.3, 0.0, 0.0],
            &mut summary,
            &mut warnings,
        );
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("[100.30078125, 0, 0]"),
            "{}",
            warnings[0]
        );
    }
}
