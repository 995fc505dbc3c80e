//! Hand-off on departure inside the node (docs/federation.md §7.8): the
//! leaving side (offers, grants, waiting for the new authority's copy) and
//! the accepting side (answering a peer's offer by this node's policy).
//!
//! Answers and link failures arrive while the node settles, without a
//! `now`; they are queued and handed to the pure [`Departure`] at the next
//! timer, as its steps are carried out.

use std::collections::BTreeSet;
use std::time::Duration;

use tracing::{info, warn};
use uuid::Uuid;

use super::Node;
use crate::clock::Time;
use crate::federation::departure::{Departure, DepartureOutcome, DepartureStep};
use crate::federation::{GlobalId, HandoverReason, LinkId};
use crate::peering::peer_file::PeerChoice;
use crate::peering::peer_file::PeerName;
use crate::scene::Origin;

/// A departure under way, with what the node must remember around it.
#[derive(Debug)]
pub(super) struct Leaving {
    departure: Departure<Uuid, GlobalId>,
    /// Answers and lost links not yet handed to `departure`.
    answers: Vec<(Uuid, bool)>,
    lost: Vec<Uuid>,
    /// The entities granted, once a peer accepted.
    granted: Vec<GlobalId>,
    /// The peer they were granted to.
    granted_to: Option<Uuid>,
}

impl Node {
    /// Whose departing entities this node accepts (default: every peer's).
    pub fn set_departure_acceptance(&mut self, accept: PeerChoice) {
        self.accept_departures = accept;
    }

    /// Starts handing this node's persistent entities (its own, not
    /// temporary) to the first of `candidates` (peer-file names, in order
    /// of preference; those not linked now, or linked without the departure
    /// hand-off and entity type version 2, are skipped) that accepts them,
    /// within `wait`. Returns how many entities it offers. The driver keeps
    /// running the node until [`Node::departure_outcome`] is `Some`.
    pub fn begin_departure(&mut self, now: Time, candidates: &[PeerName], wait: Duration) -> usize {
        let peers: Vec<Uuid> = candidates
            .iter()
            .filter_map(|name| {
                self.federation
                    .links()
                    .find(|link| {
                        link.peer_name == name.as_str()
                            && link.features.departure
                            && link.features.entity_v2
                    })
                    .map(|link| link.peer)
            })
            .collect();
        let entities: Vec<GlobalId> = self
            .scene
            .entities()
            .filter(|entity| entity.origin == Origin::Local && !entity.temporary)
            // The world server's own entities stay with it: it does not
            // leave with this node (docs/upstream.md §8).
            .filter(|entity| !self.scene.is_proxied(entity.id))
            .filter_map(|entity| self.federation.global_of(entity.id))
            .collect();
        let count = entities.len();
        info!(
            entities = count,
            candidates = peers.len(),
            "departure: offering this node's persistent entities"
        );
        self.leaving = Some(Box::new(Leaving {
            departure: Departure::start(now, peers, entities, wait),
            answers: Vec::new(),
            lost: Vec::new(),
            granted: Vec::new(),
            granted_to: None,
        }));
        self.handle_departure_timeout(now);
        count
    }

    /// How the departure ended; `None` while it runs or without one.
    pub fn departure_outcome(&self) -> Option<&DepartureOutcome<Uuid>> {
        self.leaving.as_ref()?.departure.outcome()
    }

    /// When the departure needs `handle_timeout`.
    pub(super) fn departure_timeout(&self) -> Option<Time> {
        self.leaving.as_ref()?.departure.poll_timeout()
    }

    /// A peer offered its entities on `link`: accepted if this node's
    /// policy admits that peer and this node is not leaving itself.
    pub(super) fn handle_departure_offer(&mut self, link: LinkId, peer: Uuid, entities: u64) {
        let name = self
            .federation
            .links()
            .find(|l| l.id == link)
            .and_then(|l| PeerName::new(&l.peer_name));
        let accepted = self.leaving.is_none()
            && name
                .as_ref()
                .is_some_and(|name| self.accept_departures.admits(name));
        info!(%peer, entities, accepted, "departure offer from a peer answered");
        self.federation.send_departure_answer(link, accepted);
    }

    /// A peer answered this node's departure offer.
    pub(super) fn note_departure_answer(&mut self, peer: Uuid, accepted: bool) {
        if let Some(leaving) = &mut self.leaving {
            leaving.answers.push((peer, accepted));
        }
    }

    /// The link to `peer` is going down.
    pub(super) fn note_departure_link_down(&mut self, peer: Uuid) {
        if let Some(leaving) = &mut self.leaving {
            leaving.lost.push(peer);
        }
    }

    /// Hands the departure what arrived since the last call, carries out
    /// its steps, and checks whether the new authority's copies arrived.
    pub(super) fn handle_departure_timeout(&mut self, now: Time) {
        let Some(leaving) = self.leaving.as_deref_mut() else {
            return;
        };
        for (peer, accepted) in std::mem::take(&mut leaving.answers) {
            leaving.departure.handle_answer(now, peer, accepted);
        }
        for peer in std::mem::take(&mut leaving.lost) {
            leaving.departure.handle_link_down(now, peer);
        }
        if leaving
            .departure
            .poll_timeout()
            .is_some_and(|due| due <= now)
        {
            leaving.departure.handle_timeout(now);
        }
        while let Some(step) = leaving.departure.poll_step() {
            match step {
                DepartureStep::Offer { peer, entities } => {
                    if !self.federation.send_departure_offer(peer, entities) {
                        leaving.departure.handle_link_down(now, peer);
                    }
                }
                DepartureStep::Grant { peer, entities } => {
                    for global in &entities {
                        let Some(entity) = self.federation.scene_entity_of(*global) else {
                            continue;
                        };
                        if let Err(error) = self.federation.hand_over(
                            entity,
                            peer,
                            HandoverReason::Departure,
                            &mut self.scene,
                        ) {
                            warn!(%entity, %error, "departure: entity not handed over");
                        }
                    }
                    info!(%peer, entities = entities.len(), "departure: entities granted");
                    leaving.granted = entities;
                    leaving.granted_to = Some(peer);
                }
            }
        }
        // Delivered once every granted entity is presented here from the
        // new authority's copy (or left the scene).
        if let Some(peer) = leaving.granted_to {
            let pending: BTreeSet<GlobalId> = leaving
                .granted
                .iter()
                .copied()
                .filter(|global| {
                    self.federation.scene_entity_of(*global).is_some()
                        && self.federation.route_of(*global).is_none()
                })
                .collect();
            if pending.is_empty() {
                leaving.departure.handle_delivered(peer);
            }
        }
    }
}
