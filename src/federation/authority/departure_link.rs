//! The departure offer on the wire (docs/federation.md §7.8): the
//! connection schema's `departure-offer` and `departure-answer`
//! interactions, sent on one link and never forwarded. What to offer and
//! whether to accept is the node's decision ([`super::departure`]); this
//! file only moves the two messages.

use tracing::warn;
use uuid::Uuid;

use crate::federation::core::{Federation, FederationEvent};
use crate::federation::ids::LinkId;
use crate::federation::wire::interactions::{
    integer_field, integer_fields, DEPARTURE_ANSWER, DEPARTURE_OFFER,
};
use crate::less::ids::InteractionId;
use crate::less::property_list::FieldValue;
use crate::logging::RemoteText;

impl Federation {
    /// Offers `entities` persistent entities to the peer `to` on the link
    /// to it; false without a link to that peer that agreed the departure
    /// hand-off (`handover:departure/1`).
    pub fn send_departure_offer(&mut self, to: Uuid, entities: usize) -> bool {
        let Some(link) = self
            .links
            .values_mut()
            .find(|link| link.peer == to && link.features.departure)
        else {
            return false;
        };
        let values = integer_fields(i64::try_from(entities).unwrap_or(i64::MAX));
        match link.session.send_interaction(DEPARTURE_OFFER, values) {
            Ok(()) => true,
            Err(error) => {
                warn!(link = link.id.0, error = %RemoteText(&error), "cannot send departure offer");
                false
            }
        }
    }

    /// Answers a departure offer that arrived on `link`.
    pub fn send_departure_answer(&mut self, link: LinkId, accepted: bool) {
        let Some(link) = self.links.get_mut(&link) else {
            return;
        };
        let values = integer_fields(i64::from(accepted));
        if let Err(error) = link.session.send_interaction(DEPARTURE_ANSWER, values) {
            warn!(link = link.id.0, error = %RemoteText(&error), "cannot send departure answer");
        }
    }

    /// A `departure-offer` or `departure-answer` from a peer; a malformed
    /// one is logged and ignored (the offering node times out and asks its
    /// next peer).
    pub(in crate::federation) fn handle_departure_interaction(
        &mut self,
        from: LinkId,
        interaction: InteractionId,
        values: &[FieldValue],
    ) {
        let Some(peer) = self.links.get(&from).map(|link| link.peer) else {
            return;
        };
        match (interaction, integer_field(values)) {
            (DEPARTURE_OFFER, Some(entities)) if entities >= 0 => {
                self.events.push_back(FederationEvent::DepartureOffered {
                    link: from,
                    peer,
                    entities: entities as u64,
                });
            }
            (DEPARTURE_ANSWER, Some(accepted @ (0 | 1))) => {
                self.events.push_back(FederationEvent::DepartureAnswered {
                    peer,
                    accepted: accepted == 1,
                });
            }
            _ => {
                warn!(
                    link = from.0,
                    interaction = interaction.0,
                    "malformed departure interaction ignored"
                )
            }
        }
    }
}

impl Federation {
    /// The scene entity presenting `global` here, if any.
    pub fn scene_entity_of(
        &self,
        global: crate::federation::GlobalId,
    ) -> Option<crate::tundra::EntityId> {
        self.tracked.get(&global).map(|tracked| tracked.scene())
    }
}
