//! The regions of space a node owns (docs/federation.md §7.7): axis-aligned
//! boxes and half-spaces in the node's scene coordinates, and how deep a
//! position lies in them.
//!
//! Pure geometry over validated values: a [`Zone`] can only be built with
//! finite coordinates, a box with `min < max` on every axis and a plane
//! with a non-zero normal, so no query ever meets a NaN from the
//! configuration. Positions come from the scene (a remote party's values)
//! and may be anything: a position with a non-finite coordinate lies in no
//! zone.

use std::fmt;

/// Most zones one node may declare: each position is tested against every
/// zone, so the count bounds that work.
pub const MAX_ZONES: usize = 256;

/// Largest coordinate magnitude a zone may use: beyond it FLOAT32 scene
/// positions are more than a metre apart, so a border there means nothing.
pub const MAX_COORDINATE: f32 = 1.0e7;

/// A position in the node's scene coordinates (the Placeable transform's
/// position).
pub type Position = [f32; 3];

/// One region of space a node owns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    /// The points with `min[i] <= p[i] <= max[i]` on every axis.
    Box { min: Position, max: Position },
    /// The points with `normal · p >= offset`; `normal` has unit length,
    /// so `normal · p - offset` is the distance from the plane.
    HalfSpace { normal: Position, offset: f32 },
}

/// Why a zone description is not a zone; `Display` says what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneError {
    /// A coordinate is NaN, infinite or beyond [`MAX_COORDINATE`].
    NotFinite,
    /// `min` is not below `max` on this axis (0 = x, 1 = y, 2 = z).
    EmptyBox { axis: usize },
    /// The normal has no length.
    ZeroNormal,
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::NotFinite => write!(
                f,
                "coordinates must be finite numbers within ±{MAX_COORDINATE}"
            ),
            ZoneError::EmptyBox { axis } => write!(
                f,
                "min must be below max on every axis (not on {})",
                ["x", "y", "z"][*axis]
            ),
            ZoneError::ZeroNormal => write!(f, "normal must not be [0, 0, 0]"),
        }
    }
}

fn usable(values: &[f32]) -> bool {
    values
        .iter()
        .all(|value| value.is_finite() && value.abs() <= MAX_COORDINATE)
}

impl Zone {
    /// The box between `min` and `max`.
    pub fn new_box(min: Position, max: Position) -> Result<Zone, ZoneError> {
        if !usable(&min) || !usable(&max) {
            return Err(ZoneError::NotFinite);
        }
        if let Some(axis) = (0..3).find(|&axis| min[axis] >= max[axis]) {
            return Err(ZoneError::EmptyBox { axis });
        }
        Ok(Zone::Box { min, max })
    }

    /// The half-space on the side `normal` points to of the plane
    /// `normal · p = offset * |normal|`: `offset` is the plane's distance
    /// from the origin along `normal`, whatever the normal's length.
    pub fn new_half_space(normal: Position, offset: f32) -> Result<Zone, ZoneError> {
        if !usable(&normal) || !usable(&[offset]) {
            return Err(ZoneError::NotFinite);
        }
        let length = normal
            .iter()
            .map(|c| f64::from(*c) * f64::from(*c))
            .sum::<f64>()
            .sqrt();
        if length == 0.0 {
            return Err(ZoneError::ZeroNormal);
        }
        let unit = normal.map(|c| (f64::from(c) / length) as f32);
        Ok(Zone::HalfSpace {
            normal: unit,
            offset,
        })
    }

    /// How deep `p` lies in the zone: the distance to the nearest point of
    /// its border when inside (> 0), zero on the border, and a negative
    /// number when outside (for a box, minus the largest distance outside
    /// along one axis). `None` for a position with a non-finite coordinate.
    pub fn depth(&self, p: Position) -> Option<f64> {
        if !p.iter().all(|c| c.is_finite()) {
            return None;
        }
        let p = p.map(f64::from);
        Some(match self {
            Zone::Box { min, max } => (0..3)
                .map(|axis| {
                    let below = p[axis] - f64::from(min[axis]);
                    let above = f64::from(max[axis]) - p[axis];
                    below.min(above)
                })
                .fold(f64::INFINITY, f64::min),
            Zone::HalfSpace { normal, offset } => {
                (0..3)
                    .map(|axis| f64::from(normal[axis]) * p[axis])
                    .sum::<f64>()
                    - f64::from(*offset)
            }
        })
    }
}

/// The zones one node owns. A position's depth in them is its depth in the
/// deepest single zone: zones of one node that touch do not add up, so a
/// path across their seam stays shallow there (make neighbouring zones of
/// one node overlap by the hysteresis distance).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZoneSet {
    zones: Vec<Zone>,
}

impl ZoneSet {
    /// The set of `zones`; at most [`MAX_ZONES`].
    pub fn new(zones: Vec<Zone>) -> Result<ZoneSet, usize> {
        if zones.len() > MAX_ZONES {
            return Err(zones.len());
        }
        Ok(ZoneSet { zones })
    }

    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// The depth of `p` in the deepest zone, `None` without zones or for a
    /// non-finite position.
    pub fn depth(&self, p: Position) -> Option<f64> {
        self.zones
            .iter()
            .filter_map(|zone| zone.depth(p))
            .reduce(f64::max)
    }

    /// Whether `p` lies in a zone at least `distance` deep.
    pub fn holds(&self, p: Position, distance: f64) -> bool {
        self.depth(p).is_some_and(|depth| depth >= distance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit_box() -> Zone {
        Zone::new_box([0.0, 0.0, 0.0], [10.0, 4.0, 2.0]).unwrap()
    }

    #[test]
    fn box_depth_is_the_distance_to_the_nearest_face() {
        let zone = unit_box();
        assert_eq!(zone.depth([5.0, 2.0, 1.0]), Some(1.0));
        assert_eq!(zone.depth([1.0, 2.0, 1.0]), Some(1.0));
        assert_eq!(zone.depth([0.5, 2.0, 1.0]), Some(0.5));
        assert_eq!(zone.depth([0.0, 2.0, 1.0]), Some(0.0));
        assert_eq!(zone.depth([-3.0, 2.0, 1.0]), Some(-3.0));
        assert_eq!(zone.depth([5.0, 9.0, 1.0]), Some(-5.0));
    }

    #[test]
    fn half_space_depth_is_the_signed_distance_from_its_plane() {
        // x >= 5, written with a normal of length 2.
        let zone = Zone::new_half_space([2.0, 0.0, 0.0], 5.0).unwrap();
        assert_eq!(zone.depth([7.0, 100.0, -3.0]), Some(2.0));
        assert_eq!(zone.depth([5.0, 0.0, 0.0]), Some(0.0));
        assert_eq!(zone.depth([4.0, 0.0, 0.0]), Some(-1.0));
        let diagonal = Zone::new_half_space([1.0, 1.0, 0.0], 0.0).unwrap();
        let depth = diagonal.depth([1.0, 1.0, 0.0]).unwrap();
        assert!((depth - 2f64.sqrt()).abs() < 1e-6, "{depth}");
    }

    #[test]
    fn a_non_finite_position_is_in_no_zone() {
        let set = ZoneSet::new(vec![unit_box()]).unwrap();
        for p in [
            [f32::NAN, 1.0, 1.0],
            [1.0, f32::INFINITY, 1.0],
            [1.0, 1.0, f32::NEG_INFINITY],
        ] {
            assert_eq!(set.depth(p), None);
            assert!(!set.holds(p, 0.0));
        }
    }

    #[test]
    fn bad_zones_are_refused_with_what_to_fix() {
        assert_eq!(
            Zone::new_box([0.0, 0.0, 0.0], [1.0, 0.0, 1.0]),
            Err(ZoneError::EmptyBox { axis: 1 })
        );
        assert_eq!(
            Zone::new_box([0.0, f32::NAN, 0.0], [1.0, 1.0, 1.0]),
            Err(ZoneError::NotFinite)
        );
        assert_eq!(
            Zone::new_box([0.0, 0.0, 0.0], [1.0, 1.0, 1.0e9]),
            Err(ZoneError::NotFinite)
        );
        assert_eq!(
            Zone::new_half_space([0.0, 0.0, 0.0], 1.0),
            Err(ZoneError::ZeroNormal)
        );
        assert_eq!(
            Zone::new_half_space([1.0, 0.0, 0.0], f32::INFINITY),
            Err(ZoneError::NotFinite)
        );
        assert_eq!(
            ZoneError::EmptyBox { axis: 2 }.to_string(),
            "min must be below max on every axis (not on z)"
        );
        assert_eq!(
            ZoneSet::new(vec![unit_box(); MAX_ZONES + 1]),
            Err(MAX_ZONES + 1)
        );
    }

    #[test]
    fn a_set_takes_the_deepest_zone() {
        let set = ZoneSet::new(vec![
            unit_box(),
            Zone::new_half_space([-1.0, 0.0, 0.0], 20.0).unwrap(), // x <= -20
        ])
        .unwrap();
        assert_eq!(set.depth([5.0, 2.0, 1.0]), Some(1.0));
        assert_eq!(set.depth([-26.0, 2.0, 1.0]), Some(6.0));
        assert!(set.holds([-26.0, 0.0, 0.0], 6.0));
        assert!(!set.holds([-26.0, 0.0, 0.0], 6.5));
        assert_eq!(ZoneSet::default().depth([0.0; 3]), None);
    }
}
