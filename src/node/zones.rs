//! The zone trigger inside the node (docs/federation.md §7.7): which
//! entities it watches (remote ones with a Placeable), the positions and
//! authority changes it is told, and the take-authority requests it makes.
//!
//! Positions are sampled at the node's timers: the scene's changes only
//! mark an entity, and `handle_timeout` hands the trigger the marked
//! entities' positions with that `now` (at most one sample per entity per
//! timer, however many edits arrived). The trigger's clock restarts with
//! every epoch this node learns; a request whose watch began in an older
//! epoch than the one known now is not sent, its watch starts over.

use std::collections::{BTreeSet, HashMap};

use tracing::debug;

use super::Node;
use crate::clock::Time;
use crate::federation::zones::{Hysteresis, Position, ZoneSet, ZoneTrigger};
use crate::federation::HandoverReason;
use crate::scene::{Change, ChangeKind, Entity, Origin, Scene};
use crate::tundra::{AttributeValue, EntityId};

/// Tundra's Placeable (EC_Placeable) type id; attribute 0 is its transform.
const PLACEABLE: u32 = 20;

/// The zone state of a node that owns zones.
#[derive(Debug)]
pub(super) struct Zones {
    trigger: ZoneTrigger<EntityId>,
    /// The epoch each watched entity's watch began in.
    epochs: HashMap<EntityId, u64>,
    /// Entities whose position, authority or presence changed since the
    /// last sample.
    marked: BTreeSet<EntityId>,
    /// Requests of this node the authority refused, not yet told the trigger.
    refused: Vec<EntityId>,
    /// Take-authority requests sent for zones.
    requests_sent: u64,
    /// Zone requests not sent (no route to the authority, already it).
    requests_not_sent: u64,
    /// Zone requests the authority refused.
    requests_refused: u64,
    /// Entities with a zone request unanswered (its refusal counts as the
    /// zone's, a client's request for the same entity does not).
    in_flight: BTreeSet<EntityId>,
}

/// What became of this node's zone requests (`/status`, `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ZoneRequestCounts {
    /// Entities watched now.
    pub watched: usize,
    /// Take-authority requests sent because an entity settled in a zone.
    pub sent: u64,
    /// Requests not sent (no route to the authority).
    pub not_sent: u64,
    /// Requests the authority refused.
    pub refused: u64,
}

/// The entity's Placeable position (relative to its parent, as the scene
/// holds it).
fn position_of(entity: &Entity) -> Option<Position> {
    let placeable = entity.component_of_type(PLACEABLE)?;
    match &placeable.attribute(0)?.value {
        AttributeValue::Transform(transform) => {
            Some([transform.pos.x, transform.pos.y, transform.pos.z])
        }
        _ => None,
    }
}

impl Zones {
    /// The zones this node owns.
    pub(super) fn zone_set(&self) -> &ZoneSet {
        self.trigger.zones()
    }

    fn new(zones: ZoneSet, hysteresis: Hysteresis, scene: &Scene) -> Zones {
        Zones {
            trigger: ZoneTrigger::new(zones, hysteresis),
            epochs: HashMap::new(),
            marked: scene.entities().map(|entity| entity.id).collect(),
            refused: Vec::new(),
            requests_sent: 0,
            requests_not_sent: 0,
            requests_refused: 0,
            in_flight: BTreeSet::new(),
        }
    }

    /// Marks the entities `changes` touch.
    pub(super) fn mark(&mut self, changes: &[Change]) {
        for change in changes {
            match change.kind {
                ChangeKind::EntityRemoved(entity) => {
                    self.in_flight.remove(&entity);
                    self.marked.insert(entity);
                }
                ChangeKind::AttributeChanged(entity, ..)
                | ChangeKind::ComponentCreated(entity, _)
                | ChangeKind::ComponentRemoved(entity, _)
                | ChangeKind::EntityCreated(entity) => {
                    self.marked.insert(entity);
                }
                _ => {}
            }
        }
    }

    /// Marks an entity whose authority changed here.
    pub(super) fn mark_entity(&mut self, entity: EntityId) {
        self.in_flight.remove(&entity);
        self.marked.insert(entity);
    }

    /// This node's zone request for `entity` was refused.
    pub(super) fn note_refused(&mut self, entity: EntityId) {
        if self.in_flight.remove(&entity) {
            self.requests_refused += 1;
        }
        self.refused.push(entity);
    }
}

impl Node {
    /// The zones this node owns and the hysteresis of its trigger; no
    /// zones: nothing is watched.
    pub fn set_zones(&mut self, zones: ZoneSet, hysteresis: Hysteresis) {
        self.zones =
            (!zones.is_empty()).then(|| Box::new(Zones::new(zones, hysteresis, &self.scene)));
        // Entities near a zone must reach this node to be watched.
        self.refresh_interest(self.last_timeout.unwrap_or(Time::ZERO));
    }

    /// Take-authority requests this node sent because an entity settled in
    /// its zones, and the entities it watches now.
    pub fn zone_counts(&self) -> (u64, usize) {
        self.zones.as_ref().map_or((0, 0), |zones| {
            (zones.requests_sent, zones.trigger.watched())
        })
    }

    /// What became of this node's zone requests (all 0 without zones).
    pub fn zone_requests(&self) -> ZoneRequestCounts {
        self.zones
            .as_ref()
            .map_or_else(ZoneRequestCounts::default, |zones| ZoneRequestCounts {
                watched: zones.trigger.watched(),
                sent: zones.requests_sent,
                not_sent: zones.requests_not_sent,
                refused: zones.requests_refused,
            })
    }

    /// When the zone trigger needs `handle_timeout`.
    pub(super) fn zone_timeout(&self) -> Option<Time> {
        self.zones.as_ref()?.trigger.poll_timeout()
    }

    /// Samples the marked entities at `now`, runs the trigger's timers and
    /// sends the requests it makes.
    pub(super) fn handle_zone_timeout(&mut self, now: Time) {
        let Some(zones) = self.zones.as_deref_mut() else {
            return;
        };
        for entity in std::mem::take(&mut zones.refused) {
            zones.trigger.handle_refused(now, entity);
        }
        for entity in std::mem::take(&mut zones.marked) {
            let Some(found) = self.scene.entity(entity) else {
                zones.trigger.handle_unwatched(entity);
                zones.epochs.remove(&entity);
                continue;
            };
            let authority = self.federation.authority_of(entity);
            let (Origin::Remote, Some((_, epoch))) = (found.origin, authority) else {
                // This node's own (or not federated): not watched.
                zones.trigger.handle_unwatched(entity);
                zones.epochs.remove(&entity);
                continue;
            };
            let position = position_of(found);
            if zones.epochs.get(&entity) != Some(&epoch) {
                zones.epochs.insert(entity, epoch);
                zones.trigger.handle_authority(now, entity, position);
            } else if let Some(position) = position {
                zones.trigger.handle_position(now, entity, position);
            }
        }
        if zones.trigger.poll_timeout().is_some_and(|due| due <= now) {
            zones.trigger.handle_timeout(now);
        }
        let mut requests = Vec::new();
        while let Some(entity) = zones.trigger.poll_request() {
            requests.push(entity);
        }
        for entity in requests {
            let current = self.federation.authority_of(entity).map(|(_, epoch)| epoch);
            let Some(zones) = self.zones.as_deref_mut() else {
                return;
            };
            if current != zones.epochs.get(&entity).copied() {
                // The authority changed since the watch began: start over.
                zones.marked.insert(entity);
                zones.trigger.handle_authority(now, entity, None);
                continue;
            }
            match self
                .federation
                .request_authority(entity, HandoverReason::Zone, &self.scene)
            {
                Ok(()) => {
                    zones.requests_sent += 1;
                    zones.in_flight.insert(entity);
                    debug!(%entity, "entity settled in this node's zone: authority requested");
                }
                Err(error) => {
                    zones.requests_not_sent += 1;
                    debug!(%entity, %error, "zone request not sent");
                    zones.trigger.handle_refused(now, entity);
                }
            }
        }
    }
}
