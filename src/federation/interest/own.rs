//! A node's own interest (docs/federation.md §8.1): in `all` mode all of
//! space; in `spatial` mode a box around a sphere of `radius` about each
//! client's last ObserverPosition (or the node's centre for a client that
//! sent none), plus the boxes the node needs for itself (zones, entities
//! it handed over and waits for). Pure: observer positions in, regions in
//! federation coordinates out.
//!
//! Hysteresis: a client's box is anchored where it was last drawn and is
//! moved only once the client is `hysteresis` metres from that anchor, so a
//! walking client changes the subscription every `hysteresis` metres, not
//! every step; the margin sent with the regions (the same distance) keeps
//! an entity that drifts just out of a box until it is that much farther.

use std::collections::BTreeMap;

use super::region::{merged, Region};
use super::SENT_REGIONS;
use crate::federation::space::placement::Placement;
use crate::tundra::values::Float3;

/// How a node chooses what it wants from its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterestMode {
    /// Everything the federation has (the default; a small federation).
    #[default]
    All,
    /// What lies near this node's clients.
    Spatial,
}

/// The `[interest]` settings, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterestSettings {
    pub mode: InterestMode,
    /// Metres around each client.
    pub radius: f32,
    /// Metres a client moves before its box follows; also the margin.
    pub hysteresis: f32,
    /// Where a client without an ObserverPosition looks, in this world's
    /// coordinates; `None`: the centre of the node's own scene.
    pub centre: Option<Float3>,
}

/// Default radius, metres: about what a viewer draws in a city scene.
pub const DEFAULT_RADIUS: f32 = 300.0;
/// Default hysteresis, as a fraction of the radius.
pub const DEFAULT_HYSTERESIS_FRACTION: f32 = 0.1;

impl Default for InterestSettings {
    fn default() -> Self {
        InterestSettings {
            mode: InterestMode::All,
            radius: DEFAULT_RADIUS,
            hysteresis: DEFAULT_RADIUS * DEFAULT_HYSTERESIS_FRACTION,
            centre: None,
        }
    }
}

fn distance(a: Float3, b: Float3) -> f32 {
    let (dx, dy, dz) = (a.x - b.x, a.y - b.y, a.z - b.z);
    (dx * dx + dy * dy + dz * dz).sqrt()
}

/// A node's own interest between refreshes: the settings and where each
/// client's box is anchored.
#[derive(Debug, Clone, Default)]
pub struct OwnInterest {
    settings: InterestSettings,
    /// Per client (by the node's number for it), its box's centre.
    anchors: BTreeMap<u64, Float3>,
}

impl OwnInterest {
    pub fn new(settings: InterestSettings) -> OwnInterest {
        OwnInterest {
            settings,
            anchors: BTreeMap::new(),
        }
    }

    pub fn settings(&self) -> &InterestSettings {
        &self.settings
    }

    /// The regions this node wants, in federation coordinates, merged to
    /// at most [`SENT_REGIONS`], and the margin to send with them.
    /// `observers` are the logged-in clients and their last observer
    /// position (this world's coordinates); `centre` is the scene's centre
    /// (used when the settings name none); `extra` are boxes the node needs
    /// for itself, already in federation coordinates.
    pub fn regions(
        &mut self,
        observers: impl IntoIterator<Item = (u64, Option<Float3>)>,
        centre: impl FnOnce() -> Float3,
        placement: &Placement,
        extra: &[Region],
    ) -> (Vec<Region>, f32) {
        let settings = self.settings;
        if settings.mode == InterestMode::All {
            self.anchors.clear();
            return (vec![Region::EVERYWHERE], 0.0);
        }
        let mut default_centre = settings.centre;
        let mut centre = Some(centre);
        let mut anchors = BTreeMap::new();
        for (client, position) in observers {
            let position = match position {
                Some(p) if p.x.is_finite() && p.y.is_finite() && p.z.is_finite() => p,
                _ => *default_centre.get_or_insert_with(|| {
                    centre
                        .take()
                        .map(|c| c())
                        .unwrap_or(Float3::new(0.0, 0.0, 0.0))
                }),
            };
            let anchor = match self.anchors.get(&client) {
                Some(old) if distance(*old, position) <= settings.hysteresis => *old,
                _ => position,
            };
            anchors.insert(client, anchor);
        }
        self.anchors = anchors;
        let mut boxes: Vec<Region> = self
            .anchors
            .values()
            .map(|a| Region::around(placement.to_federation(*a), settings.radius))
            .collect();
        boxes.extend_from_slice(extra);
        (merged(&boxes, SENT_REGIONS), settings.hysteresis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spatial(radius: f32, hysteresis: f32) -> OwnInterest {
        OwnInterest::new(InterestSettings {
            mode: InterestMode::Spatial,
            radius,
            hysteresis,
            centre: None,
        })
    }

    fn at(x: f32) -> Float3 {
        Float3::new(x, 0.0, 0.0)
    }

    #[test]
    fn all_mode_wants_everything_and_nothing_else() {
        let mut own = OwnInterest::new(InterestSettings::default());
        let (regions, _) = own.regions([(1, Some(at(5.0)))], || at(0.0), &Placement::ORIGIN, &[]);
        assert_eq!(regions, vec![Region::EVERYWHERE]);
    }

    #[test]
    fn a_client_box_follows_only_after_the_hysteresis_distance() {
        let mut own = spatial(100.0, 10.0);
        let placement = Placement::ORIGIN;
        let (first, margin) = own.regions([(1, Some(at(0.0)))], || at(0.0), &placement, &[]);
        assert_eq!(first, vec![Region::around(at(0.0), 100.0)]);
        assert_eq!(margin, 10.0);
        // Nine metres: the same box.
        let (same, _) = own.regions([(1, Some(at(9.0)))], || at(0.0), &placement, &[]);
        assert_eq!(same, first);
        // Eleven metres from the anchor: the box moves to the client.
        let (moved, _) = own.regions([(1, Some(at(11.0)))], || at(0.0), &placement, &[]);
        assert_eq!(moved, vec![Region::around(at(11.0), 100.0)]);
    }

    #[test]
    fn boxes_are_placed_in_the_federation_and_clients_without_a_position_use_the_centre() {
        let mut own = spatial(50.0, 5.0);
        let placement = Placement::new([1000.0, 0.0, 0.0]).unwrap();
        let (regions, _) = own.regions([(1, None), (2, None)], || at(20.0), &placement, &[]);
        assert_eq!(regions, vec![Region::around(at(1020.0), 50.0)]);
        // No clients: nothing but what the node needs for itself.
        let zone = Region::around(at(-500.0), 5.0);
        let (regions, _) = own.regions([], || at(20.0), &placement, &[zone]);
        assert_eq!(regions, vec![zone]);
    }

    #[test]
    fn many_clients_merge_to_the_sent_bound_and_cover_every_client() {
        let mut own = spatial(10.0, 1.0);
        let clients: Vec<(u64, Option<Float3>)> =
            (0..100).map(|i| (i, Some(at(i as f32 * 37.0)))).collect();
        let (regions, _) = own.regions(clients.clone(), || at(0.0), &Placement::ORIGIN, &[]);
        assert!(regions.len() <= SENT_REGIONS);
        for (_, p) in clients {
            let p = p.unwrap();
            assert!(regions.iter().any(|r| r.covers(&Region::around(p, 10.0))));
        }
    }
}
