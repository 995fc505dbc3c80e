//! The node's own interest (docs/federation.md §8.1), drawn from its
//! clients' ObserverPositions, its zones and the entities it waits for,
//! and handed to the federation, which sends it to its peers.
//!
//! Refreshed at most every [`REFRESH`] while anything it is drawn from can
//! change (a client is logged in, or was at the last refresh, or a copy is
//! awaited); an idle node with no clients does not wake for it.

use std::time::Duration;

use super::Node;
use crate::clock::Time;
use crate::federation::authority::zones::Zone;
use crate::federation::interest::own::{InterestMode, InterestSettings, OwnInterest};
use crate::federation::interest::region::Region;
use crate::scene::position::own_bounds;
use crate::tundra::values::Float3;

/// How often the own interest is redrawn while it can change: the rate
/// entries may leave at (`interest::table::MIN_SEND_INTERVAL`).
pub const REFRESH: Duration = Duration::from_millis(100);

/// The node's own interest and when it is next redrawn.
#[derive(Debug, Default)]
pub(super) struct NodeInterest {
    own: OwnInterest,
    /// When to redraw; `None`: only when something changes it.
    next_refresh: Option<Time>,
    /// The last drawing had client boxes or awaited copies: the next one
    /// may take them away.
    drawn_from_changing: bool,
}

impl NodeInterest {
    pub(super) fn new(settings: InterestSettings) -> NodeInterest {
        NodeInterest {
            own: OwnInterest::new(settings),
            next_refresh: Some(Time::ZERO),
            drawn_from_changing: false,
        }
    }
}

/// A zone's box, grown by `margin` (a half-space is the box of every point
/// on its side: unbounded along the axis its normal lies on, everything
/// when the normal is not along an axis).
fn zone_region(zone: &Zone, margin: f32) -> Region {
    match *zone {
        Zone::Box { min, max } => Region {
            min: min.map(|v| v - margin),
            max: max.map(|v| v + margin),
        },
        Zone::HalfSpace { normal, offset } => {
            let axis = (0..3).find(|i| normal[*i].abs() == 1.0);
            let mut region = Region::EVERYWHERE;
            if let Some(i) = axis {
                // normal[i] * p[i] >= offset
                if normal[i] > 0.0 {
                    region.min[i] = offset - margin;
                } else {
                    region.max[i] = -offset + margin;
                }
            }
            region
        }
    }
}

impl Node {
    /// How this node chooses what it wants from its peers (`[interest]`).
    pub fn set_interest_settings(&mut self, settings: InterestSettings) {
        self.interest = NodeInterest::new(settings);
        self.refresh_interest(self.last_timeout.unwrap_or(Time::ZERO));
    }

    /// The `[interest]` settings in force.
    pub fn interest_settings(&self) -> &InterestSettings {
        self.interest.own.settings()
    }

    /// When the own interest is next redrawn or an entry is due on a link.
    pub(super) fn interest_timeout(&self) -> Option<Time> {
        let refresh = self.interest.next_refresh.filter(|_| {
            self.interest.own.settings().mode == InterestMode::Spatial
                && (self.interest.drawn_from_changing
                    || self.server.authenticated_clients().next().is_some()
                    || self.upstream.is_some())
        });
        [refresh, self.federation.interest_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Redraws the own interest if due, and sends the entries due.
    pub(super) fn handle_interest_timeout(&mut self, now: Time) {
        if self.interest.next_refresh.is_some_and(|at| at <= now) {
            self.refresh_interest(now);
        }
        self.federation.handle_interest_timeout(now);
    }

    /// Draws the own interest now and hands it to the federation.
    pub(super) fn refresh_interest(&mut self, now: Time) {
        let settings = *self.interest.own.settings();
        let placement = self.federation.placement();
        let mut extra: Vec<Region> = Vec::new();
        if settings.mode == InterestMode::Spatial {
            if let Some(zones) = &self.zones {
                extra.extend(
                    zones
                        .zone_set()
                        .zones()
                        .iter()
                        .map(|z| zone_region(z, settings.hysteresis))
                        .map(|r| r.translated(placement.offset())),
                );
            }
            extra.extend(self.federation.awaited_regions(&self.scene));
        }
        let awaited = !extra.is_empty();
        // In upstream mode the world server's own clients look where this
        // node cannot see: the bridge counts as one client at the centre.
        let bridge = self.upstream.is_some().then_some((u64::MAX, None));
        let observers: Vec<(u64, Option<Float3>)> = self
            .server
            .authenticated_clients()
            .map(|c| (c.id.0, c.observer.as_ref().and_then(|o| o.position)))
            .chain(bridge)
            .collect();
        let scene = &self.scene;
        let centre = || {
            own_bounds(scene).map_or(Float3::new(0.0, 0.0, 0.0), |b| {
                let [x, y, z] = b.centre();
                Float3::new(x as f32, y as f32, z as f32)
            })
        };
        let (regions, margin) =
            self.interest
                .own
                .regions(observers.iter().copied(), centre, &placement, &extra);
        self.interest.drawn_from_changing = !observers.is_empty() || awaited;
        self.interest.next_refresh = Some(now + REFRESH);
        self.federation.set_interest(regions, margin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_become_boxes_grown_by_the_margin() {
        let boxed = Zone::new_box([0.0, 0.0, 0.0], [10.0, 5.0, 5.0]).unwrap();
        assert_eq!(
            zone_region(&boxed, 2.0),
            Region {
                min: [-2.0; 3],
                max: [12.0, 7.0, 7.0]
            }
        );
        let east = Zone::new_half_space([1.0, 0.0, 0.0], 100.0).unwrap();
        let region = zone_region(&east, 1.0);
        assert_eq!(region.min[0], 99.0);
        assert_eq!(region.max[0], f32::INFINITY);
        let west = Zone::new_half_space([-1.0, 0.0, 0.0], 100.0).unwrap();
        // -x >= 100: x <= -100.
        assert_eq!(zone_region(&west, 0.0).max[0], -100.0);
        let slanted = Zone::new_half_space([0.6, 0.8, 0.0], 1.0).unwrap();
        assert_eq!(zone_region(&slanted, 0.0), Region::EVERYWHERE);
    }
}
