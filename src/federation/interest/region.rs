//! A region of the federation's shared space: an axis-aligned box, in
//! federation coordinates (docs/federation.md §8). Boxes because they are
//! what DDM and zones use, because any two merge into one without losing
//! coverage, and because a point test is six comparisons. Bounds may be
//! infinite (a half-space, or everything).

use crate::tundra::values::Float3;

/// An axis-aligned box, `min <= max` on every axis, bounds possibly
/// infinite, never NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Region {
    pub min: [f32; 3],
    pub max: [f32; 3],
}

impl Region {
    /// All of space.
    pub const EVERYWHERE: Region = Region {
        min: [f32::NEG_INFINITY; 3],
        max: [f32::INFINITY; 3],
    };

    /// A box, if its bounds are ordered and none is NaN.
    pub fn new(min: [f32; 3], max: [f32; 3]) -> Option<Region> {
        (0..3)
            .all(|i| !min[i].is_nan() && !max[i].is_nan() && min[i] <= max[i])
            .then_some(Region { min, max })
    }

    /// The box around a sphere.
    pub fn around(centre: Float3, radius: f32) -> Region {
        let c = [centre.x, centre.y, centre.z];
        let r = radius.abs();
        Region {
            min: c.map(|v| v - r),
            max: c.map(|v| v + r),
        }
    }

    /// Whether `p` lies inside (bounds included).
    #[inline]
    pub fn contains(&self, p: Float3) -> bool {
        let p = [p.x, p.y, p.z];
        (0..3).all(|i| self.min[i] <= p[i] && p[i] <= self.max[i])
    }

    /// Whether `p` lies within `margin` of the box.
    #[inline]
    pub fn near(&self, p: Float3, margin: f32) -> bool {
        let p = [p.x, p.y, p.z];
        (0..3).all(|i| self.min[i] - margin <= p[i] && p[i] <= self.max[i] + margin)
    }

    /// Whether `other` lies wholly inside this box.
    pub fn covers(&self, other: &Region) -> bool {
        (0..3).all(|i| self.min[i] <= other.min[i] && other.max[i] <= self.max[i])
    }

    /// The smallest box holding both.
    pub fn union(&self, other: &Region) -> Region {
        Region {
            min: [0, 1, 2].map(|i| self.min[i].min(other.min[i])),
            max: [0, 1, 2].map(|i| self.max[i].max(other.max[i])),
        }
    }

    /// Its volume (infinite for an unbounded box), in f64 so that sums and
    /// differences of large boxes stay exact enough to compare.
    pub fn volume(&self) -> f64 {
        (0..3)
            .map(|i| f64::from(self.max[i]) - f64::from(self.min[i]))
            .product()
    }

    /// The box moved by `offset`.
    pub fn translated(&self, offset: [f64; 3]) -> Region {
        let shift = |v: f32, by: f64| (f64::from(v) + by) as f32;
        Region {
            min: [0, 1, 2].map(|i| shift(self.min[i], offset[i])),
            max: [0, 1, 2].map(|i| shift(self.max[i], offset[i])),
        }
    }

    /// Its six bounds, as the wire carries them.
    pub fn bounds(&self) -> [f32; 6] {
        [
            self.min[0],
            self.min[1],
            self.min[2],
            self.max[0],
            self.max[1],
            self.max[2],
        ]
    }
}

/// What merging two boxes adds: the union's volume beyond both, where an
/// unbounded union counts as more than any bounded one.
fn merge_cost(a: &Region, b: &Region) -> f64 {
    let union = a.union(b).volume();
    if union.is_infinite() {
        let (va, vb) = (a.volume(), b.volume());
        // Both already unbounded: nothing is lost by merging.
        return if va.is_infinite() && vb.is_infinite() {
            0.0
        } else {
            f64::MAX
        };
    }
    union - a.volume() - b.volume()
}

/// `regions` with the boxes other boxes cover left out, then merged two at
/// a time (always the pair whose union adds least) until at most `limit`
/// remain. Coverage never shrinks: every point inside one of `regions` is
/// inside one of the result. Deterministic: the same input gives the same
/// output on every node.
pub fn merged(regions: &[Region], limit: usize) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::with_capacity(regions.len());
    for region in regions {
        if out.iter().any(|kept| kept.covers(region)) {
            continue;
        }
        out.retain(|kept| !region.covers(kept));
        out.push(*region);
    }
    let limit = limit.max(1);
    while out.len() > limit {
        let mut best = (f64::INFINITY, 0, 1);
        for i in 0..out.len() {
            for j in i + 1..out.len() {
                let cost = merge_cost(&out[i], &out[j]);
                if cost < best.0 {
                    best = (cost, i, j);
                }
            }
        }
        let (_, i, j) = best;
        let joined = out[i].union(&out[j]);
        out.swap_remove(j);
        out[i] = joined;
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cube(x: f32, y: f32, size: f32) -> Region {
        Region::new([x, y, 0.0], [x + size, y + size, size]).unwrap()
    }

    #[test]
    fn a_box_holds_its_bounds_and_a_margin_around_them() {
        let r = cube(0.0, 0.0, 10.0);
        assert!(r.contains(Float3::new(0.0, 10.0, 5.0)));
        assert!(!r.contains(Float3::new(10.5, 5.0, 5.0)));
        assert!(r.near(Float3::new(10.5, 5.0, 5.0), 1.0));
        assert!(!r.near(Float3::new(12.0, 5.0, 5.0), 1.0));
        assert!(Region::EVERYWHERE.contains(Float3::new(1e30, -1e30, 0.0)));
        assert!(!Region::EVERYWHERE.contains(Float3::new(f32::NAN, 0.0, 0.0)));
    }

    #[test]
    fn unordered_or_nan_bounds_are_no_box() {
        assert!(Region::new([1.0, 0.0, 0.0], [0.0, 1.0, 1.0]).is_none());
        assert!(Region::new([f32::NAN, 0.0, 0.0], [1.0, 1.0, 1.0]).is_none());
        assert!(Region::new([f32::NEG_INFINITY; 3], [f32::INFINITY; 3]).is_some());
    }

    #[test]
    fn near_boxes_merge_first_and_covered_ones_go() {
        let regions = [
            cube(0.0, 0.0, 10.0),
            cube(12.0, 0.0, 10.0),
            cube(1000.0, 0.0, 10.0),
            cube(2.0, 2.0, 2.0), // inside the first
        ];
        let two = merged(&regions, 2);
        assert_eq!(two.len(), 2);
        assert!(
            two.contains(&cube(1000.0, 0.0, 10.0)),
            "the far one stays alone"
        );
        assert!(two.contains(&Region::new([0.0, 0.0, 0.0], [22.0, 10.0, 10.0]).unwrap()));
        assert_eq!(merged(&regions, 8).len(), 3, "only the covered one goes");
    }

    fn region() -> impl Strategy<Value = Region> {
        (
            -1000.0f32..1000.0,
            -1000.0f32..1000.0,
            -1000.0f32..1000.0,
            0.0f32..300.0,
        )
            .prop_map(|(x, y, z, size)| {
                Region::new([x, y, z], [x + size, y + size, z + size]).unwrap()
            })
    }

    proptest! {
        /// Merging never loses coverage and always meets the limit.
        #[test]
        fn merging_keeps_every_point_covered(
            regions in proptest::collection::vec(region(), 0..40),
            limit in 1usize..10,
            probes in proptest::collection::vec((-1000.0f32..1300.0, -1000.0f32..1300.0, -1000.0f32..1300.0), 20),
        ) {
            let out = merged(&regions, limit);
            prop_assert!(out.len() <= limit);
            for (x, y, z) in probes {
                let p = Float3::new(x, y, z);
                if regions.iter().any(|r| r.contains(p)) {
                    prop_assert!(out.iter().any(|r| r.contains(p)));
                }
            }
        }
    }
}
