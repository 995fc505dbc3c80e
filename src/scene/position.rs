//! Where an entity is: its Placeable transform, its position in its world
//! (its own position plus its parents'), and the box a scene's entities
//! take up. Read by interest management, zones and world placement.
//!
//! A child's transform is relative to its parent. The world position adds
//! the parents' positions along the entity parent chain, not their rotation
//! and scale: good to a child's own offset, which is what interest and
//! extents need, and cheap.

use super::{Entity, Scene};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::AttributeValue;

/// Tundra's Placeable type id.
pub const PLACEABLE: u32 = 20;
/// Parent chains longer than this are not followed (a malformed hierarchy
/// cannot loop the walk).
const MAX_DEPTH: usize = 64;

/// An entity's Placeable transform, if it has a Placeable.
pub fn placeable_transform(entity: &Entity) -> Option<Transform> {
    let placeable = entity.component_of_type(PLACEABLE)?;
    match &placeable.attribute(0)?.value {
        AttributeValue::Transform(t) => Some(*t),
        _ => None,
    }
}

/// The entity's position in its world: its own Placeable position plus its
/// parents' (a bounded walk).
pub fn world_position(scene: &Scene, entity: &Entity) -> Option<Float3> {
    let mut position = placeable_transform(entity)?.pos;
    let mut parent = entity.parent;
    for _ in 0..MAX_DEPTH {
        let Some(id) = parent else { break };
        let Some(ancestor) = scene.entity(id) else {
            break;
        };
        if let Some(t) = placeable_transform(ancestor) {
            position = Float3::new(
                position.x + t.pos.x,
                position.y + t.pos.y,
                position.z + t.pos.z,
            );
        }
        parent = ancestor.parent;
    }
    Some(position)
}

/// An axis-aligned box, in metres.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub min: [f64; 3],
    pub max: [f64; 3],
}

impl Bounds {
    /// The box around one point.
    pub fn point(p: [f64; 3]) -> Bounds {
        Bounds { min: p, max: p }
    }

    /// The smallest box holding both.
    pub fn union(self, other: Bounds) -> Bounds {
        Bounds {
            min: [0, 1, 2].map(|i| self.min[i].min(other.min[i])),
            max: [0, 1, 2].map(|i| self.max[i].max(other.max[i])),
        }
    }

    /// The box moved by `offset`.
    pub fn translated(self, offset: [f64; 3]) -> Bounds {
        Bounds {
            min: [0, 1, 2].map(|i| self.min[i] + offset[i]),
            max: [0, 1, 2].map(|i| self.max[i] + offset[i]),
        }
    }

    /// Whether the two boxes share a volume (touching faces do not count).
    pub fn overlaps(&self, other: &Bounds) -> bool {
        (0..3).all(|i| self.min[i] < other.max[i] && other.min[i] < self.max[i])
    }

    /// Its centre.
    pub fn centre(&self) -> [f64; 3] {
        [0, 1, 2].map(|i| (self.min[i] + self.max[i]) / 2.0)
    }
}

/// The box the scene's placed entities take up, each counted as a unit box
/// scaled by its Placeable scale around its world position; `None` for a
/// scene with no finite position.
pub fn scene_bounds(scene: &Scene) -> Option<Bounds> {
    bounds_of(scene, scene.entities())
}

/// The box this node's own entities take up (those of other worlds left
/// out), if any has a Placeable.
pub fn own_bounds(scene: &Scene) -> Option<Bounds> {
    bounds_of(
        scene,
        scene
            .entities()
            .filter(|e| e.origin == super::Origin::Local),
    )
}

fn bounds_of<'a>(scene: &Scene, entities: impl Iterator<Item = &'a Entity>) -> Option<Bounds> {
    entities
        .filter_map(|entity| {
            let position = world_position(scene, entity)?;
            let scale = placeable_transform(entity)?.scale;
            let centre = [position.x, position.y, position.z].map(f64::from);
            let half = [scale.x, scale.y, scale.z].map(|s| f64::from(s.abs()) / 2.0);
            let finite = centre.iter().chain(&half).all(|c| c.is_finite());
            finite.then(|| Bounds {
                min: [0, 1, 2].map(|i| centre[i] - half[i]),
                max: [0, 1, 2].map(|i| centre[i] + half[i]),
            })
        })
        .reduce(Bounds::union)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_join_move_and_overlap_as_boxes_do() {
        let a = Bounds {
            min: [0.0, 0.0, 0.0],
            max: [10.0, 1.0, 10.0],
        };
        let b = a.translated([10.0, 0.0, 0.0]);
        assert!(!a.overlaps(&b), "touching faces do not overlap");
        assert!(a.overlaps(&a.translated([9.0, 0.0, 0.0])));
        let both = a.union(b);
        assert_eq!((both.min, both.max), ([0.0, 0.0, 0.0], [20.0, 1.0, 10.0]));
        assert_eq!(both.centre(), [10.0, 0.5, 5.0]);
        assert_eq!(Bounds::point([1.0, 2.0, 3.0]).centre(), [1.0, 2.0, 3.0]);
    }
}
