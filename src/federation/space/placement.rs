//! A world's place in the federation's shared space (docs/federation.md
//! §2.7): every Tundra scene is authored around its own origin, and a node's
//! placement is where that origin lies in federation coordinates. Positions
//! travel between nodes in federation coordinates; a node's own clients
//! see and edit everything in their world's coordinates.
//!
//! A placement is a translation (rotations are untouched). Translating is
//! done in `f64` and rounded once to `f32`, so a value that is exact in
//! both frames (every position on the compact encoding's 1/256 m grid
//! within ±16 384 m, when the placement is on that grid too) translates
//! exactly and back; any other moves by at most half an `f32` step of the
//! larger of the two positions.

use crate::tundra::values::{Float3, Transform};

/// Largest placement coordinate, in metres: ten thousand kilometres, the
/// same bound as a zone's coordinates.
pub const MAX_PLACEMENT: f64 = 1.0e7;

/// Where this node's world origin lies in federation coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Placement {
    offset: [f64; 3],
}

/// A placement that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("placement coordinates must be finite numbers within ±{MAX_PLACEMENT} m, not {0:?}")]
pub struct PlacementError(pub [f64; 3]);

fn place(value: f32, by: f64) -> f32 {
    // `as f32` rounds to nearest; a non-finite value stays what it is.
    (f64::from(value) + by) as f32
}

impl Placement {
    /// The federation's origin: exactly today's behaviour, no translation.
    pub const ORIGIN: Placement = Placement {
        offset: [0.0, 0.0, 0.0],
    };

    /// A placement at `offset` metres.
    pub fn new(offset: [f64; 3]) -> Result<Placement, PlacementError> {
        if offset
            .iter()
            .all(|c| c.is_finite() && c.abs() <= MAX_PLACEMENT)
        {
            // -0.0 and 0.0 are one place.
            Ok(Placement {
                offset: offset.map(|c| c + 0.0),
            })
        } else {
            Err(PlacementError(offset))
        }
    }

    /// The offset, in metres.
    pub fn offset(&self) -> [f64; 3] {
        self.offset
    }

    /// Whether this is the federation's origin (nothing is translated).
    pub fn is_origin(&self) -> bool {
        self.offset == [0.0; 3]
    }

    /// A position in this world's coordinates, in federation coordinates.
    pub fn to_federation(&self, local: Float3) -> Float3 {
        let [x, y, z] = self.offset;
        Float3::new(place(local.x, x), place(local.y, y), place(local.z, z))
    }

    /// A position in federation coordinates, in this world's coordinates.
    pub fn to_local(&self, federation: Float3) -> Float3 {
        let [x, y, z] = self.offset;
        Float3::new(
            place(federation.x, -x),
            place(federation.y, -y),
            place(federation.z, -z),
        )
    }

    /// A transform whose position is in this world's coordinates, with its
    /// position in federation coordinates (rotation and scale as they are).
    pub fn transform_to_federation(&self, local: Transform) -> Transform {
        Transform {
            pos: self.to_federation(local.pos),
            ..local
        }
    }

    /// A transform whose position is in federation coordinates, with its
    /// position in this world's coordinates.
    pub fn transform_to_local(&self, federation: Transform) -> Transform {
        Transform {
            pos: self.to_local(federation.pos),
            ..federation
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn at(x: f64, y: f64, z: f64) -> Placement {
        Placement::new([x, y, z]).unwrap()
    }

    #[test]
    fn the_issue_example_translates_both_ways() {
        // World A at the origin has an entity at (1, 2, 3); world B is placed
        // at (100, 0, 0).
        let b = at(100.0, 0.0, 0.0);
        let federation = Float3::new(1.0, 2.0, 3.0);
        assert_eq!(b.to_local(federation), Float3::new(-99.0, 2.0, 3.0));
        // B's client moves it to (-95, 0, 0): (5, 0, 0) in A.
        assert_eq!(
            b.to_federation(Float3::new(-95.0, 0.0, 0.0)),
            Float3::new(5.0, 0.0, 0.0)
        );
    }

    #[test]
    fn only_the_position_of_a_transform_moves() {
        let b = at(10.0, -20.0, 30.5);
        let local = Transform {
            pos: Float3::new(1.0, 1.0, 1.0),
            rot: Float3::new(0.0, 90.0, 45.0),
            scale: Float3::new(2.0, 2.0, 2.0),
        };
        let placed = b.transform_to_federation(local);
        assert_eq!(placed.pos, Float3::new(11.0, -19.0, 31.5));
        assert_eq!((placed.rot, placed.scale), (local.rot, local.scale));
        assert_eq!(b.transform_to_local(placed), local);
    }

    #[test]
    fn a_placement_must_be_finite_and_bounded() {
        assert!(Placement::new([f64::NAN, 0.0, 0.0]).is_err());
        assert!(Placement::new([0.0, f64::INFINITY, 0.0]).is_err());
        assert!(Placement::new([0.0, 0.0, 1.0e8]).is_err());
        assert!(at(-0.0, 0.0, 0.0).is_origin());
        assert!(!at(0.001, 0.0, 0.0).is_origin());
    }

    #[test]
    fn non_finite_positions_stay_non_finite() {
        let b = at(5.0, 5.0, 5.0);
        let odd = b.to_federation(Float3::new(f32::NAN, f32::INFINITY, f32::NEG_INFINITY));
        assert!(odd.x.is_nan());
        assert_eq!((odd.y, odd.z), (f32::INFINITY, f32::NEG_INFINITY));
    }

    /// A coordinate on the 1/256 m grid of the compact position encoding,
    /// within ±16 384 m.
    fn on_grid() -> impl Strategy<Value = f32> {
        (-(1i32 << 22)..(1i32 << 22)).prop_map(|k| k as f32 / 256.0)
    }

    fn grid_placement() -> impl Strategy<Value = f64> {
        (-(1i32 << 20)..(1i32 << 20)).prop_map(|k| f64::from(k) / 256.0)
    }

    proptest! {
        /// On the grid, translating into federation coordinates and back is
        /// exact, in both orders, whenever both frames hold the position.
        #[test]
        fn translation_on_the_grid_is_exact_both_ways(
            x in on_grid(), y in on_grid(), z in on_grid(),
            px in grid_placement(), py in grid_placement(), pz in grid_placement(),
        ) {
            let placement = at(px, py, pz);
            let local = Float3::new(x, y, z);
            let federation = placement.to_federation(local);
            let fits = [federation.x, federation.y, federation.z]
                .iter()
                .all(|c| c.abs() < 16_384.0);
            prop_assume!(fits);
            prop_assert_eq!(placement.to_local(federation), local);
            prop_assert_eq!(placement.to_federation(placement.to_local(federation)), federation);
        }

        /// Anywhere else a translation rounds once: the result is the `f32`
        /// nearest to the exact sum, so it is off by at most half a step of
        /// its own magnitude, and a round trip by at most one step of the
        /// larger position.
        #[test]
        fn translation_rounds_once(
            x in -1.0e6f32..1.0e6, p in -1.0e6f64..1.0e6,
        ) {
            let placement = at(p, 0.0, 0.0);
            let placed = placement.to_federation(Float3::new(x, 0.0, 0.0)).x;
            let exact = f64::from(x) + p;
            let step = |v: f32| (f64::from(v.abs()).max(f64::MIN_POSITIVE) * f64::EPSILON * 2f64.powi(29)).max(f64::from(f32::MIN_POSITIVE));
            prop_assert!((f64::from(placed) - exact).abs() <= step(placed) / 2.0 + 1e-30);
            let back = placement.to_local(Float3::new(placed, 0.0, 0.0)).x;
            prop_assert!((f64::from(back) - f64::from(x)).abs() <= step(placed).max(step(x)));
        }
    }
}
